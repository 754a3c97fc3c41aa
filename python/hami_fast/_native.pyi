"""Typed surface of the Rust engine (``rust/hami-py``). Bytes in, bytes out; the GIL is released."""

from typing import NotRequired, TypedDict, final

__version__: str

#: Every HAMi annotation key the engine reads or writes, by its Rust constant's name
#: (``rust/hami-core/src/annotations.rs``); ``hami_fast.annotations`` names them for Python.
ANNOTATIONS: dict[str, str]

#: The Filter reasons that moving other pods off a node can lift (``Reason::moves_can_clear`` in
#: ``rust/hami-core/src/fit/reason.rs``): a card or node short of what its pods take.
REASONS_MOVES_CAN_CLEAR: tuple[str, ...]

class EngineError(ValueError):
    """Bad input: the message names the object and the field.

    ``kind`` is one of ``decode``, ``invalid``, ``config``, ``not_found``, ``internal``; ``object`` and
    ``field`` name where (either may be empty); ``message`` is what is wrong there, without them.
    """

    kind: str
    object: str
    field: str
    message: str

# The JSON documents the methods below return, as ``hami_core::wire`` defines them (key sets checked
# against ``rust/hami-core/src/wire/keys.json`` by ``tests/infra/test_stubs.py``). Stub-only: import them
# for type checking.

class Verdict(TypedDict):
    """Why one node does not take the pod: the deciding reason, its other reasons, and a detail."""

    reason: str
    others: list[str]
    detail: NotRequired[str]

class Victim(TypedDict):
    key: str
    namespace: str
    name: str
    priority: int

class PreemptionReport(TypedDict):
    """Whether evicting lower-priority pods would unblock a pod that fits nowhere, and how."""

    possible: bool
    priority: int
    node: NotRequired[str]
    gpus: NotRequired[list[str]]
    victims: NotRequired[list[Victim]]
    reason: NotRequired[str]

class Explain(TypedDict):
    """:meth:`Cluster.explain`: where a pod would go, and why not elsewhere."""

    node: str | None
    annotations: dict[str, str]
    failed: dict[str, str]
    scores: dict[str, float]
    ranked: list[str]
    node_policy: str
    reserved: NotRequired[dict[str, dict[str, str]]]
    verdicts: dict[str, Verdict]
    notes: list[str]
    preemption: NotRequired[PreemptionReport]

class FreeOn(TypedDict):
    node: str
    gpu: str
    free: int

class GpusOn(TypedDict):
    node: str
    count: int

class ContainerHeadroom(TypedDict):
    container: str
    init: bool
    nums: int
    memory_mib: int | None
    memory_percentage: int | None
    cores: int
    largest_free_memory: FreeOn | None
    largest_free_cores: FreeOn | None
    most_gpus_with_room: GpusOn | None
    largest_gpu: FreeOn | None
    most_gpus_on_a_node: GpusOn | None
    blocking: list[str]

class Headroom(TypedDict):
    """:meth:`Cluster.headroom`: what would have to change for a pod to fit, per container."""

    pod: str
    nodes: int
    gpus: int
    containers: list[ContainerHeadroom]

class Preemption(TypedDict):
    key: str
    namespace: str
    name: str
    uid: str
    priority: int
    node: str
    gpus: list[str]
    victims: list[Victim]

class PreemptPass(TypedDict):
    """:meth:`Cluster.preempt`."""

    preemptions: list[Preemption]
    more: bool

class Held(TypedDict):
    pod: str
    expires: str

class DeviceUsage(TypedDict):
    uuid: str
    index: int
    type: str
    numa: int
    health: bool
    cordoned: bool
    count: int
    devmem: int
    devcore: int
    used: int
    usedmem: int
    usedcores: int
    held: NotRequired[Held]

class NodeUsage(TypedDict):
    """One item of :meth:`Cluster.usage`."""

    name: str
    registered: bool
    error: str | None
    devices: list[DeviceUsage]

class Hold(TypedDict):
    """One item of :meth:`Cluster.holds`."""

    pod: str
    node: str
    gpus: list[str]
    expires: str

class PodDevice(TypedDict):
    uuid: str
    usedmem: int
    usedcores: int

class PodFootprint(TypedDict):
    namespace: str
    name: str
    node: str
    devices: list[PodDevice]

class QuotaUsage(TypedDict):
    namespace: str
    name: str
    resource: str
    limit: int
    used: int

class Accounting(TypedDict):
    """:meth:`Cluster.accounting`."""

    pods: list[PodFootprint]
    quotas: list[QuotaUsage]

class HandshakeWrite(TypedDict):
    """One item of :meth:`Cluster.registration_pass`: ``value`` None deletes the key."""

    node: str
    key: str
    value: str | None

class MigPlacement(TypedDict):
    start: int
    size: int

class MigInstance(TypedDict):
    gpu: str
    profile: str
    placement: MigPlacement

class Place(TypedDict):
    node: str
    gpus: list[str]
    mig: NotRequired[list[MigInstance]]

# `from` is a keyword: the functional form.
Move = TypedDict("Move", {"pod": str, "from": Place, "to": Place})

class Measures(TypedDict):
    free_whole_gpus: int
    fragmentation: float
    fragmentation_pct_of_idle: float
    gpus: int
    healthy_gpus: int

class NodeMeasure(TypedDict):
    node: str
    registered: bool
    gpus: int
    free_whole_gpus: int
    partly_used_gpus: int
    fragmentation: float
    free_milli: list[int]

class PlanBaseline(TypedDict):
    planner: str
    moves: int
    after: Measures
    elapsed_ms: float

class Plan(TypedDict):
    """:func:`plan` for objective ``free-gpus`` or ``frag``."""

    objective: str
    planner: str
    max_moves: int
    moves: list[Move]
    before: Measures
    after: Measures
    elapsed_ms: float
    pods: int
    movable_pods: int
    immovable: dict[str, int]
    nodes: int
    baseline: NotRequired[PlanBaseline]

class Reservation(TypedDict):
    pod: str
    uid: str
    node: str
    gpus: list[str]

class UnblockPlan(TypedDict):
    """:func:`plan` for one pending pod (``for_pod``, ``for_pod_key``)."""

    objective: str
    pod: str
    uid: str
    unblocked: bool
    moves: list[Move]
    target: Place | None
    message: str
    reasons: dict[str, str]
    max_moves: int
    before: Measures
    after: Measures
    elapsed_ms: float
    nodes: int
    pods: int
    reservation: Reservation | None

class QueuePlacement(TypedDict):
    pod: str
    uid: str
    node: str
    gpus: list[str]
    moves: int
    mig: NotRequired[list[MigInstance]]

class QueuedContainer(TypedDict):
    init: bool
    gpus: int
    memory_mib: int
    memory_percentage: int | None
    cores: int

class QueuedPod(TypedDict):
    pod: str
    uid: str
    containers: list[QueuedContainer]
    never: str | None

class QueueBaseline(TypedDict):
    planner: str
    moves: int
    unblocked: int
    after: Measures
    freed_whole_gpus: int
    elapsed_ms: float

class QueuePlan(TypedDict):
    """:func:`plan` for objective ``pending``: the pending queue unblocked in order."""

    objective: str
    pending: int
    max_moves: int
    unblocked_by_moves: int
    fit_without_moves: int
    moves: list[Move]
    placements: list[QueuePlacement]
    queue: list[QueuedPod]
    before: Measures
    after: Measures
    freed_whole_gpus: int
    nodes: int
    pods: int
    elapsed_ms: float
    baseline: NotRequired[QueueBaseline]

class Fragmentation(TypedDict):
    """:func:`fragmentation`."""

    cluster: Measures
    workload_types: int
    nodes: list[NodeMeasure]

class TargetCheck(TypedDict):
    """:func:`validate_target`."""

    ok: bool
    uuids: list[str]
    message: str
    field: str
    pin: dict[str, str]

class ReplaySummary(TypedDict):
    """:func:`replay`: the curves are keyed by arrived GPU % as strings."""

    policy: str
    seed: int
    tune: float
    pods: int
    failed: int
    tuned: int
    total_gpus: int
    typical_types: int
    unallocated_pct_at_100: float | None
    alloc_pct_by_arrived: dict[str, float]
    frag_pct_by_arrived: dict[str, float]
    frag_ratio_by_arrived: dict[str, float]
    elapsed_s: float

class Arrivals(TypedDict):
    """:func:`replay_arrivals`."""

    seed: int
    total_gpus: int
    nodes: list[tuple[str, int, int, int, str]]
    pods: list[tuple[int, int, int, int, str]]

class AdmissionStatus(TypedDict):
    code: int
    message: NotRequired[str]
    reason: NotRequired[str]

class AdmissionResponse(TypedDict):
    allowed: bool
    patch: NotRequired[str]
    patchType: NotRequired[str]
    status: NotRequired[AdmissionStatus]
    uid: str
    warnings: NotRequired[list[str]]

class AdmissionReview(TypedDict):
    """:meth:`Cluster.admit`'s answer, as the API server reads it."""

    apiVersion: str
    kind: str
    response: AdmissionResponse

class HostResources(TypedDict):
    cpu: str
    memory: str

class SnapshotNodeMeta(TypedDict):
    annotations: dict[str, str]
    name: str

class SnapshotNodeStatus(TypedDict):
    allocatable: HostResources

class SnapshotNode(TypedDict):
    apiVersion: str
    kind: str
    metadata: SnapshotNodeMeta
    status: SnapshotNodeStatus

class OwnerReference(TypedDict):
    apiVersion: str
    controller: bool
    kind: str
    name: str
    uid: str

class SnapshotPodMeta(TypedDict):
    annotations: dict[str, str]
    creationTimestamp: str
    labels: dict[str, str]
    name: str
    namespace: str
    ownerReferences: list[OwnerReference]
    uid: str

class SnapshotResources(TypedDict):
    limits: dict[str, str]
    requests: HostResources

class SnapshotContainer(TypedDict):
    name: str
    resources: SnapshotResources

class SnapshotPodSpec(TypedDict):
    containers: list[SnapshotContainer]
    nodeName: NotRequired[str]
    schedulerName: str

class SnapshotPodStatus(TypedDict):
    phase: str

class SnapshotPod(TypedDict):
    apiVersion: str
    kind: str
    metadata: SnapshotPodMeta
    spec: SnapshotPodSpec
    status: SnapshotPodStatus

class SnapshotListMeta(TypedDict):
    arrivedPct: float

class SnapshotList(TypedDict):
    """:func:`replay_snapshot`: the Nodes first, then the Pods in arrival order."""

    apiVersion: str
    items: list[SnapshotNode | SnapshotPod]
    kind: str
    metadata: SnapshotListMeta

@final
class RequeuedPod:
    """A rejected pod that fits after a release (from :meth:`Cluster.requeue`); ``node`` is where Fit
    would place it now, ``key`` its reservation key."""

    @property
    def key(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def node(self) -> str: ...

@final
class FilterDecision:
    """One ``/filter`` decision, typed (from :meth:`Cluster.decide`).

    ``outcome`` is ``scheduled``, ``unschedulable``, ``passthrough`` (no vGPU request, or an autoscaler
    dry run) or ``error``; ``pod_key`` is the reservation key :meth:`Cluster.release` takes; ``patch`` is
    the pod's merge patch when a node was chosen; ``events`` are ``(type, reason, message)``;
    ``reason_counts`` counts failed candidate nodes per HAMi reason.
    """

    @property
    def response(self) -> bytes: ...
    @property
    def outcome(self) -> str: ...
    @property
    def pod_key(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def resource_version(self) -> str: ...
    @property
    def pod_group(self) -> bool: ...
    @property
    def node(self) -> str | None: ...
    @property
    def patch(self) -> bytes | None: ...
    @property
    def devices(self) -> str | None: ...
    @property
    def events(self) -> list[tuple[str, str, str]]: ...
    @property
    def reason_counts(self) -> dict[str, int]: ...
    @property
    def locks(self) -> list[str]:
        """The node locks its Bind takes: annotation keys, in HAMi's order."""
    @property
    def error(self) -> EngineError | None:
        """With outcome ``error``: the error the response's ``Error`` reads, typed (carried, not raised:
        kube-scheduler gets its answer)."""

@final
class ObjectCache:
    """The planner's nodes and pods kept current one object at a time: a reflector feeds it as it
    feeds :class:`Cluster`; plans, target checks, fragmentation, usage and holds are read from it
    without listing the cluster. One parsed snapshot serves every reader until something changes or
    a hold lapses. ``config`` as :class:`Cluster`'s. ``now`` (Unix seconds) defaults to the clock."""

    def __init__(self, config: bytes | None = None) -> None: ...
    def apply(self, objects: bytes, name: str = "snapshot") -> None:
        """A ``List`` (``kubectl get nodes,pods -o json``) or one Node or Pod; ``name`` is what errors name."""
    def apply_watch_event(self, line: bytes) -> tuple[str, str, str, int, str | None]:
        """As :meth:`Cluster.apply_watch_event`."""
    def apply_list_page(self, page: bytes) -> tuple[str, str, list[str], list[str]]:
        """As :meth:`Cluster.apply_list_page`."""
    def retain(self, kind: str, keys: list[str]) -> int:
        """As :meth:`Cluster.retain`."""
    def generation(self) -> int:
        """Changes so far: equal numbers mean nothing changed in between."""
    def plan(self, options: bytes, now: int | None = None) -> bytes:
        """:func:`plan` on these objects; the options may name a waiting pod as ``for_pod_key``."""
    def fragmentation(self, now: int | None = None) -> bytes:
        """:func:`fragmentation` on these objects."""
    def validate_target(self, pod: str, node: str, gpus: list[str], now: int | None = None) -> bytes:
        """:func:`validate_target` on these objects."""
    def check_evictee(self, pod: bytes, scheduler_name: str) -> None:
        """Whether the pod (JSON) a placement names may be evicted: something recreates it elsewhere
        (a controller owner other than a DaemonSet or a Node) and it uses ``scheduler_name``. Else
        :class:`EngineError` (``kind`` ``invalid``, ``field`` the pod's field that forbids it, ``message``
        the reason: "is a bare pod ...")."""
    def usage(self) -> bytes:
        """As :meth:`Cluster.usage`."""
    def holds(self, now: int | None = None) -> bytes:
        """As :meth:`Cluster.holds`."""
    def waiting_for_moves(self, now: int | None = None) -> list[tuple[str, str]]:
        """The pods waiting for room that moving other pods can make, in queue order (kube-scheduler's
        last attempt failed for such a reason, no live hold is theirs): ``[(namespace/name, uid)]``."""
    def node_count(self) -> int: ...

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
    def decide(self, args: bytes, now: int, record: bool = True) -> FilterDecision:
        """ExtenderArgs -> the typed decision (what the extender serves).

        With ``record`` the reservation is kept under ``pod_key`` until :meth:`release` or the pod leaves.
        """
    def release(self, pod_uid: str) -> bool:
        """Drop the reservation of a pod (for example after a failed annotation patch)."""
    def requeue(self, now: int) -> tuple[list[RequeuedPod], bool]:
        """After a release of vGPU capacity: the pods Filter rejected that fit now, in kube-scheduler's
        queue order (priority, then age), each marked requeued until Filter sees it again; and
        whether the pass stopped short of some waiting pods (its work is bounded: call again)."""
    def preempt(self, now: int) -> bytes:
        """The waiting pods that evicting lower-priority pods unblocks now, a :class:`PreemptPass` as
        JSON; the GPUs chosen for each are held at once."""
    def unhold(self, pod_key: str) -> bool:
        """Drop the GPUs held for a pod (a preemption not carried out); True if it had a hold."""
    def look_again(self, pod_key: str) -> bool:
        """Have preemption look at a waiting pod again at its next pass although no node changed;
        False if the pod is not waiting."""
    def waiting_count(self) -> int:
        """How many pods Filter rejected wait for a release."""
    def explain(self, pod: bytes, now: int, node_policy: str | None = None, gpu_policy: str | None = None) -> bytes:
        """Run the webhook on ``pod``, then report where it would go: an :class:`Explain` as JSON,
        ``verdicts`` each failing node once, ``notes`` the request fields HAMi reads otherwise than
        written; for a pod that fits nowhere, ``preemption``. Raises :class:`EngineError` for a pod
        that is not JSON, one the webhook denies, or one hami-fast does not schedule."""
    def registration_pass(self, now: int) -> bytes:
        """One of HAMi's registration passes: JSON list of :class:`HandshakeWrite`."""
    def headroom(self, pod: bytes) -> bytes:
        """Per container of ``pod`` (webhook defaults applied): the request, the largest free memory and
        cores of any usable GPU (``{"node", "gpu", "free"}``), the node with the most GPUs with room
        (``{"node", "count"}``), the largest GPU (``largest_gpu``, ``free`` its whole memory), the node with
        the most usable GPUs (``most_gpus_on_a_node``) and ``blocking`` (which of memory, cores, slots, gpus
        nothing offers; ``capacity``/``node_size`` when no GPU or node is that large at all): a
        :class:`Headroom` as JSON. Raises :class:`EngineError` for a pod the webhook denies."""
    def admit(self, review: bytes) -> bytes:
        """AdmissionReview (v1 or v1beta1) -> AdmissionReview response in the same version."""
    def review(self, review: bytes) -> tuple[bytes, bool]:
        """:meth:`admit` with the verdict: ``(AdmissionReview bytes, allowed)``."""
    def bind_locks(self, pod: bytes) -> list[str]:
        """The node locks (annotation keys, in HAMi's order) a Bind of this pod takes."""
    def stamp_locks(self) -> list[tuple[str, int]]:
        """The backends' own node locks ``(annotation key, seconds held)``, which any failed Bind releases."""
    def usage(self) -> bytes:
        """Per-node, per-device usage, a JSON list of :class:`NodeUsage` (for metrics, the REST API and
        tests); a GPU held for a pending pod carries ``held``."""
    def holds(self, now: int) -> bytes:
        """The live reservations at ``now`` (Unix seconds; lapsed ones are dropped), a JSON list of
        :class:`Hold` sorted by pod."""
    def accounting(self) -> bytes:
        """Every counted pod's per-GPU footprint and every vGPU quota's usage, an :class:`Accounting`
        as JSON (for metrics)."""
    def node_count(self) -> int: ...
    def pod_count(self) -> int: ...

def yaml_to_json(text: bytes, name: str = "manifest") -> bytes:
    """YAML documents (``kubectl get -o yaml``) -> JSON array of the non-empty documents.

    Malformed YAML raises EngineError (kind ``decode``) with ``object`` ``name:line:column`` and
    ``field`` ``document N``."""

def node_policy_names() -> list[str]:
    """Every valid node scheduler policy name (HAMi's binpack and spread, then the scored policies)."""

def check_node_policy(value: str) -> str:
    """A node policy flag value -> its canonical name; EngineError listing the valid names otherwise."""

def check_label_selector(text: str) -> str:
    """A label selector (``app=web,env in (a,b)``) as the planner's opt-in parses it -> the text;
    EngineError naming the requirement that does not parse otherwise."""

def load_device_config(text: bytes, file: str) -> bytes:
    """HAMi's device config file (YAML, as ``yaml.v2`` reads it) -> the checked config as JSON.

    A file HAMi would refuse, or one with a duplicate common word or a value no backend can use,
    raises EngineError (kind ``config``) with ``object`` the file and ``field`` the key path.
    """

def check_gpu_policy(value: str) -> str:
    """A GPU policy flag value (a name or a comma chain) -> the trimmed value; EngineError otherwise."""

def decode_node_register(value: str) -> bytes:
    """``hami.io/node-nvidia-register`` (JSON or legacy colon form) -> JSON list of devices.

    EngineError's ``field`` is the annotation and the device (``annotation hami.io/node-nvidia-register,
    device 1, health``)."""

def encode_node_register(devices: bytes) -> str:
    """JSON list of devices -> annotation value, in the device plugin's key order and omitempty rules."""

def decode_pod_devices(value: str) -> bytes:
    """``hami.io/vgpu-devices-allocated`` -> JSON ``[[{"uuid","type","usedmem","usedcores"}, ...], ...]``.

    EngineError's ``field`` is the annotation, slot and device (``..., container slot 1, device 0``)."""

def encode_pod_devices(containers: bytes) -> str:
    """Inverse of :func:`decode_pod_devices`."""

def parse_node_lock(value: str) -> tuple[str, str, str]:
    """``hami.io/mutex.lock`` -> (timestamp, namespace, name); legacy bare timestamp gives empty owner."""

def format_node_lock(timestamp: str, namespace: str, name: str) -> str: ...
def is_pod_group_member(pod: bytes) -> bool:
    """Pod JSON -> whether HAMi's ``IsPodGroupMember`` holds: the coscheduling label or
    ``spec.schedulingGroup.podGroupName``, non-empty."""

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
    """Replay an openb-style trace (node CSV, pod CSV) under ``policy`` and return a
    :class:`ReplaySummary` as JSON.

    ``policy`` is one of :func:`policy_names` (fgd, bestfit, dotprod, packing, clustering, random,
    binpack, spread, fgd-balance).
    The JSON object has ``policy, seed, tune, pods, failed, tuned, total_gpus, typical_types,
    unallocated_pct_at_100, alloc_pct_by_arrived, frag_pct_by_arrived, frag_ratio_by_arrived,
    elapsed_s`` (the ``*_by_arrived`` maps are keyed by arrived GPU % as strings).
    ``check_all`` confirms every candidate node with the engine's Fit (slower).
    A malformed CSV raises :class:`EngineError` with ``object`` ``<file>:<line>:<column>`` (``<file>:1``
    for the header, ``<file>`` for an empty file) and ``field`` the column (```column `cpu_milli` ```);
    ``kind`` is ``decode`` (not a number, a missing column or field, a quote, not UTF-8) or ``invalid``
    (out of range, an empty name).
    """

def policy_names() -> list[str]:
    """The node policy names the replay and ``--node-scheduler-policy`` accept, in table order."""

def replay_arrivals(
    nodes_csv: bytes,
    pods_csv: bytes,
    seed: int = 42,
    tune: float = 1.3,
    nodes_name: str = "nodes.csv",
    pods_name: str = "pods.csv",
) -> bytes:
    """The replay's cluster and arrival stream for ``seed`` without replaying: JSON
    ``{"seed", "total_gpus", "nodes": [[name, cpu_milli, memory_mib, gpus, model]],
    "pods": [[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]]}`` (pods in arrival order)."""

def node_frag(cpu_left: int, gpu_free: list[int], model: str, types: list[tuple[int, int, int, str, float]]) -> float:
    """FGD's fragment of one node in milli-GPU: ``Σ share · F(type)`` over task types
    ``(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)``; ``gpu_free`` is free milli per GPU."""

def plan(inputs: list[bytes], options: bytes | None = None, config: bytes | None = None) -> bytes:
    """Defragmentation plan over Kubernetes objects (each input a List or one Node/Pod, JSON): a
    :class:`Plan`, :class:`UnblockPlan` (``for_pod``, ``for_pod_key``) or :class:`QueuePlan`
    (objective ``pending``) as JSON.

    ``options`` is JSON ``{"max_moves": int | null, "max_moves_pct": 5.0, "planner": "drain" | "greedy",
    "baseline": true}``. Returns ``{"moves": [{"pod": "ns/name", "from": {"node", "gpus"}, "to": {...}}],
    "before": {"free_whole_gpus", "fragmentation", ...}, "after": {...}, "baseline": {...}, ...}``.
    Every move is checked with the engine's Fit against the state the earlier moves leave.
    """

def fragmentation(inputs: list[bytes], config: bytes | None = None) -> bytes:
    """``{"cluster": {free_whole_gpus, fragmentation, ...}, "nodes": [{node, fragmentation, ...}]}``."""

def validate_target(inputs: list[bytes], pod: str, node: str, gpus: list[str], config: bytes | None = None) -> bytes:
    """Pre-eviction check of a placement target, a :class:`TargetCheck` as JSON: ``{"ok": bool, "uuids": [...], "message": str, "field": str,
    "pin": {annotation: value}}`` (``field``: ``spec.nodeName`` or ``spec.gpuDevices``, the placement field a
    rejection is about; ``pin``: the annotations that pin the replacement to ``uuids``, each backend by its own
    use-UUID key).

    ``gpus`` are ``gpu-N`` (``/suffix`` ignored) or UUIDs; ``pod`` is ``namespace/name``.
    """

def replay_snapshot(
    nodes_csv: bytes,
    pods_csv: bytes,
    policy: str,
    arrived_pct: float = 90.0,
    seed: int = 42,
    tune: float = 1.3,
    nodes_name: str = "nodes.csv",
    pods_name: str = "pods.csv",
) -> bytes:
    """Replay a trace until ``arrived_pct`` % of GPU capacity has arrived; the cluster as a Kubernetes ``List``
    (a :class:`SnapshotList`, JSON).

    Pods are dated one second apart in arrival order (``creationTimestamp``), so the pending queue
    (oldest first) is the arrival order. CSV errors name ``nodes_name`` / ``pods_name`` as in :func:`replay`.
    """
