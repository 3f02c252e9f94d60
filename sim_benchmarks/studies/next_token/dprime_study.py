"""Claim (e) -- can a small transformer be trained to represent a robustified distribution D'? -- and a test that
could show it.

    # train one model on the exact D' conditionals (KL loss, fresh histories, on-policy share, early stopping)
    python -m sim_benchmarks.studies.next_token.dprime_study train --seed 0 --out runs/dprime/seed0.pt
    # measure: precision curves, the trained models on them, controls, the earlier logit-response setting
    python -m sim_benchmarks.studies.next_token.dprime_study evaluate --models runs/dprime/seed0.pt,... \
        --out runs/dprime --seeds 20
    # ship a trained model (copies it with its sha256 and writes manifest.json)
    python -m sim_benchmarks.studies.next_token.dprime_study ship --model runs/dprime/seed0.pt

The *precision curve* is the regret of the exact D' agent when its predictions are perturbed to a chosen TV from
D' (a random point of the simplex mixed in, fresh every round): it says how close to D' a model must be for its
agent to keep D''s regret, so a trained model's held-out TV can be read against it. All opponents are synthetic.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agents.repeated_game import play_game
from envs.atomic_io import write_json_atomic
from envs.errors import ConfigError
from envs.games import AntiModelOpponent, MatrixGame, MixtureOpponent, RepeatedGameEnv, rock_paper_scissors
from envs.paths import CHECKPOINTS
from envs.statistics import stratified_bootstrap_ci
from policies.next_token.dprime import (
    SAMPLE_BR_CONFIG,
    DPrimeConfig,
    LogitResponseAgent,
    RobustifiedPredictor,
    base_predictor,
    exact_dprime,
)
from policies.next_token.predictors import Predictor
from sim_benchmarks.cli import ArgumentParser, main_guard

SHIPPED = CHECKPOINTS / "next_token" / "dprime_sample_br.pt"
LOGIT_CHECKPOINT = CHECKPOINTS / "next_token" / "dprime_rps.pt"


# ------------------------------------------------------------------------------------------------ opponents
@dataclass
class AntiThenBiasedOpponent:
    """The anti-model for the first ``switch_at`` rounds (it fires the switch), then i.i.d. play with one action at
    ``major`` (drawn per episode). Uniform play after the switch loses ~(major payoff gap) per round here, Hedge
    does not: this opponent measures the Hedge content of D''s switched branch, which the anti-model cannot."""

    switch_at: int = 100
    major: float = 0.6
    _anti: AntiModelOpponent = field(default_factory=AntiModelOpponent, init=False, repr=False)
    _p: np.ndarray = field(default=None, init=False, repr=False)
    _rng: np.random.Generator = field(default=None, init=False, repr=False)

    def reset(self, n_actions: int, rng: np.random.Generator) -> None:
        self._rng = rng
        self._anti.reset(n_actions, rng)
        self._p = np.full(n_actions, (1.0 - self.major) / (n_actions - 1))
        self._p[int(rng.integers(0, n_actions))] = self.major

    def act(self, history: list[int], learner_mixed: np.ndarray, game: MatrixGame) -> int:
        if len(history) < self.switch_at:
            return self._anti.act(history, learner_mixed, game)
        return int(self._rng.choice(len(self._p), p=self._p))


def make_opponent(name: str, rounds: int) -> Any:
    """``anti_model``, ``anti_then_biased`` (anti-model for the first half) or ``D``."""
    return {"anti_model": AntiModelOpponent, "D": MixtureOpponent,
            "anti_then_biased": lambda: AntiThenBiasedOpponent(switch_at=rounds // 2)}[name]()


# ------------------------------------------------------------------------------------------------ predictors
class NoisyPredictor:
    """D' with errors of a chosen size: each round p -> (1 - l) p + l r, r uniform on the simplex (p's least likely
    vertex when r is closer than ``tv``), l set so that TV(noisy, p) = ``tv`` exactly for tv <= 1 - 1/N;
    ``after_switch_only`` leaves the rounds before the switch exact."""

    def __init__(self, inner: RobustifiedPredictor, tv: float, seed: int, after_switch_only: bool) -> None:
        self.inner, self.tv, self.after_only = inner, float(tv), after_switch_only
        self.seed = int(seed)

    @property
    def switched(self) -> bool:
        return self.inner.switched

    @property
    def switch_round(self) -> int:
        return self.inner.switch_round

    def reset(self, n_actions: int) -> None:
        self.inner.reset(n_actions)
        self.rng = np.random.default_rng(np.random.SeedSequence([self.seed, 99]))
        self._p: np.ndarray | None = None

    def update(self, action: int) -> None:
        self.inner.update(action)
        self._p = None

    def predict(self) -> np.ndarray:
        if self._p is None:
            p = self.inner.predict()
            r = self.rng.dirichlet(np.ones(len(p)))
            if 0.5 * float(np.abs(r - p).sum()) < self.tv:  # too close to reach tv: aim at p's least likely vertex
                r = np.eye(len(p))[int(np.argmin(p))]  # TV(p, vertex) >= 1 - 1/N
            gap = 0.5 * float(np.abs(r - p).sum())
            if self.tv > 0 and (self.inner.switched or not self.after_only):
                lam = min(1.0, self.tv / gap)
                p = (1 - lam) * p + lam * r
            self._p = p
        return self._p


class ShadowedPredictor:
    """A model's predictions, with the exact D' run alongside on the same history to record TV(model, D') per
    round (split at D''s switch) -- the model's TV on the very histories its agent meets. ``after_switch_only``
    plays the exact D' until its switch and the model after it: a test of the switched (Hedge) branch alone."""

    def __init__(self, model_pred: Predictor, exact: RobustifiedPredictor, after_switch_only: bool = False) -> None:
        self.model_pred, self.exact, self.after_only = model_pred, exact, after_switch_only

    def reset(self, n_actions: int) -> None:
        self.model_pred.reset(n_actions)
        self.exact.reset(n_actions)
        self.tv_before: list[float] = []
        self.tv_after: list[float] = []

    def update(self, action: int) -> None:
        self.model_pred.update(action)
        self.exact.update(action)

    def predict(self) -> np.ndarray:
        e = self.exact.predict()
        p = np.asarray(self.model_pred.predict(), dtype=np.float64)
        (self.tv_after if self.exact.switched else self.tv_before).append(0.5 * float(np.abs(p - e).sum()))
        if self.after_only and not self.exact.switched:
            return e  # the hybrid: exact D' before its switch, the model only on the switched branch
        return p


# ------------------------------------------------------------------------------------------------ measurement
MARKS = (25, 50, 100, 200)


def ci(values: Any) -> dict[str, Any]:
    """Mean with a 95 % bootstrap interval (over episodes)."""
    m, lo, hi = stratified_bootstrap_ci({"x": np.asarray(values, dtype=float)}, np.mean)
    return {"mean": m, "ci95": [lo, hi], "n": int(np.size(values))}


def play_curve(game: MatrixGame, cfg: DPrimeConfig, make: Callable[[int], Predictor], opponent: str,
               seeds: list[int]) -> dict[str, Any]:
    """Average regret R_t / t at ``MARKS`` (<= T) for the agent responding to ``make(seed)`` under ``cfg.rule``."""
    marks = [m for m in MARKS if m <= cfg.rounds] or [cfg.rounds]
    per: list[list[float]] = []
    switched, tv_b, tv_a = 0, [], []
    for s in seeds:
        pred = make(s)
        env = RepeatedGameEnv(game, make_opponent(opponent, cfg.rounds), rounds=cfg.rounds, opponent_name=opponent)
        tr = play_game(env, LogitResponseAgent(pred, beta=cfg.beta, rule=cfg.rule), 50_000 + s, s)
        per.append([float(tr.regret[m - 1] / m) for m in marks])
        switched += int(getattr(pred, "switched", False) or getattr(getattr(pred, "exact", None), "switched", False))
        if isinstance(pred, ShadowedPredictor):
            tv_b.extend(pred.tv_before)
            tv_a.extend(pred.tv_after)
    arr = np.array(per)
    out = {"t": marks, "avg_regret": arr.mean(0).tolist(), "final": ci(arr[:, -1]),
           "per_seed_final": arr[:, -1].tolist(), "switch_rate": switched / len(seeds)}
    if tv_b or tv_a:
        out["tv_before_switch"] = float(np.mean(tv_b)) if tv_b else None
        out["tv_after_switch"] = float(np.mean(tv_a)) if tv_a else None
        out["tv_all"] = float(np.mean(tv_b + tv_a))
    return out


class _Fed:
    """A predictor whose next prediction is set from outside (the batched model call in ``model_curve``)."""

    def __init__(self) -> None:
        self.value: np.ndarray | None = None

    def reset(self, n_actions: int) -> None:
        self.value = None

    def update(self, action: int) -> None:
        pass

    def predict(self) -> np.ndarray:
        return self.value


def model_curve(game: MatrixGame, cfg: DPrimeConfig, model: Any, opponent: str, seeds: list[int],
                after_switch_only: bool = False) -> dict[str, Any]:
    """``play_curve`` for a trained model's agent, with every seed's game played in lockstep so that each round is
    one batched model call (the same games as ``play_game`` with ``TransformerPredictor``; tested);
    ``after_switch_only``: the hybrid agent of ``ShadowedPredictor``."""
    import torch

    marks = [m for m in MARKS if m <= cfg.rounds] or [cfg.rounds]
    envs = [RepeatedGameEnv(game, make_opponent(opponent, cfg.rounds), rounds=cfg.rounds, opponent_name=opponent)
            for _ in seeds]
    feeds = [_Fed() for _ in seeds]
    preds = [ShadowedPredictor(f, exact_dprime(game, cfg), after_switch_only) for f in feeds]
    agents = [LogitResponseAgent(p, beta=cfg.beta, rule=cfg.rule) for p in preds]
    obs = []
    for env, agent, s in zip(envs, agents, seeds, strict=True):
        o, info = env.reset(seed=50_000 + int(s))
        agent.reset("", {**info, "policy_seed": int(s)})
        obs.append(o)
    n = game.n_opponent
    tokens = np.full((len(seeds), 1), n, dtype=np.int64)  # BOS, then the opponent's actions
    regret = np.zeros((len(seeds), cfg.rounds))
    for t in range(cfg.rounds):
        with torch.no_grad():
            probs = torch.softmax(model(torch.as_tensor(tokens))[:, -1].double(), -1).numpy()
        played = np.zeros(len(seeds), dtype=np.int64)
        for i, (env, agent) in enumerate(zip(envs, agents, strict=True)):
            feeds[i].value = probs[i]
            obs[i], _, _, _, info = env.step(agent.act(obs[i]))
            regret[i, t], played[i] = info["regret"], info["opponent_action"]
        tokens = np.concatenate([tokens, played[:, None]], axis=1)
    arr = np.stack([regret[:, m - 1] / m for m in marks], axis=1)
    tv_b = [x for p in preds for x in p.tv_before]
    tv_a = [x for p in preds for x in p.tv_after]
    return {"t": marks, "avg_regret": arr.mean(0).tolist(), "final": ci(arr[:, -1]),
            "per_seed_final": arr[:, -1].tolist(),
            "switch_rate": float(np.mean([p.exact.switched for p in preds])),
            "tv_before_switch": float(np.mean(tv_b)) if tv_b else None,
            "tv_after_switch": float(np.mean(tv_a)) if tv_a else None, "tv_all": float(np.mean(tv_b + tv_a))}


def paired(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Paired difference of final average regret (a - b) over the env seeds both played (seeds 0..n-1), with a
    bootstrap CI."""
    n = min(len(a["per_seed_final"]), len(b["per_seed_final"]))
    return ci(np.asarray(a["per_seed_final"][:n]) - np.asarray(b["per_seed_final"][:n]))


def precision_curve(game: MatrixGame, cfg: DPrimeConfig, tvs: list[float], opponent: str, seeds: list[int],
                    after_switch_only: bool) -> list[dict[str, Any]]:
    """Regret of the exact D' agent with predictions perturbed to TV = each of ``tvs`` (see ``NoisyPredictor``)."""
    rows = []
    for tv in tvs:
        res = play_curve(game, cfg, lambda s, tv=tv: NoisyPredictor(exact_dprime(game, cfg), tv, s, after_switch_only),
                         opponent, seeds)
        rows.append({"tv": tv, **res})
    return rows


# ------------------------------------------------------------------------------------------------ settings
def uniform_after_switch(game: MatrixGame, cfg: DPrimeConfig) -> RobustifiedPredictor:
    """The control: D' with its switched branch replaced by the uniform distribution."""
    return exact_dprime(game, cfg, post_switch="uniform")


def test_histories(game: MatrixGame, cfg: DPrimeConfig, count: int) -> dict[str, np.ndarray]:
    """Held-out histories (every off-policy source) from a seed range training never uses."""
    from policies.next_token.dprime_training import KL_SOURCES, simulate

    return simulate(game, cfg, np.arange(count) % KL_SOURCES.index("on_policy"), seed=20_000_000)


def sample_br_references(game: MatrixGame, cfg: DPrimeConfig, seeds: list[int], tvs: list[float], count: int,
                         log: Callable[[str], None]) -> dict[str, Any]:
    """The sample-then-best-reply D': how far it is from the base and from uniform, the references (exact D',
    plain play, the uniform-after-switch control) and the precision curves."""
    out: dict[str, Any] = {"config": asdict(cfg), "seeds": len(seeds), "tvs": tvs, "test_histories": count}
    test = test_histories(game, cfg, count)
    after = test["after_switch"]
    tv_base = 0.5 * np.abs(test["base"] - test["dprime"]).sum(-1)
    tv_unif = 0.5 * np.abs(test["dprime"] - 1.0 / game.n_opponent).sum(-1)
    out["dprime_vs_base_after_switch"] = {"mean_tv": float(tv_base[after].mean()),
                                          "median_tv": float(np.median(tv_base[after])),
                                          "positions": int(after.sum())}
    out["dprime_vs_uniform_after_switch"] = {"mean_tv": float(tv_unif[after].mean()),
                                             "max_tv": float(tv_unif[after].max())}
    for opp in ("anti_model", "anti_then_biased", "D"):
        ref = {"dprime_exact": play_curve(game, cfg, lambda s: exact_dprime(game, cfg), opp, seeds),
               "plain": play_curve(game, cfg, lambda s: base_predictor(cfg), opp, seeds),
               "uniform_after_switch": play_curve(game, cfg, lambda s: uniform_after_switch(game, cfg), opp, seeds)}
        ref["uniform_minus_exact"] = paired(ref["uniform_after_switch"], ref["dprime_exact"])
        ref["plain_minus_exact"] = paired(ref["plain"], ref["dprime_exact"])
        out[f"reference/{opp}"] = ref
        log(f"sample_br references vs {opp}: exact {ref['dprime_exact']['final']['mean']:.3f}, plain "
            f"{ref['plain']['final']['mean']:.3f}, uniform after switch "
            f"{ref['uniform_after_switch']['final']['mean']:.3f}")
        if opp == "D":
            continue
        for where in ("everywhere", "after_switch"):
            out[f"precision/{opp}/{where}"] = precision_curve(game, cfg, tvs, opp, seeds, where == "after_switch")
            log(f"  precision {opp} {where}: " + ", ".join(f"{r['tv']:g}->{r['final']['mean']:.3f}"
                                                          for r in out[f"precision/{opp}/{where}"]))
    return out


def sample_br_models(game: MatrixGame, cfg: DPrimeConfig, refs: dict[str, Any], models: list[Path],
                     seeds: list[int], log: Callable[[str], None]) -> dict[str, Any]:
    """Every trained model: held-out TV (all / before / after the switch, per source) and its agent's regret, with
    its TV to D' on the very games it played, paired against the exact D' agent and plain play."""
    from policies.next_token.dprime_training import load_trained, tv_report

    test = test_histories(game, cfg, refs["test_histories"])
    out: dict[str, Any] = {}
    for path in models:
        model, report = load_trained(path)
        if model.cfg.context != cfg.rounds + 1:
            raise ConfigError(f"model {str(path)!r} has context {model.cfg.context}, this evaluation needs "
                              f"{cfg.rounds + 1} (T + 1); train it with --rounds {cfg.rounds}")
        row: dict[str, Any] = {"file": str(path), "seed": report.get("seed"), "best_step": report.get("best_step"),
                               "train_s": report.get("train_s"), "params": sum(p.numel() for p in model.parameters()),
                               "held_out": tv_report(model, test)}
        for opp in ("anti_model", "anti_then_biased", "D"):
            res = model_curve(game, cfg, model, opp, seeds)
            ref = refs[f"reference/{opp}"]
            res["minus_exact"] = paired(res, ref["dprime_exact"])
            res["minus_plain"] = paired(res, ref["plain"])
            row[opp] = res
            if opp != "D":  # the switched branch alone: exact D' until the switch, the model after it
                hyb = model_curve(game, cfg, model, opp, seeds, after_switch_only=True)
                hyb["minus_exact"] = paired(hyb, ref["dprime_exact"])
                hyb["minus_uniform_control"] = paired(hyb, ref["uniform_after_switch"])
                row[f"{opp}/switched_branch_only"] = hyb
        out[Path(path).name] = row
        log(f"model {path}: held-out TV {row['held_out']['all']['mean_tv']:.4f} (before "
            f"{row['held_out']['all']['mean_tv_before_switch']:.4f}, after "
            f"{row['held_out']['all']['mean_tv_after_switch']:.4f}); vs anti-model avg regret "
            f"{row['anti_model']['final']['mean']:.3f}")
    return out


def logit_setting(game: MatrixGame, cfg: DPrimeConfig, seeds: list[int], tvs: list[float], checkpoint: Path | None,
                  log: Callable[[str], None]) -> dict[str, Any]:
    """The earlier setting (logit response, beta = 300, in-context bigram): why its test could not pass."""
    out: dict[str, Any] = {"config": asdict(cfg), "seeds": len(seeds), "tvs": tvs}
    tvu: list[float] = []
    for s in seeds[:5]:
        # distance of the switched branch from uniform, along the exact D' agent's games against the anti-model
        shadow = exact_dprime(game, cfg)
        shadow.reset(game.n_opponent)
        env = RepeatedGameEnv(game, AntiModelOpponent(), rounds=cfg.rounds)
        tr = play_game(env, LogitResponseAgent(exact_dprime(game, cfg), beta=cfg.beta), 50_000 + s, s)
        for j in tr.opponent:
            p = shadow.predict()
            if shadow.switched:
                tvu.append(0.5 * float(np.abs(p - 1.0 / game.n_opponent).sum()))
            shadow.update(int(j))
    out["dprime_vs_uniform_after_switch"] = {"mean_tv": float(np.mean(tvu)) if tvu else None,
                                             "max_tv": float(np.max(tvu)) if tvu else None}
    for opp in ("anti_model", "anti_then_biased"):
        ref = {"dprime_exact": play_curve(game, cfg, lambda s: exact_dprime(game, cfg), opp, seeds),
               "plain": play_curve(game, cfg, lambda s: base_predictor(cfg), opp, seeds),
               "uniform_after_switch": play_curve(game, cfg, lambda s: uniform_after_switch(game, cfg), opp, seeds)}
        ref["uniform_minus_exact"] = paired(ref["uniform_after_switch"], ref["dprime_exact"])
        out[f"reference/{opp}"] = ref
    out["precision/anti_model/after_switch"] = precision_curve(game, cfg, tvs, "anti_model", seeds, True)
    log("logit precision (after switch): " + ", ".join(f"{r['tv']:g}->{r['final']['mean']:.3f}"
                                                       for r in out["precision/anti_model/after_switch"]))
    if checkpoint is not None and checkpoint.exists():
        out["shipped_model"] = logit_model_check(game, cfg, checkpoint, seeds)
        log(f"logit shipped model: {out['shipped_model']['anti_model']['avg_regret']}")
    return out


def logit_model_check(game: MatrixGame, cfg: DPrimeConfig, path: Path, seeds: list[int]) -> dict[str, Any]:
    """The earlier model (sampled labels): regret before/after the switch, and train CE vs D''s own CE."""
    import torch

    from policies.next_token.dprime import _model_inputs, sample_histories
    from policies.next_token.transformer import TransformerPredictor, load_model

    model = load_model(path)
    blob = torch.load(path, map_location="cpu", weights_only=True)
    key_cfg = blob.get("extra", {}).get("key", {}).get("config", {})
    trained_cfg = DPrimeConfig(**{k: v for k, v in key_cfg.items() if k in DPrimeConfig.__dataclass_fields__})
    res: dict[str, Any] = {"file": str(path)}
    shadowed = lambda s: ShadowedPredictor(TransformerPredictor(model), exact_dprime(game, cfg))  # noqa: E731
    res["anti_model"] = play_curve(game, cfg, shadowed, "anti_model", seeds)
    res["base_anti_model"] = play_curve(game, cfg, lambda s: base_predictor(cfg), "anti_model", seeds)
    # its training data again (same seed and split): cross-entropy of the model and of the exact D' on the labels
    data = sample_histories(game, trained_cfg, 0, trained_cfg.histories)
    n_val = max(int(trained_cfg.histories * trained_cfg.val_fraction) // 4 * 4, 4)
    with torch.no_grad():
        probs = torch.softmax(model(_model_inputs(data["inputs"], game.n_opponent)).double(), -1).numpy()
    lab = data["labels"]
    pick = lambda a: np.take_along_axis(a, lab[..., None], -1)[..., 0]  # noqa: E731
    ce_model, ce_exact = -np.log(np.maximum(pick(probs), 1e-12)), -np.log(np.maximum(pick(data["dprime"]), 1e-12))
    kl = (data["dprime"] * (np.log(np.maximum(data["dprime"], 1e-12)) - np.log(np.maximum(probs, 1e-12)))).sum(-1)
    res["train_ce_model"] = float(ce_model[n_val:].mean())
    res["train_ce_exact_dprime"] = float(ce_exact[n_val:].mean())
    res["held_out_ce_model"] = float(ce_model[:n_val].mean())
    res["held_out_kl"] = float(kl[:n_val].mean())
    res["train_histories"] = int(len(lab) - n_val)
    res["label_presentations_per_history"] = trained_cfg.steps * trained_cfg.batch / (len(lab) - n_val)
    return res


# ------------------------------------------------------------------------------------------------ commands
def cmd_train(args: Any) -> int:
    """Train one model on exact D' conditionals and save it (sha256 beside it) with its training report."""
    import torch

    from policies.next_token.dprime_training import KLTrainConfig, save_trained, train_dprime_kl

    torch.set_num_threads(1)
    train = KLTrainConfig(steps=args.steps, d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads,
                          alibi=not args.no_alibi)
    cfg = replace(SAMPLE_BR_CONFIG, rounds=args.rounds)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] seed {args.seed}: {msg}", flush=True)

    model, report = train_dprime_kl(rock_paper_scissors(), cfg, train, args.seed, log)
    report["command"] = ("python -m sim_benchmarks.studies.next_token.dprime_study train "
                         f"--seed {args.seed} --steps {args.steps} --rounds {args.rounds} --d-model {args.d_model} "
                         f"--n-layers {args.n_layers} --n-heads {args.n_heads}"
                         + (" --no-alibi" if args.no_alibi else "") + f" --out {args.out}")
    digest = save_trained(model, args.out, report)
    log(f"best held-out TV {report['best_val_mean_tv']:.4f} at step {report['best_step']}; wrote {args.out} "
        f"(sha256 {digest[:12]}...)")
    return 0


def cmd_evaluate(args: Any) -> int:
    """Every measurement; writes dprime.json, dprime.md and precision_curve.png under --out."""
    import torch

    torch.set_num_threads(1)
    models = [Path(m) for m in args.models.split(",") if m.strip()]
    for m in models:
        if not m.exists():
            raise ConfigError(f"--models: no such model file {str(m)!r} (write one with the train command)")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", flush=True)

    game = rock_paper_scissors()
    seeds = list(range(args.seeds))
    if args.quick:
        new_cfg, old_cfg = replace(SAMPLE_BR_CONFIG, rounds=64), DPrimeConfig(rounds=64)
        new_tvs, old_tvs, n_test, checkpoint = [0.0, 0.1, 0.5], [0.0, 1e-2], 10, None
    else:
        new_cfg, old_cfg = SAMPLE_BR_CONFIG, DPrimeConfig()
        new_tvs = [0.0, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5]
        old_tvs = [0.0, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
        n_test, checkpoint = 100, LOGIT_CHECKPOINT
    res: dict[str, Any] = {"command": "python -m sim_benchmarks.studies.next_token.dprime_study evaluate "
                                      f"--models {args.models} --out {args.out} --seeds {args.seeds}"
                                      + (f" --model-seeds {args.model_seeds}" if args.model_seeds else "")
                                      + (" --quick" if args.quick else "")}
    # the model-independent parts are cached beside the results, keyed by everything they depend on
    key = {"seeds": args.seeds, "quick": args.quick, "old": asdict(old_cfg), "new": asdict(new_cfg),
           "old_tvs": old_tvs, "new_tvs": new_tvs, "test_histories": n_test}
    cache = args.out / "references.json"
    cached = json.loads(cache.read_text()) if cache.exists() else {}
    if cached.get("key") == key:
        log(f"references from {cache}")
        res["logit"], res["sample_br"] = cached["logit"], cached["sample_br"]
    else:
        log("logit-response setting (beta = 300)")
        res["logit"] = logit_setting(game, old_cfg, seeds, old_tvs, checkpoint, log)
        log("sample-then-best-reply setting")
        res["sample_br"] = sample_br_references(game, new_cfg, seeds, new_tvs, n_test, log)
        write_json_atomic(cache, {"key": key, "logit": res["logit"], "sample_br": res["sample_br"]})
    model_seeds = seeds[:args.model_seeds] if args.model_seeds else seeds
    res["sample_br"]["model_seeds"] = len(model_seeds)
    res["sample_br"]["models"] = sample_br_models(game, new_cfg, res["sample_br"], models, model_seeds, log)
    res["verdict"] = verdict(res["sample_br"])
    res["wall_s"] = time.perf_counter() - t0
    res["figure"] = plot_precision(args.out, res)
    write_json_atomic(args.out / "dprime.json", res)
    (args.out / "dprime.md").write_text(render(res))
    print(render(res))
    log(f"wrote {args.out}/dprime.json, dprime.md, {res['figure']}")
    return 0


TOLERANCE = 0.03  # average regret at T: how far from the exact D' agent still counts as "keeps D''s regret"


def reachable_tv(s: dict[str, Any], opp: str) -> float:
    """The largest noise level of the precision curve (noise everywhere) up to which the agent's average regret
    stays within ``TOLERANCE`` of the exact D' agent's: the TV a model needs."""
    exact = s[f"reference/{opp}"]["dprime_exact"]["final"]["mean"]
    best = 0.0
    for row in sorted(s[f"precision/{opp}/everywhere"], key=lambda r: r["tv"]):
        if abs(row["final"]["mean"] - exact) > TOLERANCE:
            break
        best = row["tv"]
    return best


def seed_interval(values: list[float]) -> dict[str, Any]:
    """Mean over training seeds with a 95 % t interval (None for a single seed)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return {"mean": float(x.mean()), "ci95": None, "n": len(x)}
    half = float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return {"mean": float(x.mean()), "ci95": [float(x.mean() - half), float(x.mean() + half)], "n": len(x)}


def verdict(s: dict[str, Any]) -> dict[str, Any]:
    """Claim (e) read against the precision curve. ``yes``: on both adversaries plain play is more than
    ``TOLERANCE`` worse than the exact D' agent (the test can fail), every trained model's TV to D' -- on held-out
    histories and on the games its own agent played -- is within the curve's reachable TV, and its agent's regret is
    within ``TOLERANCE`` of the exact D' agent's (paired 95 % interval); ``partly``: the models' agents beat plain
    play (paired interval below 0) on both but miss one of the rest; ``no``: otherwise."""
    if not s["models"]:
        return {"verdict": "inconclusive", "why": "no trained model evaluated"}
    models = list(s["models"].values())
    rows: dict[str, Any] = {}
    for opp in ("anti_model", "anti_then_biased", "D"):
        ref = s[f"reference/{opp}"]
        diffs = [m[opp]["minus_exact"] for m in models]
        row = {"exact": ref["dprime_exact"]["final"]["mean"], "plain": ref["plain"]["final"]["mean"],
               "model_over_seeds": seed_interval([m[opp]["final"]["mean"] for m in models]),
               "model_minus_exact": [d["mean"] for d in diffs],
               "model_minus_exact_ci95": [d["ci95"] for d in diffs],
               "own_games_tv": [m[opp]["tv_all"] for m in models],
               "own_games_dprime_switch_rate": [m[opp]["switch_rate"] for m in models],
               "regret_kept": all(abs(d["ci95"][0]) <= TOLERANCE and abs(d["ci95"][1]) <= TOLERANCE for d in diffs)}
        if opp != "D":
            plain_gap = ref["plain_minus_exact"]
            to_plain = [m[opp]["minus_plain"] for m in models]
            tol_tv = reachable_tv(s, opp)
            held = [m["held_out"]["all"]["mean_tv"] for m in models]
            row.update({"plain_minus_exact": plain_gap["mean"], "plain_ci95": plain_gap["ci95"],
                        "reachable_tv": tol_tv, "held_out_tv": held,
                        "model_minus_plain": [d["mean"] for d in to_plain],
                        "model_minus_plain_ci95": [d["ci95"] for d in to_plain],
                        "test_can_fail": plain_gap["ci95"][0] > TOLERANCE,
                        "tv_reached": all(tv <= tol_tv for tv in held + row["own_games_tv"]),
                        "better_than_plain": all(d["ci95"][1] < 0 for d in to_plain)})
        rows[opp] = row
    adv = [rows[o] for o in ("anti_model", "anti_then_biased")]
    if all(r["test_can_fail"] and r["tv_reached"] and r["regret_kept"] for r in adv):
        word = "yes"
    elif all(r["better_than_plain"] for r in adv):
        word = "partly"
    else:
        word = "no"
    return {"verdict": word, "tolerance": TOLERANCE, "per_opponent": rows}


def plot_precision(out: Path, res: dict[str, Any]) -> str:
    """precision_curve.png: regret vs TV to D' for both settings, references as lines, trained models as points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("logit", "anti_model", "after_switch"), ("sample_br", "anti_model", "everywhere"),
              ("sample_br", "anti_then_biased", "everywhere")]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for ax, (setting, opp, where) in zip(axes, panels, strict=True):
        s = res[setting]
        curves = [(w, s.get(f"precision/{opp}/{w}")) for w in ("everywhere", "after_switch")]
        for w, rows in curves:
            if not rows:
                continue
            xs = [r["tv"] for r in rows if r["tv"] > 0]
            ys = [r["final"]["mean"] for r in rows if r["tv"] > 0]
            lo = [r["final"]["ci95"][0] for r in rows if r["tv"] > 0]
            hi = [r["final"]["ci95"][1] for r in rows if r["tv"] > 0]
            line = ax.plot(xs, ys, marker="o", label=f"exact D' + noise ({w.replace('_', ' ')})")[0]
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        ref = s[f"reference/{opp}"]
        for name, style in (("dprime_exact", "k--"), ("plain", "r:"), ("uniform_after_switch", "g-.")):
            ax.axhline(ref[name]["final"]["mean"], ls=style[1:], color=style[0], lw=1,
                       label=f"{name.replace('_', ' ')} {ref[name]['final']['mean']:.3f}")
        models = s.get("models") or ({"earlier model": s["shipped_model"]} if "shipped_model" in s else {})
        for name, m in models.items():
            r = m[opp] if opp in m else None
            if r is None or r.get("tv_all") is None:
                continue
            x = r["tv_all"] if where == "everywhere" else (r.get("tv_after_switch") or r["tv_all"])
            f = r["final"]
            ax.errorbar([x], [f["mean"]], yerr=[[f["mean"] - f["ci95"][0]], [f["ci95"][1] - f["mean"]]], marker="*",
                        ms=11, ls="none", capsize=3, label=f"trained {name} (TV {x:.3f})")
        t_last = s["config"]["rounds"]
        ax.set(xscale="log", xlabel="TV(prediction, D') per round", ylabel=f"average regret at t = {t_last}",
               title=f"{setting}: vs {opp}")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "precision_curve.png", dpi=110)
    plt.close(fig)
    return "precision_curve.png"


def _f(r: dict[str, Any]) -> str:
    return f"{r['mean']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"


def render(res: dict[str, Any]) -> str:
    """The tables the results page quotes."""
    lo, sb = res["logit"], res["sample_br"]
    lines = [f"Command: `{res['command']}`", "",
             "## Earlier setting: logit response, beta = 300", "",
             "D' vs uniform after the switch (anti-model games): mean TV "
             f"{lo['dprime_vs_uniform_after_switch']['mean_tv']}, max {lo['dprime_vs_uniform_after_switch']['max_tv']}",
             "",
             "| TV to D' after the switch | avg regret vs anti-model at T (95 % CI) |", "| --- | --- |"]
    lines += [f"| {r['tv']:g} | {_f(r['final'])} |" for r in lo["precision/anti_model/after_switch"]]
    for opp in ("anti_model", "anti_then_biased"):
        ref = lo[f"reference/{opp}"]
        lines.append(f"\nvs {opp}: exact D' {_f(ref['dprime_exact']['final'])}, plain {_f(ref['plain']['final'])}, "
                     f"uniform after switch {_f(ref['uniform_after_switch']['final'])} (minus exact "
                     f"{_f(ref['uniform_minus_exact'])})")
    if "shipped_model" in lo:
        m = lo["shipped_model"]
        lines.append(f"\nearlier model: vs anti-model avg regret at t={m['anti_model']['t']}: "
                     f"{[round(x, 3) for x in m['anti_model']['avg_regret']]} (bigram "
                     f"{[round(x, 3) for x in m['base_anti_model']['avg_regret']]}); TV before/after switch on its "
                     f"games {m['anti_model'].get('tv_before_switch')}, {m['anti_model'].get('tv_after_switch')}; "
                     f"train CE {m['train_ce_model']:.4f} vs exact D' CE {m['train_ce_exact_dprime']:.4f} on the same "
                     f"labels ({m['train_histories']} histories, each presented "
                     f"~{m['label_presentations_per_history']:.0f} times), held-out KL {m['held_out_kl']:.3f}")
    lines += ["", "## Sample-then-best-reply D' (sharpened discounted bigram)", "",
              f"TV(base, D') after the switch: mean {sb['dprime_vs_base_after_switch']['mean_tv']:.3f} over "
              f"{sb['dprime_vs_base_after_switch']['positions']} positions; TV(D', uniform) after the switch: mean "
              f"{sb['dprime_vs_uniform_after_switch']['mean_tv']:.3f}", "",
              "| opponent | exact D' | plain (base) | uniform after switch | uniform - exact (paired) |",
              "| --- | --- | --- | --- | --- |"]
    for opp in ("anti_model", "anti_then_biased", "D"):
        ref = sb[f"reference/{opp}"]
        lines.append(f"| {opp} | {_f(ref['dprime_exact']['final'])} | {_f(ref['plain']['final'])} | "
                     f"{_f(ref['uniform_after_switch']['final'])} | {_f(ref['uniform_minus_exact'])} |")
    for opp in ("anti_model", "anti_then_biased"):
        for where in ("everywhere", "after_switch"):
            rows = sb[f"precision/{opp}/{where}"]
            lines.append(f"\nprecision vs {opp}, noise {where}: "
                         + "; ".join(f"TV {r['tv']:g}: {_f(r['final'])}" for r in rows))
    lines += ["", "| model | held-out TV all / before / after switch | vs anti-model: regret, TV on its games, "
              "minus exact, minus plain | vs anti-then-biased: same | on D |", "| --- | --- | --- | --- | --- |"]
    for name, m in sb["models"].items():
        h = m["held_out"]["all"]
        cells = []
        for opp in ("anti_model", "anti_then_biased"):
            r = m[opp]
            after = (f"after switch {r['tv_after_switch']:.3f}" if r["tv_after_switch"] is not None
                     else "D' never switches on these games")
            cells.append(f"{_f(r['final'])}, TV {r['tv_all']:.3f} ({after}), {_f(r['minus_exact'])}, "
                         f"{_f(r['minus_plain'])}")
        lines.append(f"| {name} (seed {m['seed']}, step {m['best_step']}) | {h['mean_tv']:.4f} / "
                     f"{h['mean_tv_before_switch']:.4f} / {h['mean_tv_after_switch']:.4f} | {cells[0]} | {cells[1]} | "
                     f"{_f(m['D']['final'])} |")
    for name, m in sb["models"].items():
        for opp in ("anti_model", "anti_then_biased"):
            h = m.get(f"{opp}/switched_branch_only")
            if h:
                lines.append(f"\n{name} on the switched branch only (exact D' before the switch) vs {opp}: "
                             f"{_f(h['final'])}, TV after the switch {h['tv_after_switch']}, minus exact "
                             f"{_f(h['minus_exact'])}, minus the uniform control {_f(h['minus_uniform_control'])}")
    v = res["verdict"]
    if "per_opponent" in v:
        for opp, r in v["per_opponent"].items():
            m = r["model_over_seeds"]
            lines.append(f"\n{opp}: models over training seeds {m['mean']:.3f} {m['ci95']} (n = {m['n']}); exact "
                         f"{r['exact']:.3f}, plain {r['plain']:.3f}"
                         + (f"; reachable TV {r['reachable_tv']:g}, held-out TV "
                            f"{[round(x, 3) for x in r['held_out_tv']]}" if "reachable_tv" in r else "")
                         + f"; TV on own games {[round(x, 3) for x in r['own_games_tv']]}")
    lines += ["", f"Verdict: **{v['verdict']}**", ""]
    return "\n".join(lines)


def cmd_ship(args: Any) -> int:
    """Copy a trained model (and its sha256) to checkpoints/next_token and write the manifest beside it."""
    from policies.next_token.dprime_training import load_trained
    from policies.next_token.transformer import file_sha256

    model, report = load_trained(args.model)  # sha256-checked
    args.dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.model, args.dest)
    digest = file_sha256(args.dest)
    args.dest.with_name(args.dest.name + ".sha256").write_text(f"{digest}  {args.dest.name}\n")
    manifest_path = args.dest.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest[args.dest.name] = {
        "file": args.dest.name, "sha256": digest, "what": "causal transformer trained on the exact conditionals of "
        "the sample-then-best-reply robustified distribution D' (rock-paper-scissors, T = 200)",
        "config": asdict(model.cfg), "params": sum(p.numel() for p in model.parameters()),
        "training": {k: report.get(k) for k in ("command", "seed", "best_step", "best_val_mean_tv", "train_s",
                                                "dprime_config", "train_config")},
        "ship_command": f"python -m sim_benchmarks.studies.next_token.dprime_study ship --model {args.model}"}
    write_json_atomic(manifest_path, manifest)
    print(f"wrote {args.dest} (sha256 {digest[:12]}...) and {manifest_path}")
    return 0


@main_guard
def main(argv: list[str] | None = None) -> int:
    """``train``, ``evaluate`` or ``ship``."""
    ap = ArgumentParser(prog="sim_benchmarks.studies.next_token.dprime_study", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    tr = sub.add_parser("train", help="train one model on the exact D' conditionals")
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--steps", type=int, default=200)
    tr.add_argument("--rounds", type=int, default=SAMPLE_BR_CONFIG.rounds, help="T (model context T + 1)")
    tr.add_argument("--d-model", type=int, default=32)
    tr.add_argument("--n-layers", type=int, default=4)
    tr.add_argument("--n-heads", type=int, default=2)
    tr.add_argument("--no-alibi", action="store_true", help="plain learned positions only (no recency bias)")
    tr.add_argument("--out", type=Path, required=True)
    ev = sub.add_parser("evaluate", help="precision curves, trained models, controls, the logit setting")
    ev.add_argument("--models", default="", help="comma-separated model files written by train")
    ev.add_argument("--out", type=Path, required=True)
    ev.add_argument("--seeds", type=int, default=20)
    ev.add_argument("--model-seeds", type=int, default=0,
                    help="games per opponent for each trained model (the first of --seeds; 0 = all)")
    ev.add_argument("--quick", action="store_true", help="fewer noise levels and T = 64 (seconds; for tests)")
    sh = sub.add_parser("ship", help="copy a trained model into checkpoints/next_token with a manifest")
    sh.add_argument("--model", type=Path, required=True)
    sh.add_argument("--dest", type=Path, default=SHIPPED)
    args = ap.parse_args(argv)
    for name in ("steps", "rounds", "d_model", "n_layers", "n_heads", "seeds"):
        if getattr(args, name, 1) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if getattr(args, "model_seeds", 0) < 0:
        raise ConfigError(f"--model-seeds must be >= 0, got {args.model_seeds}")
    if args.cmd == "train":
        return cmd_train(args)
    if args.cmd == "evaluate":
        return cmd_evaluate(args)
    return cmd_ship(args)


if __name__ == "__main__":
    raise SystemExit(main())
