"""Formula-level checks of InstEmb: pooling, DAAP, the losses, look-ahead tokens and greedy decoding."""

import copy

import pytest
import torch
from torch.nn import functional as F

from policies.aux.lm_geometry.instemb import (
    InstEmbConfig,
    InstEmbEncoder,
    LookAhead,
    daap,
    distill_loss,
    final_states,
    greedy_generate,
    info_nce,
    last_token_pool,
    mean_pool,
    span_mean_pool,
)
from policies.aux.lm_geometry.tiny_gpt import TinyGPT, TinyGPTConfig


def _model(seed: int = 0) -> TinyGPT:
    torch.manual_seed(seed)
    return TinyGPT(TinyGPTConfig(vocab=13, d_model=16, n_layers=2, n_heads=2, max_len=24)).eval()


def test_pooling_picks_last_real_token_and_averages_real_tokens_only():
    h = torch.arange(2 * 4 * 3, dtype=torch.float32).view(2, 4, 3)
    lengths = torch.tensor([2, 4])
    assert torch.equal(last_token_pool(h, lengths), torch.stack([h[0, 1], h[1, 3]]))
    assert torch.allclose(mean_pool(h, lengths), torch.stack([h[0, :2].mean(0), h[1].mean(0)]))
    spans = span_mean_pool(h, torch.tensor([1, 2]), torch.tensor([3, 3]))
    assert torch.allclose(spans, torch.stack([h[0, 1:3].mean(0), h[1, 2]]))
    with pytest.raises(ValueError, match="span"):
        span_mean_pool(h, torch.tensor([1, 2]), torch.tensor([1, 3]))


def test_daap_is_unit_and_mixes_the_two_cosines_by_alpha():
    torch.manual_seed(1)
    la, lb, ka, kb = torch.randn(4, 5, 8).unbind(0)
    for alpha in (0.0, 0.3, 1.0):
        ea, eb = daap(la, ka, alpha), daap(lb, kb, alpha)
        assert ea.shape == (5, 16)
        assert torch.allclose(ea.norm(dim=-1), torch.ones(5), atol=1e-6)
        want = alpha * F.cosine_similarity(la, lb, dim=-1) + (1 - alpha) * F.cosine_similarity(ka, kb, dim=-1)
        assert torch.allclose((ea * eb).sum(-1), want, atol=1e-6)


def test_info_nce_matches_cross_entropy_over_scaled_cosines():
    torch.manual_seed(2)
    q, d = torch.randn(3, 6), torch.randn(4, 6)
    labels = torch.tensor([2, 0, 3])
    cos = F.normalize(q, dim=-1) @ F.normalize(d, dim=-1).T
    want = -torch.log_softmax(cos / 0.1, dim=-1)[torch.arange(3), labels].mean()
    assert info_nce(q, d, labels, 0.1).item() == pytest.approx(want.item(), rel=1e-6)
    # Queries equal to their positives and orthogonal to the rest: loss → 0 as τ shrinks.
    eye = torch.eye(4)
    assert info_nce(eye[:3], eye, torch.arange(3), 0.01).item() < 1e-6


def test_distill_loss_is_one_minus_cosine_and_stops_teacher_gradient():
    s = torch.tensor([[1.0, 0.0], [0.0, 2.0]], requires_grad=True)
    t = torch.tensor([[3.0, 0.0], [1.0, 0.0]], requires_grad=True)
    loss = distill_loss(s, t)
    assert loss.item() == pytest.approx(0.5)  # (0 + 1) / 2
    loss.backward()
    assert t.grad is None and s.grad is not None


def test_lookahead_tokens_go_right_after_each_rows_last_real_token():
    la = LookAhead(2, 3, torch.Generator().manual_seed(0))
    x = torch.ones(2, 4, 3)
    out = la.append(x, torch.tensor([2, 4]))
    assert out.shape == (2, 6, 3)
    assert torch.equal(out[0, 2:4], la.tokens.detach()) and torch.equal(out[1, 4:6], la.tokens.detach())
    assert torch.equal(out[0, :2], x[0, :2]) and torch.equal(out[1, :4], x[1])
    # Unpadded batches take the concatenation path; it must agree with the general one.
    full = la.append(x, torch.tensor([4, 4]))
    assert torch.equal(full[:, 4:], la.tokens.detach().expand(2, 2, 3))


def test_lookahead_tokens_change_the_embedding_but_not_the_last_token_anchor():
    enc = InstEmbEncoder(_model(), InstEmbConfig(n_lookahead=3, alpha=0.5), torch.Generator().manual_seed(0))
    ids, lengths = torch.randint(5, 13, (2, 7)), torch.tensor([7, 5])
    with torch.no_grad():
        last, look = enc.anchors(ids, lengths)
        e0 = enc.embed(ids, lengths)
        enc.lookahead.tokens.add_(torch.randn_like(enc.lookahead.tokens))
        last2, look2 = enc.anchors(ids, lengths)
        e1 = enc.embed(ids, lengths)
        plain = last_token_pool(final_states(enc.model, ids), lengths)
    # Causal attention: the last input token never sees the look-ahead tokens appended after it.
    assert torch.allclose(last, last2, atol=1e-6) and torch.allclose(last, plain, atol=1e-5)
    assert not torch.allclose(look, look2, atol=1e-3)
    assert not torch.allclose(e0, e1, atol=1e-3)


def test_right_padding_does_not_change_a_rows_embedding():
    enc = InstEmbEncoder(_model(), InstEmbConfig(n_lookahead=2), torch.Generator().manual_seed(0))
    ids = torch.randint(5, 13, (1, 5))
    padded = torch.cat([torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], 1), torch.randint(5, 13, (1, 8))])
    with torch.no_grad():
        alone = enc.embed(ids, torch.tensor([5]))
        batched = enc.embed(padded, torch.tensor([5, 8]))
    assert torch.allclose(alone[0], batched[0], atol=1e-5)


def test_instemb_loss_trains_lookahead_and_leaves_a_frozen_teacher_alone():
    lm = _model()
    teacher = copy.deepcopy(lm)
    enc = InstEmbEncoder(copy.deepcopy(lm).train(), InstEmbConfig(n_lookahead=2), torch.Generator().manual_seed(0))
    q, d = torch.randint(5, 13, (3, 6)), torch.randint(5, 13, (2, 4))
    gold = torch.randint(5, 13, (3, 4))
    loss, parts = enc.loss(q, torch.tensor([6, 6, 4]), d, torch.tensor([4, 3]), torch.tensor([0, 1, 1]), gold,
                           torch.tensor([1, 1, 1]), torch.tensor([3, 3, 4]), teacher=teacher)
    assert loss.item() == pytest.approx(parts["info_nce"] + parts["distill"], rel=1e-5)
    loss.backward()
    assert enc.lookahead.tokens.grad is not None and enc.lookahead.tokens.grad.abs().sum() > 0
    assert all(p.grad is None for p in teacher.parameters())


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="n_lookahead"):
        InstEmbConfig(n_lookahead=0)
    with pytest.raises(ValueError, match="alpha"):
        InstEmbConfig(alpha=1.5)
    with pytest.raises(ValueError, match="temperature"):
        InstEmbConfig(temperature=0.0)


def test_greedy_generate_matches_stepwise_argmax_and_padding():
    model = _model(3)
    prompts = [torch.randint(3, 13, (n,)) for n in (4, 6)]
    ids = torch.zeros(2, 6, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, :len(p)] = p
    out, n = greedy_generate(model, ids, torch.tensor([4, 6]), max_new=3, eos=2)
    for r, p in enumerate(prompts):
        seq = p.clone()
        want = []
        with torch.no_grad():
            for _ in range(3):
                nxt = int(model(seq[None]).logits[0, -1].argmax())
                want.append(nxt)
                if nxt == 2:
                    break
                seq = torch.cat([seq, torch.tensor([nxt])])
        assert out[r, :len(want)].tolist() == want
        stop = want.index(2) if 2 in want else 3
        assert int(n[r]) == stop
