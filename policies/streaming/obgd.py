"""Overshooting-bounded gradient descent (ObGD) with eligibility traces, and its adaptive variant.

ObGD (Elsayed et al. 2024): z ← γλ z + ∇f; δ̄ = max(|δ|, 1); M = α κ δ̄ ‖z‖₁; θ ← θ + (α / max(M, 1)) δ z.
Parameters and traces are single flat vectors (see ``networks.flatten_parameters_``), so a whole update is a
handful of vector ops: batch-1 streaming RL on CPU is bound by memory passes and per-op overhead, not
arithmetic. The trace update and its L1 norm are one fused pass (``kernels.decay_add_l1_``).
"""

from __future__ import annotations

import numpy as np
import torch

from policies.streaming.kernels import decay_add_l1_, decay_add_outer_l1_, l1_norm


class ObGD:
    """Eligibility-trace ascent on ``δ·z`` with the overshooting bound; ``κ`` = 2 for values, 3 for policies.

    ``params`` is a flat 1-D parameter buffer updated in place.
    """

    def __init__(self, params: torch.Tensor, lr: float = 1.0, gamma: float = 0.99, lam: float = 0.8,
                 kappa: float = 2.0) -> None:
        if params.dim() != 1:
            raise ValueError("ObGD expects a flat 1-D parameter buffer (use flatten_parameters_)")
        self.params = params
        self.lr, self.gamma, self.lam, self.kappa = float(lr), float(gamma), float(lam), float(kappa)
        self.trace = torch.zeros_like(params)
        self._trace_np = self.trace.numpy()  # shares memory with the trace
        self._decay = self._trace_np.dtype.type(self.gamma * self.lam)  # γλ in the trace's precision
        self.trace_l1 = 0.0  # ‖z‖₁, kept current by accumulate / reset_traces / load_state_dict

    def accumulate(self, grad: torch.Tensor, outer: tuple[int, np.ndarray, np.ndarray] | None = None) -> None:
        """z ← γλ z + ∇f (and ‖z‖₁ in the same pass).

        ``outer = (start, u, v)``: the block of ∇f at ``start`` is the outer product u·vᵀ, given as its factors
        (``grad`` is not read there), as ``Im2colNetwork.backward(defer_outer=True)`` returns it.
        """
        if outer is None:
            self.trace_l1 = decay_add_l1_(self._trace_np, grad.numpy(), self._decay)
        else:
            start, u, v = outer
            self.trace_l1 = decay_add_outer_l1_(self._trace_np, grad.numpy(), self._decay, int(start), u, v)

    def step_size(self, delta: float) -> float:
        """α / max(α κ max(|δ|, 1) ‖z‖₁, 1): the bounded step that multiplies δ z."""
        return self.lr / max(self.lr * self.kappa * max(abs(delta), 1.0) * self.trace_l1, 1.0)

    def step(self, delta: float) -> float:
        """θ ← θ + step·δ·z; returns the scalar ``step·δ`` applied to the trace (the update is that times z)."""
        scale = self.step_size(delta) * delta
        with torch.no_grad():
            self.params.add_(self.trace, alpha=scale)
        return scale

    def reset_traces(self) -> None:
        """Zero the trace (episode end; non-greedy action for Q(λ))."""
        self.trace.zero_()
        self.trace_l1 = 0.0

    def state_dict(self) -> dict:
        return {"trace": self.trace.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.trace.copy_(state["trace"])
        self.trace_l1 = l1_norm(self._trace_np)


class AdaptiveObGD(ObGD):
    """ObGD with an Adam-like second moment of δz: the step uses ẑ = z/(√v̂ + ε) in place of z.

    v ← β₂ v + (1−β₂)(δz)²; v̂ = v/(1−β₂ᵗ); M = α κ δ̄ ‖ẑ‖₁; θ ← θ + α/max(M, 1)·δ·ẑ.
    """

    def __init__(self, params: torch.Tensor, lr: float = 1.0, gamma: float = 0.99, lam: float = 0.8,
                 kappa: float = 2.0, beta2: float = 0.999, eps: float = 1e-8) -> None:
        super().__init__(params, lr, gamma, lam, kappa)
        self.beta2, self.eps = float(beta2), float(eps)
        self.v = torch.zeros_like(params)
        self.t = 0

    def step(self, delta: float) -> float:
        self.t += 1
        self.v.mul_(self.beta2).addcmul_(self.trace, self.trace, value=(1.0 - self.beta2) * delta * delta)
        zhat = self.trace / ((self.v / (1.0 - self.beta2**self.t)).sqrt_().add_(self.eps))
        z_l1 = l1_norm(zhat.numpy())
        step = self.lr / max(self.lr * self.kappa * max(abs(delta), 1.0) * z_l1, 1.0)
        with torch.no_grad():
            self.params.add_(zhat, alpha=step * delta)
        return step * delta

    def state_dict(self) -> dict:
        return {**super().state_dict(), "v": self.v.clone(), "t": self.t}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.v.copy_(state["v"])
        self.t = int(state["t"])
