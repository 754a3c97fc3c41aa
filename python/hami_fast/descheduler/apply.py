"""Apply mode of `hami-fast plan`: one HamiPodPlacement per move, in order, rate limited, each
waited on until Completed (a Failed move stops the run: later moves assumed it had happened)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast.descheduler import kube as k
from hami_fast.kube.client import KubeClient

log = logging.getLogger("hami_fast.descheduler.apply")

# Labels a controller sets per pod (a replacement gets new values), and the one the scheduler's
# Filter adds (as HAMi does): a replacement has none of them at admission, so they are not selected on.
VOLATILE_LABELS = (
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "batch.kubernetes.io/job-completion-index",
    "hami.io/vgpu-node",
)


def placement_for(move: dict[str, Any], pod: dict[str, Any], req_id: str) -> dict[str, Any]:
    namespace, name = move["pod"].split("/", 1)
    labels = {
        key: value
        for key, value in ((pod.get("metadata") or {}).get("labels") or {}).items()
        if key not in VOLATILE_LABELS
    }
    if not labels:
        raise ValueError(f"pod {move['pod']} has no labels: a placement needs a podSelector")
    return {
        "apiVersion": f"{k.GROUP}/{k.VERSION}",
        "kind": "HamiPodPlacement",
        "metadata": {
            "generateName": "defrag-",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "hami-fast-plan"},
        },
        "spec": {
            "reqID": req_id,
            "podSelector": {"matchLabels": labels},
            "nodeName": move["to"]["node"],
            "gpuDevices": move["to"]["gpus"],
            "evictPod": name,
        },
    }


def apply_moves(
    client: KubeClient,
    moves: list[dict[str, Any]],
    interval: float = 5.0,
    timeout: float = 900.0,
    say: Callable[[str], None] = print,
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    run_id = run_id or time.strftime("%Y%m%d%H%M%S")
    results: list[dict[str, Any]] = []
    for i, move in enumerate(moves):
        if i:
            time.sleep(interval)
        namespace, name = move["pod"].split("/", 1)
        pod = k.get_pod(client, namespace, name)
        if pod is None:
            say(f"move {i + 1}: pod {move['pod']} is gone; stopping")
            results.append({"move": move, "phase": "Skipped", "message": "pod gone"})
            break
        body = placement_for(move, pod, f"plan-{run_id}-{i:04d}")
        created = client.request("POST", k.placements_path(namespace), body=orjson.dumps(body)).json()
        placement_name = created["metadata"]["name"]
        say(
            f"move {i + 1}/{len(moves)}: {move['pod']} -> {move['to']['node']} {move['to']['gpus']} (placement {namespace}/{placement_name})"
        )
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            current = k.get_placement(client, namespace, placement_name) or {}
            status = current.get("status") or {}
            if status.get("phase") in ("Completed", "Failed"):
                break
            time.sleep(1.0)
        phase = status.get("phase") or "Timeout"
        results.append(
            {
                "move": move,
                "placement": f"{namespace}/{placement_name}",
                "phase": phase,
                "message": status.get("message", ""),
            }
        )
        say(f"  {phase}: {status.get('message', '')}")
        if phase != "Completed":
            say("stopping: later moves assumed this one had happened")
            break
    return results
