"""The Atari/Octax streaming network as im2col + BLAS matrix products with compiled glue (``backend="numba"``).

At batch 1–2 ATen's convolutions are far from the arithmetic bound on these screens: oneDNN's forward pays a
fixed setup per call and the native backward unfolds the input again (~2.4 ms of a ~4 ms Stream Q step on Atari).
Here every convolution is one im2col (numba) plus one GEMM (torch.mm), the backward reuses the forward's
columns, and LayerNorm, LeakyReLU, their backward and the col2im are compiled loops. Activations are kept
position-major (H, W, C), so each GEMM writes a row's latent contiguously for its LayerNorm; the patch order is
torch's (C, kH, kW), so the weights stay live views of the flat parameter buffer.

``backward(..., defer_outer=True)`` leaves the largest gradient block — the first hidden layer's weight, an outer
product g·xᵀ of 0.8 M entries on Atari — unwritten and returns its two factors, so ObGD can fold it straight into
the trace (``kernels.decay_add_outer_l1_``) instead of writing and re-reading it.

Results match the torch path to float32 rounding, not bit for bit (different summation order); like the torch
path they are deterministic for a given machine and build.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from torch import nn

from policies.streaming.kernels import FASTMATH
from policies.streaming.numba_net import layer_norm_lrelu, lrelu_ln_backward


@numba.njit(cache=True)
def im2col_rows(x, k, stride, cols):  # cols[r, p·wo+q, (c·k+i)·k+j] = x[r, c, p·s+i, q·s+j]
    # numba_net.im2col's output, copied in runs of k floats (~2× faster on the 84×84 screen)
    n_rows, n_in, height, width = x.shape
    ho = (height - k) // stride + 1
    wo = (width - k) // stride + 1
    for r in range(n_rows):
        for p in range(ho):
            for q in range(wo):
                row = cols[r, p * wo + q]
                for c in range(n_in):
                    for i in range(k):
                        src = x[r, c, p * stride + i, q * stride:]  # views indexed by the loop variable: no
                        dst = row[(c * k + i) * k:]  # per-element wrap-around check
                        for j in range(k):
                            dst[j] = src[j]


# numba_net.im2col on a (rows, C, H, W) *view* of the position-major activations gives the same columns, but its
# innermost loop then strides over memory (about 2× slower on the 9×9×64 latent); here channels are innermost.
@numba.njit(cache=True, fastmath=FASTMATH)
def im2col_hwc(x, k, stride, cols):  # x (rows, H, W, C); cols[r, p*wo+q, (c*k+i)*k+j] = x[r, p*s+i, q*s+j, c]
    n_rows, height, width, n_in = x.shape
    ho = (height - k) // stride + 1
    wo = (width - k) // stride + 1
    for r in range(n_rows):
        for p in range(ho):
            for q in range(wo):
                pq = p * wo + q
                for i in range(k):
                    for j in range(k):
                        for c in range(n_in):
                            cols[r, pq, (c * k + i) * k + j] = x[r, p * stride + i, q * stride + j, c]


@numba.njit(cache=True, fastmath=FASTMATH)
def col2im_hwc(dcols, k, stride, dx):  # the adjoint of im2col_hwc for one row: dx (H, W, C) = Σ patches
    height, width, n_in = dx.shape
    ho = (height - k) // stride + 1
    wo = (width - k) // stride + 1
    dx[:] = 0.0
    for p in range(ho):
        for q in range(wo):
            pq = p * wo + q
            for i in range(k):
                for j in range(k):
                    for c in range(n_in):
                        dx[p * stride + i, q * stride + j, c] += dcols[pq, (c * k + i) * k + j]


@numba.njit(cache=True, fastmath=FASTMATH)
def _ln_rows(v, y, a, rstd, slope, eps):  # LayerNorm + LeakyReLU of each row of v (rows, n) into y, a
    for r in range(v.shape[0]):
        rstd[r] = layer_norm_lrelu(v[r], y[r], a[r], slope, eps)


@numba.njit(cache=True, fastmath=FASTMATH)
def _hwc_to_chw(x, out):  # (rows, L, C) → (rows, C·L), torch's flatten order
    rows, n_pos, n_ch = x.shape
    for r in range(rows):
        for pq in range(n_pos):
            for c in range(n_ch):
                out[r, c * n_pos + pq] = x[r, pq, c]


@numba.njit(cache=True, fastmath=FASTMATH)
def _chw_to_hwc_grad(d, out, y, rstd, slope):  # d (C·L) → out (L, C), then the LN∘LReLU backward on it
    n_pos, n_ch = out.shape
    for pq in range(n_pos):
        for c in range(n_ch):
            out[pq, c] = d[c * n_pos + pq]
    lrelu_ln_backward(out.reshape(-1), y, rstd, slope)


@numba.njit(cache=True, fastmath=FASTMATH)
def _channel_sums(d, out):  # out[c] = Σ_pq d[pq, c]
    out[:] = 0.0
    for pq in range(d.shape[0]):
        for c in range(d.shape[1]):
            out[c] += d[pq, c]


class _Conv:
    """Buffers and live weight views of one conv block (conv → LN → LReLU) for up to ``rows`` rows."""

    def __init__(self, conv: nn.Conv2d, in_hw: tuple[int, int], rows: int) -> None:
        if conv.padding != (0, 0) or conv.dilation != (1, 1) or conv.groups != 1 \
                or conv.kernel_size[0] != conv.kernel_size[1] or conv.stride[0] != conv.stride[1]:
            raise ValueError("Im2colNetwork needs square, unpadded, undilated, equal-stride convolutions")
        self.k, self.stride = int(conv.kernel_size[0]), int(conv.stride[0])
        self.in_c, self.out_c = conv.in_channels, conv.out_channels
        self.out_hw = ((in_hw[0] - self.k) // self.stride + 1, (in_hw[1] - self.k) // self.stride + 1)
        self.n_pos = self.out_hw[0] * self.out_hw[1]
        self.w = conv.weight.detach().view(self.out_c, -1)  # (C', C·k·k): torch's patch order
        self.b = conv.bias.detach()
        self.cols = torch.zeros(rows, self.n_pos, self.in_c * self.k * self.k)
        self.v = torch.zeros(rows * self.n_pos, self.out_c)  # pre-norm output, position-major
        self.y = np.zeros((rows, self.n_pos * self.out_c), np.float32)  # normalised
        self.a = np.zeros((rows, *self.out_hw, self.out_c), np.float32)  # activation (H', W', C')
        self.rstd = np.zeros(rows, np.float64)
        self.dcols = torch.zeros(self.n_pos, self.in_c * self.k * self.k)
        self.dv = np.zeros((self.n_pos, self.out_c), np.float32)  # gradient at the pre-norm output, one row


class Im2colNetwork:
    """Forward of a batch and the gradient of ⟨cotangent, output[row]⟩ for a multi-conv ``StreamNetwork``.

    Same interface as ``numba_net.NumbaNetwork``: ``forward`` keeps the activations of its last call and
    ``backward`` uses them; weights are read live from the network's parameters.
    """

    def __init__(self, net: nn.Module, in_shape: tuple[int, int, int], max_rows: int = 2) -> None:
        layers = list(net.encoder.net) + list(net.head.net)
        convs = [m for m in net.encoder.net if isinstance(m, nn.Conv2d)]
        kinds = [type(m).__name__ for m in layers]
        expected = ["Conv2d", "LayerNormNoAffine", "LeakyReLU"] * len(convs) + [
            "Flatten", "Linear", "LayerNormNoAffine", "LeakyReLU", "Linear"]
        if not convs or kinds != expected:
            raise ValueError(f"Im2colNetwork handles conv/LN/LReLU blocks + the streaming head, got {kinds}")
        self.in_shape = tuple(int(d) for d in in_shape)
        self.slope = float(layers[2].negative_slope)
        self.eps = 1e-5  # torch.layer_norm's default, as in networks.LayerNormNoAffine
        self.max_rows = max_rows
        self.blocks: list[_Conv] = []
        hw = self.in_shape[1:]
        for conv in convs:
            self.blocks.append(_Conv(conv, hw, max_rows))
            hw = self.blocks[-1].out_hw
        fc1, fc2 = layers[-4], layers[-1]
        self.w1, self.b1 = fc1.weight.detach(), fc1.bias.detach()
        self.w2, self.b2 = fc2.weight.detach(), fc2.bias.detach()
        latent, hidden = self.w1.shape[1], self.w1.shape[0]
        self.n_out = self.w2.shape[0]
        self.flat_in = torch.zeros(max_rows, latent)  # the latent in torch's (C, H, W) flatten order
        self.v1 = torch.zeros(max_rows, hidden)
        self.y1 = np.zeros((max_rows, hidden), np.float32)
        self.a1 = torch.zeros(max_rows, hidden)
        self.r1 = np.zeros(max_rows, np.float64)
        self.out = torch.zeros(max_rows, self.n_out)
        # offset of fc1.weight in net.parameters() order: where a deferred outer product lands in the flat vector
        self.outer_offset = sum(p.numel() for c in convs for p in c.parameters())
        self._rows = 0

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Outputs (rows, n_out) float32 for float32 input (rows, C, H, W), rows ≤ ``max_rows``."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.shape[0] > self.max_rows:
            raise ValueError(f"Im2colNetwork.forward: {x.shape[0]} rows > max_rows {self.max_rows}")
        if x.shape[1:] != self.in_shape:
            raise ValueError(f"Im2colNetwork.forward: input {x.shape[1:]} != network input {self.in_shape}")
        rows = x.shape[0]
        src = x
        for i, blk in enumerate(self.blocks):
            cols = blk.cols[:rows]
            (im2col_rows if i == 0 else im2col_hwc)(src, blk.k, blk.stride, cols.numpy())
            v = blk.v[: rows * blk.n_pos]
            torch.addmm(blk.b, cols.view(-1, cols.shape[2]), blk.w.t(), out=v)
            _ln_rows(v.numpy().reshape(rows, -1), blk.y[:rows], blk.a[:rows].reshape(rows, -1), blk.rstd,
                     self.slope, self.eps)
            src = blk.a[:rows]
        last = self.blocks[-1]
        _hwc_to_chw(src.reshape(rows, last.n_pos, last.out_c), self.flat_in.numpy()[:rows])
        torch.addmm(self.b1, self.flat_in[:rows], self.w1.t(), out=self.v1[:rows])
        _ln_rows(self.v1.numpy()[:rows], self.y1[:rows], self.a1.numpy()[:rows], self.r1, self.slope, self.eps)
        torch.addmm(self.b2, self.a1[:rows], self.w2.t(), out=self.out[:rows])
        self._rows = rows
        return self.out.numpy()[:rows].copy()

    def backward(self, cotangent: np.ndarray, grads: list[np.ndarray], row: int = 0,
                 defer_outer: bool = False) -> tuple[int, np.ndarray, np.ndarray] | None:
        """Write ∂⟨cotangent, output[row]⟩/∂θ into ``grads`` (arrays shaped like the parameters, in
        ``net.parameters()`` order), from the last ``forward``.

        With ``defer_outer`` the first hidden layer's weight gradient (= u·vᵀ) is not written;
        (:attr:`outer_offset`, u, v) is returned instead, for ``ObGD.accumulate(grad, outer)``.
        """
        if not 0 <= row < self._rows:
            raise RuntimeError(f"Im2colNetwork.backward: row {row} not in the last forward ({self._rows} rows)")
        t = [torch.from_numpy(g) for g in grads]
        g = torch.from_numpy(np.ascontiguousarray(cotangent, dtype=np.float32).reshape(1, -1))
        n = 2 * len(self.blocks)
        torch.mm(g.t(), self.a1[row:row + 1], out=t[n + 2])  # fc2
        t[n + 3].copy_(g[0])
        d1 = g.mm(self.w2)  # (1, hidden)
        lrelu_ln_backward(d1.numpy()[0], self.y1[row], self.r1[row], self.slope)
        x1 = self.flat_in[row]
        if defer_outer:
            outer = (self.outer_offset, d1.numpy()[0].copy(), x1.numpy().copy())
        else:
            torch.mm(d1.t(), x1.view(1, -1), out=t[n])
            outer = None
        t[n + 1].copy_(d1[0])
        last = self.blocks[-1]  # ∂/∂latent arrives in torch's (C, H, W) order
        _chw_to_hwc_grad(d1.mm(self.w1)[0].numpy(), last.dv, last.y[row], last.rstd[row], self.slope)
        for i in range(len(self.blocks) - 1, -1, -1):
            blk = self.blocks[i]  # blk.dv: ∂/∂ its pre-norm output, already through LN∘LReLU
            dv = torch.from_numpy(blk.dv)
            torch.mm(dv.t(), blk.cols[row], out=t[2 * i].view(blk.out_c, -1))
            _channel_sums(blk.dv, grads[2 * i + 1])
            if i > 0:  # col2im straight into the previous block's buffer, then its LN∘LReLU backward
                torch.mm(dv, blk.w, out=blk.dcols)
                prev = self.blocks[i - 1]
                col2im_hwc(blk.dcols.numpy(), blk.k, blk.stride, prev.dv.reshape(*prev.out_hw, prev.out_c))
                lrelu_ln_backward(prev.dv.reshape(-1), prev.y[row], prev.rstd[row], self.slope)
        return outer
