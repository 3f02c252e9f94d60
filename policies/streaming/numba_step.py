"""The whole Stream Q(λ) learner step on the MinAtar network as one compiled call (``backend=numba``).

One call normalises the new observation, runs the forward of [s, s'], forms the TD error, runs the reverse pass of
Q(s, a), updates the eligibility trace with its L1 norm and takes the ObGD step. On MinAtar's network (132k
parameters, 131k of them the hidden layer's weight) a step is bound by passes over the parameter and trace vectors,
not by arithmetic, so the passes are fused:

1. forward: the hidden layer's weight is read once for both rows (s and s');
2. reverse pass + trace: one pass over that weight and its trace block computes the input gradient Wᵀ·dh, adds the
   outer product dh·a1ᵀ to the trace (the weight gradient is never written out) and sums ‖z‖₁;
3. the ObGD step θ ← θ + (step·δ)·z over the whole vector (it needs the finished ‖z‖₁), with the trace reset
   folded into the same pass when the step ends the trace.

No BLAS call remains: at batch 1–2 its GEMM/GEMV overhead was most of the step (the hidden layer's 2-row forward
took ~50 µs through ``np.dot`` against ~6 µs for the loop here). The convolution reads its patches straight from
the input ("wide" layout, see ``numba_net.im2col_wide``) instead of copying them out.

Same maths as ``numba_net`` + ``obgd`` + the observation normaliser; the summation order differs, so results
match them to float32 rounding, not bit for bit, and are deterministic for a given machine and build.
"""

from __future__ import annotations

import numba
import numpy as np
from torch import nn

from policies.streaming.kernels import FASTMATH, welford_normalize_
from policies.streaming.numba_net import layer_norm_lrelu, lrelu_ln_backward, minatar_layers

# dims vector layout: the network's shape, passed as one int64 array (fewer arguments = less dispatch per call)
C, H, W, K, NC, HID, NOUT = range(7)


@numba.njit(cache=True, fastmath=FASTMATH)
def _conv_ln(x, theta, dims, slope, eps, wide, v, y, a):
    # conv (stride 1, unpadded) of the flat input x into the channel-major latent v, then LN + LReLU into y, a.
    # Patch row (c, i, j) of the "wide" im2col is x[(c·H + i)·W + j :][:L]: read in place, never copied.
    n_in, in_h, in_w, k, n_conv = dims[C], dims[H], dims[W], dims[K], dims[NC]
    ho = in_h - k + 1
    wo = in_w - k + 1
    length = (ho - 1) * in_w + wo
    kk = n_in * k * k
    b_off = n_conv * kk
    for o in range(n_conv):
        row = wide[o]
        for t in range(length):
            row[t] = 0.0
        for c in range(n_in):
            for i in range(k):
                for j in range(k):
                    w = theta[o * kk + (c * k + i) * k + j]
                    xs = x[(c * in_h + i) * in_w + j:]
                    for t in range(length):
                        row[t] += w * xs[t]
        b = theta[b_off + o]
        for p in range(ho):
            src = row[p * in_w:]
            dst = v[(o * ho + p) * wo:]
            for q in range(wo):
                dst[q] = src[q] + b
    return layer_norm_lrelu(v, y, a, slope, eps)


@numba.njit(cache=True, fastmath=FASTMATH)
def _head(theta, z, pending, dims, rows, slope, eps, a1, h, y2, a2, r2, out):
    # hidden layer for ``rows`` rows reading its weight once, LN + LReLU, output layer. A deferred ObGD step of
    # the hidden weight (``pending``: see q_lambda_step) is applied in the same pass, element by element as the
    # step itself would have: w ← w + a·z, then z ← 0 if the step also ended the trace.
    n_conv, k, n_in, hidden, n_out = dims[NC], dims[K], dims[C], dims[HID], dims[NOUT]
    latent = a1.shape[1]
    w1_off = n_conv * n_in * k * k + n_conv
    b1_off = w1_off + hidden * latent
    w2_off = b1_off + hidden
    b2_off = w2_off + n_out * hidden
    a = np.float32(pending[0])
    update = pending[2] != 0.0
    clear = pending[1] != 0.0
    pending[:] = 0.0
    for j in range(hidden):
        w = theta[w1_off + j * latent:w1_off + (j + 1) * latent]
        zr = z[w1_off + j * latent:w1_off + (j + 1) * latent]
        acc0 = np.float32(0.0)
        acc1 = np.float32(0.0)
        if update and clear:  # three loops, not branches inside one, so each vectorises
            for i in range(latent):
                wi = w[i] + a * zr[i]
                w[i] = wi
                zr[i] = 0.0
                acc0 += wi * a1[0, i]
                acc1 += wi * a1[rows - 1, i]
        elif update:
            for i in range(latent):
                wi = w[i] + a * zr[i]
                w[i] = wi
                acc0 += wi * a1[0, i]
                acc1 += wi * a1[rows - 1, i]
        else:
            for i in range(latent):
                acc0 += w[i] * a1[0, i]
                acc1 += w[i] * a1[rows - 1, i]
        h[0, j] = acc0 + theta[b1_off + j]
        h[rows - 1, j] = acc1 + theta[b1_off + j]
    for r in range(rows):
        r2[r] = layer_norm_lrelu(h[r], y2[r], a2[r], slope, eps)
        for m in range(n_out):
            w = theta[w2_off + m * hidden:w2_off + (m + 1) * hidden]
            acc = np.float32(0.0)
            for i in range(hidden):
                acc += w[i] * a2[r, i]
            out[r, m] = acc + theta[b2_off + m]


@numba.njit(cache=True, fastmath=FASTMATH)
def q_forward(theta, z, pending, dims, x, slope, eps, wide, v, y1, a1, r1, h, y2, a2, r2, out):
    """Q(x, ·) of one flat input into ``out[0]`` (the acting forward; same arithmetic as the step's)."""
    r1[0] = _conv_ln(x, theta, dims, slope, eps, wide, v, y1[0], a1[0])
    _head(theta, z, pending, dims, 1, slope, eps, a1, h, y2, a2, r2, out)


@numba.njit(cache=True, fastmath=FASTMATH)
def apply_pending(theta, z, pending, dims, latent):
    """Apply a deferred ObGD step of the hidden weight now (before its weights or trace are read elsewhere)."""
    if pending[2] == 0.0:
        return
    w1_off = dims[NC] * dims[C] * dims[K] * dims[K] + dims[NC]
    a = np.float32(pending[0])
    clear = pending[1] != 0.0
    pending[:] = 0.0
    for i in range(w1_off, w1_off + dims[HID] * latent):
        theta[i] += a * z[i]
    if clear:
        z[w1_off:w1_off + dims[HID] * latent] = 0.0


@numba.njit(cache=True, fastmath=FASTMATH)
def q_lambda_step(theta, z, pending, dims, s, raw_next, s_next, count, mean, m2, obs_eps, action, r_scaled, terminated,
                  reset, gamma, decay, lr, kappa, slope, eps, wide, v, y1, a1, r1, h, y2, a2, r2, out, da1, da2):
    """One Stream Q(λ) step on flat float32 parameters ``theta`` and trace ``z`` (in place).

    Normalises ``raw_next`` (the ``count``-th observation) into ``s_next`` with the running ``mean``/``m2``,
    computes Q(s, ·), Q(s', ·) into ``out`` (weights before the update), δ = r + γ·max Q(s') − Q(s, a) (no
    bootstrap if ``terminated``), z ← decay·z + ∇θ Q(s, a), θ ← θ + (α/max(α κ max(|δ|, 1) ‖z‖₁, 1))·δ·z, and
    zeroes z afterwards if ``reset``. Returns (δ, the scalar applied to z, ‖z‖₁ after the step). The step of the
    hidden weight (and its trace reset) is left in ``pending`` [a, reset, 1] for the next forward or
    :func:`apply_pending`: until then that block of ``theta`` and ``z`` is one step behind.
    """
    n_in, k, n_conv, hidden, n_out = dims[C], dims[K], dims[NC], dims[HID], dims[NOUT]
    in_h, in_w = dims[H], dims[W]
    ho = in_h - k + 1
    wo = in_w - k + 1
    latent = a1.shape[1]
    kk = n_in * k * k
    b_off = n_conv * kk
    w1_off = b_off + n_conv
    b1_off = w1_off + hidden * latent
    w2_off = b1_off + hidden
    b2_off = w2_off + n_out * hidden
    welford_normalize_(raw_next, count, mean, m2, obs_eps, s_next)
    # -- forward of [s, s'] (weights before the update)
    r1[0] = _conv_ln(s, theta, dims, slope, eps, wide, v, y1[0], a1[0])
    r1[1] = _conv_ln(s_next, theta, dims, slope, eps, wide, v, y1[1], a1[1])
    _head(theta, z, pending, dims, 2, slope, eps, a1, h, y2, a2, r2, out)
    q_sa = np.float64(out[0, action])
    best = out[1, 0]
    for m in range(1, n_out):
        if out[1, m] > best:
            best = out[1, m]
    target = r_scaled + (0.0 if terminated else gamma * np.float64(best))
    delta = target - q_sa
    # -- reverse pass of Q(s, a) fused with the trace update; the total L1 norm accumulates in float64
    l1 = 0.0
    for m in range(n_out):  # output layer: ∂Q(s,a)/∂W2[m] = [m == a]·a2(s), ∂/∂b2 = onehot
        zr = z[w2_off + m * hidden:w2_off + (m + 1) * hidden]
        part = 0.0
        if m == action:
            for i in range(hidden):
                val = decay * zr[i] + a2[0, i]
                zr[i] = val
                part += abs(val)
        else:
            for i in range(hidden):
                val = decay * zr[i]
                zr[i] = val
                part += abs(val)
        l1 += part
        val = decay * z[b2_off + m] + (np.float32(1.0) if m == action else np.float32(0.0))
        z[b2_off + m] = val
        l1 += abs(val)
    wa = theta[w2_off + action * hidden:w2_off + (action + 1) * hidden]
    for i in range(hidden):
        da2[i] = wa[i]
    lrelu_ln_backward(da2, y2[0], r2[0], slope)
    part = 0.0
    for j in range(hidden):  # hidden bias
        val = decay * z[b1_off + j] + da2[j]
        z[b1_off + j] = val
        part += abs(val)
    l1 += part
    for i in range(latent):
        da1[i] = 0.0
    for j in range(hidden):  # the one pass over the hidden weight and its trace block
        w = theta[w1_off + j * latent:w1_off + (j + 1) * latent]
        zr = z[w1_off + j * latent:w1_off + (j + 1) * latent]
        g = da2[j]
        part = 0.0
        for i in range(latent):
            da1[i] += w[i] * g
            val = decay * zr[i] + g * a1[0, i]
            zr[i] = val
            part += abs(val)
        l1 += part
    lrelu_ln_backward(da1, y1[0], r1[0], slope)
    # conv weight and bias: ∂/∂w[o,c,i,j] = Σ_t dwide[o,t]·s[(c·H + i)·W + j + t], with da1 laid out "wide"
    # (junk columns zero) so each is one contiguous dot product over the patch row read in place
    dwide = wide
    length = dwide.shape[1]
    for o in range(n_conv):
        d = da1[o * ho * wo:(o + 1) * ho * wo]
        row = dwide[o]
        for t in range(length):
            row[t] = 0.0
        gb = np.float32(0.0)
        for p in range(ho):
            dst = row[p * in_w:]
            src = d[p * wo:]
            for q in range(wo):
                dst[q] = src[q]
                gb += src[q]
        val = decay * z[b_off + o] + gb
        z[b_off + o] = val
        l1 += abs(val)
    part = 0.0
    for c in range(n_in):
        for i in range(k):
            for j in range(k):
                xs = s[(c * in_h + i) * in_w + j:]
                col = (c * k + i) * k + j
                for o in range(n_conv):
                    row = dwide[o]
                    acc = np.float32(0.0)
                    for t in range(length):
                        acc += row[t] * xs[t]
                    idx = o * kk + col
                    val = decay * z[idx] + acc
                    z[idx] = val
                    part += abs(val)
    l1 += part
    # -- ObGD step (and the trace reset): every block but the hidden weight now; that one, 131k of MinAtar's 132k
    # parameters, in the next forward's pass over it (``pending``), which reads it anyway
    scale = lr / max(lr * kappa * max(abs(delta), 1.0) * l1, 1.0) * delta
    a = np.float32(scale)
    for lo, hi in ((0, w1_off), (b1_off, theta.size)):
        if reset:
            for i in range(lo, hi):
                theta[i] += a * z[i]
                z[i] = 0.0
        else:
            for i in range(lo, hi):
                theta[i] += a * z[i]
    pending[0] = a
    pending[1] = 1.0 if reset else 0.0
    pending[2] = 1.0
    if reset:
        l1 = 0.0
    return delta, scale, l1


class FusedQStep:
    """Stream Q(λ)'s step and acting forward on a one-conv MinAtar ``StreamNetwork`` as single compiled calls.

    ``theta`` and ``trace`` are the learner's flat parameter and trace vectors (numpy views, updated in place);
    the network's parameters must be views into ``theta`` in ``net.parameters()`` order (as
    ``flatten_parameters_`` leaves them).
    """

    def __init__(self, net: nn.Module, in_shape: tuple[int, int, int], theta: np.ndarray, trace: np.ndarray) -> None:
        conv, fc1, fc2, slope = minatar_layers(net, "FusedQStep")
        if tuple(conv.stride) != (1, 1) or conv.padding != (0, 0) or conv.kernel_size[0] != conv.kernel_size[1]:
            raise ValueError("FusedQStep needs a square, unpadded, stride-1 convolution")
        if theta.dtype != np.float32 or trace.dtype != np.float32 or theta.shape != trace.shape:
            raise ValueError("FusedQStep: theta and trace must be float32 vectors of one size")
        offset = 0
        for p in net.parameters():  # the kernel addresses every parameter by its offset in theta
            if p.detach().numpy().__array_interface__["data"][0] != theta.__array_interface__["data"][0] + 4 * offset:
                raise ValueError("FusedQStep: the network's parameters are not views into theta in order")
            offset += p.numel()
        if offset != theta.size:
            raise ValueError("FusedQStep: theta holds more than the network's parameters")
        self.theta, self.trace = theta, trace
        self.in_shape = tuple(int(d) for d in in_shape)
        n_in, height, width = self.in_shape
        k, n_conv = int(conv.kernel_size[0]), int(conv.weight.shape[0])
        hidden, n_out = int(fc1.weight.shape[0]), int(fc2.weight.shape[0])
        self.dims = np.array([n_in, height, width, k, n_conv, hidden, n_out], np.int64)
        self.slope = slope
        self.eps = 1e-5  # torch.layer_norm's default, as in networks.LayerNormNoAffine
        latent = int(fc1.weight.shape[1])
        ho, wo = height - k + 1, width - k + 1
        self.wide = np.zeros((n_conv, (ho - 1) * width + wo), np.float32)
        self.v = np.zeros(latent, np.float32)
        self.y1 = np.zeros((2, latent), np.float32)
        self.a1 = np.zeros((2, latent), np.float32)
        self.r1 = np.zeros(2, np.float64)
        self.h = np.zeros((2, hidden), np.float32)
        self.y2 = np.zeros((2, hidden), np.float32)
        self.a2 = np.zeros((2, hidden), np.float32)
        self.r2 = np.zeros(2, np.float64)
        self.out = np.zeros((2, n_out), np.float32)
        self.da1 = np.zeros(latent, np.float32)
        self.da2 = np.zeros(hidden, np.float32)
        self.pending = np.zeros(3, np.float64)  # the hidden weight's deferred step [a, reset, 1], or zeros

    def flush(self) -> None:
        """Apply the deferred step of the hidden weight now: call before its weights or trace are read or
        overwritten outside this class (checkpoints, a trace reset, comparisons)."""
        apply_pending(self.theta, self.trace, self.pending, self.dims, self.y1.shape[1])

    def discard_pending(self) -> None:
        """Forget a deferred step (the weights and trace were just replaced, e.g. by a checkpoint load)."""
        self.pending[:] = 0.0

    def forward(self, s: np.ndarray) -> np.ndarray:
        """Q(s, ·) (float32, a copy) of one float32 observation shaped like the network's input."""
        x = np.ascontiguousarray(s, dtype=np.float32).reshape(-1)
        if x.size != int(np.prod(self.in_shape)):
            raise ValueError(f"FusedQStep.forward: input of {x.size} values, network input {self.in_shape}")
        q_forward(self.theta, self.trace, self.pending, self.dims, x, self.slope, self.eps, self.wide, self.v,
                  self.y1, self.a1, self.r1, self.h, self.y2, self.a2, self.r2, self.out)
        return self.out[0].copy()

    def step(self, s: np.ndarray, raw_next: np.ndarray, s_next: np.ndarray, count: int, mean: np.ndarray,
             m2: np.ndarray, obs_eps: float, action: int, r_scaled: float, terminated: bool, reset: bool,
             gamma: float, decay: np.float32, lr: float, kappa: float) -> tuple[float, float, float]:
        """:func:`q_lambda_step` on flat 1-D arrays: ``s`` (float32, normalised), ``raw_next`` (uint8 or float),
        ``s_next`` (float32, written). Q(s, ·) and Q(s', ·) are left in ``self.out``."""
        return q_lambda_step(self.theta, self.trace, self.pending, self.dims, s, raw_next, s_next, count, mean, m2,
                             obs_eps, action, r_scaled, terminated, reset, gamma, decay, lr, kappa, self.slope,
                             self.eps, self.wide, self.v, self.y1, self.a1, self.r1, self.h, self.y2, self.a2, self.r2,
                             self.out, self.da1, self.da2)
