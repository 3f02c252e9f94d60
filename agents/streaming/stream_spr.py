"""Streaming SPR with orthogonal updates: Stream Q(λ) plus a self-predictive loss on a K-step window.

Each step: (1) the Stream Q(λ)/ObGD update, remembering the encoder's update Δ_RL; (2) when the current episode
holds K+1 observations and the step was neither terminal nor exploratory, the SPR loss over the window that
starts K steps back — prediction k is the transition model rolled forward with the actions *actually taken* at
window steps 0..k−1; (3) per-module momentum projection of the SPR gradient; (4) the encoder's SPR step made
orthogonal to Δ_RL (always, or only on conflict with PCGrad); SPR heads take plain SGD steps; (5) EMA update of
the target encoder and projection.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from agents.streaming.stream_q import StreamQ, StreamQConfig
from envs.config import option
from envs.errors import choice_error
from policies.streaming.im2col_spr import Im2colSPRLoss
from policies.streaming.kernels import ema_, momentum_project_step_
from policies.streaming.networks import flatten_parameters_, init_module_, mkldnn_enabled
from policies.streaming.numba_spr import NumbaSPRLoss
from policies.streaming.numba_spr_update import RL_NONE, RL_ORTHOGONAL, RL_PCGRAD, FusedSPRUpdate
from policies.streaming.spr import (
    Projection,
    TransitionModel,
    ema_copy,
    make_predictor,
    momentum_project,
    pcgrad_project,
    project_orthogonal,
    spr_loss,
)

PROJECTIONS = ("none", "momentum", "rl", "both", "pcgrad")


@dataclass(frozen=True)
class StreamSPRConfig(StreamQConfig):
    """Stream Q(λ) settings plus the SPR ones (defaults from the streaming-SPR paper)."""

    title: ClassVar[str] = "stream_spr"

    k: int = option(5, "prediction horizon K (window of K+1 observations)", min=1)
    spr_weight: float = option(2.0, "SPR loss weight w", min=0)
    spr_lr: float = option(1e-4, "step size α of the SPR SGD steps", min=0)
    tau: float = option(0.99, "EMA of the target encoder and projection", min=0, max=1)
    beta: float = option(0.99, "momentum of the per-module projection buffers", min=0, max=1)
    # momentum + PCGrad against Δ_RL for pcgrad
    projection: str = option("both", "encoder-step projection: none | momentum | rl | both | pcgrad")
    proj_dim: int = option(0, "projection width (0: the suite's hidden width)", min=0)
    # backend=numba on MinAtar: the whole SPR update (loss, reverse pass, momentum projections, steps, the target
    # projection's EMA) as one compiled call (policies.streaming.numba_spr_update); false = the loss kernel plus
    # per-module steps that runs made before it existed, whose checkpoints therefore resume with false
    fused_spr: bool = option(True, "backend=numba on MinAtar: the whole SPR update as one compiled call")

    LEGACY_VALUES: ClassVar[dict[str, Any]] = {**StreamQConfig.LEGACY_VALUES, "fused_spr": False}


class StreamSPR(StreamQ):
    """Stream Q(λ) with a streaming SPR auxiliary loss and the projection ablations of ``config.projection``."""

    def __init__(self, suite: str, obs_shape: tuple[int, ...], n_actions: int,
                 config: StreamSPRConfig | None = None, seed: int = 0) -> None:
        cfg = config or StreamSPRConfig()
        if cfg.projection not in PROJECTIONS:
            raise choice_error("SPR projection", cfg.projection, list(PROJECTIONS))
        if cfg.k < 1:
            raise ValueError(f"SPR horizon k must be >= 1, got {cfg.k}")
        super().__init__(suite, obs_shape, n_actions, cfg, seed)
        self.config: StreamSPRConfig = cfg
        gen = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, 0x5B8]).generate_state(1)[0]))
        latent = self.q.encoder.latent_shape
        dim = cfg.proj_dim or self.q.hidden
        self.transition = TransitionModel(latent, self.n_actions)
        self.projection = Projection(latent, dim)
        self.predictor = make_predictor(dim)
        for m in (self.transition, self.projection, self.predictor):
            init_module_(m, cfg.sparsity, gen)
        self.target_encoder = ema_copy(self.q.encoder)
        self.target_projection = ema_copy(self.projection)
        self.n_enc = sum(p.numel() for p in self.q.encoder.parameters())  # the encoder is the flat vector's head
        self.heads: list[nn.Module] = [self.transition, self.projection, self.predictor]
        self.head_flats = [flatten_parameters_(m) for m in self.heads]
        self.target_enc_flat = flatten_parameters_(self.target_encoder)
        self.target_proj_flat = flatten_parameters_(self.target_projection)
        # momentum buffers c, one per module: encoder, transition, projection, predictor
        self.momentum = [torch.zeros(self.n_enc)] + [torch.zeros_like(f) for f in self.head_flats]
        self._spr_params = list(self.q.encoder.parameters()) + [p for m in self.heads for p in m.parameters()]
        self._module_sizes = [len(list(m.parameters())) for m in [self.q.encoder, *self.heads]]
        # backend "numba": the SPR loss's forward and reverse pass compiled too — one numba call on MinAtar,
        # im2col + BLAS GEMMs on the Atari/Octax conv stacks
        self.fast_spr: NumbaSPRLoss | Im2colSPRLoss | None = None
        self.fused_spr: FusedSPRUpdate | None = None
        if self.fast is not None and suite == "minatar":
            self.fast_spr = NumbaSPRLoss(self.q.encoder, self.transition, self.projection, self.predictor,
                                         self.target_encoder, self.target_projection, latent)
            if cfg.fused_spr:
                mode = {"rl": RL_ORTHOGONAL, "both": RL_ORTHOGONAL, "pcgrad": RL_PCGRAD}.get(cfg.projection, RL_NONE)
                self.fused_spr = FusedSPRUpdate(
                    self.fast_spr, self.flat[: self.n_enc].numpy(), [f.numpy() for f in self.head_flats],
                    [self.target_enc_flat.numpy(), self.target_proj_flat.numpy()], [c.numpy() for c in self.momentum],
                    mode, cfg.projection in ("momentum", "both", "pcgrad"), cfg.beta, -cfg.spr_lr * cfg.spr_weight)
                self._trace_enc = self.opt.trace[: self.n_enc].numpy()  # a view: ObGD updates the trace in place
                self._enc_np, self._target_enc_np = self.flat[: self.n_enc].numpy(), self.target_enc_flat.numpy()
        elif self.fast is not None:
            self.fast_spr = Im2colSPRLoss(self.q.encoder, self.transition, self.projection, self.predictor,
                                          self.target_encoder, self.target_projection, self.obs_shape)
        # the fused update defers the target projection's EMA: the projection changes only in SPR updates, so the
        # n steps since the last one are applied as one step of weight 1 − τⁿ when the target is next read
        self._ema_pending = 0
        self._win_obs: deque[torch.Tensor] = deque(maxlen=cfg.k + 1)
        self._win_act: deque[int] = deque(maxlen=cfg.k)
        self.spr_updates = 0

    # -- the window --------------------------------------------------------------------------------------
    def spr_window(self) -> tuple[list[torch.Tensor], list[int]]:
        """(observations o_0..o_K, actions a_0..a_{K−1}) where a_i was taken at o_i (current episode only)."""
        return list(self._win_obs), list(self._win_act)

    def act(self, obs: np.ndarray) -> int:
        a = super().act(obs)
        if not self._win_obs:  # first step of an episode
            self._win_obs.append(self.pipe.tensor)
        return a

    def observe(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray, terminated: bool,
                truncated: bool) -> dict[str, Any]:
        greedy = self._greedy if action == self._last_action else False
        done = terminated or truncated
        s, _ = self.pipe.get(obs)
        r_scaled = self.pipe.reward_scaler(reward, done)
        # traces are cut at the end: the SPR step projects against this step's RL update, δ·step·z
        delta, s_next = self._learn(s, int(action), r_scaled, next_obs, terminated, reset=False)
        # The window pairs o_i with the action taken at o_i: append a_t before o_{t+1}.
        self._win_act.append(int(action))
        self._win_obs.append(s_next)
        stats: dict[str, Any] = {"delta": delta}
        if len(self._win_obs) == self.config.k + 1 and not terminated and greedy:
            stats["spr_loss"] = self._spr_update()
        self._ema_update()
        if done or not greedy:
            self.cut_traces()
        if done:
            self._win_obs.clear()
            self._win_act.clear()
        self.steps += 1
        return stats

    # -- SPR ---------------------------------------------------------------------------------------------
    def spr_gradients(self) -> tuple[float, list[torch.Tensor]]:
        """SPR loss on the current window and its flat gradients per module (encoder, transition, proj, pred)."""
        self.flush_targets()
        obs = torch.stack(list(self._win_obs))
        if self.fast_spr is not None:
            loss, flat = self.fast_spr.gradients(obs.numpy(), np.asarray(self._win_act))
            return loss, [torch.from_numpy(f) for f in flat]
        actions = torch.tensor(list(self._win_act))
        with mkldnn_enabled(self.q.use_mkldnn):
            z = self.q.encoder(obs[:1])
            rolled = []
            for k in range(self.config.k):
                z = self.transition(z, actions[k:k + 1])  # ẑ_{k+1} = h(ẑ_k, a_k)
                rolled.append(z)
            pred = self.predictor(self.projection(torch.cat(rolled)))
            with torch.no_grad():
                target = self.target_projection(self.target_encoder(obs[1:]))
            loss = spr_loss(pred, target)
        with mkldnn_enabled(False):  # native conv backward, as in fused_backward
            grads = torch.autograd.grad(loss, self._spr_params)
        flat_grads, i = [], 0
        for n in self._module_sizes:
            flat_grads.append(torch.cat([g.reshape(-1) for g in grads[i:i + n]]))
            i += n
        return float(loss.detach()), flat_grads

    def _spr_update(self) -> float:
        cfg = self.config
        if self.fused_spr is not None:
            obs = np.stack([o.numpy() for o in self._win_obs])
            loss = self.fused_spr.update(obs, np.array(self._win_act, np.int64), self._trace_enc, self._rl_scale,
                                         self._pending_ema_weight())
            self._ema_pending = 0
            self.spr_updates += 1
            return loss
        loss, grads = self.spr_gradients()
        use_momentum = cfg.projection in ("momentum", "both", "pcgrad")
        step = cfg.spr_lr * cfg.spr_weight
        if use_momentum and self.fast_spr is not None:  # the heads' projection and SGD step in one pass each
            for flat, g, c in zip(self.head_flats, grads[1:], self.momentum[1:], strict=True):
                momentum_project_step_(g.numpy(), c.numpy(), cfg.beta, 1e-12, flat.numpy(), -step)
            self._encoder_spr_step(momentum_project(grads[0], self.momentum[0], cfg.beta) * (-step))
            self.spr_updates += 1
            return loss
        u = [momentum_project(g, c, cfg.beta) if use_momentum else g for g, c in zip(grads, self.momentum, strict=True)]
        self._encoder_spr_step(u[0] * (-step))
        with torch.no_grad():
            for flat, ui in zip(self.head_flats, u[1:], strict=True):
                flat.add_(ui, alpha=-step)
        self.spr_updates += 1
        return loss

    def _encoder_spr_step(self, v: torch.Tensor) -> None:
        """Apply the encoder's SPR step ``v``, first projected against this step's RL update as configured."""
        if self.config.projection in ("rl", "both", "pcgrad"):
            delta_rl = self.opt.trace[: self.n_enc] * self._rl_scale  # the encoder part of this step's ObGD update
            v = pcgrad_project(v, delta_rl) if self.config.projection == "pcgrad" else project_orthogonal(v, delta_rl)
        with torch.no_grad():
            self.flat[: self.n_enc].add_(v)

    def _ema_update(self) -> None:
        w = 1.0 - self.config.tau
        if self.fused_spr is not None:
            ema_(self._target_enc_np, self._enc_np, w)
            self._ema_pending += 1
            return
        with torch.no_grad():
            self.target_enc_flat.lerp_(self.flat[: self.n_enc], w)
            self.target_proj_flat.lerp_(self.head_flats[1], w)

    def _pending_ema_weight(self) -> float:
        return 1.0 - self.config.tau ** self._ema_pending if self._ema_pending else 0.0

    def flush_targets(self) -> None:
        """Apply the target projection's deferred EMA steps (fused update); call before reading it from outside."""
        if self._ema_pending:
            ema_(self.target_proj_flat.numpy(), self.head_flats[1].numpy(), self._pending_ema_weight())
            self._ema_pending = 0

    # -- checkpointing ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update({
            "heads": [f.clone() for f in self.head_flats],
            "targets": [self.target_enc_flat.clone(), self.target_proj_flat.clone()],
            "momentum": [c.clone() for c in self.momentum],
            "spr_updates": self.spr_updates,
        })
        if self.fused_spr is not None:  # saved as it stands: a flush here would make rounding depend on checkpoints
            state["ema_pending"] = self._ema_pending
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        for dst, src in zip(self.head_flats, state["heads"], strict=True):
            dst.copy_(src)
        self.target_enc_flat.copy_(state["targets"][0])
        self.target_proj_flat.copy_(state["targets"][1])
        for dst, src in zip(self.momentum, state["momentum"], strict=True):
            dst.copy_(src)
        self.spr_updates = int(state["spr_updates"])
        self._ema_pending = int(state.get("ema_pending", 0))
        self._win_obs.clear()
        self._win_act.clear()
