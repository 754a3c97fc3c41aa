"""A Kubernetes API server for tests: real HTTP, in-memory state (test code only).

    from kubeapi import KubeAPIServer
    with KubeAPIServer() as api:
        api.write_kubeconfig("/tmp/kubeconfig")
        ...

See README.md (semantics, fault controls, known gaps) and ``kubeapi.fixtures`` (pytest fixtures).
"""

from .faults import Faults, RequestRecord, Rule
from .resources import PLACEMENT_GROUP, Registry, ResourceType
from .server import KubeAPIServer
from .store import ApiError, Store

__all__ = [
    "ApiError",
    "Faults",
    "KubeAPIServer",
    "PLACEMENT_GROUP",
    "Registry",
    "RequestRecord",
    "ResourceType",
    "Rule",
    "Store",
]
