"""Streaming SPR's loss and gradients on the Atari/Octax networks as im2col + BLAS GEMMs (``backend="numba"``).

The same loss as ``policies.streaming.spr`` (online encoder on o_0, the transition model rolled with the K actions
taken, projection + predictor, −Σ_k cos against the EMA target encoder + projection of o_1..o_K) and its reverse
pass, without autograd. On the Atari screen that loss is ~130 M multiply-adds per update, nearly all in
convolutions; the autograd version spends much of its time in convolution backward kernels that unfold their
input again, in concatenations and in graph bookkeeping. Here every convolution is one im2col (compiled) plus one
GEMM (numpy's BLAS), the reverse pass reuses the forward's patches, the target encoder's K frames go through each
layer as one GEMM, and the transition model's weight gradients over the K steps are one GEMM each. A frame stays
in the window for K+1 updates, so its first-layer patches are computed once and kept. Weights are read live from
the modules' parameters (numpy views, so ObGD's and the EMA's in-place updates show through).

Results match autograd to float32 rounding, not bit for bit (different summation order); deterministic for a
given machine, build and BLAS thread count.
"""

from __future__ import annotations

import numba
import numpy as np
from torch import nn

from policies.streaming.im2col_net import _hwc_to_chw, _ln_rows, im2col_rows
from policies.streaming.kernels import FASTMATH
from policies.streaming.numba_net import layer_norm_lrelu, lrelu_ln_backward
from policies.streaming.numba_spr import parameter_views

# Patch order. The first layer reads the (C, H, W) observation in torch's (C, kH, kW) patch order (runs of k
# floats); every later convolution reads position-major (H, W, C) activations, where the (kH, kW, C) order makes
# each patch row k·C (or C) contiguous floats on both sides — several times faster than torch's order there. The
# weights of those layers are permuted into that order once per call (tens of kilobytes) and their gradients
# permuted back.


@numba.njit(cache=True)
def im2col_ijc(x, k, stride, cols):  # cols[r, p·wo+q, (i·k+j)·C+c] = x[r, p·s+i, q·s+j, c]
    n_rows, height, width, n_in = x.shape
    ho = (height - k) // stride + 1
    wo = (width - k) // stride + 1
    run = k * n_in
    for r in range(n_rows):
        for p in range(ho):
            for i in range(k):
                line = x[r, p * stride + i].reshape(width * n_in)
                for q in range(wo):
                    src = line[q * stride * n_in:]
                    dst = cols[r, p * wo + q, i * run:]
                    for t in range(run):
                        dst[t] = src[t]


@numba.njit(cache=True)
def col2im_ijc(dcols, k, stride, dx):  # the adjoint of im2col_ijc for one frame: dx (H, W, C) = Σ patches
    height, width, n_in = dx.shape
    wo = (width - k) // stride + 1
    ho = (height - k) // stride + 1
    run = k * n_in
    dx[:] = 0.0
    for p in range(ho):
        for i in range(k):
            line = dx[p * stride + i].reshape(width * n_in)
            for q in range(wo):
                src = dcols[p * wo + q, i * run:]
                dst = line[q * stride * n_in:]
                for t in range(run):
                    dst[t] += src[t]


@numba.njit(cache=True)
def im2col_same_ijc(x, action, n_actions, k, pad, cols):
    # Patches of a stride-1, zero-padded convolution over x (H, W, C) plus ``n_actions`` one-hot action planes
    # (channels C.., plane ``action`` all ones), in (kH, kW, C + A) order: cols[p·W+q, (i·k+j)·(C+A)+c] =
    # input[c, p+i−pad, q+j−pad], 0 outside.
    height, width, n_ch = x.shape
    n_tot = n_ch + n_actions
    for p in range(height):
        for q in range(width):
            row = cols[p * width + q]
            for i in range(k):
                pi = p + i - pad
                for j in range(k):
                    qj = q + j - pad
                    dst = row[(i * k + j) * n_tot:]
                    inside = 0 <= pi < height and 0 <= qj < width
                    if inside:
                        src = x[pi, qj]
                        for c in range(n_ch):
                            dst[c] = src[c]
                    else:
                        for c in range(n_ch):
                            dst[c] = 0.0
                    for c in range(n_actions):
                        dst[n_ch + c] = 1.0 if inside and c == action else 0.0


@numba.njit(cache=True)
def col2im_same_ijc_add(dcols, k, pad, n_actions, dx):
    # The adjoint of im2col_same_ijc for the C latent channels of dx (H, W, C), added in place; the action planes
    # take no gradient.
    height, width, n_ch = dx.shape
    n_tot = n_ch + n_actions
    for p in range(height):
        for q in range(width):
            row = dcols[p * width + q]
            for i in range(k):
                pi = p + i - pad
                for j in range(k):
                    qj = q + j - pad
                    if 0 <= pi < height and 0 <= qj < width:
                        src = row[(i * k + j) * n_tot:]
                        dst = dx[pi, qj]
                        for c in range(n_ch):
                            dst[c] += src[c]


@numba.njit(cache=True)
def to_ijc(w, n_in, k, out):  # a weight (C', C·k·k) in torch's order → (C', k·k·C)
    n_out = w.shape[0]
    src = w.reshape(n_out, n_in, k, k)
    dst = out.reshape(n_out, k, k, n_in)
    for o in range(n_out):  # 4-D indexing by loop variables only: no per-element wrap-around checks
        for i in range(k):
            for j in range(k):
                for c in range(n_in):
                    dst[o, i, j, c] = src[o, c, i, j]


@numba.njit(cache=True)
def from_ijc(g, n_in, k, out):  # the inverse of to_ijc: (C', k·k·C) → torch's (C', C·k·k)
    n_out = g.shape[0]
    src = g.reshape(n_out, k, k, n_in)
    dst = out.reshape(n_out, n_in, k, k)
    for o in range(n_out):
        for c in range(n_in):
            for i in range(k):
                for j in range(k):
                    dst[o, c, i, j] = src[o, i, j, c]


@numba.njit(cache=True)
def same_frame(a, b):  # a == b element for element (stops at the first difference)
    x = a.reshape(a.size)
    y = b.reshape(b.size)
    for i in range(x.size):
        if x[i] != y[i]:
            return False
    return True


@numba.njit(cache=True, fastmath=FASTMATH)
def linear_rows(z, w, b, out):
    # out[s, i] = Σ_j z[s, j] w[i, j] + b[i] for a few rows s: each weight row is read from memory once and
    # reused from L1 for every s (BLAS's small-M GEMM path re-packs the whole weight per call, ~2× slower here)
    n_rows, n_in = z.shape
    for i in range(w.shape[0]):
        wi = w[i]
        for s in range(n_rows):
            zs = z[s]
            acc = np.float32(0.0)
            for j in range(n_in):
                acc += zs[j] * wi[j]
            out[s, i] = acc + b[i]


@numba.njit(cache=True, fastmath=FASTMATH)
def _chw_to_hwc(d, out):  # (rows, C·L) in torch's flatten order → (rows, L, C)
    rows, n_pos, n_ch = out.shape
    for r in range(rows):
        for pq in range(n_pos):
            for c in range(n_ch):
                out[r, pq, c] = d[r, c * n_pos + pq]


@numba.njit(cache=True, fastmath=FASTMATH)
def _bias_ln_rows(v, b, y, a, rstd, slope, eps):  # v (rows, L, C) += b[c]; then LN + LReLU of each row
    rows, n_pos, n_ch = v.shape
    for r in range(rows):
        for pq in range(n_pos):
            for c in range(n_ch):
                v[r, pq, c] += b[c]
        rstd[r] = layer_norm_lrelu(v[r].reshape(n_pos * n_ch), y[r], a[r], slope, eps)


@numba.njit(cache=True, fastmath=FASTMATH)
def cosine_loss_grad(pred, tgt, dpred):
    """−Σ_k cos(pred_k, tgt_k) over rows, and its gradient w.r.t. ``pred`` into ``dpred`` (norms clamped at 1e-8,
    as ``torch.cosine_similarity``)."""
    loss = 0.0
    for s in range(pred.shape[0]):
        pp = 0.0
        tt = 0.0
        pt = 0.0
        for j in range(pred.shape[1]):
            pp += pred[s, j] * pred[s, j]
            tt += tgt[s, j] * tgt[s, j]
            pt += pred[s, j] * tgt[s, j]
        pn = max(np.sqrt(pp), 1e-8)
        tn = max(np.sqrt(tt), 1e-8)
        cos = pt / (pn * tn)
        loss -= cos
        for j in range(pred.shape[1]):
            dpred[s, j] = -(tgt[s, j] / (pn * tn) - cos * pred[s, j] / (pn * pn))
    return loss


def _blocks_of(encoder: nn.Module) -> list[nn.Conv2d]:
    kinds = [type(m).__name__ for m in encoder.net]
    convs = [m for m in encoder.net if isinstance(m, nn.Conv2d)]
    if not convs or kinds != ["Conv2d", "LayerNormNoAffine", "LeakyReLU"] * len(convs):
        raise ValueError(f"Im2colSPRLoss handles encoders of conv/LN/LReLU blocks, got {kinds}")
    for conv in convs:
        if conv.padding != (0, 0) or conv.dilation != (1, 1) or conv.groups != 1 \
                or conv.kernel_size[0] != conv.kernel_size[1] or conv.stride[0] != conv.stride[1]:
            raise ValueError("Im2colSPRLoss needs square, unpadded, undilated, equal-stride encoder convolutions")
    return convs


class _EncoderPass:
    """Buffers of one encoder pass over ``rows`` frames (patches, pre-norm outputs, normalised outputs,
    activations, 1/std), kept for the reverse pass."""

    def __init__(self, geometry: list[tuple[int, int, int, int, int, int]], rows: int) -> None:
        self.cols, self.v, self.y, self.a, self.rstd = [], [], [], [], []
        for i, (k, _, in_c, out_c, oh, ow) in enumerate(geometry):  # the first layer's patches are kept per frame
            self.cols.append(np.zeros((rows, oh * ow, in_c * k * k) if i else (0,), np.float32))
            self.v.append(np.zeros((rows, oh * ow, out_c), np.float32))
            self.y.append(np.zeros((rows, oh * ow * out_c), np.float32))
            self.a.append(np.zeros((rows, oh, ow, out_c), np.float32))
            self.rstd.append(np.zeros(rows, np.float64))


class Im2colSPRLoss:
    """SPR loss + its gradients for a multi-conv encoder (Atari, Octax) and ``policies.streaming.spr``'s heads.

    ``gradients(obs, actions)`` returns (loss, [flat gradient per module]) for the modules (encoder, transition,
    projection, predictor), each laid out as ``torch.cat([p.grad.reshape(-1) for p in module.parameters()])``;
    the same interface as ``numba_spr.NumbaSPRLoss``. The returned arrays are reused by the next call.
    """

    def __init__(self, encoder: nn.Module, transition: nn.Module, projection: nn.Module, predictor: nn.Linear,
                 target_encoder: nn.Module, target_projection: nn.Module, obs_shape: tuple[int, int, int]) -> None:
        convs = _blocks_of(encoder)
        _blocks_of(target_encoder)
        tk = int(transition.conv1.kernel_size[0])
        if tk % 2 == 0 or transition.conv1.padding != ((tk - 1) // 2,) * 2 \
                or transition.conv2.padding != ((tk - 1) // 2,) * 2:
            raise ValueError("Im2colSPRLoss needs the transition model's odd, same-padded convolutions")
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.slope, self.eps = float(encoder.net[2].negative_slope), 1e-5
        self.tk, self.pad, self.n_actions = tk, (tk - 1) // 2, int(transition.n_actions)
        self.geometry = []  # (k, stride, in channels, out channels, out height, out width) per encoder conv
        in_c, (h, w) = self.obs_shape[0], self.obs_shape[1:]
        for conv in convs:
            k, s = int(conv.kernel_size[0]), int(conv.stride[0])
            h, w = (h - k) // s + 1, (w - k) // s + 1
            if h < 1 or w < 1:
                raise ValueError(f"encoder leaves an empty latent for input {self.obs_shape}")
            self.geometry.append((k, s, in_c, conv.out_channels, h, w))
            in_c = conv.out_channels
        self.lat = (h, w, in_c)  # the latent, position-major
        self.enc_w = parameter_views(encoder)  # [W1, b1, W2, b2, ...], convs as (C', C·k·k) in torch's order
        self.tenc_w = parameter_views(target_encoder)
        self.trans_w = parameter_views(transition)  # W1 (C, (C+A)·k·k), b1, W2 (C, C·k·k), b2
        self.proj_w = parameter_views(projection)  # (dim, C·H·W) in torch's flatten order, bias
        self.pred_w = parameter_views(predictor)
        self.tproj_w = parameter_views(target_projection)
        modules = (encoder, transition, projection, predictor)
        self.flat = [np.zeros(sum(p.numel() for p in m.parameters()), np.float32) for m in modules]
        self.grads: list[np.ndarray] = []  # views of self.flat shaped like the weight views above
        for flat, m in zip(self.flat, modules, strict=True):
            offset = 0
            for p in m.parameters():
                view = flat[offset:offset + p.numel()]
                self.grads.append(view.reshape(p.shape[0], -1) if p.dim() >= 2 else view)
                offset += p.numel()
        # (kH, kW, C)-ordered copies of the weights of every layer that reads position-major activations:
        # name → (torch-ordered live view, input channels, kernel size); gradient buffers in that order
        self._perm_src: dict[str, tuple[np.ndarray, int, int]] = {}
        for i in range(1, len(self.geometry)):
            kk, _, ic, _, _, _ = self.geometry[i]
            self._perm_src[f"enc{i}"] = (self.enc_w[2 * i], ic, kk)
            self._perm_src[f"tenc{i}"] = (self.tenc_w[2 * i], ic, kk)
        self._perm_src["t1"] = (self.trans_w[0], in_c + self.n_actions, tk)
        self._perm_src["t2"] = (self.trans_w[2], in_c, tk)
        self._perm = {name: np.zeros_like(src) for name, (src, _, _) in self._perm_src.items()}
        self._gperm = {name: np.zeros_like(w) for name, w in self._perm.items() if not name.startswith("tenc")}
        self._online = _EncoderPass(self.geometry, 1)
        self._k = -1

    def _allocate(self, k: int) -> None:  # per-K buffers, made on the first call with that K
        lh, lw, c = self.lat
        n_pos, f32 = lh * lw, np.float32
        ckk1, ckk2 = (c + self.n_actions) * self.tk ** 2, c * self.tk ** 2
        dim = self.proj_w[0].shape[0]
        self._target = _EncoderPass(self.geometry, k)
        k0, _, c0, _, oh0, ow0 = self.geometry[0]
        # the first layer's patches of each frame, kept across calls: they depend on the frame only, and a frame
        # stays in the window for K+1 updates (K+2 slots: the K+1 frames of a call plus one to write a new one)
        self._frames = np.zeros((k + 2, *self.obs_shape), f32)
        self._frame_cols = np.zeros((k + 2, oh0 * ow0, c0 * k0 * k0), f32)
        self._slots: list[int] = []  # slot of each window position in the last call
        self.z = np.zeros((k + 1, lh, lw, c), f32)  # z[0] online latent of o_0, z[s+1] = h(z[s], a_s)
        self.cols1 = np.zeros((k, n_pos, ckk1), f32)
        self.cols2 = np.zeros((k, n_pos, ckk2), f32)
        self.v1, self.v2 = np.zeros((1, n_pos, c), f32), np.zeros((1, n_pos, c), f32)
        self.y1, self.y2 = np.zeros((k, n_pos * c), f32), np.zeros((k, n_pos * c), f32)
        self.a1 = np.zeros((k, lh, lw, c), f32)
        self.r1, self.r2 = np.zeros(k, np.float64), np.zeros(k, np.float64)
        self.zc, self.tzc = np.zeros((k, n_pos * c), f32), np.zeros((k, n_pos * c), f32)  # (C, H, W) order
        self.hid, self.yp, self.ap = (np.zeros((k, dim), f32) for _ in range(3))
        self.rp, self.trp = np.zeros(k, np.float64), np.zeros(k, np.float64)
        self.thid, self.tyh, self.tgt = (np.zeros((k, dim), f32) for _ in range(3))
        self.pred, self.dpred, self.dap = (np.zeros((k, dim), f32) for _ in range(3))
        self.dzc = np.zeros((k, n_pos * c), f32)
        self.dz = np.zeros((k + 1, lh, lw, c), f32)
        self.dv1, self.dv2 = np.zeros((k, n_pos, c), f32), np.zeros((k, n_pos, c), f32)
        self.dcols1, self.dcols2 = np.zeros((n_pos, ckk1), f32), np.zeros((n_pos, ckk2), f32)
        self.da1 = np.zeros((lh, lw, c), f32)
        self.dvs = [np.zeros((oh * ow, oc), f32) for _, _, _, oc, oh, ow in self.geometry]
        self.dcols = [np.zeros((oh * ow, ic * kk * kk), f32) for kk, _, ic, _, oh, ow in self.geometry]
        self._k = k

    def _frame_patches(self, obs: np.ndarray) -> list[int]:
        """The slot of ``self._frame_cols`` holding each frame's first-layer patches, computing only new frames."""
        slots = [-1] * obs.shape[0]
        for j in range(obs.shape[0]):  # the window moved one step: position j held frame j+1 last time
            if j + 1 < len(self._slots) and same_frame(self._frames[self._slots[j + 1]], obs[j]):
                slots[j] = self._slots[j + 1]
        free = [i for i in range(self._frames.shape[0]) if i not in slots]
        k0, s0 = self.geometry[0][:2]
        for j in range(obs.shape[0]):
            if slots[j] < 0:
                slots[j] = slot = free.pop()
                self._frames[slot] = obs[j]
                im2col_rows(obs[j:j + 1], k0, s0, self._frame_cols[slot:slot + 1])
        self._slots = slots
        return slots

    def _encode(self, slots: list[int], weights: list[np.ndarray], prefix: str, bufs: _EncoderPass) -> np.ndarray:
        """Forward of the encoder with ``weights`` over the frames in ``slots``; returns the last activations."""
        rows = len(slots)
        src = None
        for i, (k, s, _, _, _, _) in enumerate(self.geometry):
            v = bufs.v[i][:rows]
            if i == 0:  # one GEMM per frame on its kept patches
                for r, slot in enumerate(slots):
                    np.dot(self._frame_cols[slot], weights[0].T, out=v[r])
            else:
                cols = bufs.cols[i][:rows]
                im2col_ijc(src, k, s, cols)
                np.dot(cols.reshape(-1, cols.shape[2]), self._perm[f"{prefix}{i}"].T, out=v.reshape(-1, v.shape[2]))
            _bias_ln_rows(v, weights[2 * i + 1], bufs.y[i], bufs.a[i][:rows].reshape(rows, -1), bufs.rstd[i],
                          self.slope, self.eps)
            src = bufs.a[i][:rows]
        return src

    def gradients(self, obs: np.ndarray, actions: np.ndarray) -> tuple[float, list[np.ndarray]]:
        """(loss, flat gradients per module) for observations o_0..o_K (K+1, C, H, W) and actions a_0..a_{K−1}."""
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        actions = np.asarray(actions, dtype=np.int64).reshape(-1)
        k = actions.shape[0]
        if obs.shape[0] != k + 1 or k < 1:
            raise ValueError(f"need K+1 observations for K ≥ 1 actions, got {obs.shape[0]} and {k}")
        if obs.shape[1:] != self.obs_shape:
            raise ValueError(f"observations {obs.shape[1:]} != the encoder's input {self.obs_shape}")
        if actions.min() < 0 or actions.max() >= self.n_actions:
            raise ValueError(f"actions must be in [0, {self.n_actions}), got {actions.tolist()}")
        if k != self._k:
            self._allocate(k)
        for name, (src, n_in, kk) in self._perm_src.items():  # this call's weights, in (kH, kW, C) order
            to_ijc(src, n_in, kk, self._perm[name])
        slope, eps, tk, pad, n_act = self.slope, self.eps, self.tk, self.pad, self.n_actions
        lh, lw, c = self.lat
        n_pos = lh * lw
        tw1, tw2 = self._perm["t1"], self._perm["t2"]
        tb1, tb2 = self.trans_w[1], self.trans_w[3]
        wp, bp = self.proj_w
        wq, bq = self.pred_w
        # -- forward: online encoder on o_0, the transition model rolled with the actions taken ---------------
        slots = self._frame_patches(obs)
        self.z[0] = self._encode(slots[:1], self.enc_w, "enc", self._online)[0]
        v1, v2 = self.v1[0], self.v2[0]
        for s in range(k):
            im2col_same_ijc(self.z[s], int(actions[s]), n_act, tk, pad, self.cols1[s])
            np.dot(self.cols1[s], tw1.T, out=v1)
            _bias_ln_rows(self.v1, tb1, self.y1[s:s + 1], self.a1[s].reshape(1, -1), self.r1[s:s + 1], slope, eps)
            im2col_same_ijc(self.a1[s], 0, 0, tk, pad, self.cols2[s])
            np.dot(self.cols2[s], tw2.T, out=v2)
            _bias_ln_rows(self.v2, tb2, self.y2[s:s + 1], self.z[s + 1].reshape(1, -1), self.r2[s:s + 1], slope,
                          eps)
        # -- projection + predictor on the K rolled latents; the EMA targets of o_1..o_K, one GEMM per layer ------
        _hwc_to_chw(self.z[1:].reshape(k, n_pos, c), self.zc)
        linear_rows(self.zc, wp, bp, self.hid)
        _ln_rows(self.hid, self.yp, self.ap, self.rp, slope, eps)
        np.dot(self.ap, wq.T, out=self.pred)
        self.pred += bq
        tz = self._encode(slots[1:], self.tenc_w, "tenc", self._target)
        _hwc_to_chw(tz.reshape(k, n_pos, c), self.tzc)
        linear_rows(self.tzc, self.tproj_w[0], self.tproj_w[1], self.thid)
        _ln_rows(self.thid, self.tyh, self.tgt, self.trp, slope, eps)
        loss = cosine_loss_grad(self.pred, self.tgt, self.dpred)
        # -- reverse pass ------------------------------------------------------------------------------------
        n_enc = len(self.enc_w)
        g_enc, g_trans = self.grads[:n_enc], self.grads[n_enc:n_enc + 4]
        gwp, gbp, gwq, gbq = self.grads[n_enc + 4:]
        np.sum(self.dpred, axis=0, out=gbq)
        np.dot(self.dpred.T, self.ap, out=gwq)
        np.dot(self.dpred, wq, out=self.dap)
        for s in range(k):
            lrelu_ln_backward(self.dap[s], self.yp[s], self.rp[s], slope)
        np.sum(self.dap, axis=0, out=gbp)
        np.dot(self.dap.T, self.zc, out=gwp)
        np.dot(self.dap, wp, out=self.dzc)
        self.dz[0] = 0.0
        _chw_to_hwc(self.dzc, self.dz[1:].reshape(k, n_pos, c))
        for s in range(k - 1, -1, -1):  # dz[s+1] is complete: its projection and transition s+1 are done
            d2 = self.dv2[s]
            d2[:] = self.dz[s + 1].reshape(n_pos, c)
            lrelu_ln_backward(d2.reshape(-1), self.y2[s], self.r2[s], slope)
            np.dot(d2, tw2, out=self.dcols2)
            self.da1[:] = 0.0
            col2im_same_ijc_add(self.dcols2, tk, pad, 0, self.da1)
            d1 = self.dv1[s]
            d1[:] = self.da1.reshape(n_pos, c)
            lrelu_ln_backward(d1.reshape(-1), self.y1[s], self.r1[s], slope)
            np.dot(d1, tw1, out=self.dcols1)
            col2im_same_ijc_add(self.dcols1, tk, pad, n_act, self.dz[s])
        # the weight gradients of all K steps, one GEMM each
        g1, g2 = self._gperm["t1"], self._gperm["t2"]
        np.dot(self.dv1.reshape(-1, c).T, self.cols1.reshape(k * n_pos, -1), out=g1)
        from_ijc(g1, c + n_act, tk, g_trans[0])
        np.sum(self.dv1.reshape(-1, c), axis=0, out=g_trans[1])
        np.dot(self.dv2.reshape(-1, c).T, self.cols2.reshape(k * n_pos, -1), out=g2)
        from_ijc(g2, c, tk, g_trans[2])
        np.sum(self.dv2.reshape(-1, c), axis=0, out=g_trans[3])
        # the online encoder, from ∂/∂z[0]
        on = self._online
        last = len(self.geometry) - 1
        dv = self.dvs[last]
        dv[:] = self.dz[0].reshape(n_pos, c)
        lrelu_ln_backward(dv.reshape(-1), on.y[last][0], on.rstd[last][0], slope)
        for i in range(last, -1, -1):
            kk, st, ic, _, _, _ = self.geometry[i]
            if i == 0:
                np.dot(dv.T, self._frame_cols[slots[0]], out=g_enc[0])
            else:
                gp = self._gperm[f"enc{i}"]
                np.dot(dv.T, on.cols[i][0], out=gp)
                from_ijc(gp, ic, kk, g_enc[2 * i])
            np.sum(dv, axis=0, out=g_enc[2 * i + 1])
            if i > 0:
                np.dot(dv, self._perm[f"enc{i}"], out=self.dcols[i])
                prev = self.dvs[i - 1]
                col2im_ijc(self.dcols[i], kk, st, prev.reshape(on.a[i - 1].shape[1:]))
                lrelu_ln_backward(prev.reshape(-1), on.y[i - 1][0], on.rstd[i - 1][0], slope)
                dv = prev
        return float(loss), self.flat
