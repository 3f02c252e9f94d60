"""Studies of the streaming line: one command per study (python -m sim_benchmarks.studies.streaming.<module>)."""
