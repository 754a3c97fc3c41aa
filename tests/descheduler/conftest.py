"""The descheduler area: a registered two-node cluster on the test API server, pinning webhooks
closed after each test. The objects and helpers are in tests/descheduler_world.py."""

import pytest
from descheduler_world import close_pinners, node, pod


@pytest.fixture
def cluster(kubeapi):
    kubeapi.create(node("n1"))
    kubeapi.create(node("n2", unhealthy=(1,)))
    kubeapi.create(pod("old", "n1", 0, 4000))
    kubeapi.create(pod("busy", "n2", 0, 14000, app="other"))
    return kubeapi


@pytest.fixture(autouse=True)
def _close_pinners():
    yield
    close_pinners()
