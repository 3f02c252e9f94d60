"""Suite modules: each declares its suites, policies and trainers in ``SPECS``; the registry's table loads them."""
