"""The benchmark statistics under their older name: they live in :mod:`envs.statistics` (the lowest layer, so every
layer may use them); this module keeps the studies that import ``sim_benchmarks.metrics`` working."""

from envs.statistics import iqm, stratified_bootstrap_ci, wilson_ci

__all__ = ["iqm", "stratified_bootstrap_ci", "wilson_ci"]
