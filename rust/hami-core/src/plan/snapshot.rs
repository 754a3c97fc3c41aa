//! The planner's working state, built from Kubernetes objects through the engine's own state.

use super::{movable, pod_host_request, resident_instances, Owner, PendingPod, PlanPod};
use crate::codec::MIG_ALLOCATIONS_KEY;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::frag::Workload;
use crate::k8s::quantity::{cpu_milli, memory_mib};
use crate::k8s::Envelope;
use crate::k8s::{Object, Pod};
use crate::model::{GpuNode, HostResources};
use crate::policy::node as np;
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::state::reservations::Reservation;
use crate::state::ClusterState;
use std::collections::{HashMap, HashSet};

/// Nodes (with usage) and GPU-holding pods: the planner's working state.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub nodes: Vec<GpuNode>,
    pub index: HashMap<String, usize>,
    pub pods: Vec<PlanPod>,
    pub workload: Workload,
    /// Pods waiting for vGPU resources (no node yet, phase Pending), by namespace and name.
    pub pending: Vec<PendingPod>,
    /// GPUs held for pending pods (owner key, hold), unexpired when the snapshot was read: their
    /// GPUs are marked RESERVED on `nodes`, so no move lands there.
    pub holds: Vec<(String, Reservation)>,
}

/// An item's kind: its own, else its list's (`NodeList` -> `Node`).
fn kind_of<'a>(object: &'a Object, list_kind: &'a str) -> &'a str {
    if object.kind.is_empty() {
        list_kind.strip_suffix("List").unwrap_or("")
    } else {
        &object.kind
    }
}

/// Whether `object` is one of the `left_out` nodes or a pod bound to one.
fn is_left_out(object: &Object, list_kind: &str, left_out: &HashSet<&str>) -> bool {
    !left_out.is_empty()
        && match kind_of(object, list_kind) {
            "Node" => left_out.contains(object.metadata.name.as_str()),
            "Pod" => left_out.contains(object.spec.node_name.as_str()),
            _ => false,
        }
}

/// The wall clock in Unix seconds: a snapshot drops the holds that have lapsed.
fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl Snapshot {
    /// Builds the state from Kubernetes objects: each input is a `List` (e.g. `kubectl get
    /// nodes,pods -o json`) or a single Node / Pod, JSON bytes.
    pub fn from_objects(inputs: &[&[u8]], config: &Config) -> Result<Self> {
        Self::from_objects_except(inputs, config, &HashSet::new())
    }

    /// [`Self::from_objects`] as if the inputs held neither the nodes named in `left_out` nor the
    /// pods bound to them.
    pub fn from_objects_except(inputs: &[&[u8]], config: &Config, left_out: &HashSet<&str>) -> Result<Self> {
        let mut cluster = ClusterState::new(config.clone());
        let mut pods: Vec<(Pod, String, Owner)> = Vec::new();
        let mut allocatable: HashMap<String, (i64, i64)> = HashMap::new();
        let mut host_used: HashMap<String, (i64, i64, i64)> = HashMap::new();
        for (n, bytes) in inputs.iter().enumerate() {
            let env: Envelope =
                serde_json::from_slice(bytes).map_err(|e| Error::decode(format!("snapshot input {n}"), e))?;
            let items: Vec<&[u8]> = match &env.items {
                Some(items) => items.iter().map(|r| r.get().as_bytes()).collect(),
                None => vec![*bytes],
            };
            let list_kind = if env.items.is_some() { env.kind.as_str() } else { "" };
            for item in items {
                let object = serde_json::from_slice::<Object>(item).ok();
                if object.as_ref().is_some_and(|o| is_left_out(o, list_kind, left_out)) {
                    continue;
                }
                // The engine's state takes every item (one without `kind` takes the list's); an
                // item it cannot use (e.g. a malformed annotation) is left out of the plan.
                let _ = cluster.apply_item(item, list_kind);
                let Some(object) = object else { continue };
                match kind_of(&object, list_kind) {
                    "Node" => {
                        let a = &object.status.allocatable;
                        let cpu = a.get("cpu").and_then(|q| cpu_milli(&q.0));
                        let mem = a.get("memory").and_then(|q| memory_mib(&q.0));
                        if let (Some(cpu), Some(mem)) = (cpu, mem) {
                            allocatable.insert(object.metadata.name, (cpu, mem));
                        }
                    }
                    "Pod" => {
                        let owner = object.metadata.controller().map(|(k, n)| (k.to_owned(), n.to_owned()));
                        let (pod, status) = object.into_pod();
                        if !pod.spec.node_name.is_empty() && !status.is_terminal() {
                            let (cpu, mem) = pod_host_request(&pod);
                            let e = host_used.entry(pod.spec.node_name.clone()).or_insert((0, 0, 0));
                            *e = (e.0 + cpu, e.1 + mem, e.2 + 1);
                        }
                        pods.push((pod, status.phase, owner));
                    }
                    _ => {}
                }
            }
        }
        cluster.expire_holds(unix_now());
        let mut holds: Vec<(String, Reservation)> =
            cluster.reservations().iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        holds.sort_by(|a, b| a.1.pod.cmp(&b.1.pod));
        let mut nodes: Vec<GpuNode> = cluster.nodes.values().cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for n in &mut nodes {
            if let Some(&(cpu, mem)) = allocatable.get(&n.name) {
                let (cpu_requested, memory_requested, pods_requested) =
                    host_used.get(&n.name).copied().unwrap_or_default();
                n.host = Some(HostResources {
                    cpu_milli: cpu,
                    memory_mib: mem,
                    pods: i64::MAX / 4,
                    cpu_requested,
                    memory_requested,
                    pods_requested,
                });
            }
        }
        let index: HashMap<String, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        let mut out = Vec::new();
        let mut pending = Vec::new();
        for (pod, phase, owner) in pods {
            let key = pod.reservation_key();
            let Some(record) = cluster.pod(&key) else {
                let waiting = pod.spec.node_name.is_empty() && matches!(phase.as_str(), "Pending" | "");
                if waiting && pod.metadata.deletion_timestamp.is_none() {
                    pending.extend(PendingPod::from_pod(&pod, config).ok());
                }
                continue;
            };
            let Some(&node) = index.get(&*record.node) else { continue };
            let request = PodRequest::from_pod(&pod, config);
            let hints = PodHints::from_annotations(&pod.metadata.annotations).unwrap_or_default();
            let gpu_policy = hints.gpu_policy.clone().unwrap_or_else(|| GpuPolicy::parse(&config.gpu_scheduler_policy));
            let blocked = movable(&pod, &phase, &owner, &request);
            let host = pod_host_request(&pod);
            let mig = resident_instances(&record.mig, || pod.metadata.annotations.get(MIG_ALLOCATIONS_KEY));
            out.push(PlanPod {
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                labels: pod.metadata.labels.clone(),
                owner,
                node,
                footprint: record.footprint.to_vec(),
                mig,
                request,
                hints,
                gpu_policy,
                host,
                blocked,
            });
        }
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let workload =
            Workload::typical(out.iter().filter_map(|p| np::live_task_type(&nodes[p.node], &p.footprint)), 95.0);
        pending.sort_by(PendingPod::queue_order);
        Ok(Self { nodes, index, pods: out, workload, pending, holds })
    }
}
