"""Studies of the generic_vla line: one command per study (python -m sim_benchmarks.studies.generic_vla.<module>)."""
