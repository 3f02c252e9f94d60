"""Reference implementations of non-embodied methods (torch/numpy only), grouped by theme.

- ``lm_geometry/``: language-model geometry and embeddings (contextual curvature, ManifoldKV, SubspacePath pruning,
  InstEmb).
- ``training/``: training dynamics, quantisation and weight editing (LLR, RobuQ, HAMU, SPARD, Theseus).
- ``structured/``: structured prediction (DMANet, ConfSleepNet, GOTabPFN, Pseudo-Mallows, zero-shot classifier
  expansion).

Each method's experiment lives in ``sim_benchmarks/studies/aux/`` and runs with
``python -m sim_benchmarks.studies.aux METHOD --seeds 0-4 --out DIR``.
"""
