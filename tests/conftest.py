"""Fixtures several areas share: the test Kubernetes API server and an API client on it.
Each area's own fixtures are in its conftest.py; helper modules here (k8s_objects, serving, ...)
are importable from every area (`pythonpath` in pyproject.toml)."""

import logging

import pytest
from hami_fast.kube.client import KubeClient, load_api_client
from hami_fast.server import logs
from kubeapi.fixtures import kubeapi, kubeapi_factory, kubeapi_tls  # noqa: F401  (test Kubernetes API server)


@pytest.fixture
def client(kubeapi) -> KubeClient:  # noqa: F811
    """hami_fast's API client on the test API server, unthrottled."""
    return KubeClient(load_api_client(kubeapi.kubeconfig), qps=0, burst=100, timeout=10)


@pytest.fixture(autouse=True)
def root_logging_restored():
    """Commands run in-process set the root logger up (a handler on the stderr pytest captured, then
    closes): take it off again, or later tests log into a closed stream."""
    root = logging.getLogger()
    level = root.level
    yield
    ours = tuple(logs.FORMATS.values())
    root.handlers[:] = [h for h in root.handlers if not isinstance(h.formatter, ours)]
    root.setLevel(level)
