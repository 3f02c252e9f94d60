"""The unbounded-context robustification written as extra transformer layers with explicit weights.

A residual stream of named slots is processed by two causal *uniform* attention layers (query/key weights zero,
so every position averages all positions up to itself) and four small MLPs (ReLU or gated-linear, as in GLU
transformers). Given, per position t, the previous round's payoff vector u_{t-1}, the payoff the best response
earned then u_{t-1}[b_{t-1}], and the current best response b_t of the base model, the stack outputs exactly the
mixed strategy of ``agents.RobustAgent``:

1. attention A: mean of [u, u[b]] over positions <= t = (G_t, L_t) / (t+1)
2. GLU: multiply by the position feature (t+1) -> cumulative payoffs G_t and regrets r_i = G_t[i] - L_t
3. ReLU MLP: h_i = step(r_i - tau) (a difference of two steep ReLUs, slope M), summed
4. ReLU MLP: fired_t = min(1, sum_i h_i)
5. attention B: mean of fired over positions <= t; ReLU MLP: switched_t = step(mean)   (the switch is permanent)
6. GLU gate: logits = switched * (eta G_t - 1000 b_t) + 1000 b_t; softmax readout -> Hedge after the switch, b_t
   before.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from policies.next_token.agents import BestResponseAgent, hedge_eta, tau_schedule

STEEP = 1e9  # slope of the step functions; values within 1/STEEP of the threshold are the only inexact ones
GATE = 1e3  # logit margin of the pure best response: exp(-1000) underflows to 0, and 1e3 * 1e-16 rounding is tiny


class UniformCausalAttention(nn.Module):
    """Single-head attention with W_Q = W_K = 0: position t outputs W_O W_V times the mean of x_0..x_t."""

    def __init__(self, w_v: torch.Tensor, w_o: torch.Tensor) -> None:
        super().__init__()
        self.w_q = nn.Parameter(torch.zeros(1, w_v.shape[1], dtype=w_v.dtype), requires_grad=False)
        self.w_k = nn.Parameter(torch.zeros(1, w_v.shape[1], dtype=w_v.dtype), requires_grad=False)
        self.w_v = nn.Parameter(w_v, requires_grad=False)
        self.w_o = nn.Parameter(w_o, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-2]
        scores = (x @ self.w_q.T) @ (x @ self.w_k.T).transpose(-1, -2)  # all zeros by construction
        mask = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        attn = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return x + (attn @ (x @ self.w_v.T)) @ self.w_o.T


class ReLUMLP(nn.Module):
    """x + W2 relu(W1 x + b1)."""

    def __init__(self, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> None:
        super().__init__()
        self.w1, self.b1, self.w2 = (nn.Parameter(t, requires_grad=False) for t in (w1, b1, w2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(x @ self.w1.T + self.b1) @ self.w2.T


class GLUMLP(nn.Module):
    """x + W_out ((W_a x) * (W_b x)): the gated-linear MLP of GLU-style transformers, without activation."""

    def __init__(self, w_a: torch.Tensor, w_b: torch.Tensor, w_out: torch.Tensor) -> None:
        super().__init__()
        self.w_a, self.w_b, self.w_out = (nn.Parameter(t, requires_grad=False) for t in (w_a, w_b, w_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + ((x @ self.w_a.T) * (x @ self.w_b.T)) @ self.w_out.T


class RobustificationLayers(nn.Module):
    """The explicit-weights stack for K learner actions, threshold ``tau`` and Hedge rate ``eta``."""

    def __init__(self, k: int, tau: float, eta: float) -> None:
        super().__init__()
        self.k = k
        names = [("u", k), ("c", 1), ("b", k), ("one", 1), ("tp1", 1), ("gbar", k), ("lbar", 1), ("G", k),
                 ("r", k), ("hsum", 1), ("fired", 1), ("fbar", 1), ("sw", 1), ("logit", k)]
        self.slot: dict[str, slice] = {}
        i = 0
        for name, size in names:
            self.slot[name] = slice(i, i + size)
            i += size
        self.dim = i
        d, s, dt = self.dim, self.slot, torch.float64

        def idx(name: str, j: int = 0) -> int:
            return s[name].start + j

        # 1. attention A: gbar <- mean(u), lbar <- mean(c)
        w_v = torch.zeros(k + 1, d, dtype=dt)
        w_o = torch.zeros(d, k + 1, dtype=dt)
        for j in range(k):
            w_v[j, idx("u", j)] = 1.0
            w_o[idx("gbar", j), j] = 1.0
        w_v[k, idx("c")] = 1.0
        w_o[idx("lbar"), k] = 1.0
        att_a = UniformCausalAttention(w_v, w_o)
        # 2. GLU: r_i = (gbar_i - lbar)(t+1), G_i = gbar_i (t+1)
        w_a = torch.zeros(2 * k, d, dtype=dt)
        w_b = torch.zeros(2 * k, d, dtype=dt)
        w_out = torch.zeros(d, 2 * k, dtype=dt)
        for j in range(k):
            w_a[j, idx("gbar", j)], w_a[j, idx("lbar")] = 1.0, -1.0
            w_a[k + j, idx("gbar", j)] = 1.0
            w_b[j, idx("tp1")] = w_b[k + j, idx("tp1")] = 1.0
            w_out[idx("r", j), j] = 1.0
            w_out[idx("G", j), k + j] = 1.0
        glu_a = GLUMLP(w_a, w_b, w_out)
        # 3. hsum = sum_i [relu(M(r_i - tau)) - relu(M(r_i - tau) - 1)]
        w1 = torch.zeros(2 * k, d, dtype=dt)
        b1 = torch.zeros(2 * k, dtype=dt)
        w2 = torch.zeros(d, 2 * k, dtype=dt)
        for j in range(k):
            w1[2 * j, idx("r", j)] = w1[2 * j + 1, idx("r", j)] = STEEP
            # step(x) = relu(Mx - 1/2) - relu(Mx - 3/2): 0 for x <= 1/(2M), so a regret exactly at tau
            # (common with payoffs in multiples of 1/2) does not fire, as in the strict test r > tau
            b1[2 * j], b1[2 * j + 1] = -STEEP * tau - 0.5, -STEEP * tau - 1.5
            w2[idx("hsum"), 2 * j], w2[idx("hsum"), 2 * j + 1] = 1.0, -1.0
        step_r = ReLUMLP(w1, b1, w2)
        # 4. fired = hsum - relu(hsum - 1)  (hsum >= 0)
        w1 = torch.zeros(2, d, dtype=dt)
        w1[0, idx("hsum")] = w1[1, idx("hsum")] = 1.0
        b1 = torch.tensor([0.0, -1.0], dtype=dt)
        w2 = torch.zeros(d, 2, dtype=dt)
        w2[idx("fired"), 0], w2[idx("fired"), 1] = 1.0, -1.0
        clip = ReLUMLP(w1, b1, w2)
        # 5. attention B: fbar <- mean(fired); switched = step(fbar)
        w_v = torch.zeros(1, d, dtype=dt)
        w_v[0, idx("fired")] = 1.0
        w_o = torch.zeros(d, 1, dtype=dt)
        w_o[idx("fbar"), 0] = 1.0
        att_b = UniformCausalAttention(w_v, w_o)
        w1 = torch.zeros(2, d, dtype=dt)
        w1[0, idx("fbar")] = w1[1, idx("fbar")] = STEEP
        b1 = torch.tensor([-0.5, -1.5], dtype=dt)
        w2 = torch.zeros(d, 2, dtype=dt)
        w2[idx("sw"), 0], w2[idx("sw"), 1] = 1.0, -1.0
        step_f = ReLUMLP(w1, b1, w2)
        # 6. GLU gate: logit = sw * (eta G - M b) + one * (M b)
        w_a = torch.zeros(2 * k, d, dtype=dt)
        w_b = torch.zeros(2 * k, d, dtype=dt)
        w_out = torch.zeros(d, 2 * k, dtype=dt)
        for j in range(k):
            w_a[j, idx("sw")] = 1.0
            w_b[j, idx("G", j)], w_b[j, idx("b", j)] = eta, -GATE
            w_a[k + j, idx("one")] = 1.0
            w_b[k + j, idx("b", j)] = GATE
            w_out[idx("logit", j), j] = w_out[idx("logit", j), k + j] = 1.0
        gate = GLUMLP(w_a, w_b, w_out)
        self.layers = nn.Sequential(att_a, glu_a, step_r, clip, att_b, step_f, gate)

    def embed(self, u_prev: torch.Tensor, c_prev: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Residual stream for (L, K) previous payoff vectors, (L,) previous BR payoffs and (L, K) one-hot BRs."""
        length = u_prev.shape[0]
        x = torch.zeros(length, self.dim, dtype=torch.float64)
        x[:, self.slot["u"]] = u_prev
        x[:, self.slot["c"]] = c_prev[:, None]
        x[:, self.slot["b"]] = b
        x[:, self.slot["one"]] = 1.0
        x[:, self.slot["tp1"]] = torch.arange(1, length + 1, dtype=torch.float64)[:, None]
        return x

    @torch.no_grad()
    def forward(self, u_prev: torch.Tensor, c_prev: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(L, K) mixed strategies for every position."""
        out = self.layers(self.embed(u_prev, c_prev, b))
        return torch.softmax(out[:, self.slot["logit"]], dim=-1)

    def switched(self, u_prev: torch.Tensor, c_prev: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(L,) the switch flag at each position (for diagnostics)."""
        with torch.no_grad():
            return self.layers(self.embed(u_prev, c_prev, b))[:, self.slot["sw"]][:, 0]


def features_from_history(payoff: np.ndarray, opponent: list[int], brs: list[int]):
    """Layer inputs for positions 0..len(brs)-1 from the opponent's actions and the base model's best responses."""
    k = payoff.shape[0]
    length = len(brs)
    u_prev = np.zeros((length, k))
    c_prev = np.zeros(length)
    for t in range(1, length):
        u_prev[t] = payoff[:, opponent[t - 1]]
        c_prev[t] = u_prev[t, brs[t - 1]]
    b = np.eye(k)[np.asarray(brs, dtype=np.int64)]
    return torch.as_tensor(u_prev), torch.as_tensor(c_prev), torch.as_tensor(b)


class ExplicitRobustAgent(BestResponseAgent):
    """``RobustAgent`` computed by running the base model + ``RobustificationLayers`` on the whole history."""

    def __init__(self, predictor, tau: str | float = "delta", delta: float = 0.05, **kw: Any) -> None:
        super().__init__(predictor, **kw)
        self.tau_spec, self.delta = tau, delta

    def _on_reset(self, info: dict[str, Any]) -> None:
        super()._on_reset(info)
        self.tau = tau_schedule(self.tau_spec, self.rounds, self.k, self.delta)
        self.layers = RobustificationLayers(self.k, self.tau, hedge_eta(self.rounds, self.k))
        # per-position layer inputs, grown by one row a round (same rows as ``features_from_history``)
        self.u_rows: list[np.ndarray] = [np.zeros(self.k)]
        self.c_rows: list[float] = [0.0]
        self.brs: list[int] = []
        self.switched, self.switch_round = False, -1

    def _observe(self, j: int, u: np.ndarray) -> None:
        super()._observe(j, u)
        self.u_rows.append(u)
        self.c_rows.append(float(u[self.brs[-1]]))

    def _decide(self) -> np.ndarray:
        self.brs.append(self._br())
        u_prev = torch.as_tensor(np.stack(self.u_rows))
        c_prev = torch.as_tensor(np.asarray(self.c_rows))
        b = torch.as_tensor(np.eye(self.k)[self.brs])
        with torch.no_grad():
            out = self.layers.layers(self.layers.embed(u_prev, c_prev, b))
        if not self.switched and out[-1, self.layers.slot["sw"]].item() > 0.5:
            self.switched, self.switch_round = True, self.t
        return torch.softmax(out[-1, self.layers.slot["logit"]], dim=-1).numpy()

    def episode_info(self) -> dict[str, Any]:
        """Per-episode diagnostics merged into the episode record."""
        return {"switched": bool(self.switched), "switch_round": int(self.switch_round), "tau": float(self.tau)}
