"""Streaming learners: traces, the SPR window, projections, determinism, resume, the CLI and a learning check."""

import filecmp
import json

import numpy as np
import pytest
import torch

from agents.streaming import StreamAC, StreamACConfig, StreamQ, StreamQConfig, StreamSPR, StreamSPRConfig
from envs.arcade import make_arcade_env
from envs.errors import ConfigError
from sim_benchmarks.training.streaming import build_config, train


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # batch-1 updates with 2 threads on a shared 2-core box run up to 100x slower
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _env(name="minatar:breakout"):
    return make_arcade_env(name, {"sticky_action_prob": 0.0} if name.startswith("minatar") else {})


def _q(cfg, seed=0):
    env = _env()
    return env, StreamQ("minatar", env.observation_space.shape, env.action_space.n, cfg, seed=seed)


def test_stream_q_trace_decays_with_gamma_lambda():
    # lr=0 keeps the weights fixed, so the trace must be exactly γλ∇Q(s0,a0) + ∇Q(s1,a1)
    env, ag = _q(StreamQConfig(lr=0.0, start_e=0.0, end_e=0.0, gamma=0.9, lam=0.5))
    obs, _ = env.reset(seed=0)
    grads = []
    for _ in range(2):
        a = ag.act(obs)
        s = ag.pipe.tensor.unsqueeze(0)
        q = ag.q(s)
        grads.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(q[0, a], list(ag.q.parameters()))]))
        nobs, r, term, trunc, _ = env.step(a)
        assert not (term or trunc)
        ag.observe(obs, a, r, nobs, term, trunc)
        obs = nobs
    assert torch.allclose(ag.opt.trace, 0.45 * grads[0] + grads[1], atol=1e-6)


def test_stream_q_traces_reset_after_non_greedy_action_and_episode_end():
    env, ag = _q(StreamQConfig(start_e=1.0, end_e=1.0))  # always explore: greedy only by chance
    obs, _ = env.reset(seed=1)
    seen = {True: 0, False: 0}
    for _ in range(120):
        a = ag.act(obs)
        greedy = ag._greedy
        nobs, r, term, trunc, _ = env.step(a)
        ag.observe(obs, a, r, nobs, term, trunc)
        zero = bool(torch.count_nonzero(ag.opt.trace) == 0)
        if term or trunc or not greedy:
            assert zero
        else:
            assert not zero
        seen[greedy] += 1
        obs = env.reset()[0] if term or trunc else nobs
    assert seen[True] > 10 and seen[False] > 10


def test_stream_ac_traces_reset_at_episode_end_only():
    env = _env()
    ag = StreamAC("minatar", env.observation_space.shape, env.action_space.n, StreamACConfig(), seed=0)
    obs, _ = env.reset(seed=0)
    ends = 0
    for _ in range(150):
        a = ag.act(obs)
        nobs, r, term, trunc, _ = env.step(a)
        ag.observe(obs, a, r, nobs, term, trunc)
        for part in (ag.actor, ag.critic):
            assert bool(torch.count_nonzero(part.opt.trace) == 0) == (term or trunc)
        if term or trunc:
            ends += 1
            obs, _ = env.reset()
        else:
            obs = nobs
    assert ends >= 2


def test_stream_ac_policy_cotangent_matches_autograd():
    from agents.streaming.stream_ac import policy_objective_cotangent

    logits = torch.randn(5, dtype=torch.float64, requires_grad=True)
    logp = torch.log_softmax(logits, -1)
    obj = logp[2] + 0.3 * (-(logp.exp() * logp).sum())
    (expected,) = torch.autograd.grad(obj, logits)
    assert torch.allclose(policy_objective_cotangent(logits.detach(), 2, 0.3), expected)


def _spr(projection="both", k=3, seed=0, game="minatar:freeway"):
    env = _env(game)  # freeway episodes last 2,500 steps: windows fill without an episode end
    cfg = StreamSPRConfig(k=k, start_e=0.0, end_e=0.0, projection=projection, spr_lr=1e-2)
    return env, StreamSPR("minatar", env.observation_space.shape, env.action_space.n, cfg, seed=seed)


def test_spr_window_pairs_each_observation_with_the_action_taken_there():
    env, ag = _spr(k=3)
    calls = []
    ag.transition.register_forward_hook(lambda m, inp, out: calls.append(int(inp[1][0])))
    obs, _ = env.reset(seed=2)
    history = []  # (normalised obs tensor, action taken at it)
    rng = np.random.default_rng(0)
    for _t in range(6):
        ag.act(obs)
        a = int(rng.integers(env.action_space.n))  # force varied actions (logged as non-greedy → no SPR step)
        history.append((ag.pipe.tensor, a))
        nobs, r, term, trunc, _ = env.step(a)
        ag.observe(obs, a, r, nobs, term, trunc)
        obs = nobs
    window_obs, window_act = ag.spr_window()
    assert len(window_obs) == 4 and len(window_act) == 3
    # window = o_3..o_6 with actions a_3..a_5: a_i is the action taken at o_i
    for i in range(3):
        assert window_obs[i] is history[3 + i][0]
        assert window_act[i] == history[3 + i][1]
    calls.clear()
    ag.spr_gradients()
    assert calls == window_act  # prediction k+1 rolls the model with the action taken at window step k


def test_spr_window_is_cleared_at_episode_end():
    env, ag = _spr(k=2, game="minatar:breakout")
    obs, _ = env.reset(seed=0)
    while True:
        a = ag.act(obs)
        nobs, r, term, trunc, _ = env.step(a)
        ag.observe(obs, a, r, nobs, term, trunc)
        if term or trunc:
            break
        obs = nobs
    assert ag.spr_window() == ([], [])


def _spr_after_steps(projection, n=30):
    env, ag = _spr(projection=projection, k=3, seed=1)
    obs, _ = env.reset(seed=1)
    for _ in range(n):
        a = ag.act(obs)
        nobs, r, term, trunc, _ = env.step(a)
        ag.observe(obs, a, r, nobs, term, trunc)
        obs = env.reset()[0] if term or trunc else nobs
    return ag


@pytest.mark.parametrize("projection", ["both", "rl"])
def test_encoder_spr_step_is_orthogonal_to_the_rl_update(projection):
    ag = _spr_after_steps(projection)
    assert ag.spr_updates > 0 and len(ag.spr_window()[0]) == 4
    before = ag.flat[: ag.n_enc].clone()
    ag._spr_update()
    change = ag.flat[: ag.n_enc] - before
    delta_rl = ag.opt.trace[: ag.n_enc] * ag._rl_scale
    assert float(change.norm()) > 0 and float(delta_rl.norm()) > 0
    cos = float(torch.dot(change.double(), delta_rl.double()) / (change.norm() * delta_rl.norm()))
    assert abs(cos) < 1e-4


def test_without_rl_projection_the_encoder_step_is_not_orthogonal():
    ag = _spr_after_steps("none")
    before = ag.flat[: ag.n_enc].clone()
    ag._spr_update()
    change = ag.flat[: ag.n_enc] - before
    delta_rl = ag.opt.trace[: ag.n_enc] * ag._rl_scale
    cos = float(torch.dot(change.double(), delta_rl.double()) / (change.norm() * delta_rl.norm()))
    assert abs(cos) > 1e-3


def test_bad_options_raise_config_error():
    with pytest.raises(ConfigError, match="unknown option for stream_q 'kk'; valid: adaptive"):
        build_config("stream_q", "minatar", 100, {"kk": 1})
    with pytest.raises(ConfigError, match="unknown SPR projection 'sideways'"):
        train("minatar:breakout", "stream_spr", 10, 0, "/tmp/unused-embodia", options={"projection": "sideways"})
    cfg = build_config("stream_spr", "atari", 1000, {"k": "7", "projection": "pcgrad"})
    assert cfg.k == 7 and cfg.projection == "pcgrad" and cfg.exploration_fraction == 0.05
    # booleans and numbers go through the typed-option parser: a typo is an error, not a silent default
    with pytest.raises(ConfigError, match="option adaptive must be true or false, got 'yes'"):
        build_config("stream_q", "minatar", 100, {"adaptive": "yes"})
    with pytest.raises(ConfigError, match="option k must be an integer, got 'five'"):
        build_config("stream_spr", "minatar", 100, {"k": "five"})
    assert build_config("stream_ac", "minatar", 100, {"adaptive": "true"}).adaptive is True


def _assert_bit_identical(a, b, where="state"):
    """Exact equality of nested checkpoint states (dicts, lists, tensors, arrays, scalars)."""
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _assert_bit_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_bit_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), where
    else:
        assert a == b, where


@pytest.mark.parametrize("agent, extra", [("stream_q", {}), ("stream_ac", {}), ("stream_spr", {}),
                                          ("stream_q", {"backend": "numba"}), ("stream_ac", {"backend": "numba"}),
                                          ("stream_spr", {"backend": "numba"})])
def test_same_seed_gives_bit_identical_metrics_and_resume_continues_exactly(agent, extra, tmp_path):
    opts = {"checkpoint_every": 150, **extra}
    a = train("minatar:breakout", agent, 500, 5, tmp_path / "a", options=opts)
    train("minatar:breakout", agent, 500, 5, tmp_path / "b", options=opts)
    assert filecmp.cmp(tmp_path / "a" / "metrics.jsonl", tmp_path / "b" / "metrics.jsonl", shallow=False)

    class Killed(Exception):
        pass

    done = [0]

    def die_at_400(n):
        done[0] += n
        if done[0] >= 400:
            raise Killed

    with pytest.raises(Killed):
        train("minatar:breakout", agent, 500, 5, tmp_path / "c", options=opts, on_progress=die_at_400)
    boundary = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=False)["loop"]["counters"]["step"]
    c = train("minatar:breakout", agent, 500, 5, tmp_path / "c", resume=True, options=opts)
    assert 150 <= c["resumed_from_step"] == boundary < 400  # resumed at the chunk boundary the kill left behind
    assert filecmp.cmp(tmp_path / "a" / "metrics.jsonl", tmp_path / "c" / "metrics.jsonl", shallow=False)
    # the last checkpoint (~step 450) was written after the resume: every weight, trace, SPR head, target, momentum
    # buffer, normaliser and RNG state equals the uninterrupted run's, bit for bit
    full = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)["loop"]
    resumed = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=False)["loop"]
    assert resumed["counters"] == full["counters"] and full["counters"]["step"] > boundary
    _assert_bit_identical(full, resumed)
    if agent == "stream_spr":
        assert full["learner"]["spr_updates"] > 0
    records = [json.loads(line) for line in open(tmp_path / "a" / "metrics.jsonl")]
    assert [r["episode"] for r in records] == list(range(len(records)))
    assert set(records[0]) == {"step", "episode", "return", "length"}
    assert a["schema"] == "embodia.train/1" and a["steps"] == 500 and a["episodes"] == len(records)
    assert (tmp_path / "a" / "learning_curve.png").stat().st_size > 1000


def test_a_checkpoint_from_before_the_fused_step_resumes_bit_identically_on_the_layered_kernels(tmp_path):
    opts = {"checkpoint_every": 100, "backend": "numba"}
    train("minatar:breakout", "stream_q", 400, 2, tmp_path / "a", options={**opts, "fused_step": False})

    class Killed(Exception):
        pass

    def die_at_250(n, done=[0]):  # noqa: B006 (a counter across calls)
        done[0] += n
        if done[0] >= 250:
            raise Killed

    with pytest.raises(Killed):
        train("minatar:breakout", "stream_q", 400, 2, tmp_path / "c", options={**opts, "fused_step": False},
              on_progress=die_at_250)
    ckpt = tmp_path / "c" / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=False)
    del state["identity"]["config"]["fused_step"]  # as written before the option existed
    torch.save(state, ckpt)
    with pytest.raises(ConfigError, match="from another run"):  # asking for the fused step explicitly: refused
        train("minatar:breakout", "stream_q", 400, 2, tmp_path / "c", resume=True,
              options={**opts, "fused_step": True})
    resumed = train("minatar:breakout", "stream_q", 400, 2, tmp_path / "c", resume=True, options=opts)
    assert resumed["config"]["fused_step"] is False and resumed["resumed_from_step"] > 0
    assert filecmp.cmp(tmp_path / "a" / "metrics.jsonl", tmp_path / "c" / "metrics.jsonl", shallow=False)
    fresh = train("minatar:breakout", "stream_q", 150, 2, tmp_path / "b", options=opts)
    assert fresh["config"]["fused_step"] is True  # new runs take the fused step


def test_an_spr_checkpoint_from_before_the_fused_update_resumes_bit_identically_on_the_old_path(tmp_path):
    # a run begun with the loss kernel + per-module steps (a checkpoint without the fused_spr field) continues on
    # them: its metrics and final state equal an uninterrupted run's on that path, bit for bit
    opts = {"checkpoint_every": 150, "backend": "numba", "start_e": 0.2}
    train("minatar:breakout", "stream_spr", 450, 4, tmp_path / "a", options={**opts, "fused_spr": False})

    class Killed(Exception):
        pass

    def die_at_300(n, done=[0]):  # noqa: B006 (a counter across calls)
        done[0] += n
        if done[0] >= 300:
            raise Killed

    with pytest.raises(Killed):
        train("minatar:breakout", "stream_spr", 450, 4, tmp_path / "c", options={**opts, "fused_spr": False},
              on_progress=die_at_300)
    ckpt = tmp_path / "c" / "checkpoint.pt"
    state = torch.load(ckpt, weights_only=False)
    del state["identity"]["config"]["fused_spr"]  # as written before the option existed
    torch.save(state, ckpt)
    with pytest.raises(ConfigError, match="from another run"):  # asking for the fused update explicitly: refused
        train("minatar:breakout", "stream_spr", 450, 4, tmp_path / "c", resume=True,
              options={**opts, "fused_spr": True})
    resumed = train("minatar:breakout", "stream_spr", 450, 4, tmp_path / "c", resume=True, options=opts)
    assert resumed["config"]["fused_spr"] is False and resumed["resumed_from_step"] > 0
    assert filecmp.cmp(tmp_path / "a" / "metrics.jsonl", tmp_path / "c" / "metrics.jsonl", shallow=False)
    full = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)["loop"]
    _assert_bit_identical(full, torch.load(ckpt, weights_only=False)["loop"])
    assert full["learner"]["spr_updates"] > 0
    fresh = StreamSPR("minatar", (4, 10, 10), 3, build_config("stream_spr", "minatar", 100, {"backend": "numba"}))
    assert fresh.config.fused_spr is True and fresh.fused_spr is not None  # new runs take the fused update
    assert StreamSPR("minatar", (4, 10, 10), 3, StreamSPRConfig(fused_spr=True)).fused_spr is None  # torch backend


def test_resume_refuses_a_checkpoint_from_another_run(tmp_path):
    train("minatar:breakout", "stream_q", 400, 1, tmp_path, options={"checkpoint_every": 100})
    with pytest.raises(ConfigError, match="from another run"):
        train("minatar:breakout", "stream_q", 400, 2, tmp_path, resume=True, options={"checkpoint_every": 100})
    # a checkpoint written before a config field existed resumes when that field is at its default only
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=False)
    del state["identity"]["config"]["backend"]
    torch.save(state, tmp_path / "checkpoint.pt")
    with pytest.raises(ConfigError, match="from another run"):
        train("minatar:breakout", "stream_q", 400, 1, tmp_path, resume=True,
              options={"checkpoint_every": 100, "backend": "numba"})
    assert train("minatar:breakout", "stream_q", 400, 1, tmp_path, resume=True,
                 options={"checkpoint_every": 100})["resumed_from_step"] > 0
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot read checkpoint"):
        train("minatar:breakout", "stream_q", 400, 1, tmp_path, resume=True)


def test_launch_train_cli_writes_the_contract(tmp_path, capsys):
    from launch.train import main

    out = tmp_path / "run"
    rc = main(["--env", "minatar:freeway", "--agent", "stream_spr", "--steps", "300", "--seed", "1",
               "--out", str(out), "--option", "k=2"])
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    keys = ("env", "agent", "steps", "return_last100", "steps_per_second", "wall_s", "seed", "config")
    assert all(key in summary for key in keys)
    assert summary["config"]["k"] == 2 and summary["steps"] == 300
    assert summary["representation"]["states"] == 1000 and summary["representation"]["effective_rank"] > 1
    bad = ["--env", "minatar:breakout", "--agent", "stream_x", "--steps", "10", "--out", str(tmp_path / "x")]
    assert main(bad) == 2
    assert "valid: stream_q, stream_ac, stream_spr" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("env_name", ["atari:Pong", "octax:brix"])
def test_every_agent_runs_on_atari_and_octax(env_name, tmp_path):
    for agent in ("stream_q", "stream_ac", "stream_spr"):
        s = train(env_name, agent, 150, 0, tmp_path / agent, options={"k": 2} if agent == "stream_spr" else {})
        assert s["steps"] == 150 and np.isfinite(s["steps_per_second"])


@pytest.mark.slow
def test_stream_q_learns_minatar_breakout_in_20k_steps(tmp_path):
    # random play scores ≈ 0.5 per episode; measured 2.47 for this seed (`launch.train ... --seed 0`, 25 s)
    s = train("minatar:breakout", "stream_q", 20_000, 0, tmp_path)
    assert s["return_last100"] >= 1.5


@pytest.mark.slow
def test_stream_q_with_the_compiled_network_learns_minatar_breakout_too(tmp_path):
    # the numba backend's own run of the learning check: measured 2.38 (`... --option backend=numba`)
    s = train("minatar:breakout", "stream_q", 20_000, 0, tmp_path, options={"backend": "numba"})
    assert s["return_last100"] >= 1.5 and s["config"]["backend"] == "numba"


@pytest.mark.parametrize("env_name", ["minatar:breakout", "atari:Breakout", "octax:brix"])
@pytest.mark.parametrize("cls, cfg_cls, parts", [(StreamQ, StreamQConfig, [None]),
                                                 (StreamAC, StreamACConfig, ["actor", "critic"]),
                                                 (StreamSPR, StreamSPRConfig, [None])])
def test_numba_backend_gives_the_torch_update(env_name, cls, cfg_cls, parts):
    env = _env(env_name)
    suite = env_name.split(":")[0]
    shape, n = env.observation_space.shape, env.action_space.n
    opts = {} if cls is StreamAC else {"start_e": 0.0, "end_e": 0.0}  # greedy, so SPR updates happen
    if cls is StreamSPR:
        opts["k"] = 2
    ref = cls(suite, shape, n, cfg_cls(**opts), seed=3)
    fast = cls(suite, shape, n, cfg_cls(backend="numba", **opts), seed=3)
    obs, _ = env.reset(seed=0)
    for _ in range(3):  # a few steps: traces carry over, and SPR's K = 2 window fills
        a = fast.act(obs)
        assert ref.act(obs) == a  # same weights (to rounding) and action stream
        nxt, r, term, trunc, _ = env.step(a)
        ref.observe(obs, a, float(r), nxt, term, trunc)
        fast.observe(obs, a, float(r), nxt, term, trunc)
        obs = nxt
    if cls is not StreamAC:
        fast.flush()  # the fused MinAtar step defers the hidden weight's update to the next forward
    for part in parts:
        f, g = (fast, ref) if part is None else (getattr(fast, part), getattr(ref, part))
        # the trace, not the gradient buffer: Atari/Octax fold their largest block into the trace directly
        torch.testing.assert_close(f.opt.trace, g.opt.trace, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(f.flat, g.flat, rtol=1e-4, atol=1e-6)
    if cls is StreamSPR:
        assert fast.spr_updates == ref.spr_updates == 2  # steps 2 and 3 complete a K = 2 window


def test_numba_backend_on_atari_is_deterministic():
    runs = []
    for _ in range(2):
        env = _env("atari:Breakout")
        ag = StreamQ("atari", env.observation_space.shape, env.action_space.n,
                     StreamQConfig(backend="numba", start_e=0.2, end_e=0.2), seed=4)
        obs, _ = env.reset(seed=1)
        for _ in range(40):
            a = ag.act(obs)
            nxt, r, term, trunc, _ = env.step(a)
            ag.observe(obs, a, float(r), nxt, term, trunc)
            obs = env.reset()[0] if term or trunc else nxt
        runs.append(ag.flat.clone())
    assert torch.equal(*runs)


def test_loop_passes_a_lost_life_to_the_learner_as_terminal_but_keeps_the_episode():
    from agents.streaming.loop import StreamingLoop

    class Recorder:  # records what the loop tells the learner
        def __init__(self):
            self.terminals = []

        def act(self, obs):
            return 0

        def observe(self, obs, action, reward, next_obs, terminated, truncated):
            self.terminals.append(terminated)

    env = make_arcade_env("atari:Breakout", {"episodic_life": True, "fire_reset": True})
    learner, episodes = Recorder(), []
    StreamingLoop(env, learner, seed=0).run(2000, episodes.append)
    first = episodes[0]
    # five lives, one reported episode: four flagged losses plus the game over reach the learner as terminal
    assert sum(learner.terminals[: first["length"]]) == 5 and learner.terminals[first["length"] - 1]
