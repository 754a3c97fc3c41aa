"""The server area: hami-fast serve in-process (tests/serving.py) or as its own process, against
the test API server."""

import pytest
from k8s_objects import gpu_node


@pytest.fixture
def one_gpu(kubeapi):
    """The test API server with node-0 holding one GPU of gpu_node's 16384 MiB."""
    kubeapi.create(gpu_node("node-0", gpus=1))
    return kubeapi
