"""Pseudo-Mallows: q is a normalised distribution, sampling matches it, the exact posterior and the MCMC agree."""

import itertools

import numpy as np
import pytest

from policies.aux.structured.mallows_mcmc import leap_and_shift, mallows_mcmc
from policies.aux.structured.pseudo_mallows import (
    all_permutations,
    check_tiers,
    choose_order,
    click_tiers,
    exact_log_posterior,
    exact_mallows_sample,
    factor_scores,
    kl_to_exact,
    log_q,
    marginal_tv,
    marginalised_kl,
    permanent,
    rank_marginals,
    sample,
    top_k_tiers,
)


def _dataset(n: int, seed: int, users: int = 8):
    rng = np.random.default_rng(seed)
    perms = all_permutations(n)
    full = exact_mallows_sample(rng.permutation(n), 3.0, users, rng, perms)
    lo, hi = top_k_tiers(full, rng.integers(1, n - 1, users))
    return rng, perms, lo, hi


@pytest.mark.parametrize("n", [4, 6])
def test_q_sums_to_one_for_every_order(n):
    rng, perms, lo, hi = _dataset(n, n)
    scores = factor_scores(lo, hi, 3.0)
    for order in (list(range(n)), list(range(n))[::-1], rng.permutation(n).tolist()):
        assert np.exp(log_q(perms, scores, order)).sum() == pytest.approx(1.0, abs=1e-10)


def test_samples_follow_q_and_report_their_log_probability():
    rng, perms, lo, hi = _dataset(4, 1)
    scores = factor_scores(lo, hi, 3.0)
    order = [2, 0, 3, 1]
    draws, logq = sample(scores, order, rng.random((40000, 4)))
    assert np.allclose(logq, log_q(draws, scores, order))
    assert (np.sort(draws, axis=1) == np.arange(4)).all()  # every draw is a permutation
    index = {tuple(p): k for k, p in enumerate(perms)}
    freq = np.bincount([index[tuple(d)] for d in draws], minlength=len(perms)) / len(draws)
    assert np.abs(freq - np.exp(log_q(perms, scores, order))).max() < 0.01


def test_factor_scores_match_the_definition():
    lo, hi = np.array([[0, 1, 1]]), np.array([[0, 2, 2]])  # item 0 first, items 1 and 2 somewhere in ranks 1-2
    scores = factor_scores(lo, hi, 1.5)
    k = lambda u, r: np.exp(-1.5 / 3 * abs(u - r))  # noqa: E731
    for r in range(3):
        assert scores[0, r] == pytest.approx(np.log(k(0, r)))
        assert scores[1, r] == pytest.approx(np.log((k(1, r) + k(2, r)) / 2))


def test_permanent_matches_brute_force():
    mats = np.random.default_rng(2).random((3, 5, 5))
    brute = [sum(np.prod([m[i, p[i]] for i in range(5)]) for p in itertools.permutations(range(5))) for m in mats]
    assert np.allclose(permanent(mats), brute)


def test_exact_posterior_with_full_rankings_is_the_mallows_posterior():
    rng = np.random.default_rng(3)
    perms = all_permutations(4)
    full = exact_mallows_sample(np.arange(4), 2.0, 5, rng, perms)
    log_post = exact_log_posterior(full, full, 2.0, perms)  # every tier a single rank
    direct = -2.0 / 4 * np.abs(perms[:, None, :] - full[None]).sum(axis=(1, 2))
    direct -= np.log(np.exp(direct).sum())
    assert np.allclose(log_post, direct)


def test_marginalised_kl_estimate_matches_enumeration_and_the_search_finds_a_good_order():
    rng, perms, lo, hi = _dataset(5, 4, users=10)
    scores = factor_scores(lo, hi, 3.0)
    order = rng.permutation(5).tolist()
    lq = log_q(perms, scores, order)
    exact = float((np.exp(lq) * (lq - scores[np.arange(5)[None, :], perms].sum(axis=1))).sum())
    assert marginalised_kl(scores, order, rng.random((20000, 5))) == pytest.approx(exact, abs=0.1)
    log_post = exact_log_posterior(lo, hi, 3.0, perms)
    kls = np.array([kl_to_exact(log_post, perms, scores, o) for o in perms])
    chosen, _ = choose_order(scores, rng, samples=500)
    assert kl_to_exact(log_post, perms, scores, chosen) <= np.median(kls)


def test_mcmc_matches_exact_marginals_on_click_data():
    rng = np.random.default_rng(5)
    perms = all_permutations(5)
    full = exact_mallows_sample(rng.permutation(5), 3.0, 6, rng, perms)
    lo, hi = click_tiers(full, [1, 2, 2, 3, 1, 2])
    weights = np.exp(exact_log_posterior(lo, hi, 3.0, perms))
    exact = np.stack([np.bincount(perms[:, i], weights=weights, minlength=5) for i in range(5)])
    draws, acceptance = mallows_mcmc(lo, hi, 3.0, 12000, 1000, 1, rng)
    mc = np.stack([np.bincount(draws[:, i], minlength=5) / len(draws) for i in range(5)])
    assert 0.05 < acceptance < 0.95
    assert np.abs(mc - exact).max() < 0.05


def test_leap_and_shift_returns_a_permutation_with_a_symmetric_ratio_for_adjacent_moves():
    rng = np.random.default_rng(6)
    rho = rng.permutation(10)
    for _ in range(50):
        prop, log_ratio = leap_and_shift(rho, 2, rng)
        assert sorted(prop) == list(range(10))
        if np.abs(prop - rho).max() == 1:
            assert log_ratio == 0.0


def test_tiers_are_validated():
    check_tiers(*top_k_tiers(np.array([[1, 0, 2, 3]]), [2]))
    with pytest.raises(ValueError, match="tier \\[1, 3\\] has 2 items for 3 ranks"):
        check_tiers(np.array([[0, 1, 1, 2]]), np.array([[0, 3, 3, 2]]))
    with pytest.raises(ValueError, match="only for n <= 9"):
        all_permutations(12)


def test_rank_marginals_and_their_total_variation():
    perms = all_permutations(4)
    uniform = rank_marginals(perms)
    assert np.allclose(uniform, 0.25) and np.allclose(uniform.sum(axis=1), 1.0)
    point = rank_marginals(perms[:1])  # one ranking: every item's rank is certain
    assert marginal_tv(point, point) == 0.0
    assert marginal_tv(point, uniform) == pytest.approx(0.75)
    weights = np.zeros(len(perms))
    weights[0] = 1.0
    assert np.allclose(rank_marginals(perms, weights), point)
