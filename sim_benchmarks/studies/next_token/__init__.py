"""Studies of the next_token line: one command per study (python -m sim_benchmarks.studies.next_token.<module>)."""
