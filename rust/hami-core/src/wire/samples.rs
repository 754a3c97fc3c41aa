//! One fully populated sample of every wire document, and the key set each serialises to, kept in
//! `keys.json`: `tests/infra/test_stubs.py` checks the TypedDicts of `_native.pyi` against that file, so a
//! key added here and not in the stub (or the other way round) fails one side or the other.
//! `WIRE_KEYS_UPDATE=1 cargo test -p hami-core wire` rewrites `keys.json`.

use super::admission::*;
use super::explain::*;
use super::plan::*;
use super::preempt::*;
use super::replay::*;
use super::snapshot::*;
use super::state::*;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

fn sample(name: &'static str, value: impl Serialize) -> (&'static str, Value) {
    (name, serde_json::to_value(value).unwrap())
}

fn map<V: Clone>(key: &str, value: V) -> BTreeMap<String, V> {
    BTreeMap::from([(key.to_owned(), value)])
}

fn victim() -> Victim {
    Victim { key: "u1".into(), namespace: "ns".into(), name: "low".into(), priority: 1 }
}

fn verdict() -> Verdict {
    Verdict { reason: "CardInsufficientMemory", others: vec!["CardInsufficientCore"], detail: "why".into() }
}

fn preemption_report() -> PreemptionReport {
    PreemptionReport {
        possible: true,
        priority: 10,
        node: Some("n1".into()),
        gpus: vec!["GPU-0".into()],
        victims: vec![victim()],
        reason: "why not".into(),
    }
}

fn explain() -> Explain {
    Explain {
        node: Some("n1".into()),
        annotations: map("hami.io/vgpu-node", "n1".to_owned()),
        failed: map("n2", "1/1 CardInsufficientMemory".to_owned()),
        scores: map("n1", 1.5),
        ranked: vec!["n1".into()],
        node_policy: "binpack".into(),
        reserved: map("n1", map("GPU-0", "held".to_owned())),
        verdicts: map("n2", verdict()),
        notes: vec!["container c: note".into()],
        preemption: Some(preemption_report()),
    }
}

fn free_on() -> FreeOn {
    FreeOn { node: "n1".into(), gpu: "GPU-0".into(), free: 100 }
}

fn gpus_on() -> GpusOn {
    GpusOn { node: "n1".into(), count: 2 }
}

fn container_headroom() -> ContainerHeadroom {
    ContainerHeadroom {
        container: "c".into(),
        init: false,
        nums: 1,
        memory_mib: Some(1000),
        memory_percentage: None,
        cores: 10,
        largest_free_memory: Some(free_on()),
        largest_free_cores: Some(free_on()),
        most_gpus_with_room: Some(gpus_on()),
        largest_gpu: Some(free_on()),
        most_gpus_on_a_node: Some(gpus_on()),
        blocking: vec!["memory"],
    }
}

fn headroom() -> Headroom {
    Headroom { pod: "ns/p".into(), nodes: 1, gpus: 2, containers: vec![container_headroom()] }
}

fn preemption() -> Preemption {
    Preemption {
        key: "u2".into(),
        namespace: "ns".into(),
        name: "urgent".into(),
        uid: "u2".into(),
        priority: 10,
        choice: Choice { node: "n1".into(), gpus: vec!["GPU-0".into()], victims: vec![victim()] },
    }
}

const GPUS: &[Box<str>] = &[];

fn device_usage() -> DeviceUsage<'static> {
    DeviceUsage {
        uuid: "GPU-0",
        index: 0,
        device_type: "NVIDIA-T4",
        numa: 0,
        health: true,
        cordoned: false,
        count: 10,
        devmem: 16000,
        devcore: 100,
        used: 1,
        usedmem: 1000,
        usedcores: 10,
        held: Some(Held { pod: "ns/p", expires: "2026-01-01T00:00:00Z".into() }),
    }
}

fn accounting() -> Accounting<'static> {
    let device = PodDevice { uuid: "GPU-0", usedmem: 1000, usedcores: 10 };
    let pod = PodFootprint { namespace: "ns", name: "p", node: "n1", devices: vec![device] };
    let quota = QuotaUsage { namespace: "ns", name: "q", resource: "nvidia.com/gpumem", limit: 10, used: 1 };
    Accounting { pods: vec![pod], quotas: vec![quota] }
}

fn mig() -> MigInstance {
    let placement = crate::codec::MigPlacement { start: 0, size: 1 };
    MigInstance { gpu: "GPU-0".into(), profile: "1g.5gb".into(), placement }
}

fn place() -> Place {
    Place { node: "n1".into(), gpus: vec!["GPU-0".into()], mig: vec![mig()] }
}

fn a_move() -> Move {
    Move { pod: "ns/p".into(), from: place(), to: place() }
}

fn measures() -> Measures {
    Measures { free_whole_gpus: 1, fragmentation: 0.5, fragmentation_pct_of_idle: 10.0, gpus: 8, healthy_gpus: 8 }
}

fn node_measure() -> NodeMeasure {
    NodeMeasure {
        node: "n1".into(),
        registered: true,
        gpus: 8,
        free_whole_gpus: 1,
        partly_used_gpus: 2,
        fragmentation: 0.5,
        free_milli: vec![1000],
    }
}

fn plan() -> Plan {
    let baseline = PlanBaseline { planner: "greedy", moves: 1, after: measures(), elapsed_ms: 1.0 };
    Plan {
        objective: "free-gpus",
        planner: "drain",
        max_moves: 5,
        moves: vec![a_move()],
        before: measures(),
        after: measures(),
        elapsed_ms: 1.0,
        pods: 10,
        movable_pods: 9,
        immovable: map("why", 1),
        nodes: 2,
        baseline: Some(baseline),
    }
}

fn reservation() -> Reservation {
    Reservation { pod: "ns/p".into(), uid: "u".into(), node: "n1".into(), gpus: vec!["GPU-0".into()] }
}

fn unblock_plan() -> UnblockPlan {
    UnblockPlan {
        objective: "for",
        unblock: Unblock {
            pod: "ns/p".into(),
            uid: "u".into(),
            unblocked: true,
            moves: vec![a_move()],
            target: Some(place()),
            message: String::new(),
            reasons: map("n2", "why".to_owned()),
            max_moves: 5,
            before: measures(),
            after: measures(),
            elapsed_ms: 1.0,
        },
        nodes: 2,
        pods: 10,
        reservation: Some(reservation()),
    }
}

fn queue_placement() -> QueuePlacement {
    QueuePlacement {
        pod: "ns/p".into(),
        uid: "u".into(),
        node: "n1".into(),
        gpus: vec!["GPU-0".into()],
        moves: 1,
        mig: vec![mig()],
    }
}

fn queued_container() -> QueuedContainer {
    QueuedContainer { init: false, gpus: 1, memory_mib: 1000, memory_percentage: Some(50), cores: 10 }
}

fn queued_pod() -> QueuedPod {
    QueuedPod { pod: "ns/p".into(), uid: "u".into(), containers: vec![queued_container()], never: Some("why".into()) }
}

fn queue_baseline() -> QueueBaseline {
    QueueBaseline { planner: "greedy", moves: 1, unblocked: 1, after: measures(), freed_whole_gpus: 1, elapsed_ms: 1.0 }
}

fn queue_plan() -> QueuePlan {
    QueuePlan {
        objective: "pending",
        pending: 1,
        max_moves: 5,
        unblocked_by_moves: 1,
        fit_without_moves: 0,
        moves: vec![a_move()],
        placements: vec![queue_placement()],
        queue: vec![queued_pod()],
        before: measures(),
        after: measures(),
        freed_whole_gpus: 1,
        nodes: 2,
        pods: 10,
        elapsed_ms: 1.0,
        baseline: Some(queue_baseline()),
    }
}

fn target_check() -> TargetCheck {
    TargetCheck {
        ok: true,
        uuids: vec!["GPU-0".into()],
        message: String::new(),
        field: "",
        pin: map("nvidia.com/use-gpuuuid", "GPU-0".to_owned()),
    }
}

fn replay_summary() -> ReplaySummary {
    let curve = map("100", 50.0);
    ReplaySummary {
        policy: "fgd",
        seed: 42,
        tune: 1.3,
        pods: 10,
        failed: 1,
        tuned: 0,
        total_gpus: 8,
        typical_types: 3,
        unallocated_pct_at_100: Some(5.0),
        alloc_pct_by_arrived: curve.clone(),
        frag_pct_by_arrived: curve.clone(),
        frag_ratio_by_arrived: curve,
        elapsed_s: 0.5,
    }
}

fn arrivals() -> Arrivals {
    let nodes = vec![("n1".to_owned(), 1000, 1024, 8, "V100M16".to_owned())];
    Arrivals { seed: 42, total_gpus: 8, nodes, pods: vec![(1000, 1024, 500, 1, String::new())] }
}

fn admission_review() -> AdmissionReview {
    let status = AdmissionStatus { code: 403, message: Some("no".into()), reason: Some("Forbidden") };
    let response = AdmissionResponse {
        allowed: true,
        patch: Some("W10=".into()),
        patch_type: Some("JSONPatch"),
        status: Some(status),
        uid: "u".into(),
        warnings: vec!["hami-fast: a note".into()],
    };
    AdmissionReview { api_version: "admission.k8s.io/v1".into(), kind: "AdmissionReview", response }
}

fn snapshot_node() -> SnapshotNode {
    SnapshotNode {
        api_version: "v1",
        kind: "Node",
        metadata: SnapshotNodeMeta {
            annotations: map("hami.io/node-nvidia-register", "[]".to_owned()),
            name: "n1".into(),
        },
        status: SnapshotNodeStatus { allocatable: host_resources() },
    }
}

fn host_resources() -> HostResources {
    HostResources { cpu: "1000m".into(), memory: "1024Mi".into() }
}

fn snapshot_pod() -> SnapshotPod {
    let owner = OwnerReference {
        api_version: "apps/v1",
        controller: true,
        kind: "ReplicaSet",
        name: "rs".into(),
        uid: "u".into(),
    };
    let resources = SnapshotResources { limits: map("nvidia.com/gpu", "1".to_owned()), requests: host_resources() };
    SnapshotPod {
        api_version: "v1",
        kind: "Pod",
        metadata: SnapshotPodMeta {
            annotations: map("hami.io/vgpu-node", "n1".to_owned()),
            creation_timestamp: "2026-01-01T00:00:00Z".into(),
            labels: map("app", "a".to_owned()),
            name: "p".into(),
            namespace: "openb",
            owner_references: vec![owner],
            uid: "u".into(),
        },
        spec: SnapshotPodSpec {
            containers: vec![SnapshotContainer { name: "main", resources }],
            node_name: Some("n1".into()),
            scheduler_name: "hami-scheduler",
        },
        status: SnapshotPodStatus { phase: "Running" },
    }
}

fn snapshot_samples() -> Vec<(&'static str, Value)> {
    let (node, pod) = (snapshot_node(), snapshot_pod());
    let items = vec![SnapshotItem::Node(node.clone()), SnapshotItem::Pod(pod.clone())];
    let metadata = SnapshotListMeta { arrived_pct: 90.0 };
    vec![
        sample("SnapshotList", SnapshotList { api_version: "v1", items, kind: "List", metadata }),
        sample("SnapshotListMeta", SnapshotListMeta { arrived_pct: 90.0 }),
        sample("SnapshotNode", &node),
        sample("SnapshotNodeMeta", &node.metadata),
        sample("SnapshotNodeStatus", &node.status),
        sample("HostResources", host_resources()),
        sample("SnapshotPod", &pod),
        sample("SnapshotPodMeta", &pod.metadata),
        sample("OwnerReference", &pod.metadata.owner_references[0]),
        sample("SnapshotPodSpec", &pod.spec),
        sample("SnapshotContainer", &pod.spec.containers[0]),
        sample("SnapshotResources", &pod.spec.containers[0].resources),
        sample("SnapshotPodStatus", &pod.status),
    ]
}

fn plan_samples() -> Vec<(&'static str, Value)> {
    let fragmentation = Fragmentation { cluster: measures(), workload_types: 3, nodes: vec![node_measure()] };
    vec![
        sample("MigInstance", mig()),
        sample("MigPlacement", mig().placement),
        sample("Place", place()),
        sample("Move", a_move()),
        sample("Measures", measures()),
        sample("NodeMeasure", node_measure()),
        sample("Plan", plan()),
        sample("PlanBaseline", plan().baseline),
        sample("UnblockPlan", unblock_plan()),
        sample("Reservation", reservation()),
        sample("QueuePlan", queue_plan()),
        sample("QueuePlacement", queue_placement()),
        sample("QueuedPod", queued_pod()),
        sample("QueuedContainer", queued_container()),
        sample("QueueBaseline", queue_baseline()),
        sample("Fragmentation", fragmentation),
        sample("TargetCheck", target_check()),
        sample("ReplaySummary", replay_summary()),
        sample("Arrivals", arrivals()),
        sample("AdmissionReview", admission_review()),
        sample("AdmissionResponse", admission_review().response),
        sample("AdmissionStatus", admission_review().response.status),
    ]
}

/// Every wire document by the name its TypedDict has in `_native.pyi`.
pub(super) fn samples() -> Vec<(&'static str, Value)> {
    let accounting = accounting();
    vec![
        sample("Explain", explain()),
        sample("Verdict", verdict()),
        sample("PreemptionReport", preemption_report()),
        sample("Victim", victim()),
        sample("Headroom", headroom()),
        sample("ContainerHeadroom", container_headroom()),
        sample("FreeOn", free_on()),
        sample("GpusOn", gpus_on()),
        sample("PreemptPass", PreemptPass { preemptions: vec![preemption()], more: false }),
        sample("Preemption", preemption()),
        sample("NodeUsage", NodeUsage { name: "n1", registered: true, error: None, devices: vec![device_usage()] }),
        sample("DeviceUsage", device_usage()),
        sample("Held", Held { pod: "ns/p", expires: "2026-01-01T00:00:00Z".into() }),
        sample("Hold", Hold { pod: "ns/p", node: "n1", gpus: GPUS, expires: "2026-01-01T00:00:00Z".into() }),
        sample("PodFootprint", &accounting.pods[0]),
        sample("PodDevice", &accounting.pods[0].devices[0]),
        sample("QuotaUsage", &accounting.quotas[0]),
        sample("Accounting", &accounting),
        sample("HandshakeWrite", HandshakeWrite { node: "n1".into(), key: "hami.io/node-handshake", value: None }),
    ]
    .into_iter()
    .chain(plan_samples())
    .chain(snapshot_samples())
    .collect()
}

fn key_sets() -> BTreeMap<&'static str, Vec<String>> {
    samples()
        .into_iter()
        .map(|(name, value)| {
            let Value::Object(fields) = value else { panic!("{name}: a wire document is a JSON object") };
            (name, fields.keys().cloned().collect())
        })
        .collect()
}

#[test]
fn keys_json_lists_each_documents_keys() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/wire/keys.json");
    let expected = serde_json::to_string_pretty(&key_sets()).unwrap() + "\n";
    if std::env::var_os("WIRE_KEYS_UPDATE").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(stored == expected, "{} is stale: rerun with WIRE_KEYS_UPDATE=1 and update _native.pyi", path.display());
}

#[test]
fn names_are_unique() {
    let names: Vec<&str> = samples().iter().map(|(n, _)| *n).collect();
    assert_eq!(key_sets().len(), names.len(), "{names:?}");
}
