"""The ``backend`` option of the streaming learners: which implementation runs the network's forward/backward."""

from __future__ import annotations

from torch import nn

from envs.errors import choice_error
from policies.streaming.im2col_net import Im2colNetwork
from policies.streaming.numba_net import NumbaNetwork

BACKENDS = ("torch", "numba")


def compiled_network(backend: str, suite: str, net: nn.Module, obs_shape: tuple[int, ...]
                     ) -> NumbaNetwork | Im2colNetwork | None:
    """None for ``"torch"`` (the fused torch path of ``networks.py``); for ``"numba"`` the fully compiled
    :class:`NumbaNetwork` on MinAtar and the im2col/GEMM :class:`Im2colNetwork` on Atari and Octax."""
    if backend not in BACKENDS:
        raise choice_error("streaming backend", backend, list(BACKENDS))
    if backend == "torch":
        return None
    if suite == "minatar":
        return NumbaNetwork(net, tuple(obs_shape))
    return Im2colNetwork(net, tuple(obs_shape))
