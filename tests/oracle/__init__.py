"""Plain-Python reference of HAMi's NVIDIA fit and score, used only by tests.

``explain(nodes, pods, quotas, pod, now, node_policy, gpu_policy)`` answers the same question as
``hami_fast._native.Cluster.explain`` and returns the same JSON object.
"""

from .hami import explain

__all__ = ["explain"]
