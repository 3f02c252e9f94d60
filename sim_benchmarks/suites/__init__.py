"""Suite modules: each registers its suites, policies and trainers when imported (see registry.load_all)."""
