"""Studies of the simpler line: one command per study (python -m sim_benchmarks.studies.simpler.<module>)."""
