"""Manipulation collection loops: expert demonstrations (SIMPLER and VLABench, with DAgger-driven episodes),
their resumable block cache, and the attribute scenes the prompt baselines train on.
"""
