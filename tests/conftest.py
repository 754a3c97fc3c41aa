"""Shared pytest wiring. Keep fixtures in their own modules and import them here."""

from kubeapi.fixtures import kubeapi, kubeapi_factory, kubeapi_tls  # noqa: F401  (test Kubernetes API server)


# ---- the oracle suite's seed (tests/hamigen/seeding.py, docs/compatibility.md) ----------------------
def pytest_terminal_summary(terminalreporter):
    if any(
        "test_hami_oracle" in r.nodeid for rs in terminalreporter.stats.values() for r in rs if hasattr(r, "nodeid")
    ):
        from hamigen.seeding import describe

        terminalreporter.write_line(describe())
