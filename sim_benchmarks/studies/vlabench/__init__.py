"""Studies of Personalized-VLABench: one command per study (python -m launch.study vlabench.<module>)."""
