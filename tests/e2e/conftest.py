"""End-to-end tests on a real control plane: opt-in.

Run them with `HAMI_FAST_E2E=1 python -m pytest tests/e2e` (or `python -m pytest tests/e2e --with-e2e`).
They need the binaries of scripts/build-control-plane.sh and helm (scripts/install-helm.sh); when
those are missing the tests skip, unless HAMI_FAST_E2E_REQUIRE=1 (CI), which makes that a failure.
Logs of every component land in the test's temporary folder, or in $HAMI_FAST_E2E_LOGS if set.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from controlplane import binaries_dir, find_helm, missing_binaries, running_cluster  # noqa: E402

HERE = Path(__file__).parent


def pytest_addoption(parser):
    parser.addoption(
        "--with-e2e", action="store_true", default=False, help="run the end-to-end tests on a real control plane"
    )


def _enabled(config) -> bool:
    return bool(config.getoption("--with-e2e", default=False)) or os.environ.get("HAMI_FAST_E2E") == "1"


def pytest_collection_modifyitems(config, items):
    if _enabled(config):
        return
    skip = pytest.mark.skip(reason="end-to-end tests are opt-in: HAMI_FAST_E2E=1 (or pytest tests/e2e --with-e2e)")
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)


def _unavailable(message: str):
    if os.environ.get("HAMI_FAST_E2E_REQUIRE") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    missing = missing_binaries()
    if missing:
        _unavailable(
            f"control-plane binaries missing in {binaries_dir()}: {', '.join(missing)} (run scripts/build-control-plane.sh)"
        )
    if not find_helm():
        _unavailable("helm not found (run scripts/install-helm.sh)")
    logs_env = os.environ.get("HAMI_FAST_E2E_LOGS")
    workdir = Path(logs_env) if logs_env else tmp_path_factory.mktemp("control-plane")
    if logs_env:
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
    with running_cluster(workdir) as c:
        yield c


# Side by side with HAMi's binary, KWOK scale.
def _workdir(tmp_path_factory, name: str) -> Path:
    logs_env = os.environ.get("HAMI_FAST_E2E_LOGS")
    if not logs_env:
        return tmp_path_factory.mktemp(name)
    # A sibling of the `cluster` fixture's folder, which that fixture empties when it starts.
    workdir = Path(f"{logs_env.rstrip('/')}-{name}")
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    return workdir


@pytest.fixture(scope="session")
def e2e_workdir(tmp_path_factory):
    """A fresh folder per control plane: `e2e_workdir("name")` ($HAMI_FAST_E2E_LOGS-name if set)."""
    return lambda name: _workdir(tmp_path_factory, name)


@pytest.fixture(scope="session")
def require_side_by_side():
    """The control plane, helm and HAMi's real scheduler binary (<repo>/../shared/tools/hami-scheduler)."""
    from sidebyside import hami_missing

    missing = missing_binaries()
    if missing:
        _unavailable(f"control-plane binaries missing in {binaries_dir()}: {', '.join(missing)}")
    if not find_helm():
        _unavailable("helm not found (run scripts/install-helm.sh)")
    reason = hami_missing()
    if reason:
        # HAMi's binary is a test tool next to the repo, not part of it: absent means skip, even in CI.
        pytest.skip(reason)


@pytest.fixture(scope="session")
def require_kwok(require_side_by_side):
    from sidebyside import kwok_missing

    if os.environ.get("HAMI_FAST_E2E_NO_KWOK") == "1":
        pytest.skip("KWOK could not be built here (HAMI_FAST_E2E_NO_KWOK=1, see .ci/run)")
    reason = kwok_missing()
    if reason:
        _unavailable(reason)
