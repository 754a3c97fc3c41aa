"""Typed surface of the Rust engine (``rust/hami-py``). Bytes in, bytes out; the GIL is released."""

from typing import final

__version__: str

class EngineError(ValueError):
    """Bad input: the message names the object and the field."""

@final
class Cluster:
    """Nodes, pods and quotas kept in Rust; per-device usage maintained incrementally.

    ``config`` is JSON: any subset of
    ``{"resource_count_name", "resource_memory_name", "resource_memory_percentage_name",
    "resource_core_name", "resource_priority_name", "default_memory", "default_cores",
    "default_gpu_num", "memory_factor", "node_scheduler_policy", "gpu_scheduler_policy",
    "scheduler_name", "force_overwrite_default_scheduler", "gpu_core_policy",
    "runtime_class_name", "overwrite_env"}``.
    """

    def __init__(self, config: bytes | None = None) -> None: ...
    def apply(self, obj: bytes) -> None:
        """Add or update a Node, Pod or ResourceQuota, or every item of a ``List`` (JSON bytes)."""
    def delete(self, obj: bytes) -> None:
        """Remove a Node, Pod or ResourceQuota (JSON bytes of the object or its tombstone)."""
    def apply_watch_event(self, line: bytes) -> tuple[str, str, str, int, str | None]:
        """Apply one watch line ``{"type": ..., "object": ...}``.

        Returns ``(event type, resourceVersion, key, Status code, error)``; ``error`` names an object
        whose content could not be used (the stream itself stays valid). Raises on an undecodable line.
        """
    def apply_list_page(self, page: bytes) -> tuple[str, str, list[str], list[str]]:
        """Apply one LIST page; returns ``(resourceVersion, continue, item keys, per-item errors)``."""
    def retain(self, kind: str, keys: list[str]) -> int:
        """After a re-list, forget objects of ``kind`` whose key is not in ``keys``; returns how many."""
    def filter(self, args: bytes, now: int, record: bool = True) -> tuple[bytes, bytes | None]:
        """ExtenderArgs -> (ExtenderFilterResult bytes, decision JSON or None).

        The decision is ``{"pod": {"namespace","name","uid"}, "node": str, "annotations": {..},
        "patch": <merge patch bytes as str>, "scores": {..}, "failed": {..}}``. With ``record`` the
        reservation is kept under the pod UID until :meth:`release` or the pod leaves.
        """
    def release(self, pod_uid: str) -> bool:
        """Drop the reservation of a pod (for example after a failed annotation patch)."""
    def explain(self, pod: bytes, now: int, node_policy: str | None = None, gpu_policy: str | None = None) -> bytes:
        """Run the webhook on ``pod`` (a denial is the answer's error), then report where it would go."""
    def registration_pass(self, now: int) -> bytes:
        """One of HAMi's registration passes: JSON list of ``{"node", "key", "value"}`` handshake writes."""
    def admit(self, review: bytes) -> bytes:
        """AdmissionReview (v1 or v1beta1) -> AdmissionReview response in the same version."""
    def usage(self) -> bytes:
        """Per-node, per-device usage as JSON (for metrics, the REST API and tests)."""
    def accounting(self) -> bytes:
        """``{"pods": [{namespace, name, node, devices: [{uuid, usedmem, usedcores}]}],
        "quotas": [{namespace, name, resource, limit, used}]}`` as JSON (for metrics)."""
    def node_count(self) -> int: ...
    def pod_count(self) -> int: ...

def decode_node_register(value: str) -> bytes:
    """``hami.io/node-nvidia-register`` (JSON or legacy colon form) -> JSON list of devices."""

def encode_node_register(devices: bytes) -> str:
    """JSON list of devices -> annotation value, in the device plugin's key order and omitempty rules."""

def decode_pod_devices(value: str) -> bytes:
    """``hami.io/vgpu-devices-allocated`` -> JSON ``[[{"uuid","type","usedmem","usedcores"}, ...], ...]``."""

def encode_pod_devices(containers: bytes) -> str:
    """Inverse of :func:`decode_pod_devices`."""

def parse_node_lock(value: str) -> tuple[str, str, str]:
    """``hami.io/mutex.lock`` -> (timestamp, namespace, name); legacy bare timestamp gives empty owner."""

def format_node_lock(timestamp: str, namespace: str, name: str) -> str: ...
def parse_binding_args(body: bytes) -> tuple[str, str, str, str]:
    """ExtenderBindingArgs -> ``(PodName, PodNamespace, PodUID, Node)``; keys case-insensitive."""

def replay(
    nodes_csv: bytes,
    pods_csv: bytes,
    policy: str,
    seed: int = 42,
    tune: float = 1.3,
    nodes_name: str = "nodes.csv",
    pods_name: str = "pods.csv",
    shuffle: bool = True,
    check_all: bool = False,
) -> bytes:
    """Replay an openb-style trace (node CSV, pod CSV) under ``policy`` and return JSON.

    ``policy`` is one of fgd, bestfit, dotprod, packing, clustering, random, binpack, spread.
    The JSON object has ``policy, seed, tune, pods, failed, tuned, total_gpus, typical_types,
    unallocated_pct_at_100, alloc_pct_by_arrived, frag_pct_by_arrived, frag_ratio_by_arrived,
    elapsed_s`` (the ``*_by_arrived`` maps are keyed by arrived GPU % as strings).
    ``check_all`` confirms every candidate node with the engine's Fit (slower).
    A malformed CSV raises :class:`EngineError` naming the file, line and column.
    """

def node_frag(cpu_left: int, gpu_free: list[int], model: str, types: list[tuple[int, int, int, str, float]]) -> float:
    """FGD's fragment of one node in milli-GPU: ``Σ share · F(type)`` over task types
    ``(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)``; ``gpu_free`` is free milli per GPU."""

def plan(inputs: list[bytes], options: bytes | None = None, config: bytes | None = None) -> bytes:
    """Defragmentation plan over Kubernetes objects (each input a List or one Node/Pod, JSON).

    ``options`` is JSON ``{"max_moves": int | null, "max_moves_pct": 5.0, "planner": "drain" | "greedy",
    "baseline": true}``. Returns ``{"moves": [{"pod": "ns/name", "from": {"node", "gpus"}, "to": {...}}],
    "before": {"free_whole_gpus", "fragmentation", ...}, "after": {...}, "baseline": {...}, ...}``.
    Every move is checked with the engine's Fit against the state the earlier moves leave.
    """

def fragmentation(inputs: list[bytes], config: bytes | None = None) -> bytes:
    """``{"cluster": {free_whole_gpus, fragmentation, ...}, "nodes": [{node, fragmentation, ...}]}``."""

def validate_target(inputs: list[bytes], pod: str, node: str, gpus: list[str], config: bytes | None = None) -> bytes:
    """Pre-eviction check of a placement target: ``{"ok": bool, "uuids": [...], "message": str}``.

    ``gpus`` are ``gpu-N`` (``/suffix`` ignored) or UUIDs; ``pod`` is ``namespace/name``.
    """

def replay_snapshot(
    nodes_csv: bytes, pods_csv: bytes, policy: str, arrived_pct: float = 90.0, seed: int = 42, tune: float = 1.3
) -> bytes:
    """Replay a trace until ``arrived_pct`` % of GPU capacity has arrived; the cluster as a Kubernetes ``List``."""
