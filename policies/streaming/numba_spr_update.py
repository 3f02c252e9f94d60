"""Streaming SPR's whole update on the MinAtar network as one compiled call (``backend=numba``, ``fused_spr``).

``numba_spr`` computes the SPR loss's gradients in one call and leaves the momentum projections, the SGD steps,
the encoder's RL-orthogonal step and the EMA to the agent (torch ops and one kernel per module). Here one call does
all of it except the target encoder's EMA (``kernels.ema_``, every step):

0. the target projection's EMA steps deferred since the last update (the agent defers them: the projection only
   changes in this update, so n EMA steps towards it are one step of weight 1 − τⁿ), in the target forward's pass;
1. the online encoder on o_0 and the transition model rolled with the K actions taken (as ``numba_spr``);
2. projection, predictor and the target projection as loops that read each weight row once for all K rows: at
   K = 5 the 1024×128 projection's products through OpenBLAS's small-M path cost ~45–60 µs each, the loop ~5–15;
3. the projection head's reverse pass fused with its momentum projection and SGD step in two passes over its
   weight (pass 1: the latent's cotangent, ⟨g, c⟩ and ‖c‖², with the weight gradient g made row by row and never
   written out; pass 2: g again, u = g − coef·c, θ += −α·w·u, c ← βc + (1−β)u);
4. the transition model's and encoder's reverse pass (as ``numba_spr``), the transition model's and predictor's
   momentum projection + step, and the encoder's: u from its momentum projection, v = −α·w·u made orthogonal to
   this step's RL update Δ_RL = step·z (or PCGrad), θ_enc += v.

Same maths as ``numba_spr`` + the agent's update; the summation order differs, so results match it to float32
rounding, not bit for bit. The reverse-pass helpers are copies of ``numba_spr``'s kernel, which is kept verbatim:
split into functions LLVM vectorises a few of its sums differently (measured: bias gradients differ in the last
bit), and runs begun on it must resume bit-identically.
"""

from __future__ import annotations

import numba
import numpy as np

from policies.streaming.kernels import FASTMATH, momentum_project_, momentum_project_step_
from policies.streaming.numba_net import (
    col2im_wide_add,
    from_wide,
    im2col_wide,
    layer_norm_lrelu,
    lrelu_ln_backward,
    to_wide,
)
from policies.streaming.numba_spr import NumbaSPRLoss, _pad_into, _unpad_add

# projection modes of the encoder's step (StreamSPRConfig.projection)
RL_NONE, RL_ORTHOGONAL, RL_PCGRAD = 0, 1, 2


@numba.njit(cache=True)
def _put_step(src, dst, s):  # dst[:, s, :] = src, as explicit row copies: numba's strided slice assignment with
    # runtime shapes took ~20 µs for one transition step's patches (13k floats), the loop ~1 µs
    for r in range(src.shape[0]):
        row = dst[r, s]
        srow = src[r]
        for t in range(srow.size):
            row[t] = srow[t]


@numba.njit(cache=True, fastmath=FASTMATH)
def encode_and_roll(obs_flat, actions, n_actions, in_c, in_h, in_w, enc_k, enc_stride, lat_c, lat_h, lat_w, tk,
                    slope, eps, we, be, w1, b1, w2, b2):
    """Online encoder on o_0, then the transition model rolled with the K actions taken: the latents z (K+1, n)
    and what the reverse pass keeps (LayerNorm outputs and rstds, every step's patches side by side)."""
    n_steps = actions.shape[0]
    n_lat = lat_c * lat_h * lat_w
    f32 = np.float32
    len_e = (lat_h - 1) * in_w + lat_w  # the encoder's wide output length
    pad = (tk - 1) // 2
    hp, wpd = lat_h + 2 * pad, lat_w + 2 * pad  # the transition model's zero-padded latent
    len_t = (lat_h - 1) * wpd + lat_w
    n_in1 = lat_c + n_actions
    cols_e = np.empty((in_c * enc_k * enc_k, len_e), f32)
    wide_e = np.empty((lat_c, len_e), f32)
    v = np.empty(n_lat, f32)
    ye = np.empty(n_lat, f32)
    z = np.empty((n_steps + 1, n_lat), f32)
    im2col_wide(obs_flat[0], in_c, in_h, in_w, enc_k, enc_stride, cols_e)
    np.dot(we, cols_e, wide_e)
    from_wide(wide_e, be, lat_h, lat_w, in_w, v)
    re = layer_norm_lrelu(v, ye, z[0], slope, eps)
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
        _put_step(cols1, cols1_all, s)
        np.dot(w1, cols1, wide_t)
        from_wide(wide_t, b1, lat_h, lat_w, wpd, v)
        r1[s] = layer_norm_lrelu(v, y1[s], a1[s], slope, eps)
        _pad_into(a1[s], lat_c, lat_h, lat_w, pad, xp2)
        im2col_wide(xp2.reshape(lat_c * hp * wpd), lat_c, hp, wpd, tk, 1, cols2)
        _put_step(cols2, cols2_all, s)
        np.dot(w2, cols2, wide_t)
        from_wide(wide_t, b2, lat_h, lat_w, wpd, v)
        r2[s] = layer_norm_lrelu(v, y2[s], z[s + 1], slope, eps)
    return z, ye, re, y1, r1, y2, r2, cols1_all, cols2_all


@numba.njit(cache=True, fastmath=FASTMATH)
def target_latents(obs_flat, in_c, in_h, in_w, enc_k, enc_stride, lat_c, lat_h, lat_w, slope, eps, twe, tbe):
    """The EMA target encoder's latents of o_1..o_K, (K, n)."""
    n_steps = obs_flat.shape[0] - 1
    n_lat = lat_c * lat_h * lat_w
    f32 = np.float32
    len_e = (lat_h - 1) * in_w + lat_w
    cols_e = np.empty((in_c * enc_k * enc_k, len_e), f32)
    wide_e = np.empty((lat_c, len_e), f32)
    v = np.empty(n_lat, f32)
    tz = np.empty((n_steps, n_lat), f32)
    ty = np.empty(n_lat, f32)
    for s in range(n_steps):
        im2col_wide(obs_flat[s + 1], in_c, in_h, in_w, enc_k, enc_stride, cols_e)
        np.dot(twe, cols_e, wide_e)
        from_wide(wide_e, tbe, lat_h, lat_w, in_w, v)
        layer_norm_lrelu(v, ty, tz[s], slope, eps)
    return tz


@numba.njit(cache=True, fastmath=FASTMATH)
def cosine_loss_grad(pred, tgt):
    """(−Σ_k cos(pred_k, target_k), its gradient w.r.t. the predictions)."""
    n_steps, dim = pred.shape
    loss = 0.0
    dpred = np.empty((n_steps, dim), np.float32)
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
    return loss, dpred


@numba.njit(cache=True, fastmath=FASTMATH)
def transition_encoder_backward(dz, obs_flat, n_actions, in_c, in_h, in_w, enc_k, enc_stride, lat_c, lat_h, lat_w,
                                tk, slope, ye, re, y1, r1, y2, r2, cols1_all, cols2_all, w1, w2,
                                gwe, gbe, gw1, gb1, gw2, gb2):
    """Reverse pass through the rolled transition model and the online encoder, given the cotangents dz[1..K] of
    the rolled latents (dz[0] is overwritten); the weight gradients of all K steps as one GEMM each."""
    n_steps = dz.shape[0] - 1
    n_lat = lat_c * lat_h * lat_w
    f32 = np.float32
    len_e = (lat_h - 1) * in_w + lat_w
    pad = (tk - 1) // 2
    hp, wpd = lat_h + 2 * pad, lat_w + 2 * pad
    len_t = (lat_h - 1) * wpd + lat_w
    n_in1 = lat_c + n_actions
    dz[0] = 0.0
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
        _put_step(dwide, dwide2_all, s)
        np.dot(w2.T, dwide, dcols2)
        dxp2[:] = 0.0
        col2im_wide_add(dcols2, lat_c, hp, wpd, tk, 1, dxp2)
        d[:] = 0.0
        _unpad_add(dxp2.reshape(lat_c, hp, wpd), lat_c, lat_h, lat_w, pad, d)
        lrelu_ln_backward(d, y1[s], r1[s], slope)
        to_wide(d, lat_h, lat_w, wpd, dwide)
        for o in range(lat_c):
            gb1[o] += dwide[o].sum()
        _put_step(dwide, dwide1_all, s)
        np.dot(w1.T, dwide, dcols1)
        dxp1[:] = 0.0
        col2im_wide_add(dcols1, n_in1, hp, wpd, tk, 1, dxp1)
        _unpad_add(dxp1.reshape(n_in1, hp, wpd), lat_c, lat_h, lat_w, pad, dz[s])  # action planes: no gradient
    n_cols = n_steps * len_t
    np.dot(dwide1_all.reshape(lat_c, n_cols), cols1_all.reshape(cols1_all.shape[0], n_cols).T, gw1)
    np.dot(dwide2_all.reshape(lat_c, n_cols), cols2_all.reshape(cols2_all.shape[0], n_cols).T, gw2)
    cols_e = np.empty((in_c * enc_k * enc_k, len_e), f32)
    wide_e = np.empty((lat_c, len_e), f32)
    d[:] = dz[0]
    lrelu_ln_backward(d, ye, re, slope)
    to_wide(d, lat_h, lat_w, in_w, wide_e)
    for o in range(lat_c):
        gbe[o] = wide_e[o].sum()
    im2col_wide(obs_flat[0], in_c, in_h, in_w, enc_k, enc_stride, cols_e)  # o_0's patches
    np.dot(wide_e, cols_e.T, gwe)


@numba.njit(cache=True, fastmath=FASTMATH)
def rows_linear(x, w, b, out):
    """out[r] = w·x[r] + b for every row r of x; each row of w is read once for all rows."""
    for j in range(w.shape[0]):
        wj = w[j]
        for r in range(x.shape[0]):
            xr = x[r]
            acc = np.float32(0.0)
            for i in range(xr.size):
                acc += xr[i] * wj[i]
            out[r, j] = acc + b[j]


@numba.njit(cache=True, fastmath=FASTMATH)
def ema_rows_linear(x, w, b, src_w, src_b, weight, out):
    """:func:`rows_linear` after the EMA step (w, b) ← (w, b) + weight·((src_w, src_b) − (w, b)) (``kernels.ema_``'s
    arithmetic), made row by row in the same pass over w; weight 0 skips it."""
    a = np.float32(weight)
    for j in range(w.shape[0]):
        wj = w[j]
        if weight != 0.0:
            sj = src_w[j]
            for i in range(wj.size):
                wj[i] += a * (sj[i] - wj[i])
            b[j] += a * (src_b[j] - b[j])
        for r in range(x.shape[0]):
            xr = x[r]
            acc = np.float32(0.0)
            for i in range(xr.size):
                acc += xr[i] * wj[i]
            out[r, j] = acc + b[j]


@numba.njit(cache=True, fastmath=FASTMATH)
def _grad_row(dy, x, j, g):  # g = Σ_r dy[r, j]·x[r]: row j of the weight gradient dyᵀ·x
    # rows taken four at a time, so g is written once per four rows instead of once per row (a store-bound loop)
    n_rows = dy.shape[0]
    r = 0
    while r + 4 <= n_rows:
        a0, a1, a2, a3 = dy[r, j], dy[r + 1, j], dy[r + 2, j], dy[r + 3, j]
        x0, x1, x2, x3 = x[r], x[r + 1], x[r + 2], x[r + 3]
        if r == 0:
            for i in range(g.size):
                g[i] = a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i]
        else:
            for i in range(g.size):
                g[i] += a0 * x0[i] + a1 * x1[i] + a2 * x2[i] + a3 * x3[i]
        r += 4
    while r < n_rows:
        a0 = dy[r, j]
        x0 = x[r]
        if r == 0:
            for i in range(g.size):
                g[i] = a0 * x0[i]
        else:
            for i in range(g.size):
                g[i] += a0 * x0[i]
        r += 1


@numba.njit(cache=True, fastmath=FASTMATH)
def _bias_grad(dy, gb):  # gb = Σ_r dy[r]
    for j in range(gb.size):
        acc = dy[0, j]
        for r in range(1, dy.shape[0]):
            acc += dy[r, j]
        gb[j] = acc


@numba.njit(cache=True, fastmath=FASTMATH)
def _input_grad_rows(dy, w, j, n_j, dx):  # dx[r] += Σ_{j ≤ l < j+n_j} dy[r, l]·w[l] for every row r (n_j ≤ 4)
    for r in range(dy.shape[0]):
        dxr = dx[r]
        if n_j == 4:  # four weight rows per pass over dx[r]: one load and store of dx per four
            a0, a1, a2, a3 = dy[r, j], dy[r, j + 1], dy[r, j + 2], dy[r, j + 3]
            w0, w1, w2, w3 = w[j], w[j + 1], w[j + 2], w[j + 3]
            for i in range(dxr.size):
                dxr[i] += a0 * w0[i] + a1 * w1[i] + a2 * w2[i] + a3 * w3[i]
        else:
            for jj in range(j, j + n_j):
                a = dy[r, jj]
                wl = w[jj]
                for i in range(dxr.size):
                    dxr[i] += a * wl[i]


@numba.njit(cache=True, fastmath=FASTMATH)
def rows_linear_backward(dy, x, w, gw, gb, dx):
    """Gradients of out = x·wᵀ + b given dy: gw = dyᵀ·x, gb = Σ_r dy[r], dx = dy·w (one pass over w and gw)."""
    _bias_grad(dy, gb)
    dx[:] = 0.0
    for j in range(w.shape[0]):
        _grad_row(dy, x, j, gw[j])
    for j in range(0, w.shape[0], 4):
        _input_grad_rows(dy, w, j, min(4, w.shape[0] - j), dx)


@numba.njit(cache=True, fastmath=FASTMATH)
def linear_backward_step(dy, x, w, b, cw, cb, beta, eps, alpha, use_momentum, dx):
    """Reverse pass of out = x·wᵀ + b given dy, with the parameter gradient (g = dyᵀ·x, Σ_r dy[r]) consumed as it
    is made, never written out: dx = dy·w (weights before the step), then the step θ += α·u where u is g's
    momentum projection u = g − (⟨g,c⟩/(‖c‖²+eps))·c with c ← βc + (1−β)u (``kernels.momentum_project_step_``'s
    maths), or u = g without momentum. Two passes over w and c: the projection needs ⟨g,c⟩ first, taken as
    Σ_r dy[r]·(c·x[r]) so that pass 1 need not form g."""
    n_out, n_in = w.shape
    n_rows = dy.shape[0]
    g = np.empty(n_in, np.float32)
    gb = np.empty(n_out, np.float32)
    _bias_grad(dy, gb)
    dx[:] = 0.0
    gc = 0.0
    cc = 0.0
    for j in range(n_out):  # pass 1: dx and the projection's two sums
        if j % 4 == 0:
            _input_grad_rows(dy, w, j, min(4, n_out - j), dx)
        if use_momentum:
            cj = cw[j]
            c2 = np.float32(0.0)
            for i in range(n_in):
                c2 += cj[i] * cj[i]
            cc += c2
            for r in range(n_rows):
                xr = x[r]
                q = np.float32(0.0)
                for i in range(n_in):
                    q += cj[i] * xr[i]
                gc += dy[r, j] * q
    a = np.float32(alpha)
    coef = np.float32(0.0)
    if use_momentum:
        for j in range(n_out):
            gc += gb[j] * cb[j]
            cc += cb[j] * cb[j]
        coef = np.float32(gc / (cc + eps))
    keep, mix = np.float32(beta), np.float32(1.0 - beta)
    for j in range(n_out):  # pass 2: g again, its projection and the step
        _grad_row(dy, x, j, g)
        wj = w[j]
        if use_momentum:
            cj = cw[j]
            for i in range(n_in):
                u = g[i] - coef * cj[i]
                wj[i] += a * u
                cj[i] = keep * cj[i] + mix * u
        else:
            for i in range(n_in):
                wj[i] += a * g[i]
    for j in range(n_out):
        if use_momentum:
            u = gb[j] - coef * cb[j]
            b[j] += a * u
            cb[j] = keep * cb[j] + mix * u
        else:
            b[j] += a * gb[j]


@numba.njit(cache=True, fastmath=FASTMATH)
def step_module(g, c, params, beta, eps, alpha, use_momentum):
    """params += α·u, u = g's momentum projection against c (updated) or g itself."""
    if use_momentum:
        momentum_project_step_(g, c, beta, eps, params, alpha)
    else:
        a = np.float32(alpha)
        for i in range(g.size):
            params[i] += a * g[i]


@numba.njit(cache=True, fastmath=FASTMATH)
def encoder_step(g, c, beta, eps, alpha, use_momentum, trace, rl_scale, mode, params, v):
    """The encoder's SPR step: v = α·u (u: g's momentum projection, or g), made orthogonal to the RL update
    Δ_RL = rl_scale·trace (``RL_ORTHOGONAL``: always; ``RL_PCGRAD``: only when ⟨v, Δ_RL⟩ < 0), then params += v."""
    if use_momentum:
        momentum_project_(g, c, beta, eps, v)
    else:
        v[:] = g
    a = np.float32(alpha)
    for i in range(v.size):
        v[i] = v[i] * a
    if mode != RL_NONE:
        r = np.float32(rl_scale)
        dd = 0.0
        vd = 0.0
        for i in range(v.size):
            d = trace[i] * r
            dd += d * d
            vd += v[i] * d
        if dd > 1e-30 and (mode == RL_ORTHOGONAL or vd < 0.0):
            coef = np.float32(vd / dd)
            for i in range(v.size):
                v[i] = v[i] - coef * (trace[i] * r)
    for i in range(v.size):
        params[i] += v[i]


@numba.njit(cache=True)
def _split(flat, n_out, n_in):  # a Linear/conv block of a flat vector: (weight (n_out, n_in), bias (n_out))
    n = n_out * n_in
    return flat[:n].reshape(n_out, n_in), flat[n:n + n_out]


@numba.njit(cache=True, fastmath=FASTMATH)
def spr_update(obs, actions, dims, fp, enc, tr, proj, pred, tenc, tproj, g_enc, g_tr, g_pred,
               c_enc, c_tr, c_proj, c_pred, trace_enc, v_enc):
    """One SPR update on window (o_0..o_K, a_0..a_{K−1}); returns the loss. ``dims``: in_c, in_h, in_w, enc_k,
    enc_stride, lat_c, lat_h, lat_w, tk, n_actions, dim, mode, use_momentum; ``fp``: slope, LN eps, β, α (the
    signed step −lr·w), rl_scale, momentum eps, the weight of the target projection's deferred EMA (0: none).
    Module vectors are flat, each laid out as its parameters()."""
    in_c, in_h, in_w, enc_k, enc_stride = dims[0], dims[1], dims[2], dims[3], dims[4]
    lat_c, lat_h, lat_w, tk, n_actions, dim = dims[5], dims[6], dims[7], dims[8], dims[9], dims[10]
    mode, use_momentum = dims[11], dims[12] != 0
    slope, eps, beta, alpha, rl_scale, m_eps, ema_w = fp[0], fp[1], fp[2], fp[3], fp[4], fp[5], fp[6]
    n_steps = actions.shape[0]
    for s in range(n_steps):
        if actions[s] < 0 or actions[s] >= n_actions:
            return np.nan  # nothing touched; the caller reports the bad action
    n_lat = lat_c * lat_h * lat_w
    n1, n2 = (lat_c + n_actions) * tk * tk, lat_c * tk * tk
    f32 = np.float32
    obs_flat = obs.reshape(obs.shape[0], in_c * in_h * in_w)
    we, be = _split(enc, lat_c, in_c * enc_k * enc_k)
    w1, b1 = _split(tr, lat_c, n1)
    w2, b2 = _split(tr[lat_c * (n1 + 1):], lat_c, n2)
    wp, bp = _split(proj, dim, n_lat)
    wq, bq = _split(pred, dim, dim)
    twe, tbe = _split(tenc, lat_c, in_c * enc_k * enc_k)
    twp, tbp = _split(tproj, dim, n_lat)
    gwe, gbe = _split(g_enc, lat_c, in_c * enc_k * enc_k)
    gw1, gb1 = _split(g_tr, lat_c, n1)
    gw2, gb2 = _split(g_tr[lat_c * (n1 + 1):], lat_c, n2)
    gwq, gbq = _split(g_pred, dim, dim)
    cwp, cbp = _split(c_proj, dim, n_lat)
    z, ye, re, y1, r1, y2, r2, cols1_all, cols2_all = encode_and_roll(
        obs_flat, actions, n_actions, in_c, in_h, in_w, enc_k, enc_stride, lat_c, lat_h, lat_w, tk, slope, eps,
        we, be, w1, b1, w2, b2)
    # -- projection + predictor on the K rolled latents, the target projection of o_1..o_K: weight-once loops ------
    z1 = z[1:]
    hid = np.empty((n_steps, dim), f32)
    yp = np.empty((n_steps, dim), f32)
    ap = np.empty((n_steps, dim), f32)
    rp = np.empty(n_steps)
    prd = np.empty((n_steps, dim), f32)
    rows_linear(z1, wp, bp, hid)
    for s in range(n_steps):
        rp[s] = layer_norm_lrelu(hid[s], yp[s], ap[s], slope, eps)
    rows_linear(ap, wq, bq, prd)
    tz = target_latents(obs_flat, in_c, in_h, in_w, enc_k, enc_stride, lat_c, lat_h, lat_w, slope, eps, twe, tbe)
    ema_rows_linear(tz, twp, tbp, wp, bp, ema_w, hid)  # the target projection's deferred EMA steps first
    tgt = np.empty((n_steps, dim), f32)
    tyh = np.empty(dim, f32)
    for s in range(n_steps):
        layer_norm_lrelu(hid[s], tyh, tgt[s], slope, eps)
    loss, dpred = cosine_loss_grad(prd, tgt)
    # -- reverse pass; every gradient is taken before any parameter moves -------------------------------------
    dap = np.empty((n_steps, dim), f32)
    rows_linear_backward(dpred, ap, wq, gwq, gbq, dap)
    for s in range(n_steps):
        lrelu_ln_backward(dap[s], yp[s], rp[s], slope)
    dz = np.empty((n_steps + 1, n_lat), f32)
    # the projection's gradient is consumed by its momentum projection and step as it is made (its dz first)
    linear_backward_step(dap, z1, wp, bp, cwp, cbp, beta, m_eps, alpha, use_momentum, dz[1:])
    transition_encoder_backward(dz, obs_flat, n_actions, in_c, in_h, in_w, enc_k, enc_stride, lat_c, lat_h, lat_w,
                                tk, slope, ye, re, y1, r1, y2, r2, cols1_all, cols2_all, w1, w2,
                                gwe, gbe, gw1, gb1, gw2, gb2)
    step_module(g_tr, c_tr, tr, beta, m_eps, alpha, use_momentum)
    step_module(g_pred, c_pred, pred, beta, m_eps, alpha, use_momentum)
    encoder_step(g_enc, c_enc, beta, m_eps, alpha, use_momentum, trace_enc, rl_scale, mode, enc, v_enc)
    return loss


class FusedSPRUpdate:
    """Streaming SPR's update (loss, reverse pass, projections, steps) on the MinAtar network in one call.

    Built on a ``NumbaSPRLoss`` (which has checked the network and holds its geometry) and the agent's flat vectors
    (numpy views, updated in place): the encoder's part of the Q network's vector, the heads' vectors (transition,
    projection, predictor), the targets' (encoder, projection) and the four momentum buffers.
    """

    def __init__(self, loss: NumbaSPRLoss, encoder: np.ndarray, heads: list[np.ndarray],
                 targets: list[np.ndarray], momentum: list[np.ndarray], projection: int, use_momentum: bool,
                 beta: float, alpha: float) -> None:
        lat_c, lat_h, lat_w = loss.latent_shape
        dim = int(loss.online[8].shape[0])  # the predictor's width
        vectors = [encoder, *heads, *targets, *momentum]
        if any(v.dtype != np.float32 or v.ndim != 1 or not v.flags.c_contiguous for v in vectors):
            raise ValueError("FusedSPRUpdate needs contiguous float32 vectors")
        sizes = [encoder.size, *(h.size for h in heads)]
        if [t.size for t in targets] != [sizes[0], sizes[2]] or [c.size for c in momentum] != sizes:
            raise ValueError("FusedSPRUpdate: target or momentum vectors do not match the modules")
        n_online = [sum(a.size for a in loss.online[i:j]) for i, j in ((0, 2), (2, 6), (6, 8), (8, 10))]
        if n_online != sizes:
            raise ValueError(f"FusedSPRUpdate: module sizes {sizes} differ from the loss's {n_online}")
        self.loss_geometry = loss
        self.encoder, self.heads, self.targets, self.momentum = encoder, heads, targets, momentum
        self.grads = [np.zeros(sizes[0], np.float32), np.zeros(sizes[1], np.float32), np.zeros(sizes[3], np.float32)]
        self.v_enc = np.zeros(sizes[0], np.float32)
        self.projection, self.use_momentum = int(projection), bool(use_momentum)
        self.beta, self.alpha = float(beta), float(alpha)
        self.n_actions = int(loss.n_actions)
        self._dims = np.array([0, 0, 0, loss.enc_k, loss.enc_stride, lat_c, lat_h, lat_w, loss.tk, self.n_actions,
                               dim, self.projection, int(self.use_momentum)], np.int64)
        self._fp = np.array([loss.slope, loss.eps, self.beta, self.alpha, 0.0, 1e-12, 0.0])

    def update(self, obs: np.ndarray, actions: np.ndarray, trace_enc: np.ndarray, rl_scale: float,
               ema_weight: float = 0.0) -> float:
        """Apply one SPR update for observations o_0..o_K (K+1, C, H, W) float32 and actions a_0..a_{K−1} (int64);
        ``trace_enc`` is the encoder's part of the eligibility trace and ``rl_scale`` this step's ObGD step size
        (Δ_RL = rl_scale·trace_enc); ``ema_weight`` > 0 first moves the target projection that far towards the
        projection (the EMA steps deferred since the projection last changed). Returns the loss (before the
        update). Per-step path: the checks are the kernel's (actions) and these few shape tests."""
        if obs.dtype != np.float32 or actions.dtype != np.int64 or obs.ndim != 4 or \
                obs.shape[0] != actions.shape[0] + 1 or actions.shape[0] < 1:
            raise ValueError(f"need K+1 float32 observations (K+1, C, H, W) for K ≥ 1 int64 actions, got "
                             f"{obs.dtype} {obs.shape} and {actions.dtype} {actions.shape}")
        self._dims[:3] = obs.shape[1:]
        self._fp[4] = rl_scale
        self._fp[6] = ema_weight
        loss = spr_update(obs, actions, self._dims, self._fp, self.encoder, *self.heads, *self.targets,
                          *self.grads, *self.momentum, trace_enc, self.v_enc)
        if loss != loss and (actions.min() < 0 or actions.max() >= self.n_actions):  # the kernel's refusal
            raise ValueError(f"actions must be in [0, {self.n_actions}), got {actions.tolist()}")
        return float(loss)
