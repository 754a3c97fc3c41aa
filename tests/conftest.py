"""Fixtures several areas share: the test Kubernetes API server and an API client on it.
Each area's own fixtures are in its conftest.py; helper modules here (k8s_objects, serving, ...)
are importable from every area (`pythonpath` in pyproject.toml)."""

import pytest
from hami_fast.kube.client import KubeClient, load_api_client
from kubeapi.fixtures import kubeapi, kubeapi_factory, kubeapi_tls  # noqa: F401  (test Kubernetes API server)


@pytest.fixture
def client(kubeapi) -> KubeClient:  # noqa: F811
    """hami_fast's API client on the test API server, unthrottled."""
    return KubeClient(load_api_client(kubeapi.kubeconfig), qps=0, burst=100, timeout=10)
