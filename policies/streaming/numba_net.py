"""A numba forward/backward of the MinAtar streaming network (conv → LN → LReLU → FC → LN → LReLU → FC).

On MinAtar's 10×10 boards a whole Stream Q step is ~0.6 M multiply-adds, so the torch path (even the fused one in
``networks.py``) is bound by ~40 op dispatches per step, not arithmetic. Here the forward of a small batch and the
parameter gradient of one row are each a single compiled call over the network's own weights (numpy views of the
flat parameter buffer, so ObGD's in-place updates are seen without copies).

Results match the torch path to float32 rounding, not bit for bit (different summation order); like the torch
path they are deterministic for a given machine and build.
"""

from __future__ import annotations

import numba
import numpy as np
from torch import nn

from policies.streaming.kernels import FASTMATH


@numba.njit(cache=True, fastmath=FASTMATH)
def layer_norm_lrelu(v, y, a, slope, eps):  # over the whole row; returns rstd
    n = v.size
    mean = 0.0
    for i in range(n):
        mean += v[i]
    mean /= n
    var = 0.0
    for i in range(n):
        d = v[i] - mean
        var += d * d
    rstd = 1.0 / np.sqrt(var / n + eps)
    for i in range(n):
        yi = np.float32((v[i] - mean) * rstd)
        y[i] = yi
        a[i] = yi if yi > 0 else np.float32(slope) * yi
    return rstd


@numba.njit(cache=True, fastmath=FASTMATH)
def im2col(x, k, stride, cols):  # cols[r, p*wo+q, (c*k+i)*k+j] = x[r, c, p*stride+i, q*stride+j]
    n_rows, n_in, height, width = x.shape
    ho = (height - k) // stride + 1
    wo = (width - k) // stride + 1
    for r in range(n_rows):
        for p in range(ho):
            for q in range(wo):
                pq = p * wo + q
                for c in range(n_in):
                    for i in range(k):
                        for j in range(k):
                            cols[r, pq, (c * k + i) * k + j] = x[r, c, p * stride + i, q * stride + j]


@numba.njit(cache=True, fastmath=FASTMATH)
def _forward(cols, wc, bc, w1, b1, w2, b2, slope, eps, y1, r1, a1, y2, r2, a2, out):
    # cols: (rows, positions, C·k·k) patches; wc: (conv channels, C·k·k); conv output is channel-major (C', H', W')
    n_rows, n_pos, n_patch = cols.shape
    n_conv = wc.shape[0]
    conv = np.empty(n_conv * n_pos, dtype=np.float32)
    hidden = np.empty(w1.shape[0], dtype=np.float32)
    for r in range(n_rows):
        for o in range(n_conv):
            for pq in range(n_pos):
                acc = np.float32(0.0)
                for t in range(n_patch):  # contiguous in both: vectorised
                    acc += wc[o, t] * cols[r, pq, t]
                conv[o * n_pos + pq] = acc + bc[o]
        r1[r] = layer_norm_lrelu(conv, y1[r], a1[r], slope, eps)
        for h in range(w1.shape[0]):
            acc = np.float32(0.0)
            for d in range(w1.shape[1]):
                acc += w1[h, d] * a1[r, d]
            hidden[h] = acc + b1[h]
        r2[r] = layer_norm_lrelu(hidden, y2[r], a2[r], slope, eps)
        for j in range(w2.shape[0]):
            acc = np.float32(0.0)
            for h in range(w2.shape[1]):
                acc += w2[j, h] * a2[r, h]
            out[r, j] = acc + b2[j]


@numba.njit(cache=True, fastmath=FASTMATH)
def lrelu_ln_backward(da, y, rstd, slope):  # d(LN∘LReLU input) from d(LReLU output); in place on da
    n = da.size
    for i in range(n):
        if not y[i] > 0:
            da[i] *= np.float32(slope)
    mean_d = 0.0
    mean_dy = 0.0
    for i in range(n):
        mean_d += da[i]
        mean_dy += da[i] * y[i]
    mean_d /= n
    mean_dy /= n
    for i in range(n):
        da[i] = np.float32(rstd * (da[i] - mean_d - y[i] * mean_dy))


@numba.njit(cache=True, fastmath=FASTMATH)
def _linear_backward(g, a, w, gw, gb, da):  # y = W a + b: gW = g aᵀ, gb = g, da = Wᵀ g (da zeroed here)
    da[:] = 0.0
    for j in range(w.shape[0]):
        gj = g[j]
        gb[j] = gj
        for h in range(w.shape[1]):
            gw[j, h] = gj * a[h]
            da[h] += w[j, h] * gj


@numba.njit(cache=True, fastmath=FASTMATH)
def _backward(cols, row, g, w1, w2, slope, y1, r1, a1, y2, r2, a2, gwc, gbc, gw1, gb1, gw2, gb2):
    da2 = np.empty(w2.shape[1], dtype=np.float32)
    _linear_backward(g, a2[row], w2, gw2, gb2, da2)
    lrelu_ln_backward(da2, y2[row], r2[row], slope)
    da1 = np.empty(w1.shape[1], dtype=np.float32)
    _linear_backward(da2, a1[row], w1, gw1, gb1, da1)
    lrelu_ln_backward(da1, y1[row], r1[row], slope)
    n_conv, n_patch = gwc.shape
    n_pos = cols.shape[1]
    for o in range(n_conv):
        acc_b = np.float32(0.0)
        for t in range(n_patch):
            gwc[o, t] = 0.0
        for pq in range(n_pos):
            d = da1[o * n_pos + pq]
            acc_b += d
            for t in range(n_patch):  # axpy over the contiguous patch
                gwc[o, t] += d * cols[row, pq, t]
        gbc[o] = acc_b


class NumbaNetwork:
    """Forward of a batch and the gradient of ⟨cotangent, output[row]⟩ for a one-conv ``StreamNetwork``.

    ``forward`` keeps the activations of its last call; ``backward`` uses them. Weights are read live from the
    network (numpy views), so call ``forward`` after any update that the next gradient should see.
    """

    def __init__(self, net: nn.Module, in_shape: tuple[int, int, int], max_rows: int = 2) -> None:
        layers = list(net.encoder.net) + list(net.head.net)
        kinds = [type(m).__name__ for m in layers]
        expected = ["Conv2d", "LayerNormNoAffine", "LeakyReLU", "Flatten", "Linear", "LayerNormNoAffine",
                    "LeakyReLU", "Linear"]
        if kinds != expected:
            raise ValueError(f"NumbaNetwork handles the one-conv MinAtar network ({expected}), got {kinds}")
        conv, fc1, fc2 = layers[0], layers[4], layers[7]
        if conv.stride[0] != conv.stride[1] or conv.padding != (0, 0) or conv.kernel_size[0] != conv.kernel_size[1]:
            raise ValueError("NumbaNetwork needs a square, unpadded, equal-stride convolution")
        self.stride = int(conv.stride[0])
        self.slope = float(layers[2].negative_slope)
        self.eps = 1e-5  # torch.layer_norm's default, as in networks.LayerNormNoAffine
        self.k = int(conv.kernel_size[0])
        # the conv weight as (out channels, C·k·k): the im2col layout (a view, so ObGD's updates show through)
        self.params = [p.detach().numpy() for p in (conv.weight, conv.bias, fc1.weight, fc1.bias, fc2.weight,
                                                    fc2.bias)]
        self.params[0] = self.params[0].reshape(self.params[0].shape[0], -1)
        self.in_shape = tuple(int(d) for d in in_shape)
        in_c, height, width = self.in_shape
        n_pos = ((height - self.k) // self.stride + 1) * ((width - self.k) // self.stride + 1)
        self.cols = np.zeros((max_rows, n_pos, in_c * self.k * self.k), np.float32)
        latent, hidden, n_out = fc1.weight.shape[1], fc1.weight.shape[0], fc2.weight.shape[0]
        self.n_out = n_out
        self.y1 = np.zeros((max_rows, latent), np.float32)
        self.a1 = np.zeros_like(self.y1)
        self.r1 = np.zeros(max_rows, np.float64)
        self.y2 = np.zeros((max_rows, hidden), np.float32)
        self.a2 = np.zeros_like(self.y2)
        self.r2 = np.zeros(max_rows, np.float64)
        self._rows = 0

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Outputs (rows, n_out) float32 for float32 input (rows, C, H, W), rows ≤ ``max_rows``."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.shape[0] > self.y1.shape[0]:
            raise ValueError(f"NumbaNetwork.forward: {x.shape[0]} rows > max_rows {self.y1.shape[0]}")
        if x.shape[1:] != self.in_shape:
            raise ValueError(f"NumbaNetwork.forward: input {x.shape[1:]} != network input {self.in_shape}")
        wc, bc, w1, b1, w2, b2 = self.params
        rows = x.shape[0]
        cols = self.cols[:rows]
        im2col(x, self.k, self.stride, cols)
        out = np.empty((rows, self.n_out), np.float32)
        _forward(cols, wc, bc, w1, b1, w2, b2, self.slope, self.eps, self.y1, self.r1, self.a1, self.y2, self.r2,
                 self.a2, out)
        self._rows = rows
        return out

    def backward(self, cotangent: np.ndarray, grads: list[np.ndarray], row: int = 0,
                 defer_outer: bool = False) -> None:
        """Write ∂⟨cotangent, output[row]⟩/∂θ into ``grads`` (arrays shaped like the six parameters, in
        ``net.parameters()`` order), from the last ``forward``. Every block is written (``defer_outer`` is
        accepted for the interface of ``Im2colNetwork`` and ignored: MinAtar's blocks are small)."""
        if not 0 <= row < self._rows:
            raise RuntimeError(f"NumbaNetwork.backward: row {row} not in the last forward ({self._rows} rows)")
        _, _, w1, _, w2, _ = self.params
        g = np.ascontiguousarray(cotangent, dtype=np.float32).reshape(-1)
        gwc = grads[0].reshape(grads[0].shape[0], -1)
        _backward(self.cols, int(row), g, w1, w2, self.slope, self.y1, self.r1, self.a1, self.y2, self.r2, self.a2,
                  gwc, *grads[1:])
