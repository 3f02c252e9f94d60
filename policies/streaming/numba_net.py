"""A numba forward/backward of the MinAtar streaming network (conv → LN → LReLU → FC → LN → LReLU → FC).

On MinAtar's 10×10 boards a whole Stream Q step is ~0.6 M multiply-adds, so the torch path (even the fused one in
``networks.py``) is bound by ~40 op dispatches per step, not arithmetic. Here the forward of a small batch and the
parameter gradient of one row are each a single compiled call over the network's own weights (numpy views of the
flat parameter buffer, so ObGD's in-place updates are seen without copies). The convolution and the hidden layer
are BLAS GEMMs (``np.dot`` inside numba: scipy's OpenBLAS) over "wide" patches (see :func:`im2col_wide`).

Results match the torch path to float32 rounding, not bit for bit (different summation order); like the torch
path they are deterministic for a given machine, build and BLAS thread count.
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


@numba.njit(cache=True)
def im2col_wide(x, n_in, in_h, in_w, k, stride, cols):
    # Patches of x (C·Hp·Wp, flat) for an unpadded stride-s convolution, laid out "wide": cols[(c·k+i)·k+j, t] with
    # output (p, q) at t = p·Wp + q, so each patch row is one run of the input (contiguous for stride 1) and the
    # convolution is one GEMM W·cols. Columns q ≥ W of each output row are junk: never read, and their
    # cotangents are kept zero. cols: (C·k·k, (H−1)·Wp + W).
    # Loops index views by the range variable: numba wraps a computed index (base + t) around if negative, and
    # that per-element check makes a copy loop ~5× slower.
    length = cols.shape[1]
    for c in range(n_in):
        for i in range(k):
            for j in range(k):
                row = cols[(c * k + i) * k + j]
                xs = x[(c * in_h + i) * in_w + j:]
                if stride == 1:  # a plain copy loop, which LLVM vectorises
                    for t in range(length):
                        row[t] = xs[t]
                else:
                    for t in range(length):
                        row[t] = xs[stride * t]


@numba.njit(cache=True)
def col2im_wide_add(dcols, n_in, in_h, in_w, k, stride, dx):  # the adjoint of im2col_wide: dx (flat) += patches
    length = dcols.shape[1]
    for c in range(n_in):
        for i in range(k):
            for j in range(k):
                row = dcols[(c * k + i) * k + j]
                dxs = dx[(c * in_h + i) * in_w + j:]
                if stride == 1:
                    for t in range(length):
                        dxs[t] += row[t]
                else:
                    for t in range(length):
                        dxs[stride * t] += row[t]


@numba.njit(cache=True)
def from_wide(wide, bias, height, width, in_w, out):  # out[o·H·W + p·W + q] = wide[o, p·Wp + q] + bias[o]
    for o in range(wide.shape[0]):
        b = bias[o]
        for p in range(height):
            src = wide[o, p * in_w:]
            dst = out[(o * height + p) * width:]
            for q in range(width):
                dst[q] = src[q] + b


@numba.njit(cache=True)
def to_wide(v, height, width, in_w, wide):  # the inverse of from_wide (no bias); junk columns zeroed
    wide[:] = 0.0
    for o in range(wide.shape[0]):
        for p in range(height):
            src = v[(o * height + p) * width:]
            dst = wide[o, p * in_w:]
            for q in range(width):
                dst[q] = src[q]


@numba.njit(cache=True, fastmath=FASTMATH)
def _forward(x, k, stride, wc, bc, w1, b1, w2, b2, slope, eps, cols, wide, v, y1, r1, a1, h, y2, r2, a2, out):
    # x: (rows, C, H, W); cols: (rows, C·k·k, L) wide patches (kept for the gradient); conv output channel-major
    rows, n_in, in_h, in_w = x.shape
    lat_h = (in_h - k) // stride + 1
    lat_w = (in_w - k) // stride + 1
    for r in range(rows):
        im2col_wide(x[r].reshape(n_in * in_h * in_w), n_in, in_h, in_w, k, stride, cols[r])
        np.dot(wc, cols[r], wide)
        from_wide(wide, bc, lat_h, lat_w, in_w, v)
        r1[r] = layer_norm_lrelu(v, y1[r], a1[r], slope, eps)
    np.dot(a1[:rows], w1.T, h[:rows])  # both rows in one GEMM: the 128×1024 weight is read once
    for r in range(rows):
        h[r] += b1
        r2[r] = layer_norm_lrelu(h[r], y2[r], a2[r], slope, eps)
        for j in range(w2.shape[0]):
            acc = np.float32(0.0)
            for i in range(w2.shape[1]):
                acc += w2[j, i] * a2[r, i]
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
def _backward(cols, row, g, in_w, lat_h, lat_w, w1, w2, slope, y1, r1, a1, y2, r2, a2, dwide, da2, da1,
              gwc, gbc, gw1, gb1, gw2, gb2, write_outer):
    # fc2: gW2 = g a2ᵀ, gb2 = g, da2 = W2ᵀ g
    da2[:] = 0.0
    for j in range(w2.shape[0]):
        gj = g[j]
        gb2[j] = gj
        for i in range(w2.shape[1]):
            gw2[j, i] = gj * a2[row, i]
            da2[i] += w2[j, i] * gj
    lrelu_ln_backward(da2, y2[row], r2[row], slope)
    gb1[:] = da2
    if write_outer:  # else the caller folds gW1 = da2 a1ᵀ into the trace from its factors
        for j in range(w1.shape[0]):
            gj = da2[j]
            for i in range(w1.shape[1]):
                gw1[j, i] = gj * a1[row, i]
    np.dot(da2, w1, da1)
    lrelu_ln_backward(da1, y1[row], r1[row], slope)
    to_wide(da1, lat_h, lat_w, in_w, dwide)
    for o in range(dwide.shape[0]):
        gbc[o] = dwide[o].sum()
    np.dot(dwide, cols[row].T, gwc)


MINATAR_LAYERS = ["Conv2d", "LayerNormNoAffine", "LeakyReLU", "Flatten", "Linear", "LayerNormNoAffine", "LeakyReLU",
                  "Linear"]


def minatar_layers(net: nn.Module, who: str) -> tuple[nn.Module, nn.Module, nn.Module, float]:
    """The conv, hidden and output layers of the one-conv MinAtar network and its LeakyReLU slope; ``ValueError``
    naming ``who`` for any other network."""
    layers = list(net.encoder.net) + list(net.head.net)
    kinds = [type(m).__name__ for m in layers]
    if kinds != MINATAR_LAYERS:
        raise ValueError(f"{who} handles the one-conv MinAtar network ({MINATAR_LAYERS}), got {kinds}")
    return layers[0], layers[4], layers[7], float(layers[2].negative_slope)


class NumbaNetwork:
    """Forward of a batch and the gradient of ⟨cotangent, output[row]⟩ for a one-conv ``StreamNetwork``.

    ``forward`` keeps the activations of its last call; ``backward`` uses them. Weights are read live from the
    network (numpy views), so call ``forward`` after any update that the next gradient should see.
    """

    def __init__(self, net: nn.Module, in_shape: tuple[int, int, int], max_rows: int = 2) -> None:
        conv, fc1, fc2, slope = minatar_layers(net, "NumbaNetwork")
        if conv.stride[0] != conv.stride[1] or conv.padding != (0, 0) or conv.kernel_size[0] != conv.kernel_size[1]:
            raise ValueError("NumbaNetwork needs a square, unpadded, equal-stride convolution")
        self.stride = int(conv.stride[0])
        self.slope = slope
        self.eps = 1e-5  # torch.layer_norm's default, as in networks.LayerNormNoAffine
        self.k = int(conv.kernel_size[0])
        # the conv weight as (out channels, C·k·k): the im2col layout (a view, so ObGD's updates show through)
        self.params = [p.detach().numpy() for p in (conv.weight, conv.bias, fc1.weight, fc1.bias, fc2.weight,
                                                    fc2.bias)]
        self.params[0] = self.params[0].reshape(self.params[0].shape[0], -1)
        self.in_shape = tuple(int(d) for d in in_shape)
        in_c, height, width = self.in_shape
        self.lat_hw = ((height - self.k) // self.stride + 1, (width - self.k) // self.stride + 1)
        wide_len = (self.lat_hw[0] - 1) * width + self.lat_hw[1]  # see im2col_wide
        n_conv = conv.weight.shape[0]
        self.cols = np.zeros((max_rows, in_c * self.k * self.k, wide_len), np.float32)
        self.wide = np.zeros((n_conv, wide_len), np.float32)
        latent, hidden, n_out = fc1.weight.shape[1], fc1.weight.shape[0], fc2.weight.shape[0]
        self.n_out = n_out
        self.v = np.zeros(latent, np.float32)
        self.y1 = np.zeros((max_rows, latent), np.float32)
        self.a1 = np.zeros_like(self.y1)
        self.r1 = np.zeros(max_rows, np.float64)
        self.h = np.zeros((max_rows, hidden), np.float32)
        self.y2 = np.zeros((max_rows, hidden), np.float32)
        self.a2 = np.zeros_like(self.y2)
        self.r2 = np.zeros(max_rows, np.float64)
        self.out = np.zeros((max_rows, n_out), np.float32)
        self.da2 = np.zeros(hidden, np.float32)
        self.da1 = np.zeros(latent, np.float32)
        # offset of fc1.weight in net.parameters() order: where a deferred outer product lands in the flat vector
        self.outer_offset = conv.weight.numel() + conv.bias.numel()
        self._rows = 0

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Outputs (rows, n_out) float32 for float32 input (rows, C, H, W), rows ≤ ``max_rows``."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.shape[0] > self.y1.shape[0]:
            raise ValueError(f"NumbaNetwork.forward: {x.shape[0]} rows > max_rows {self.y1.shape[0]}")
        if x.shape[1:] != self.in_shape:
            raise ValueError(f"NumbaNetwork.forward: input {x.shape[1:]} != network input {self.in_shape}")
        rows = x.shape[0]
        _forward(x, self.k, self.stride, *self.params, self.slope, self.eps, self.cols, self.wide, self.v,
                 self.y1, self.r1, self.a1, self.h, self.y2, self.r2, self.a2, self.out)
        self._rows = rows
        return self.out[:rows].copy()

    def backward(self, cotangent: np.ndarray, grads: list[np.ndarray], row: int = 0,
                 defer_outer: bool = False) -> tuple[int, np.ndarray, np.ndarray] | None:
        """Write ∂⟨cotangent, output[row]⟩/∂θ into ``grads`` (arrays shaped like the six parameters, in
        ``net.parameters()`` order), from the last ``forward``.

        With ``defer_outer`` the hidden layer's weight gradient (= u·vᵀ, 131k of MinAtar's 132k parameters) is
        not written; (:attr:`outer_offset`, u, v) is returned instead, for ``ObGD.accumulate(grad, outer)``.
        """
        if not 0 <= row < self._rows:
            raise RuntimeError(f"NumbaNetwork.backward: row {row} not in the last forward ({self._rows} rows)")
        _, _, w1, _, w2, _ = self.params
        g = np.ascontiguousarray(cotangent, dtype=np.float32).reshape(-1)
        gwc = grads[0].reshape(grads[0].shape[0], -1)
        _backward(self.cols, int(row), g, self.in_shape[2], *self.lat_hw, w1, w2, self.slope, self.y1, self.r1,
                  self.a1, self.y2, self.r2, self.a2, self.wide, self.da2, self.da1, gwc, *grads[1:],
                  not defer_outer)
        if defer_outer:
            return self.outer_offset, self.da2.copy(), self.a1[row].copy()
        return None
