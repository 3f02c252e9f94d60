"""Stream Q(λ): online Q-learning with eligibility traces and ObGD, no replay buffer, no target network.

Per transition: one forward of the batch [s, s'] (s' also gives the greedy action for the next step), one
backward of Q(s, a), a fused trace update and one ObGD step. Traces reset at episode end and after any
non-greedy action (Watkins-style cut).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from agents.streaming.common import ObservationPipe, linear_schedule, make_rngs
from envs.config import Options, option
from policies.streaming.backends import compiled_network
from policies.streaming.networks import (
    ForwardCache,
    StreamNetwork,
    flatten_parameters_,
    fused_backward,
    fused_forward,
    param_views,
)
from policies.streaming.numba_step import FusedQStep
from policies.streaming.obgd import AdaptiveObGD, ObGD


@dataclass(frozen=True)
class StreamQConfig(Options):
    """Stream Q(λ) hyper-parameters (defaults from Stream-x); ``--option key=value`` of ``launch.train``."""

    title: ClassVar[str] = "stream_q"
    # Stream-x decays ε over 5 % of an Atari run instead of ``exploration_fraction``'s default
    ATARI_EXPLORATION_FRACTION: ClassVar[float] = 0.05

    lr: float = option(1.0, "ObGD step size", min=0)
    gamma: float = option(0.99, "discount", min=0, max=1)
    lam: float = option(0.8, "trace decay λ", min=0, max=1)
    kappa: float = option(2.0, "ObGD overshooting bound κ", min=0)
    sparsity: float = option(0.9, "fraction of each layer's weights initialised to zero", min=0, max=1)
    start_e: float = option(1.0, "ε at the start", min=0, max=1)
    end_e: float = option(0.01, "ε after the decay", min=0, max=1)
    exploration_fraction: float = option(0.2, "ε decays over this fraction of total_steps (Atari: 0.05)",
                                         min=0, max=1)
    total_steps: int = option(5_000_000, "run length the ε schedule refers to (set from --steps)", min=1)
    adaptive: bool = option(False, "AdaptiveObGD instead of ObGD")
    # "numba": the compiled MinAtar network (policies.streaming.numba_net) or the im2col/GEMM Atari/Octax one
    # (im2col_net); same maths, float32-rounding-level differences from the torch path, so a run is
    # reproducible within one backend
    backend: Literal["torch", "numba"] = option("torch", "network implementation (numba: compiled)")
    # network preset (policies.streaming.networks.PRESETS): "" = the suite's default, "stream_x" = the Stream-x
    # reference network, "nature" = the DQN encoder on Atari
    network: str = option("", "network preset ('' = the suite's default; stream_x, nature)")
    # backend=numba on MinAtar: normaliser, forward, TD error, reverse pass, trace and ObGD step as one compiled
    # call (policies.streaming.numba_step); false = the layer-by-layer kernels (BLAS GEMMs) that runs made
    # before it existed, whose checkpoints therefore resume with false (bit-identical continuations)
    fused_step: bool = option(True, "backend=numba on MinAtar: the whole Q(λ) step as one compiled call")

    # the value a checkpoint written before a field existed ran with, where that differs from today's default
    LEGACY_VALUES: ClassVar[dict[str, Any]] = {"fused_step": False}


class StreamQ:
    """Stream Q(λ) learner: ``act(obs)`` then ``observe(obs, a, r, next_obs, terminated, truncated)``."""

    def __init__(self, suite: str, obs_shape: tuple[int, ...], n_actions: int, config: StreamQConfig | None = None,
                 seed: int = 0) -> None:
        self.config = cfg = config or StreamQConfig()
        self.suite, self.obs_shape, self.n_actions = suite, tuple(obs_shape), int(n_actions)
        gen, self.rng = make_rngs(seed)
        self.q = StreamNetwork(suite, self.obs_shape, self.n_actions, cfg.sparsity, gen, preset=cfg.network)
        self.flat = flatten_parameters_(self.q)  # every weight is a view into this one vector
        self.grad = torch.zeros_like(self.flat)
        self.grad_views = param_views(self.grad, self.q)
        self.fast = compiled_network(cfg.backend, suite, self.q, self.obs_shape)
        self._grad_np = [v.numpy() for v in self.grad_views]
        self._onehot = torch.eye(self.n_actions).unsqueeze(1)  # [a] is the cotangent selecting Q(s, a)
        self._onehot_np = np.eye(self.n_actions, dtype=np.float32)
        self._pair = np.zeros((2, *self.obs_shape), np.float32)  # the compiled forward's [s, s'] batch
        opt_cls = AdaptiveObGD if cfg.adaptive else ObGD
        self.opt = opt_cls(self.flat, lr=cfg.lr, gamma=cfg.gamma, lam=cfg.lam, kappa=cfg.kappa)
        self.fused: FusedQStep | None = None
        if cfg.backend == "numba" and suite == "minatar" and cfg.fused_step and not cfg.adaptive:
            self.fused = FusedQStep(self.q, self.obs_shape, self.flat.numpy(), self.opt.trace.numpy())
            # normalised observations are written into a ring of preallocated tensors (no allocation per step);
            # long enough that no slot is reused while the pipe or an SPR window of K + 1 still holds it
            size = getattr(cfg, "k", 0) + 3
            self._ring_np = np.zeros((size, int(np.prod(self.obs_shape))), np.float32)
            self._ring = [torch.from_numpy(row).view(self.obs_shape) for row in self._ring_np]
            self._ring_i = 0
        self._rl_scale = 0.0
        self.pipe = ObservationPipe(self.obs_shape, cfg.gamma)
        self.steps = 0
        self._greedy = True
        self._last_action = -1

    # -- acting -------------------------------------------------------------------------------------------
    def epsilon(self) -> float:
        cfg = self.config
        return linear_schedule(cfg.start_e, cfg.end_e, int(cfg.exploration_fraction * cfg.total_steps), self.steps)

    def _q_values(self, s: torch.Tensor) -> torch.Tensor | np.ndarray:
        """Q(s, ·): a tensor on the torch path, a numpy array from the compiled network (no tensor wrapping on
        the per-step path)."""
        if self.pipe.outputs is None:
            if self.fused is not None:
                self.pipe.outputs = self.fused.forward(s.numpy())
            elif self.fast is not None:
                self.pipe.outputs = self.fast.forward(s.numpy()[None])[0]
            else:
                self.pipe.outputs = fused_forward(self.q, s.unsqueeze(0))[0]
        return self.pipe.outputs

    def act(self, obs: np.ndarray) -> int:
        """ε-greedy action; remembers whether it was greedy (a non-greedy action cuts the traces)."""
        s, _ = self.pipe.get(obs)
        q = self._q_values(s)
        greedy_a = int(q.argmax())  # the first maximum, for a tensor as for an array
        if self.rng.random() < self.epsilon():
            a = int(self.rng.integers(self.n_actions))
        else:
            a = greedy_a
        self._greedy = a == greedy_a
        self._last_action = a
        return a

    # -- learning -----------------------------------------------------------------------------------------
    def _td_update(self, s: torch.Tensor, a: int, r_scaled: float, s_next: torch.Tensor, terminated: bool
                   ) -> tuple[float, torch.Tensor | np.ndarray]:
        """One Q(λ) step; returns (δ, Q(s') computed before the update)."""
        if self.fast is not None:
            self._pair[0] = s.numpy()
            self._pair[1] = s_next.numpy()
            q = self.fast.forward(self._pair)
            # ∇θ Q(s, a) into self.grad, except the big hidden-layer block: left as factors for the trace
            outer = self.fast.backward(self._onehot_np[a], self._grad_np, defer_outer=True)
        else:
            cache = ForwardCache()
            q = fused_forward(self.q, torch.stack((s, s_next)), cache)  # one pass for Q(s, ·) and Q(s', ·)
            fused_backward(cache, self._onehot[a], self.grad_views)  # ∇θ Q(s, a) into self.grad
            outer = None
        q_sa = float(q[0, a])
        q_next = q[1]
        target = r_scaled + (0.0 if terminated else self.config.gamma * float(q_next.max()))
        delta = target - q_sa
        self.opt.accumulate(self.grad, outer)
        self._rl_scale = self.opt.step(delta)
        return delta, q_next

    def _learn(self, s: torch.Tensor, action: int, r_scaled: float, next_obs: np.ndarray, terminated: bool,
               reset: bool) -> tuple[float, torch.Tensor]:
        """Normalise ``next_obs`` (the pipe's new observation), take the Q(λ) step from ``s``, then zero the
        traces if ``reset``; returns (δ, the normalised s'). The pipe keeps Q(s', ·) from the step's forward
        (weights before the update) for the next greedy action."""
        if self.fused is None:
            s_next = self.pipe.push(next_obs)
            delta, q_next = self._td_update(s, action, r_scaled, s_next, terminated)
            self.pipe.outputs = q_next
            if reset:
                self.opt.reset_traces()
            return delta, s_next
        cfg, opt = self.config, self.opt
        raw = np.ascontiguousarray(next_obs).reshape(-1)
        if raw.dtype == np.bool_:
            raw = raw.view(np.uint8)  # the same 0/1 values, without a conversion pass
        last = self._ring_i
        s_flat = self._ring_np[last] if s is self._ring[last] else s.numpy().reshape(-1)
        self._ring_i = nxt = (last + 1) % len(self._ring)
        s_next = self._ring[nxt]
        count, mean, m2 = self.pipe.obs_norm.stats.next_sample()
        delta, self._rl_scale, opt.trace_l1 = self.fused.step(
            s_flat, raw, self._ring_np[nxt], count, mean, m2, self.pipe.obs_norm.eps,
            action, r_scaled, terminated, reset, cfg.gamma, opt._decay, opt.lr, opt.kappa)
        self.pipe.adopt(next_obs, s_next, self.fused.out[1].copy())
        return delta, s_next

    def flush(self) -> None:
        """Bring ``flat`` and the trace up to date: the fused step defers the hidden weight's update to the next
        forward (see ``numba_step``); anything reading or replacing them from outside calls this first."""
        if self.fused is not None:
            self.fused.flush()

    def cut_traces(self) -> None:
        """Zero the traces (after any deferred update that still needs them)."""
        self.flush()
        self.opt.reset_traces()

    def observe(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray, terminated: bool,
                truncated: bool) -> dict[str, Any]:
        """Learn from one transition (s, a, r, s'); ``obs``/``action`` must be the last ``act`` call's."""
        s, _ = self.pipe.get(obs)
        greedy = self._greedy if action == self._last_action else False
        done = terminated or truncated
        r_scaled = self.pipe.reward_scaler(reward, done)
        delta, _ = self._learn(s, int(action), r_scaled, next_obs, terminated, reset=done or not greedy)
        self.steps += 1
        return {"delta": delta}

    # -- checkpointing ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        self.flush()
        return {"net": self.q.state_dict(), "opt": self.opt.state_dict(), "pipe": self.pipe.state_dict(),
                "rng": self.rng.bit_generator.state, "steps": self.steps, "config": asdict(self.config)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.fused is not None:
            self.fused.discard_pending()
        self.q.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        self.pipe.load_state_dict(state["pipe"])
        self.rng.bit_generator.state = state["rng"]
        self.steps = int(state["steps"])
