"""A numba forward/backward of streaming SPR's loss on the MinAtar network, in one compiled call.

The loss (``policies.streaming.spr``): the online encoder embeds o_0, the transition model rolls the latent forward
with the K actions taken, projection + predictor map each ẑ_k to a prediction, and −Σ_k cos(prediction_k,
target_k) is taken against the EMA target encoder + projection of o_1..o_K. On MinAtar's 8×8 latent the torch
autograd version spends ~3 ms per update on ~60 op dispatches and the graph; here the whole forward and reverse
pass (~8 M multiply-adds) is one call over numpy views of the modules' weights (ObGD's and the EMA's in-place
updates show through). Convolutions and linear layers are BLAS GEMMs over wide patches (``numba_net.im2col_wide``),
the projection/predictor/target layers batched over the K steps.

Results match autograd to float32 rounding, not bit for bit (different summation order); deterministic for a
given machine, build and BLAS thread count.
"""

from __future__ import annotations

import numba
import numpy as np
from torch import nn

from policies.streaming.kernels import FASTMATH
from policies.streaming.numba_net import (
    col2im_wide_add,
    from_wide,
    im2col_wide,
    layer_norm_lrelu,
    lrelu_ln_backward,
    to_wide,
)


@numba.njit(cache=True)
def _pad_into(v, n_ch, height, width, pad, xp):  # xp[c, p+pad, q+pad] = v[c·H·W + p·W + q]; the border is untouched
    for c in range(n_ch):
        for p in range(height):
            src = v[(c * height + p) * width:]
            dst = xp[c, p + pad, pad:]
            for q in range(width):
                dst[q] = src[q]


@numba.njit(cache=True)
def _unpad_add(xp, n_ch, height, width, pad, v):  # v[c·H·W + p·W + q] += xp[c, p+pad, q+pad] for channels < n_ch
    for c in range(n_ch):
        for p in range(height):
            src = xp[c, p + pad, pad:]
            dst = v[(c * height + p) * width:]
            for q in range(width):
                dst[q] += src[q]


@numba.njit(cache=True, fastmath=FASTMATH)
def _spr_loss_grad(obs, actions, n_actions, enc_k, enc_stride, lat_c, lat_h, lat_w, tk, slope, eps,
                   we, be, w1, b1, w2, b2, wp, bp, wq, bq, twe, tbe, twp, tbp,
                   gwe, gbe, gw1, gb1, gw2, gb2, gwp, gbp, gwq, gbq):
    n_steps = actions.shape[0]
    n_lat = lat_c * lat_h * lat_w
    dim = wp.shape[0]
    f32 = np.float32
    in_c, in_h, in_w = obs.shape[1], obs.shape[2], obs.shape[3]
    obs_flat = obs.reshape(obs.shape[0], in_c * in_h * in_w)
    len_e = (lat_h - 1) * in_w + lat_w  # the encoder's wide output length
    pad = (tk - 1) // 2
    hp, wpd = lat_h + 2 * pad, lat_w + 2 * pad  # the transition model's zero-padded latent
    len_t = (lat_h - 1) * wpd + lat_w
    n_in1 = lat_c + n_actions
    # -- forward: online encoder on o_0 ------------------------------------------------------------------
    cols_e = np.empty((in_c * enc_k * enc_k, len_e), f32)
    wide_e = np.empty((lat_c, len_e), f32)
    v = np.empty(n_lat, f32)
    ye = np.empty(n_lat, f32)
    z = np.empty((n_steps + 1, n_lat), f32)
    im2col_wide(obs_flat[0], in_c, in_h, in_w, enc_k, enc_stride, cols_e)
    np.dot(we, cols_e, wide_e)
    from_wide(wide_e, be, lat_h, lat_w, in_w, v)
    re = layer_norm_lrelu(v, ye, z[0], slope, eps)
    # -- transition model rolled with the actions taken (patches kept for the reverse pass) -----------------
    xp1 = np.zeros((n_in1, hp, wpd), f32)  # zero-padded input: latent channels, then the action planes
    xp2 = np.zeros((lat_c, hp, wpd), f32)
    cols1 = np.empty((n_in1 * tk * tk, len_t), f32)
    cols2 = np.empty((lat_c * tk * tk, len_t), f32)
    # every step's patches side by side, (C·k·k, K, L): the weight gradients of all K steps are then one GEMM each
    cols1_all = np.empty((n_in1 * tk * tk, n_steps, len_t), f32)
    cols2_all = np.empty((lat_c * tk * tk, n_steps, len_t), f32)
    wide_t = np.empty((lat_c, len_t), f32)
    y1 = np.empty((n_steps, n_lat), f32)
    a1 = np.empty((n_steps, n_lat), f32)
    y2 = np.empty((n_steps, n_lat), f32)
    r1 = np.empty(n_steps)
    r2 = np.empty(n_steps)
    for s in range(n_steps):
        _pad_into(z[s], lat_c, lat_h, lat_w, pad, xp1)
        xp1[lat_c:] = 0.0
        xp1[lat_c + actions[s], pad:pad + lat_h, pad:pad + lat_w] = 1.0  # the action's one-hot plane
        im2col_wide(xp1.reshape(n_in1 * hp * wpd), n_in1, hp, wpd, tk, 1, cols1)
        cols1_all[:, s, :] = cols1
        np.dot(w1, cols1, wide_t)
        from_wide(wide_t, b1, lat_h, lat_w, wpd, v)
        r1[s] = layer_norm_lrelu(v, y1[s], a1[s], slope, eps)
        _pad_into(a1[s], lat_c, lat_h, lat_w, pad, xp2)
        im2col_wide(xp2.reshape(lat_c * hp * wpd), lat_c, hp, wpd, tk, 1, cols2)
        cols2_all[:, s, :] = cols2
        np.dot(w2, cols2, wide_t)
        from_wide(wide_t, b2, lat_h, lat_w, wpd, v)
        r2[s] = layer_norm_lrelu(v, y2[s], z[s + 1], slope, eps)
    # -- projection + predictor on all K rolled latents at once; the EMA targets of o_1..o_K -----------------
    hid = np.empty((n_steps, dim), f32)
    yp = np.empty((n_steps, dim), f32)
    ap = np.empty((n_steps, dim), f32)
    rp = np.empty(n_steps)
    pred = np.empty((n_steps, dim), f32)
    np.dot(z[1:], wp.T, hid)
    for s in range(n_steps):
        hid[s] += bp
        rp[s] = layer_norm_lrelu(hid[s], yp[s], ap[s], slope, eps)
    np.dot(ap, wq.T, pred)
    for s in range(n_steps):
        pred[s] += bq
    tz = np.empty((n_steps, n_lat), f32)
    ty = np.empty(n_lat, f32)
    for s in range(n_steps):
        im2col_wide(obs_flat[s + 1], in_c, in_h, in_w, enc_k, enc_stride, cols_e)
        np.dot(twe, cols_e, wide_e)
        from_wide(wide_e, tbe, lat_h, lat_w, in_w, v)
        layer_norm_lrelu(v, ty, tz[s], slope, eps)
    np.dot(tz, twp.T, hid)
    tgt = np.empty((n_steps, dim), f32)
    tyh = np.empty(dim, f32)
    for s in range(n_steps):
        hid[s] += tbp
        layer_norm_lrelu(hid[s], tyh, tgt[s], slope, eps)
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
    # -- reverse pass (the weight gradients of the K rows as GEMMs; biases as column sums) -------------------
    gbq[:] = 0.0
    gbp[:] = 0.0
    for s in range(n_steps):
        gbq += dpred[s]
    np.dot(dpred.T, ap, gwq)
    dap = np.dot(dpred, wq)
    for s in range(n_steps):
        lrelu_ln_backward(dap[s], yp[s], rp[s], slope)
        gbp += dap[s]
    np.dot(dap.T, z[1:], gwp)
    dz = np.empty((n_steps + 1, n_lat), f32)
    dz[0] = 0.0
    np.dot(dap, wp, dz[1:])
    for g in (gb1, gb2):
        g[:] = 0.0
    dwide = np.empty((lat_c, len_t), f32)
    dwide1_all = np.empty((lat_c, n_steps, len_t), f32)  # the cotangents of every step, as cols*_all
    dwide2_all = np.empty((lat_c, n_steps, len_t), f32)
    dcols1 = np.empty((n_in1 * tk * tk, len_t), f32)
    dcols2 = np.empty((lat_c * tk * tk, len_t), f32)
    dxp1 = np.empty(n_in1 * hp * wpd, f32)
    dxp2 = np.empty(lat_c * hp * wpd, f32)
    d = np.empty(n_lat, f32)
    for s in range(n_steps - 1, -1, -1):  # dz[s+1] is complete: its projection and transition s+1 are done
        d[:] = dz[s + 1]
        lrelu_ln_backward(d, y2[s], r2[s], slope)
        to_wide(d, lat_h, lat_w, wpd, dwide)
        for o in range(lat_c):
            gb2[o] += dwide[o].sum()
        dwide2_all[:, s, :] = dwide
        np.dot(w2.T, dwide, dcols2)
        dxp2[:] = 0.0
        col2im_wide_add(dcols2, lat_c, hp, wpd, tk, 1, dxp2)
        d[:] = 0.0
        _unpad_add(dxp2.reshape(lat_c, hp, wpd), lat_c, lat_h, lat_w, pad, d)
        lrelu_ln_backward(d, y1[s], r1[s], slope)
        to_wide(d, lat_h, lat_w, wpd, dwide)
        for o in range(lat_c):
            gb1[o] += dwide[o].sum()
        dwide1_all[:, s, :] = dwide
        np.dot(w1.T, dwide, dcols1)
        dxp1[:] = 0.0
        col2im_wide_add(dcols1, n_in1, hp, wpd, tk, 1, dxp1)
        _unpad_add(dxp1.reshape(n_in1, hp, wpd), lat_c, lat_h, lat_w, pad, dz[s])  # action planes: no gradient
    n_cols = n_steps * len_t
    np.dot(dwide1_all.reshape(lat_c, n_cols), cols1_all.reshape(cols1_all.shape[0], n_cols).T, gw1)
    np.dot(dwide2_all.reshape(lat_c, n_cols), cols2_all.reshape(cols2_all.shape[0], n_cols).T, gw2)
    d[:] = dz[0]
    lrelu_ln_backward(d, ye, re, slope)
    to_wide(d, lat_h, lat_w, in_w, wide_e)
    for o in range(lat_c):
        gbe[o] = wide_e[o].sum()
    im2col_wide(obs_flat[0], in_c, in_h, in_w, enc_k, enc_stride, cols_e)  # o_0's patches (reused for targets)
    np.dot(wide_e, cols_e.T, gwe)
    return loss


def parameter_views(module: nn.Module) -> list[np.ndarray]:
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
        self.online = [*parameter_views(encoder), *parameter_views(transition), *parameter_views(projection),
                       *parameter_views(predictor)]
        self.target = [*parameter_views(target_encoder), *parameter_views(target_projection)]
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

