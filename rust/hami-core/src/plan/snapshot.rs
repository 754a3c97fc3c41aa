//! The planner's working state, built from Kubernetes objects through the engine's own state.

use super::objects::{CachedPod, ObjectCache};
use super::{resident_instances, Immovable, PendingPod, PlanPod};
use crate::config::Config;
use crate::error::Result;
use crate::frag::Workload;
use crate::model::{GpuNode, HostResources};
use crate::policy::node as np;
use crate::state::reservations::Reservation;
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
        let mut objects = ObjectCache::new(config.clone());
        for (n, bytes) in inputs.iter().enumerate() {
            objects.apply_input(bytes, &format!("snapshot input {n}"))?;
        }
        Ok(objects.snapshot(left_out, unix_now()))
    }

    /// The snapshot of `objects` but the `left_out` nodes and the pods bound to them; the caller
    /// has dropped the lapsed holds.
    pub(super) fn assemble(objects: &ObjectCache, left_out: &HashSet<&str>) -> Self {
        let cluster = &objects.cluster;
        let mut holds: Vec<(String, Reservation)> =
            cluster.reservations().iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        holds.sort_by(|a, b| a.1.pod.cmp(&b.1.pod));
        let mut nodes: Vec<GpuNode> =
            cluster.nodes.values().filter(|n| !left_out.contains(n.name.as_str())).cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let host_used = host_used(objects);
        for n in &mut nodes {
            if let Some(&(cpu, mem)) = objects.allocatable.get(&n.name) {
                let (cpu_requested, memory_requested, pods_requested) =
                    host_used.get(n.name.as_str()).copied().unwrap_or_default();
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
        let whole = objects.pods.values().filter_map(|p| match p {
            CachedPod::Whole(w) => Some(&**w),
            CachedPod::Host { .. } => None,
        });
        for w in whole {
            let Some(record) = cluster.pod(&w.reservation_key) else {
                pending.extend(w.pending.clone().map(|p| p.with_quotas(cluster)));
                continue;
            };
            let Some(&node) = index.get(&*record.node) else { continue };
            // The webhook's answer to a replacement depends on the namespace's usage now: asked
            // here, of pods that could move, in namespaces with a quota.
            let denied = w.placed.blocked.is_none() && cluster.has_quotas(&w.placed.namespace);
            let denied = denied.then(|| crate::mutate::replacement_denied(cluster, &w.quota_view, true)).flatten();
            out.push(PlanPod {
                blocked: denied.map(Immovable::ReplacementDenied).or_else(|| w.placed.blocked.clone()),
                node,
                footprint: record.footprint.to_vec(),
                mig: resident_instances(&record.mig, || w.mig_annotation.as_ref()),
                ..w.placed.clone()
            });
        }
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let workload =
            Workload::typical(out.iter().filter_map(|p| np::live_task_type(&nodes[p.node], &p.footprint)), 95.0);
        pending.sort_by(PendingPod::queue_order);
        Self { nodes, index, pods: out, workload, pending, holds }
    }
}

/// Per node: the CPU and memory its running pods request, and how many there are.
fn host_used(objects: &ObjectCache) -> HashMap<&str, (i64, i64, i64)> {
    let mut used: HashMap<&str, (i64, i64, i64)> = HashMap::new();
    for p in objects.pods.values() {
        let (node, (cpu, mem)) = match p {
            CachedPod::Host { node, cpu, memory } => (node.as_str(), (*cpu, *memory)),
            CachedPod::Whole(w) => match &w.running_on {
                Some(node) => (node.as_str(), w.placed.host),
                None => continue,
            },
        };
        let e = used.entry(node).or_insert((0, 0, 0));
        *e = (e.0 + cpu, e.1 + mem, e.2 + 1);
    }
    used
}
