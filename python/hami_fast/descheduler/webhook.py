"""Pinning webhook: a hami-scheduler pod whose labels match a validated, unclaimed placement gets a
required node affinity on the target node and `nvidia.com/use-gpuuuid` with the target UUIDs.

A placement is claimed before the patch is returned, by a status write carrying the placement's
resourceVersion: of several pods created at once (in this process or in other replicas), exactly
one wins; the others are admitted unchanged.
"""

from __future__ import annotations

import base64
import logging
import threading
from typing import Any

import orjson

from hami_fast.descheduler import kube as k
from hami_fast.kube.client import ApiError, KubeClient

log = logging.getLogger("hami_fast.descheduler.webhook")

OPEN_PHASES = ("Pending", "DeletingOldPod")


def labels_match(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    want = ((selector or {}).get("matchLabels")) or {}
    return bool(want) and all(labels.get(key) == value for key, value in want.items())


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def pin_patch(pod: dict[str, Any], placement: dict[str, Any]) -> list[dict[str, Any]]:
    """JSON Patch: stamp annotations, use-gpuuuid, and a required node affinity on the target node."""
    spec, status = placement.get("spec") or {}, placement.get("status") or {}
    meta = placement["metadata"]
    uuids = status.get("resolvedUUIDs") or []
    node = spec["nodeName"]
    ops: list[dict[str, Any]] = []
    annotations = {
        k.USE_UUID: ",".join(uuids),
        k.STAMP_NAME: f"{meta['namespace']}/{meta['name']}",
        k.STAMP_REQ_ID: str(spec.get("reqID", "")),
        k.STAMP_TARGET: f"{node}/{','.join(uuids)}",
    }
    if not (pod.get("metadata") or {}).get("annotations"):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": annotations})
    else:
        ops += [
            {"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
            for key, value in annotations.items()
        ]
    requirement = {"key": "metadata.name", "operator": "In", "values": [node]}
    term = {"matchFields": [requirement]}
    pod_spec = pod.get("spec") or {}
    affinity = pod_spec.get("affinity")
    required = {"nodeSelectorTerms": [term]}
    if not affinity:
        ops.append(
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
            }
        )
    elif not affinity.get("nodeAffinity"):
        ops.append(
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity",
                "value": {"requiredDuringSchedulingIgnoredDuringExecution": required},
            }
        )
    elif not affinity["nodeAffinity"].get("requiredDuringSchedulingIgnoredDuringExecution"):
        ops.append(
            {
                "op": "add",
                "path": "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                "value": required,
            }
        )
    else:
        terms = (
            affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].get("nodeSelectorTerms") or []
        )
        base = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
        if not terms:
            ops.append({"op": "add", "path": base, "value": [term]})
        for i, t in enumerate(terms):
            if t.get("matchFields"):
                ops.append({"op": "add", "path": f"{base}/{i}/matchFields/-", "value": requirement})
            else:
                ops.append({"op": "add", "path": f"{base}/{i}/matchFields", "value": [requirement]})
    return ops


class Pinner:
    def __init__(self, client: KubeClient | None, scheduler_name: str = k.SCHEDULER_NAME) -> None:
        self.client, self.scheduler_name = client, scheduler_name
        self.lock = threading.Lock()

    def target_problem(self, placement: dict[str, Any]) -> str:
        """The target node still exists and its resolved GPUs are registered, healthy, not cordoned."""
        from hami_fast import _native
        from hami_fast.kube.client import path_of

        node_name = (placement.get("spec") or {}).get("nodeName", "")
        uuids = (placement.get("status") or {}).get("resolvedUUIDs") or []
        try:
            node = self.client.request("GET", path_of("api", "v1", "nodes", node_name)).json()
        except ApiError as exc:
            if exc.status == 404:
                return f"node {node_name} not found"
            raise
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        try:
            devices = {
                d.get("id"): d
                for d in orjson.loads(_native.decode_node_register(annotations.get("hami.io/node-nvidia-register", "")))
            }
        except (_native.EngineError, orjson.JSONDecodeError) as exc:
            return f"node {node_name} is not registered: {exc}"
        cordoned = {u.strip() for u in annotations.get("hami.io/device-cordon", "").split(",") if u.strip()}
        for uuid in uuids:
            device = devices.get(uuid)
            if device is None:
                return f"GPU {uuid} no longer registered on {node_name}"
            if not device.get("health"):
                return f"GPU {uuid} on {node_name} is not healthy"
            if uuid in cordoned:
                return f"GPU {uuid} on {node_name} is cordoned"
        return ""

    def admit(self, body: bytes) -> bytes:
        try:
            review = orjson.loads(body)
            request = review["request"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            return orjson.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": "", "allowed": True, "warnings": [f"unreadable AdmissionReview: {exc}"]},
                }
            )
        response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
        try:
            patch = self.pin(request)
        except ApiError as exc:  # never block pod creation (failurePolicy Ignore semantics)
            log.warning("pinning skipped: %s", exc)
            patch = None
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
        return orjson.dumps(
            {
                "apiVersion": review.get("apiVersion", "admission.k8s.io/v1"),
                "kind": "AdmissionReview",
                "response": response,
            }
        )

    def _claim(self, placement: dict[str, Any], pod_meta: dict[str, Any], attempts: int = 5) -> dict[str, Any] | None:
        """Claim with a resourceVersion-guarded status write. A conflict may come from the controller's
        own status update rather than a rival claim: re-read, and retry while the placement is still
        open and unclaimed."""
        for _ in range(attempts):
            status = placement.setdefault("status", {})
            stamp = k.now_rfc3339()
            status["claimedBy"] = {
                "podName": pod_meta.get("name") or "",
                "generateName": pod_meta.get("generateName") or "",
                "claimedAt": stamp,
            }
            status["consumedAt"] = stamp
            try:
                return k.put_status(self.client, placement)
            except ApiError as exc:
                if exc.status != 409:
                    raise
            meta = placement["metadata"]
            fresh = k.get_placement(self.client, meta["namespace"], meta["name"])
            fresh_status = (fresh or {}).get("status") or {}
            if fresh is None or fresh_status.get("phase") not in OPEN_PHASES or fresh_status.get("claimedBy"):
                return None
            placement = fresh
        return None

    def pin(self, request: dict[str, Any]) -> list[dict[str, Any]] | None:
        pod = request.get("object") or {}
        if request.get("operation", "CREATE") != "CREATE" or (request.get("kind") or {}).get("kind", "Pod") != "Pod":
            return None
        if (pod.get("spec") or {}).get("schedulerName") != self.scheduler_name or self.client is None:
            return None
        if request.get("dryRun"):
            return None
        meta = pod.get("metadata") or {}
        namespace = request.get("namespace") or meta.get("namespace") or "default"
        labels = meta.get("labels") or {}
        with self.lock:
            candidates = [
                p
                for p in k.list_placements(self.client, namespace)
                if (p.get("status") or {}).get("phase") in OPEN_PHASES
                and not (p.get("status") or {}).get("claimedBy")
                and (p.get("status") or {}).get("resolvedUUIDs")
                and labels_match((p.get("spec") or {}).get("podSelector"), labels)
            ]
            candidates.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
            for placement in candidates:
                problem = self.target_problem(placement)
                if problem:
                    # Never leave an unschedulable pin: admit the pod as it is, fail the placement.
                    status = placement.setdefault("status", {})
                    status.update(phase="Failed", message=f"target no longer valid at admission: {problem}")
                    try:
                        k.put_status(self.client, placement)
                    except ApiError:
                        pass
                    continue
                claimed = self._claim(placement, meta)
                if claimed is None:
                    continue  # another pod or replica claimed it first
                log.info("pinned pod to placement", extra={"placement": f"{namespace}/{placement['metadata']['name']}"})
                return pin_patch(pod, claimed)
        return None
