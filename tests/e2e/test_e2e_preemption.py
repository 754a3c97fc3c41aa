"""End-to-end: vGPU-aware preemption on the real control plane. A GPU full of a low-priority pod; a
high-priority pod that needs the whole GPU gets it: hami-fast evicts the low-priority pod through
the Eviction API, holds the GPU, nominates the node, and the pod binds there. A pod of equal
priority does not preempt. Opt-in, see conftest.py.

The pods ask for `nvidia.com/use-gputype: H100`: only this module's node has an H100, so the other
modules' nodes and pods play no part.
"""

from __future__ import annotations

from typing import Any

import pytest
from controlplane import ApiError, wait_for
from test_e2e_control_plane import (
    NS,
    _alive,
    device_plugin_allocate,
    events_for,
    get_pod,
    gpu_pod,
    make_node,
    pods_path,
    wait_bound,
)

GPU_MEM = 16384
H100 = {"nvidia.com/use-gputype": "H100"}


def pod(name: str, priority_class: str) -> dict[str, Any]:
    out = gpu_pod(name, node="pre-1", gpu=1, mem=GPU_MEM)
    out["metadata"]["annotations"] = dict(H100)
    out["spec"]["priorityClassName"] = priority_class
    return out


@pytest.fixture(scope="module")
def node(cluster):
    api = cluster.api
    api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}, exist_ok=True)
    for name, value in (("e2e-low", 10), ("e2e-high", 1000)):
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        api.create("/apis/scheduling.k8s.io/v1/priorityclasses", body, exist_ok=True)
    make_node(api, "pre-1", gpus=1, memory=GPU_MEM, gpu_type="NVIDIA-H100-SXM5-16GB")
    return "pre-1"


def gone(api, name: str) -> bool:
    try:
        found = get_pod(api, name)
    except ApiError as exc:
        return exc.status == 404
    return bool(found["metadata"].get("deletionTimestamp"))


def reasons_of(api, name: str) -> set[str]:
    return {e["reason"] for e in events_for(api, name)}


def test_a_high_priority_pod_evicts_the_low_priority_holder_and_binds_on_its_gpu(cluster, node):
    api = cluster.api
    api.create(pods_path(), pod("holder-low", "e2e-low"))
    device_plugin_allocate(api, wait_bound(cluster, "holder-low"))
    api.create(pods_path(), pod("same-low", "e2e-low"))
    api.create(pods_path(), pod("urgent", "e2e-high"))
    bound = wait_bound(cluster, "urgent", timeout=120)
    assert bound["spec"]["nodeName"] == node
    assert gone(api, "holder-low")
    # Events are posted in the background, after the eviction.
    wait_for("a Preempted event on the victim", lambda: "Preempted" in reasons_of(api, "holder-low"), timeout=30)
    wait_for("a Preempting event on the preemptor", lambda: "Preempting" in reasons_of(api, "urgent"), timeout=30)
    # The pod of equal priority evicted no one and is still pending.
    _alive(cluster)
    same = get_pod(api, "same-low")
    assert not same["spec"].get("nodeName") and not same["metadata"].get("deletionTimestamp")
    for name in ("urgent", "same-low"):
        api.delete(pods_path(name))
    wait_for("the module's pods gone", lambda: all(gone(api, n) for n in ("urgent", "same-low")), timeout=30)
