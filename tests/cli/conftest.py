"""The cli area: `hami-fast` and `kubectl hami` as a user runs them (explain, why, top, the first ten
minutes), on snapshot files or against the test API server (`kubeapi`, tests/conftest.py)."""
