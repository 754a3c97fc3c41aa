//! The planner's objects kept current from watches: the engine's cluster state plus what the
//! planner reads beyond it (node allocatable, each pod's owner, phase and host request).
//!
//! A reflector feeds it LIST pages and watch events as it feeds the scheduler's engine, so the
//! descheduler plans, validates and draws the GPU map without listing the cluster. A one-shot
//! snapshot (`hami-fast plan`, a file) goes through the same type.

use super::{movable, pod_host_request, Immovable, Owner, PendingPod, PlanPod, Snapshot};
use crate::codec::MIG_ALLOCATIONS_KEY;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::fit::Reason;
use crate::k8s::quantity::{cpu_milli, memory_mib};
use crate::k8s::{Envelope, ListPage, Object, ObjectKey, Pod, WatchEvent};
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::state::{ClusterState, EventInfo, ListInfo};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the planner keeps of a pod.
#[derive(Debug, Clone)]
pub(super) enum CachedPod {
    /// A pod that holds, asks for or annotates GPUs: what the planner reads of it, derived once.
    Whole(Box<WholePod>),
    /// Any other pod running on a node: only its CPU and memory request counts there.
    Host { node: String, cpu: i64, memory: i64 },
}

/// A GPU pod as every snapshot reads it, derived when its event arrives rather than per snapshot.
#[derive(Debug, Clone)]
pub(super) struct WholePod {
    /// Where the engine keeps its allocation (the UID, else `namespace/name`).
    pub reservation_key: String,
    /// The pod as the planner moves it, but for where it sits: node, footprint and MIG instances
    /// come from the engine's record when a snapshot is taken.
    pub placed: PlanPod,
    pub mig_annotation: Option<String>,
    /// The pod as a pending one, if it waits for vGPU resources (unbound, Pending, not terminating).
    pub pending: Option<PendingPod>,
    /// Its node while it runs there (bound, not terminal): its CPU and memory count there.
    pub running_on: Option<String>,
    /// kube-scheduler's last message when it found no node.
    pub unschedulable: Option<String>,
    /// What the webhook reads of it for quota (namespace and container resources): whether a
    /// replacement would be admitted is asked of the namespace's usage when a snapshot is taken.
    pub quota_view: Box<Pod>,
}

impl WholePod {
    fn new(pod: &Pod, phase: String, owner: Owner, unschedulable: Option<String>, cluster: &ClusterState) -> Self {
        let config = &cluster.config;
        let mut request = full_request(pod, cluster);
        let admitted = request.asks_vendors().then(|| admitted(pod, cluster)).flatten();
        let view = admitted.as_ref().unwrap_or(pod);
        if admitted.is_some() {
            request = full_request(view, cluster);
        }
        let hints = PodHints::from_annotations(&view.metadata.annotations).unwrap_or_default();
        let gpu_policy = hints.gpu_policy.clone().unwrap_or_else(|| GpuPolicy::parse(&config.gpu_scheduler_policy));
        // Of an NVIDIA pod the webhook refuses only a privileged container (the quota is asked
        // per snapshot): the webhook's full run is kept for pods that ask other backends.
        let checked = request.asks_vendors() || pod.spec.containers.iter().any(|c| c.privileged());
        let denied = || crate::mutate::replacement_denied(cluster, view, false).map(Immovable::ReplacementDenied);
        let blocked = movable(pod, &phase, &owner, &request).or_else(|| checked.then(denied).flatten());
        let unbound = pod.spec.node_name.is_empty();
        let waiting = unbound && matches!(phase.as_str(), "Pending" | "") && pod.metadata.deletion_timestamp.is_none();
        let terminal = matches!(phase.as_str(), "Succeeded" | "Failed");
        Self {
            reservation_key: pod.reservation_key(),
            placed: PlanPod {
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                labels: pod.metadata.labels.clone(),
                owner,
                node: 0,
                footprint: Vec::new(),
                mig: Vec::new(),
                request,
                hints,
                gpu_policy,
                host: pod_host_request(pod),
                blocked,
            },
            mig_annotation: pod.metadata.annotations.get(MIG_ALLOCATIONS_KEY).cloned(),
            pending: waiting.then(|| PendingPod::from_pod(view, config, &cluster.backends).ok()).flatten(),
            running_on: (!unbound && !terminal).then(|| pod.spec.node_name.clone()),
            quota_view: Box::new(quota_view(view)),
            unschedulable,
        }
    }
}

/// Nodes and pods as the planner reads them, kept current one object at a time.
#[derive(Debug)]
pub struct ObjectCache {
    pub(super) config: Config,
    pub(super) cluster: ClusterState,
    /// Node name -> (allocatable CPU in millicores, memory in MiB).
    pub(super) allocatable: HashMap<String, (i64, i64)>,
    /// `namespace/name` -> the pod.
    pub(super) pods: HashMap<String, CachedPod>,
    generation: u64,
    memo: Option<Memo>,
}

/// The last snapshot and until when it holds: the next change, or the first hold to lapse.
#[derive(Debug, Clone)]
struct Memo {
    generation: u64,
    valid_until: i64,
    snapshot: Arc<Snapshot>,
}

/// The item's kind: its own, else its list's (`NodeList` -> `Node`).
fn kind_of<'a>(object: &'a Object, list_kind: &'a str) -> &'a str {
    if object.kind.is_empty() {
        list_kind.strip_suffix("List").unwrap_or("")
    } else {
        &object.kind
    }
}

/// The pod but what the webhook's quota checks read: its namespace, annotations and resources.
fn quota_view(pod: &Pod) -> Pod {
    let mut out = pod.clone();
    out.metadata.labels.clear();
    for c in out.spec.containers.iter_mut().chain(out.spec.init_containers.iter_mut()) {
        c.env = None;
    }
    out
}

/// What the pod asks of every backend the cluster's device config sets up.
fn full_request(pod: &Pod, cluster: &ClusterState) -> PodRequest {
    let mut request = PodRequest::from_pod(pod, &cluster.config);
    request.vendor = crate::vendor::request::vendor_requests(pod, &cluster.backends);
    request
}

/// A pod asking another backend as the webhook leaves it (its card sizes and defaults; no change
/// on a pod it admitted): what a replacement from the same template asks once admitted. `None`
/// for one the webhook would refuse.
fn admitted(pod: &Pod, cluster: &ClusterState) -> Option<Pod> {
    let mut admitted = pod.clone();
    let cores = crate::vendor::neuron::cluster_cores(pod, &cluster.backends, cluster.nodes.values());
    let split = crate::vendor::neuron::split_size(cores);
    crate::mutate::apply_defaults(&mut admitted, &cluster.config, &cluster.backends, split).ok()?;
    Some(admitted)
}

fn pod_key(pod: &Pod) -> String {
    ObjectKey::namespaced(&pod.metadata.namespace, &pod.metadata.name).to_string()
}

impl ObjectCache {
    pub fn new(config: Config) -> Self {
        let cluster = ClusterState::new(config.clone());
        Self { config, cluster, allocatable: HashMap::new(), pods: HashMap::new(), generation: 0, memo: None }
    }

    /// The engine's state of the cached objects (usage, holds).
    pub fn state(&self) -> &ClusterState {
        &self.cluster
    }

    /// Per-node, per-device usage of the cached objects, as [`ClusterState::usage_json`].
    pub fn usage_json(&self) -> Vec<u8> {
        self.cluster.usage_json()
    }

    pub fn node_count(&self) -> usize {
        self.cluster.node_count()
    }

    /// The live holds at `now` as JSON (lapsed ones dropped), as [`ClusterState::holds_json`].
    pub fn holds_json(&mut self, now: i64) -> Vec<u8> {
        self.cluster.holds_json(now)
    }

    /// Bumped on every change: a reader compares it to know whether anything changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// A `List` (e.g. `kubectl get nodes,pods -o json`) or a single Node or Pod. An item the
    /// engine cannot use (e.g. a malformed annotation) is left out of the plan.
    pub fn apply_input(&mut self, bytes: &[u8], what: &str) -> Result<()> {
        let env: Envelope = serde_json::from_slice(bytes).map_err(|e| Error::decode(what, e))?;
        match &env.items {
            Some(items) => {
                let list_kind = env.kind.as_str();
                for item in items {
                    let _ = self.cluster.apply_item(item.get().as_bytes(), list_kind);
                    self.keep(item.get().as_bytes(), list_kind);
                }
            }
            None => {
                let _ = self.cluster.apply_item(bytes, "");
                self.keep(bytes, "");
            }
        }
        self.generation += 1;
        Ok(())
    }

    /// One page of a LIST, as [`ClusterState::apply_list_page`].
    pub fn apply_list_page(&mut self, bytes: &[u8]) -> Result<ListInfo> {
        let info = self.cluster.apply_list_page(bytes)?;
        let page: ListPage = serde_json::from_slice(bytes).map_err(|e| Error::decode("list", e))?;
        for item in &page.items {
            self.keep(item.get().as_bytes(), &page.kind);
        }
        self.generation += 1;
        Ok(info)
    }

    /// One line of a watch stream, as [`ClusterState::apply_watch_event`].
    pub fn apply_watch_event(&mut self, line: &[u8]) -> Result<EventInfo> {
        let info = self.cluster.apply_watch_event(line)?;
        let event: WatchEvent = serde_json::from_slice(line).map_err(|e| Error::decode("watch event", e))?;
        let item = event.object.get().as_bytes();
        match event.event_type.as_str() {
            "ADDED" | "MODIFIED" => self.keep(item, ""),
            "DELETED" => self.forget(item),
            _ => return Ok(info),
        }
        self.generation += 1;
        Ok(info)
    }

    /// After a re-list: forgets every object of `kind` whose key is not in `keys`.
    pub fn retain(&mut self, kind: &str, keys: &HashSet<String>) -> usize {
        let gone = self.cluster.retain(kind, keys);
        match kind {
            "Node" => self.allocatable.retain(|name, _| keys.contains(name)),
            "Pod" => self.pods.retain(|key, _| keys.contains(key)),
            _ => {}
        }
        self.generation += 1;
        gone
    }

    fn keep(&mut self, item: &[u8], list_kind: &str) {
        let Ok(object) = serde_json::from_slice::<Object>(item) else { return };
        match kind_of(&object, list_kind) {
            "Node" => self.keep_node(object),
            "Pod" => self.keep_pod(object),
            _ => {}
        }
    }

    fn keep_node(&mut self, object: Object) {
        let a = &object.status.allocatable;
        let cpu = a.get("cpu").and_then(|q| cpu_milli(&q.0));
        let memory = a.get("memory").and_then(|q| memory_mib(&q.0));
        match (cpu, memory) {
            (Some(cpu), Some(memory)) => self.allocatable.insert(object.metadata.name, (cpu, memory)),
            _ => self.allocatable.remove(&object.metadata.name),
        };
    }

    fn keep_pod(&mut self, object: Object) {
        let owner = object.metadata.controller().map(|(k, n)| (k.to_owned(), n.to_owned()));
        let (pod, status) = object.into_pod();
        let key = pod_key(&pod);
        let whole = self.cluster.pod(&pod.reservation_key()).is_some()
            || pod.metadata.annotations.keys().any(|k| k.starts_with("hami.io/"))
            || !full_request(&pod, &self.cluster).is_empty();
        let running = !pod.spec.node_name.is_empty() && !status.is_terminal();
        let entry = if whole {
            let unschedulable = status.unschedulable_message().map(str::to_owned);
            CachedPod::Whole(Box::new(WholePod::new(&pod, status.phase, owner, unschedulable, &self.cluster)))
        } else if running {
            let (cpu, memory) = pod_host_request(&pod);
            CachedPod::Host { node: pod.spec.node_name, cpu, memory }
        } else {
            self.pods.remove(&key);
            return;
        };
        self.pods.insert(key, entry);
    }

    fn forget(&mut self, item: &[u8]) {
        let Ok(object) = serde_json::from_slice::<Object>(item) else { return };
        match object.kind.as_str() {
            "Node" => {
                self.allocatable.remove(&object.metadata.name);
            }
            "Pod" => {
                let (pod, _) = object.into_pod();
                self.pods.remove(&pod_key(&pod));
            }
            _ => {}
        }
    }

    /// The planner's snapshot of every node but `left_out` (and of the pods bound to them), with
    /// the holds that have not lapsed at `now`.
    pub fn snapshot(&mut self, left_out: &HashSet<&str>, now: i64) -> Snapshot {
        self.cluster.expire_holds(now);
        Snapshot::assemble(self, left_out)
    }

    /// [`Self::snapshot`] of every node, shared while nothing changes and no hold lapses.
    pub fn shared_snapshot(&mut self, now: i64) -> Arc<Snapshot> {
        if let Some(memo) = self.memo.as_ref().filter(|m| m.generation == self.generation && now < m.valid_until) {
            return Arc::clone(&memo.snapshot);
        }
        let snapshot = Arc::new(self.snapshot(&HashSet::new(), now));
        let valid_until = snapshot.holds.iter().map(|(_, r)| r.expires).min().unwrap_or(i64::MAX);
        self.memo = Some(Memo { generation: self.generation, valid_until, snapshot: Arc::clone(&snapshot) });
        snapshot
    }

    /// The waiting pods that moving other pods could make room for, in queue order: kube-scheduler's
    /// last attempt failed for a reason moves can clear, and no live hold is theirs already.
    pub fn waiting_for_moves(&mut self, now: i64) -> Vec<WaitingPod> {
        let snapshot = self.shared_snapshot(now);
        let held: HashSet<&str> = snapshot.holds.iter().map(|(_, r)| &*r.pod).collect();
        let insufficient = format!("Insufficient {}", self.config.resource_count_name);
        let clearable = |message: &str| {
            message.contains(&insufficient)
                || Reason::ALL.iter().any(|r| r.moves_can_clear() && message.contains(r.as_str()))
        };
        snapshot
            .pending
            .iter()
            .filter(|p| !held.contains(p.key.as_str()))
            .filter(|p| match self.pods.get(&p.key) {
                Some(CachedPod::Whole(w)) => w.unschedulable.as_deref().is_some_and(clearable),
                _ => false,
            })
            .map(|p| WaitingPod { pod: p.key.clone(), uid: p.uid.clone(), created: p.created.clone() })
            .collect()
    }
}

/// A pod waiting for vGPU resources ([`ObjectCache::waiting_for_moves`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingPod {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    pub created: Option<String>,
}
