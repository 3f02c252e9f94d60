"""Studies: one-off experiments per research line, apart from the evaluation harness. Each has one command."""
