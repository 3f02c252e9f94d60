"""Studies of the vap line: one command per study (python -m sim_benchmarks.studies.vap.<module>)."""
