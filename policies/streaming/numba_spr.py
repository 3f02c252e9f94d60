"""A numba forward/backward of streaming SPR's loss on the MinAtar network, in one compiled call.

The loss (``policies.streaming.spr``): the online encoder embeds o_0, the transition model rolls the latent forward
with the K actions taken, projection + predictor map each ẑ_k to a prediction, and −Σ_k cos(prediction_k,
target_k) is taken against the EMA target encoder + projection of o_1..o_K. On MinAtar's 8×8 latent the torch
autograd version spends ~3 ms per update on ~60 op dispatches and the graph; here the whole forward and reverse
pass (~8 M multiply-adds) is one call over numpy views of the modules' weights (ObGD's and the EMA's in-place
updates show through).

Results match autograd to float32 rounding, not bit for bit (different summation order); deterministic for a
given machine and build.
"""

from __future__ import annotations

import numba
import numpy as np
from torch import nn

from policies.streaming.kernels import FASTMATH
from policies.streaming.numba_net import im2col, layer_norm_lrelu, lrelu_ln_backward


@numba.njit(cache=True, fastmath=FASTMATH)
def _im2col_same(x, k, cols):  # x (C, H, W), stride 1, zero padding (k−1)/2: cols[p*W+q, (c*k+i)*k+j]
    n_in, height, width = x.shape
    pad = (k - 1) // 2
    for p in range(height):
        for q in range(width):
            pq = p * width + q
            for c in range(n_in):
                for i in range(k):
                    r = p + i - pad
                    for j in range(k):
                        s = q + j - pad
                        inside = 0 <= r < height and 0 <= s < width
                        cols[pq, (c * k + i) * k + j] = x[c, r, s] if inside else np.float32(0.0)


@numba.njit(cache=True, fastmath=FASTMATH)
def _col2im_same_add(dcols, k, dx):  # dx[c, r, s] += the patches' entries for channels c < dx.shape[0]
    n_in, height, width = dx.shape
    pad = (k - 1) // 2
    for p in range(height):
        for q in range(width):
            pq = p * width + q
            for c in range(n_in):
                for i in range(k):
                    r = p + i - pad
                    if 0 <= r < height:
                        for j in range(k):
                            s = q + j - pad
                            if 0 <= s < width:
                                dx[c, r, s] += dcols[pq, (c * k + i) * k + j]


@numba.njit(cache=True, fastmath=FASTMATH)
def _conv(cols, w, b, out):  # out[o·P + pq] = w[o] · cols[pq] + b[o] (channel-major, as torch flattens)
    n_pos, n_patch = cols.shape
    for o in range(w.shape[0]):
        for pq in range(n_pos):
            acc = np.float32(0.0)
            for t in range(n_patch):
                acc += w[o, t] * cols[pq, t]
            out[o * n_pos + pq] = acc + b[o]


@numba.njit(cache=True, fastmath=FASTMATH)
def _conv_backward(d, cols, w, gw, gb, dcols, need_input):  # accumulates gw, gb; dcols = wᵀ d (overwritten)
    n_pos, n_patch = cols.shape
    for o in range(w.shape[0]):
        acc = np.float32(0.0)
        for pq in range(n_pos):
            dv = d[o * n_pos + pq]
            acc += dv
            for t in range(n_patch):
                gw[o, t] += dv * cols[pq, t]
        gb[o] += acc
    if need_input:
        dcols[:] = 0.0
        for pq in range(n_pos):
            for o in range(w.shape[0]):
                dv = d[o * n_pos + pq]
                for t in range(n_patch):
                    dcols[pq, t] += dv * w[o, t]


@numba.njit(cache=True, fastmath=FASTMATH)
def _linear(w, b, a, out):
    for j in range(w.shape[0]):
        acc = np.float32(0.0)
        for h in range(w.shape[1]):
            acc += w[j, h] * a[h]
        out[j] = acc + b[j]


@numba.njit(cache=True, fastmath=FASTMATH)
def _linear_backward_add(g, a, w, gw, gb, da):  # accumulates gW += g aᵀ, gb += g, da += Wᵀ g
    for j in range(w.shape[0]):
        gj = g[j]
        gb[j] += gj
        for h in range(w.shape[1]):
            gw[j, h] += gj * a[h]
            da[h] += w[j, h] * gj


@numba.njit(cache=True, fastmath=FASTMATH)
def _spr_loss_grad(obs, actions, n_actions, enc_k, enc_stride, lat_c, lat_h, lat_w, tk, slope, eps,
                   we, be, w1, b1, w2, b2, wp, bp, wq, bq, twe, tbe, twp, tbp,
                   gwe, gbe, gw1, gb1, gw2, gb2, gwp, gbp, gwq, gbq):
    n_steps = actions.shape[0]
    n_pos = lat_h * lat_w
    n_lat = lat_c * n_pos
    dim = wp.shape[0]
    f32 = np.float32
    # -- forward: online encoder on o_0 ------------------------------------------------------------------
    cols_e = np.empty((obs.shape[0], n_pos, we.shape[1]), f32)
    im2col(obs, enc_k, enc_stride, cols_e)
    v = np.empty(n_lat, f32)
    ye = np.empty(n_lat, f32)
    z = np.empty((n_steps + 1, n_lat), f32)
    _conv(cols_e[0], we, be, v)
    re = layer_norm_lrelu(v, ye, z[0], slope, eps)
    # -- transition model rolled with the actions taken ------------------------------------------------------
    x = np.zeros((lat_c + n_actions, lat_h, lat_w), f32)
    cols1 = np.empty((n_steps, n_pos, (lat_c + n_actions) * tk * tk), f32)
    cols2 = np.empty((n_steps, n_pos, lat_c * tk * tk), f32)
    y1 = np.empty((n_steps, n_lat), f32)
    a1 = np.empty((n_steps, n_lat), f32)
    y2 = np.empty((n_steps, n_lat), f32)
    r1 = np.empty(n_steps)
    r2 = np.empty(n_steps)
    for s in range(n_steps):
        x[:lat_c] = z[s].reshape(lat_c, lat_h, lat_w)
        x[lat_c:] = 0.0
        x[lat_c + actions[s]] = 1.0  # the action's one-hot plane
        _im2col_same(x, tk, cols1[s])
        _conv(cols1[s], w1, b1, v)
        r1[s] = layer_norm_lrelu(v, y1[s], a1[s], slope, eps)
        _im2col_same(a1[s].reshape(lat_c, lat_h, lat_w), tk, cols2[s])
        _conv(cols2[s], w2, b2, v)
        r2[s] = layer_norm_lrelu(v, y2[s], z[s + 1], slope, eps)
    # -- projection + predictor; the EMA targets of o_1..o_K -------------------------------------------------
    hid = np.empty(dim, f32)
    yp = np.empty((n_steps, dim), f32)
    ap = np.empty((n_steps, dim), f32)
    rp = np.empty(n_steps)
    pred = np.empty((n_steps, dim), f32)
    tgt = np.empty((n_steps, dim), f32)
    tz = np.empty(n_lat, f32)
    ty = np.empty(n_lat, f32)
    tyh = np.empty(dim, f32)
    for s in range(n_steps):
        _linear(wp, bp, z[s + 1], hid)
        rp[s] = layer_norm_lrelu(hid, yp[s], ap[s], slope, eps)
        _linear(wq, bq, ap[s], pred[s])
        _conv(cols_e[s + 1], twe, tbe, v)
        layer_norm_lrelu(v, ty, tz, slope, eps)
        _linear(twp, tbp, tz, hid)
        layer_norm_lrelu(hid, tyh, tgt[s], slope, eps)
    # -- loss −Σ cos(pred_k, target_k) and its gradient w.r.t. the predictions -------------------------------
    loss = 0.0
    dpred = np.empty((n_steps, dim), f32)
    for s in range(n_steps):
        pp = 0.0
        tt = 0.0
        pt = 0.0
        for j in range(dim):
            pp += pred[s, j] * pred[s, j]
            tt += tgt[s, j] * tgt[s, j]
            pt += pred[s, j] * tgt[s, j]
        pn = max(np.sqrt(pp), 1e-8)  # torch.cosine_similarity clamps each norm at eps = 1e-8
        tn = max(np.sqrt(tt), 1e-8)
        cos = pt / (pn * tn)
        loss -= cos
        for j in range(dim):
            dpred[s, j] = -(tgt[s, j] / (pn * tn) - cos * pred[s, j] / (pn * pn))
    # -- reverse pass -------------------------------------------------------------------------------------
    for g in (gwe, gw1, gw2, gwp, gwq):
        g[:] = 0.0
    for g in (gbe, gb1, gb2, gbp, gbq):
        g[:] = 0.0
    dz = np.zeros((n_steps + 1, n_lat), f32)
    dap = np.empty(dim, f32)
    for s in range(n_steps):
        dap[:] = 0.0
        _linear_backward_add(dpred[s], ap[s], wq, gwq, gbq, dap)
        lrelu_ln_backward(dap, yp[s], rp[s], slope)
        _linear_backward_add(dap, z[s + 1], wp, gwp, gbp, dz[s + 1])
    dcols1 = np.empty_like(cols1[0])
    dcols2 = np.empty_like(cols2[0])
    da1 = np.empty((lat_c, lat_h, lat_w), f32)
    d = np.empty(n_lat, f32)
    for s in range(n_steps - 1, -1, -1):  # dz[s+1] is complete: its projection and transition s+1 are done
        d[:] = dz[s + 1]
        lrelu_ln_backward(d, y2[s], r2[s], slope)
        _conv_backward(d, cols2[s], w2, gw2, gb2, dcols2, True)
        da1[:] = 0.0
        _col2im_same_add(dcols2, tk, da1)
        d[:] = da1.reshape(n_lat)
        lrelu_ln_backward(d, y1[s], r1[s], slope)
        _conv_backward(d, cols1[s], w1, gw1, gb1, dcols1, True)
        _col2im_same_add(dcols1, tk, dz[s].reshape(lat_c, lat_h, lat_w))  # the action planes take no gradient
    d[:] = dz[0]
    lrelu_ln_backward(d, ye, re, slope)
    _conv_backward(d, cols_e[0], we, gwe, gbe, dcols1, False)
    return loss


def _views(module: nn.Module) -> list[np.ndarray]:
    """Live numpy views of a module's parameters; conv weights as (out channels, C·k·k)."""
    arrays = []
    for p in module.parameters():
        a = p.detach().numpy()
        arrays.append(a.reshape(a.shape[0], -1) if a.ndim == 4 else a)
    return arrays


class NumbaSPRLoss:
    """SPR loss + its gradients for the MinAtar encoder (one conv) and ``policies.streaming.spr``'s heads.

    ``gradients(obs, actions)`` returns (loss, [flat gradient per module]) for the modules (encoder, transition,
    projection, predictor), each laid out as ``torch.cat([p.grad.reshape(-1) for p in module.parameters()])``.
    The returned arrays are reused by the next call.
    """

    def __init__(self, encoder: nn.Module, transition: nn.Module, projection: nn.Module, predictor: nn.Linear,
                 target_encoder: nn.Module, target_projection: nn.Module, latent_shape: tuple[int, int, int]) -> None:
        kinds = [type(m).__name__ for m in encoder.net]
        if kinds != ["Conv2d", "LayerNormNoAffine", "LeakyReLU"]:
            raise ValueError(f"NumbaSPRLoss handles the one-conv MinAtar encoder, got {kinds}")
        conv = encoder.net[0]
        if conv.padding != (0, 0) or conv.stride[0] != conv.stride[1] or conv.kernel_size[0] != conv.kernel_size[1]:
            raise ValueError("NumbaSPRLoss needs a square, unpadded, equal-stride encoder convolution")
        tk = transition.conv1.kernel_size[0]
        if transition.conv1.padding != ((tk - 1) // 2,) * 2 or tk % 2 == 0:
            raise ValueError("NumbaSPRLoss needs the transition model's odd, same-padded convolutions")
        self.enc_k, self.enc_stride, self.tk = int(conv.kernel_size[0]), int(conv.stride[0]), int(tk)
        self.n_actions = int(transition.n_actions)
        self.latent_shape = tuple(int(d) for d in latent_shape)
        self.slope, self.eps = float(encoder.net[2].negative_slope), 1e-5
        self.online = [*_views(encoder), *_views(transition), *_views(projection), *_views(predictor)]
        self.target = [*_views(target_encoder), *_views(target_projection)]
        modules = (encoder, transition, projection, predictor)
        self.flat = [np.zeros(sum(p.numel() for p in m.parameters()), np.float32) for m in modules]
        self.grads: list[np.ndarray] = []
        for flat, m in zip(self.flat, modules, strict=True):
            offset = 0
            for p in m.parameters():
                view = flat[offset:offset + p.numel()]
                self.grads.append(view.reshape(p.shape[0], -1) if p.dim() >= 2 else view)
                offset += p.numel()

    def gradients(self, obs: np.ndarray, actions: np.ndarray) -> tuple[float, list[np.ndarray]]:
        """(loss, flat gradients per module) for observations o_0..o_K (K+1, C, H, W) and actions a_0..a_{K−1}."""
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        actions = np.ascontiguousarray(actions, dtype=np.int64)
        if obs.shape[0] != actions.shape[0] + 1 or actions.shape[0] < 1:
            raise ValueError(f"need K+1 observations for K ≥ 1 actions, got {obs.shape[0]} and {actions.shape[0]}")
        if actions.min() < 0 or actions.max() >= self.n_actions:
            raise ValueError(f"actions must be in [0, {self.n_actions}), got {actions.tolist()}")
        lat_c, lat_h, lat_w = self.latent_shape
        loss = _spr_loss_grad(obs, actions, self.n_actions, self.enc_k, self.enc_stride, lat_c, lat_h, lat_w,
                              self.tk, self.slope, self.eps, *self.online, *self.target, *self.grads)
        return float(loss), self.flat

