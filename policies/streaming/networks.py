"""Sparse initialisation, affine-free LayerNorm and the per-suite streaming networks.

Every hidden layer is ``layer → LayerNorm (no affine parameters, over all non-batch dims) → LeakyReLU``; weights
start from :func:`sparse_init_`. Encoders map (B, C, H, W) float observations to a spatial latent (B, C', H', W')
so SPR's transition model can act on it; heads flatten it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from envs.errors import choice_error


def sparse_init_(weight: torch.Tensor, sparsity: float, generator: torch.Generator) -> torch.Tensor:
    """Uniform ±1/√fan_in, then zero exactly ``round(sparsity·fan_in)`` incoming weights of every output unit."""
    out_units = weight.shape[0]
    fan_in = weight[0].numel()
    bound = 1.0 / math.sqrt(fan_in)
    n_zero = int(round(sparsity * fan_in))
    with torch.no_grad():
        flat = weight.view(out_units, fan_in)
        flat.uniform_(-bound, bound, generator=generator)
        for unit in range(out_units):  # a separate random subset per unit, as in the Stream-x recipe
            idx = torch.randperm(fan_in, generator=generator)[:n_zero]
            flat[unit, idx] = 0.0
    return weight


def init_module_(module: nn.Module, sparsity: float, generator: torch.Generator) -> None:
    """Sparse-initialise every Linear/Conv2d weight of ``module`` and zero its biases."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            sparse_init_(m.weight, sparsity, generator)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class LayerNormNoAffine(nn.Module):
    """LayerNorm over every non-batch dimension, without learnable scale or shift."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.layer_norm(x, x.shape[1:])  # the op itself, skipping F.layer_norm's Python wrapper


def _block(layer: nn.Module) -> list[nn.Module]:
    return [layer, LayerNormNoAffine(), nn.LeakyReLU(0.01)]


class Encoder(nn.Module):
    """A conv stack producing a spatial latent; ``latent_shape`` is (C', H', W') for the given input shape."""

    def __init__(self, in_shape: tuple[int, int, int], convs: list[tuple[int, int, int]]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = in_shape[0]
        for out_c, k, s in convs:
            layers += _block(nn.Conv2d(c, out_c, k, s))
            c = out_c
        self.net = nn.Sequential(*layers)
        try:
            with torch.no_grad():
                self.latent_shape = tuple(self.net(torch.zeros(1, *in_shape)).shape[1:])
        except RuntimeError:  # a kernel larger than what is left of the screen
            self.latent_shape = (0,)
        if any(d <= 0 for d in self.latent_shape):
            raise ValueError(f"encoder leaves an empty latent {self.latent_shape} for input {in_shape}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# Network presets per suite: (out_channels, kernel, stride) per conv, then the FC width.
# - stream_x: the Stream-x reference networks (MinAtar conv 16@3x3/1 -> FC 128, 132,179 parameters on Breakout;
#   Atari conv 32@8x8/5 -> 64@4x4/3 -> 64@3x3/2 -> FC 256, 144,804 parameters on Breakout's 4 actions).
# - nature: the DQN "Nature" encoder (8x8/4, 4x4/2, 3x3/1) -> FC 256 on Atari (882,084 parameters on Breakout).
# - octax: Octax screens are 32x64, where an 8x8/stride-4 stack leaves a zero-height latent, so 4x4/stride-2
#   kernels (latent 64x4x12).
PRESETS: dict[str, dict[str, tuple[tuple[tuple[int, int, int], ...], int]]] = {
    "minatar": {"stream_x": (((16, 3, 1),), 128)},
    "atari": {"nature": (((32, 8, 4), (64, 4, 2), (64, 3, 1)), 256),
              "stream_x": (((32, 8, 5), (64, 4, 3), (64, 3, 2)), 256)},
    "octax": {"octax": (((32, 4, 2), (64, 4, 2), (64, 3, 1)), 256)},
}
DEFAULT_PRESET = {"minatar": "stream_x", "atari": "nature", "octax": "octax"}


def preset_layers(suite: str, preset: str = "") -> tuple[tuple[tuple[int, int, int], ...], int]:
    """(convs, FC width) of ``preset`` on ``suite``; an empty preset is the suite's default."""
    if suite not in PRESETS:
        raise choice_error("network suite", suite, list(PRESETS))
    name = preset or DEFAULT_PRESET[suite]
    if name not in PRESETS[suite]:
        raise choice_error(f"network preset for {suite}", name, list(PRESETS[suite]))
    return PRESETS[suite][name]


def make_encoder(suite: str, obs_shape: tuple[int, int, int], preset: str = "") -> Encoder:
    """The streaming encoder for ``suite`` (``minatar``, ``atari`` or ``octax``) and network ``preset``."""
    convs, _ = preset_layers(suite, preset)
    return Encoder(tuple(obs_shape), list(convs))


class Head(nn.Module):
    """Flatten → FC hidden (LayerNorm, LeakyReLU) → linear outputs."""

    def __init__(self, latent_dim: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), *_block(nn.Linear(latent_dim, hidden)), nn.Linear(hidden, n_out))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class StreamNetwork(nn.Module):
    """Encoder + head: Q-values (n_out = actions), policy logits, or a state value (n_out = 1)."""

    def __init__(self, suite: str, obs_shape: tuple[int, int, int], n_out: int, sparsity: float = 0.9,
                 generator: torch.Generator | None = None, preset: str = "") -> None:
        super().__init__()
        self.encoder = make_encoder(suite, obs_shape, preset)
        self.hidden = preset_layers(suite, preset)[1]
        self.head = Head(math.prod(self.encoder.latent_shape), self.hidden, n_out)
        init_module_(self, sparsity, generator if generator is not None else torch.Generator().manual_seed(0))
        # oneDNN forward convs cost ~7x more than ATen's native kernel on MinAtar's 10×10 boards but win on the
        # Atari screen; backward passes use the native kernels everywhere (see fused_backward).
        self.use_mkldnn = suite != "minatar"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


@contextmanager
def mkldnn_enabled(enabled: bool) -> Iterator[None]:
    """Switch oneDNN convolutions on/off for a block (torch's public flags() context also resets TF32 and warns)."""
    prev = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(enabled)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(prev)


def flatten_parameters_(module: nn.Module) -> torch.Tensor:
    """Re-home every parameter of ``module`` as a view into one flat buffer and return that buffer.

    ObGD then updates traces and weights with a few whole-vector ops instead of one op per tensor.
    """
    params = list(module.parameters())
    flat = torch.zeros(sum(p.numel() for p in params))
    offset = 0
    for p in params:
        n = p.numel()
        flat[offset:offset + n].copy_(p.detach().reshape(-1))
        p.data = flat[offset:offset + n].view_as(p)
        offset += n
    return flat


class ForwardCache:
    """Activations of :func:`fused_forward` that :func:`fused_backward` needs (one entry per layer)."""

    def __init__(self) -> None:
        self.entries: list[tuple] = []


def _layer_plan(net: StreamNetwork) -> tuple[tuple[str, nn.Module], ...]:
    """(kind, layer) for every layer of ``net`` in order, built once per network (the per-step loop then does
    no isinstance checks)."""
    plan = getattr(net, "_fused_plan", None)
    if plan is None:
        kinds = {nn.Conv2d: "conv", LayerNormNoAffine: "ln", nn.LeakyReLU: "lrelu", nn.Flatten: "flatten",
                 nn.Linear: "linear"}
        layers = list(net.encoder.net) + list(net.head.net)
        unknown = [type(m).__name__ for m in layers if type(m) not in kinds]
        if unknown:  # pragma: no cover - StreamNetwork only holds the layers above
            raise TypeError(f"fused_forward cannot handle {unknown}")
        plan = tuple((kinds[type(m)], m) for m in layers)
        net._fused_plan = plan
    return plan


def fused_forward(net: StreamNetwork, x: torch.Tensor, cache: ForwardCache | None = None) -> torch.Tensor:
    """Forward of a :class:`StreamNetwork` without autograd, optionally recording what the backward needs."""
    record = cache.entries.append if cache is not None else None
    with torch.no_grad(), mkldnn_enabled(net.use_mkldnn):
        for kind, layer in _layer_plan(net):
            if kind == "conv":
                if record:
                    record(("conv", layer, x))
                x = F.conv2d(x, layer.weight, layer.bias, layer.stride)
            elif kind == "ln":
                shape = x.shape[1:]
                out, mean, rstd = torch.native_layer_norm(x, shape, None, None, 1e-5)
                if record:
                    record(("ln", shape, x, mean, rstd))
                x = out
            elif kind == "lrelu":
                if record:
                    record(("lrelu", layer.negative_slope, x))
                x = F.leaky_relu(x, layer.negative_slope)
            elif kind == "flatten":
                if record:
                    record(("flatten", x.shape))
                x = x.flatten(1)
            else:  # linear
                if record:
                    record(("linear", layer, x))
                x = F.linear(x, layer.weight, layer.bias)
    return x


def param_views(flat: torch.Tensor, module: nn.Module) -> list[torch.Tensor]:
    """Views into ``flat`` shaped like each parameter of ``module`` (a flat gradient buffer's per-tensor slots)."""
    views, offset = [], 0
    for p in module.parameters():
        views.append(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()
    return views


def fused_backward(cache: ForwardCache, grad_out: torch.Tensor, grad_views: list[torch.Tensor],
                   rows: slice = slice(0, 1), use_mkldnn: bool = False) -> None:
    """Write the gradients of ⟨grad_out, output[rows]⟩ w.r.t. the parameters into ``grad_views``.

    A hand-written reverse pass over the cached activations (restricted to batch ``rows``) with ATen's own
    backward kernels, writing straight into the flat gradient buffer: it skips the autograd graph, which
    dominates the cost of a batch-1 update on CPU. ``grad_views`` is :func:`param_views` of that buffer.
    ATen's native convolution backward is the default: at batch 1 it beat oneDNN's on the Atari and Octax
    encoders too in side-by-side timings, although oneDNN wins their forward.
    """
    with torch.no_grad(), mkldnn_enabled(use_mkldnn):
        _reverse_pass(cache, grad_out, grad_views, rows)


def _reverse_pass(cache: ForwardCache, grad_out: torch.Tensor, grad_views: list[torch.Tensor], rows: slice) -> None:
    aten = torch.ops.aten
    g = grad_out
    slot = len(grad_views)
    n_layers = len(cache.entries)
    for i, entry in enumerate(reversed(cache.entries)):
        first = i == n_layers - 1  # the input needs no gradient
        kind = entry[0]
        if kind == "linear":
            _, layer, x = entry
            slot -= 2
            torch.mm(g.t(), x[rows], out=grad_views[slot])
            torch.sum(g, 0, out=grad_views[slot + 1])
            if not first:
                g = g.mm(layer.weight)
        elif kind == "lrelu":
            _, slope, x = entry
            g = aten.leaky_relu_backward(g, x[rows], slope, False)
        elif kind == "ln":
            _, shape, x, mean, rstd = entry
            g = aten.native_layer_norm_backward(g, x[rows], shape, mean[rows], rstd[rows], None, None,
                                                [True, False, False])[0]
        elif kind == "flatten":
            g = g.view(g.shape[0], *entry[1][1:])
        elif kind == "conv":
            _, layer, x = entry
            slot -= 2
            gi, gw, gb = aten.convolution_backward(g, x[rows], layer.weight, [layer.out_channels], list(layer.stride),
                                                   [0, 0], [1, 1], False, [0, 0], 1, [not first, True, True])
            grad_views[slot].copy_(gw)
            grad_views[slot + 1].copy_(gb)
            g = gi
