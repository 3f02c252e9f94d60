"""Stream AC(λ): online actor-critic with separate actor/critic networks, each with its own traces and ObGD.

The critic's trace follows ∇V(s) (κ = 2); the actor's follows ∇[log π(a|s) + c·sign(δ)·H(π(·|s))] (κ = 3); both
step along δ. The logits' cotangent is written in closed form, then one fused reverse pass per network.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from agents.streaming.common import ObservationPipe, make_rngs
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
from policies.streaming.obgd import AdaptiveObGD, ObGD


@dataclass(frozen=True)
class StreamACConfig(Options):
    """Stream AC(λ) hyper-parameters (defaults from Stream-x); ``--option key=value`` of ``launch.train``."""

    title: ClassVar[str] = "stream_ac"

    lr: float = option(1.0, "ObGD step size", min=0)
    gamma: float = option(0.99, "discount", min=0, max=1)
    lam: float = option(0.8, "trace decay λ", min=0, max=1)
    kappa_value: float = option(2.0, "the critic's ObGD bound κ", min=0)
    kappa_policy: float = option(3.0, "the actor's ObGD bound κ", min=0)
    entropy_coef: float = option(0.01, "entropy bonus weight", min=0)
    sparsity: float = option(0.9, "fraction of each layer's weights initialised to zero", min=0, max=1)
    # unused by AC itself; kept so every learner accepts the run length
    total_steps: int = option(5_000_000, "run length (set from --steps; unused by AC)", min=1)
    adaptive: bool = option(False, "AdaptiveObGD instead of ObGD")
    backend: Literal["torch", "numba"] = option("torch", "network implementation for actor and critic (see "
                                                "stream_q)")
    network: str = option("", "network preset for actor and critic ('' = the suite's default)")


class _FlatNet:
    """A StreamNetwork whose weights live in one flat vector, with a gradient buffer and its optimiser."""

    def __init__(self, suite: str, obs_shape: tuple[int, ...], n_out: int, cfg: StreamACConfig, kappa: float,
                 gen: torch.Generator) -> None:
        self.net = StreamNetwork(suite, obs_shape, n_out, cfg.sparsity, gen, preset=cfg.network)
        self.flat = flatten_parameters_(self.net)
        self.grad = torch.zeros_like(self.flat)
        self.views = param_views(self.grad, self.net)
        self.fast = compiled_network(cfg.backend, suite, self.net, obs_shape)
        self._grad_np = [v.numpy() for v in self.views]
        self.outer: tuple | None = None  # (start, u, v) of a gradient block left as an outer product
        opt_cls = AdaptiveObGD if cfg.adaptive else ObGD
        self.opt = opt_cls(self.flat, lr=cfg.lr, gamma=cfg.gamma, lam=cfg.lam, kappa=kappa)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ForwardCache | None]:
        """Outputs for the batch ``x`` and what ``backward`` needs (None on the compiled path, which keeps it)."""
        if self.fast is not None:
            return torch.from_numpy(self.fast.forward(x.numpy())), None
        cache = ForwardCache()
        return fused_forward(self.net, x, cache), cache

    def backward(self, cache: ForwardCache | None, cotangent: torch.Tensor) -> None:
        """∇θ ⟨cotangent, output[0]⟩ into ``self.grad`` (with ``self.outer``, its deferred block, if any)."""
        if self.fast is not None:
            self.outer = self.fast.backward(cotangent.numpy().reshape(-1), self._grad_np, defer_outer=True)
        else:
            fused_backward(cache, cotangent, self.views)


def policy_objective_cotangent(logits: torch.Tensor, action: int, coef: float) -> torch.Tensor:
    """∂/∂logits of log π(a) + coef·H(π) for a softmax policy (a closed form, no autograd)."""
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    entropy = -(p * logp).sum()
    cot = -coef * p * (logp + entropy)  # ∂H/∂logits_j = −p_j (log p_j + H)
    cot -= p  # ∂ log π(a)/∂logits = onehot(a) − p
    cot[action] += 1.0
    return cot


class StreamAC:
    """Stream AC(λ) learner: ``act(obs)`` samples π(·|s); ``observe`` makes one critic and one actor step."""

    def __init__(self, suite: str, obs_shape: tuple[int, ...], n_actions: int, config: StreamACConfig | None = None,
                 seed: int = 0) -> None:
        self.config = cfg = config or StreamACConfig()
        self.suite, self.obs_shape, self.n_actions = suite, tuple(obs_shape), int(n_actions)
        gen, self.rng = make_rngs(seed)
        self.actor = _FlatNet(suite, self.obs_shape, self.n_actions, cfg, cfg.kappa_policy, gen)
        self.critic = _FlatNet(suite, self.obs_shape, 1, cfg, cfg.kappa_value, gen)
        self.pipe = ObservationPipe(self.obs_shape, cfg.gamma)
        self._value_cot = torch.ones(1, 1)
        self.steps = 0

    def act(self, obs: np.ndarray) -> int:
        """Sample an action from the current policy (logits at s' are reused from the last update's forward)."""
        s, _ = self.pipe.get(obs)
        if self.pipe.outputs is None:
            self.pipe.outputs = self.actor.forward(s.unsqueeze(0))[0][0]
        probs = torch.softmax(self.pipe.outputs.double(), -1).numpy()
        a = int(np.searchsorted(np.cumsum(probs), self.rng.random() * probs.sum(), side="right"))
        return min(a, self.n_actions - 1)

    def observe(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray, terminated: bool,
                truncated: bool) -> dict[str, Any]:
        """One critic step on δ = r̃ + γ(1−term)V(s') − V(s) and one actor step along δ."""
        s, _ = self.pipe.get(obs)
        done = terminated or truncated
        r_scaled = self.pipe.reward_scaler(reward, done)
        s_next = self.pipe.push(next_obs)
        x = torch.stack((s, s_next))
        v, v_cache = self.critic.forward(x)
        logits, pi_cache = self.actor.forward(x)
        target = r_scaled + (0.0 if terminated else self.config.gamma * float(v[1, 0]))
        delta = target - float(v[0, 0])
        self.critic.backward(v_cache, self._value_cot)
        cot = policy_objective_cotangent(logits[0], int(action), self.config.entropy_coef * float(np.sign(delta)))
        self.actor.backward(pi_cache, cot.unsqueeze(0))
        for part in (self.critic, self.actor):
            part.opt.accumulate(part.grad, part.outer)
            part.opt.step(delta)
            if done:
                part.opt.reset_traces()
        self.pipe.outputs = logits[1]
        self.steps += 1
        return {"delta": delta}

    def state_dict(self) -> dict[str, Any]:
        return {"actor": self.actor.net.state_dict(), "critic": self.critic.net.state_dict(),
                "actor_opt": self.actor.opt.state_dict(), "critic_opt": self.critic.opt.state_dict(),
                "pipe": self.pipe.state_dict(), "rng": self.rng.bit_generator.state, "steps": self.steps,
                "config": asdict(self.config)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.net.load_state_dict(state["actor"])
        self.critic.net.load_state_dict(state["critic"])
        self.actor.opt.load_state_dict(state["actor_opt"])
        self.critic.opt.load_state_dict(state["critic_opt"])
        self.pipe.load_state_dict(state["pipe"])
        self.rng.bit_generator.state = state["rng"]
        self.steps = int(state["steps"])
