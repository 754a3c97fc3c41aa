"""The engine area: the native module, every vendor backend, and the differential suites against
HAMi's own code (tests/hamigen, shared/tools/hami-oracle)."""


# The oracle suites' seed, printed so that a failing run can be replayed (tests/hamigen/seeding.py).
def pytest_terminal_summary(terminalreporter):
    if any(
        "test_hami_oracle" in r.nodeid for rs in terminalreporter.stats.values() for r in rs if hasattr(r, "nodeid")
    ):
        from hamigen.seeding import describe

        terminalreporter.write_line(describe())
