//! Defragmentation planner (the GPU descheduler's): from a cluster snapshot, a sequence of pod
//! moves that frees whole GPUs and lowers FGD's fragmentation, within a move budget.
//!
//! Every move is checked with the engine's own Fit ([`fit_pod`]) against the state left by the
//! moves before it, with the moved pod's old copy released and the target GPUs whitelisted
//! exactly as the pinning webhook will whitelist them (`nvidia.com/use-gpuuuid`): a move that
//! the planner emits is a move HAMi's Filter accepts at the moment it runs. Fragmentation is
//! [`crate::frag`]'s measure on the live view of GPUs ([`np::live_free_milli`]) against the
//! snapshot's own workload ([`np::live_task_type`] of its pods), as the live FGD policy uses it.
//!
//! MIG GPUs are planned with the live engine's bookkeeping: each pod carries the instances it
//! holds (`hami.io/vgpu-mig-allocations`), lifting a pod frees their placements, and a pod that
//! lands takes the instance the engine's Fit grants ([`Seat`]), so no placement is granted twice.
//!
//! Two planners share this state: `drain` (empty the cheapest partly used GPUs first, then
//! polish with single fragmentation-lowering moves) and `greedy` (the baseline: single moves
//! only, each taken when it lowers the fragment).

#[cfg(test)]
mod mig_tests;
mod objective;
mod rejection;
#[cfg(test)]
mod tests;
mod unblock;

pub use objective::{workload_from_spec, Objective};
pub use rejection::Rejection;
pub use unblock::{baseline_queue, unblock, unblock_queue, PendingPod, QueueResult, Unblock};

use crate::codec::{decode_mig_allocations, MigPlacement, MIG_ALLOCATIONS_KEY};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::fit::{fit_host, fit_pod, host_shortfall, mig, NodeFit, PodContext};
use crate::frag::{FragMemo, NodeShape, Workload, MILLI};
use crate::k8s::quantity::{cpu_milli, memory_mib};
use crate::k8s::Envelope;
use crate::k8s::{Object, ObjectKey, Pod};
use crate::model::{
    collapse, Collapsed, DeviceUsage, GpuNode, HostResources, MigHold, CORDONED, HEALTHY, MIG, MIG_UNHEALTHY, RESERVED,
};
use crate::policy::node as np;
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::state::reservations::Reservation;
use crate::state::ClusterState;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

pub use crate::annotations::{DESCHEDULER_SKIP_KEY as SKIP_ANNOTATION, PREFER_NO_EVICTION_KEY as PREFER_NO_EVICTION};

/// CPU and memory a pod requests of its node, as kube-scheduler counts them: the larger of the
/// app containers' sum and any init container.
fn pod_host_request(pod: &Pod) -> (i64, i64) {
    let req = |c: &crate::k8s::Container, key: &str, f: fn(&str) -> Option<i64>| {
        c.resources().requests.as_ref().and_then(|r| r.get(key)).and_then(|q| f(&q.0)).unwrap_or(0)
    };
    let app_cpu: i64 = pod.spec.containers.iter().map(|c| req(c, "cpu", cpu_milli)).sum();
    let app_mem: i64 = pod.spec.containers.iter().map(|c| req(c, "memory", memory_mib)).sum();
    let init_cpu = pod.spec.init_containers.iter().map(|c| req(c, "cpu", cpu_milli)).max().unwrap_or(0);
    let init_mem = pod.spec.init_containers.iter().map(|c| req(c, "memory", memory_mib)).max().unwrap_or(0);
    (app_cpu.max(init_cpu), app_mem.max(init_mem))
}

/// A pod's controlling owner (kind, name).
type Owner = Option<(String, String)>;

/// A pod that holds GPUs in the snapshot.
#[derive(Debug, Clone)]
pub struct PlanPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// The controlling owner (kind, name), if any.
    pub owner: Option<(String, String)>,
    pub node: usize,
    pub footprint: Vec<Collapsed>,
    /// The MIG instances it holds on its node, as the engine's state books them.
    pub mig: Vec<MigInstance>,
    pub request: PodRequest,
    pub hints: PodHints,
    pub gpu_policy: GpuPolicy,
    /// CPU (milli) and memory (MiB) requested of the node (checked where the node's allocatable is known).
    pub host: (i64, i64),
    /// Why the planner may not move it (`None`: movable).
    pub blocked: Option<Immovable>,
}

/// Why the planner leaves a pod where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Immovable {
    Terminating,
    /// It carries [`SKIP_ANNOTATION`] (not `false`) or [`PREFER_NO_EVICTION`].
    OptedOut,
    /// No controller owner: nothing would recreate it.
    BarePod,
    /// Owned by a DaemonSet or a Node (the kind): its replacement comes back to the same node.
    NodeBound(String),
    NoVgpuRequest,
    /// Neither Running nor Pending.
    Phase(String),
    /// An automatic run's `movable` list leaves it out.
    NotOptedIn,
}

impl std::fmt::Display for Immovable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Terminating => f.write_str("terminating"),
            Self::OptedOut => write!(f, "opted out ({SKIP_ANNOTATION} or {PREFER_NO_EVICTION})"),
            Self::BarePod => f.write_str("bare pod (no controller owner): it would not be recreated"),
            Self::NodeBound(kind) => write!(f, "{kind} pod"),
            Self::NoVgpuRequest => f.write_str("its spec requests no vGPU resource"),
            Self::Phase(phase) => write!(f, "phase {phase}"),
            Self::NotOptedIn => f.write_str("not opted in to automatic moves"),
        }
    }
}

impl PlanPod {
    /// The engine's Fit context of this pod under `hints` (its own, or pinned to GPUs).
    pub(crate) fn context<'a>(&'a self, hints: &'a PodHints) -> PodContext<'a> {
        PodContext { request: &self.request, hints, gpu_policy: &self.gpu_policy, quota: None, device_preference: None }
    }

    pub fn key(&self) -> String {
        ObjectKey::namespaced(&self.namespace, &self.name).to_string()
    }

    fn seat(&self) -> Seat {
        Seat { footprint: self.footprint.clone(), mig: self.mig.clone() }
    }
}

/// One MIG instance a pod holds or is granted: its GPU, profile and placement.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MigInstance {
    pub gpu: String,
    pub profile: String,
    pub placement: MigPlacement,
}

impl MigInstance {
    fn hold(&self) -> MigHold {
        MigHold { gpu: self.gpu.as_str().into(), placement: self.placement }
    }
}

/// What a pod occupies on its node: the devices' footprint and the MIG instances among them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seat {
    pub footprint: Vec<Collapsed>,
    pub mig: Vec<MigInstance>,
}

impl Seat {
    /// The seat a Fit grants on `node`.
    fn of(fit: &NodeFit, init_count: usize) -> Self {
        let mig = fit
            .mig
            .iter()
            .map(|a| MigInstance { gpu: a.gpu_uuid.clone(), profile: a.profile.clone(), placement: a.placement })
            .collect();
        Self { footprint: collapse(&fit.slots, init_count, false), mig }
    }

    fn holds(&self) -> Vec<MigHold> {
        self.mig.iter().map(MigInstance::hold).collect()
    }
}

/// The instances a resident pod holds: the engine state's holds (what it booked), with the
/// profile names of the pod's annotation (the same list, in order, when the state could read it).
fn resident_instances<'a>(holds: &[MigHold], annotation: impl FnOnce() -> Option<&'a String>) -> Vec<MigInstance> {
    if holds.is_empty() {
        return Vec::new();
    }
    let decoded = annotation().and_then(|v| decode_mig_allocations(v).ok()).unwrap_or_default();
    let profile = |i: usize| decoded.get(i).filter(|_| decoded.len() == holds.len()).map(|a| a.profile.clone());
    holds
        .iter()
        .enumerate()
        .map(|(i, h)| MigInstance {
            gpu: h.gpu.to_string(),
            profile: profile(i).unwrap_or_default(),
            placement: h.placement,
        })
        .collect()
}

/// The largest per-GPU demand of any container of `request` on a card of `devmem` MiB:
/// (GPUs, memory as the Fit checks it, cores).
fn per_gpu_request(request: &PodRequest, devmem: i64) -> (usize, i64, i64) {
    request.slots.iter().flatten().fold((0, 0, 0), |(k, m, c), r| {
        (k.max(r.nums.max(0) as usize), m.max(r.resolved_memory(devmem)), c.max(r.clamped_cores()))
    })
}

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

/// Whether a pod may be evicted and recreated elsewhere, or why not.
fn movable(pod: &Pod, phase: &str, owner: &Option<(String, String)>, request: &PodRequest) -> Option<Immovable> {
    let ann = &pod.metadata.annotations;
    if pod.metadata.deletion_timestamp.is_some() {
        return Some(Immovable::Terminating);
    }
    if ann.get(SKIP_ANNOTATION).is_some_and(|v| v != "false") || ann.contains_key(PREFER_NO_EVICTION) {
        return Some(Immovable::OptedOut);
    }
    match owner {
        None => return Some(Immovable::BarePod),
        Some((kind, _)) if kind == "DaemonSet" || kind == "Node" => return Some(Immovable::NodeBound(kind.clone())),
        _ => {}
    }
    if request.is_empty() {
        return Some(Immovable::NoVgpuRequest);
    }
    if !matches!(phase, "Running" | "Pending" | "") {
        return Some(Immovable::Phase(phase.to_owned()));
    }
    None
}

impl Snapshot {
    /// Builds the state from Kubernetes objects: each input is a `List` (e.g. `kubectl get
    /// nodes,pods -o json`) or a single Node / Pod, JSON bytes.
    pub fn from_objects(inputs: &[&[u8]], config: &Config) -> Result<Self> {
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
                // The engine's state takes every item (one without `kind` takes the list's); an
                // item it cannot use (e.g. a malformed annotation) is left out of the plan.
                let _ = cluster.apply_item(item, list_kind);
                let Ok(object) = serde_json::from_slice::<Object>(item) else { continue };
                let kind =
                    if object.kind.is_empty() { list_kind.strip_suffix("List").unwrap_or("") } else { &object.kind };
                match kind {
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

    /// Cluster-level measures.
    pub fn measures(&self) -> Measures {
        let mut memo = FragMemo::default();
        let frags: Vec<f64> = self.nodes.iter().map(|n| node_frag(n, &self.workload, &mut memo)).collect();
        self.measures_with(&frags)
    }

    fn measures_with(&self, frags: &[f64]) -> Measures {
        let (mut gpus, mut healthy, mut free) = (0usize, 0usize, 0usize);
        let mut idle_milli = 0i64;
        for n in &self.nodes {
            let free_milli = np::live_free_milli(n);
            for (i, d) in n.hot.iter().enumerate() {
                gpus += 1;
                if d.has(HEALTHY) {
                    healthy += 1;
                    idle_milli += free_milli[i];
                    if is_whole_free(&n.usage[i]) && !d.has(CORDONED) {
                        free += 1;
                    }
                }
            }
        }
        let frag: f64 = frags.iter().sum();
        Measures {
            free_whole_gpus: free,
            fragmentation: round3(frag / MILLI as f64),
            fragmentation_pct_of_idle: if idle_milli > 0 { round3(100.0 * frag / idle_milli as f64) } else { 0.0 },
            gpus,
            healthy_gpus: healthy,
        }
    }

    /// Per-node measures (for `/api/v1/fragmentation`).
    pub fn node_measures(&self) -> Vec<NodeMeasure> {
        let mut memo = FragMemo::default();
        self.nodes
            .iter()
            .map(|n| NodeMeasure {
                node: n.name.clone(),
                registered: n.is_registered(),
                gpus: n.devices.len(),
                free_whole_gpus: n
                    .usage
                    .iter()
                    .zip(&n.hot)
                    .filter(|(u, h)| is_whole_free(u) && h.has(HEALTHY) && !h.has(CORDONED))
                    .count(),
                partly_used_gpus: n.usage.iter().filter(|u| !is_whole_free(u)).count(),
                fragmentation: round3(node_frag(n, &self.workload, &mut memo) / MILLI as f64),
                free_milli: np::live_free_milli(n),
            })
            .collect()
    }
}

fn is_whole_free(u: &DeviceUsage) -> bool {
    u.used == 0 && u.usedmem == 0 && u.usedcores == 0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn node_model(n: &GpuNode) -> &str {
    n.devices.first().map_or("", |d| d.device_type.as_str())
}

fn node_frag(n: &GpuNode, workload: &Workload, memo: &mut FragMemo) -> f64 {
    let free = np::live_free_milli(n);
    memo.frag(&NodeShape { cpu_left: 0, gpu_free: &free, model: node_model(n) }, workload)
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Measures {
    pub free_whole_gpus: usize,
    /// FGD's expected unusable GPU capacity, in GPUs.
    pub fragmentation: f64,
    pub fragmentation_pct_of_idle: f64,
    pub gpus: usize,
    pub healthy_gpus: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeMeasure {
    pub node: String,
    pub registered: bool,
    pub gpus: usize,
    pub free_whole_gpus: usize,
    pub partly_used_gpus: usize,
    pub fragmentation: f64,
    pub free_milli: Vec<i64>,
}

#[derive(Clone, Serialize, PartialEq, Eq)]
pub struct Place {
    pub node: String,
    pub gpus: Vec<String>,
    /// The MIG instances among the GPUs (none on GPUs that are not in MIG mode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mig: Vec<MigInstance>,
}

/// As derived, without `mig` when there is none (the texts of [`Rejection`] stay as they were).
impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Place");
        out.field("node", &self.node).field("gpus", &self.gpus);
        if !self.mig.is_empty() {
            out.field("mig", &self.mig);
        }
        out.finish()
    }
}

impl Place {
    /// Same node and GPUs (what a placement names; the instances follow from the Fit).
    fn same_gpus(&self, other: &Self) -> bool {
        self.node == other.node && self.gpus == other.gpus
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Move {
    pub pod: String,
    pub from: Place,
    pub to: Place,
}

/// How a plan is searched: `FreeGpus` drains GPUs only (objective free-gpus: every move must
/// help empty a GPU); `Drain` drains, then spends the leftover budget on fragment-lowering
/// single moves (objective frag); `Greedy` is the baseline (single fragment-lowering moves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    FreeGpus,
    Drain,
    Greedy,
}

impl Strategy {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "drain" => Ok(Self::Drain),
            "greedy" => Ok(Self::Greedy),
            other => Err(Error::config("", format!("unknown planner {other:?} (want drain or greedy)"))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::FreeGpus | Self::Drain => "drain",
            Self::Greedy => "greedy",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanResult {
    pub planner: &'static str,
    pub moves: Vec<Move>,
    pub before: Measures,
    pub after: Measures,
    pub elapsed_ms: f64,
}

/// The working state of one planning run.
struct Planner<'s> {
    s: &'s mut Snapshot,
    memo: FragMemo,
    frags: Vec<f64>,
    moved: HashSet<usize>,
    moves: Vec<Move>,
    budget: usize,
    /// Pods per (node, device).
    on_gpu: HashMap<(usize, usize), Vec<usize>>,
}

/// Per-GPU demand of a pod: (GPU count, memory, cores) per device, the largest entry.
fn demand(p: &PlanPod) -> (usize, i64, i64) {
    let mem = p.footprint.iter().map(|c| c.mem).max().unwrap_or(0);
    let cores = p.footprint.iter().map(|c| c.cores).max().unwrap_or(0);
    (p.footprint.len(), mem, cores)
}

/// Whether MIG GPU `d` of `n` has room for one instance of the pod as the Fit checks it (the
/// request's memory, cores and a slot, and a free placement of the profile HAMi would choose);
/// the memory the card has left after that instance.
fn mig_room(n: &GpuNode, d: usize, p: &PlanPod) -> Option<i64> {
    let (h, u, dev) = (&n.hot[d], &n.usage[d], &n.devices[d]);
    let (_, mem, cores) = per_gpu_request(&p.request, i64::from(h.devmem));
    let free_mem = i64::from(h.devmem) - u.usedmem;
    if free_mem < mem || i64::from(h.devcore) - u.usedcores < cores || u.used >= i64::from(h.count) {
        return None;
    }
    let allowed = p.hints.type_allowed(&dev.device_type.to_uppercase()) && p.hints.uuid_allowed(&dev.id);
    let pick = mig::select(&dev.mig_profiles, &n.mig.occupied[d], mem).filter(|_| allowed)?;
    Some(free_mem - i64::from(dev.mig_profiles[pick.profile].memory_mb))
}

/// The Fit the engine's Filter makes of a replacement pod pinned to the GPUs `fit` chose
/// (`nvidia.com/use-gpuuuid`), in HAMi's order. On MIG GPUs the order matters beyond which GPUs
/// are used: a MIG GPU that granted an instance is examined again, so the GPU walked first gives
/// as many instances as it can, and that decides the profiles and placements.
fn pinned_mig_fit(n: &GpuNode, ctx: &PodContext, fit: &NodeFit) -> Option<NodeFit> {
    let mut hints = ctx.hints.clone();
    hints.use_uuids.clear();
    for d in fit.slots.iter().flatten() {
        if !hints.use_uuids.contains(&d.uuid) {
            hints.use_uuids.push(d.uuid.clone());
        }
    }
    fit_pod(n, &PodContext { hints: &hints, device_preference: None, ..*ctx }).ok()
}

impl<'s> Planner<'s> {
    fn new(s: &'s mut Snapshot, budget: usize) -> Self {
        let mut memo = FragMemo::default();
        let frags = s.nodes.iter().map(|n| node_frag(n, &s.workload, &mut memo)).collect();
        let mut on_gpu: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        for (pi, p) in s.pods.iter().enumerate() {
            for c in &p.footprint {
                if let Some(d) = s.nodes[p.node].device_index(&c.uuid) {
                    on_gpu.entry((p.node, d)).or_default().push(pi);
                }
            }
        }
        Self { s, memo, frags, moved: HashSet::new(), moves: Vec::new(), budget, on_gpu }
    }

    fn refresh_frag(&mut self, node: usize) {
        self.frags[node] = node_frag(&self.s.nodes[node], &self.s.workload, &mut self.memo);
    }

    fn index_pod(&mut self, pi: usize, add: bool) {
        let p = &self.s.pods[pi];
        for c in &p.footprint {
            if let Some(d) = self.s.nodes[p.node].device_index(&c.uuid) {
                let list = self.on_gpu.entry((p.node, d)).or_default();
                if add {
                    list.push(pi);
                } else {
                    list.retain(|&x| x != pi);
                }
            }
        }
    }

    fn lift(&mut self, pi: usize) {
        self.index_pod(pi, false);
        let p = &self.s.pods[pi];
        let (cpu, mem) = p.host;
        let n = &mut self.s.nodes[p.node];
        n.account(&p.footprint, -1);
        n.account_mig(&p.footprint, &p.mig.iter().map(MigInstance::hold).collect::<Vec<_>>(), -1);
        if let Some(h) = n.host.as_mut() {
            h.cpu_requested -= cpu;
            h.memory_requested -= mem;
            h.pods_requested -= 1;
        }
    }

    fn land(&mut self, pi: usize, node: usize, seat: Seat) {
        let (cpu, mem) = self.s.pods[pi].host;
        let n = &mut self.s.nodes[node];
        n.account(&seat.footprint, 1);
        n.account_mig(&seat.footprint, &seat.holds(), 1);
        if let Some(h) = n.host.as_mut() {
            h.cpu_requested += cpu;
            h.memory_requested += mem;
            h.pods_requested += 1;
        }
        let p = &mut self.s.pods[pi];
        p.node = node;
        p.footprint = seat.footprint;
        p.mig = seat.mig;
        self.index_pod(pi, true);
    }

    /// Target nodes ranked by the estimated fragment change of placing the pod there (best
    /// fit on the allowed GPUs), cheapest first; only nodes with enough allowed GPUs.
    fn rank_targets(&mut self, pi: usize, allowed: &dyn Fn(usize, usize, &GpuNode) -> bool) -> Vec<(f64, i64, usize)> {
        let p = &self.s.pods[pi];
        let (k, mem, cores) = demand(p);
        let mut out = Vec::new();
        let mut fits: Vec<(i64, usize)> = Vec::with_capacity(16);
        for (t, n) in self.s.nodes.iter().enumerate() {
            if !n.is_registered() || n.devices.len() < k || host_shortfall(n, p.host.0, p.host.1) != [false; 3] {
                continue;
            }
            fits.clear();
            for (d, (h, u)) in n.hot.iter().zip(&n.usage).enumerate() {
                if !h.has(HEALTHY) || h.has(CORDONED | RESERVED | MIG_UNHEALTHY) || !allowed(t, d, n) {
                    continue;
                }
                if h.has(MIG) {
                    if let Some(left) = mig_room(n, d, p) {
                        fits.push((left, d));
                    }
                    continue;
                }
                let free_mem = i64::from(h.devmem) - u.usedmem;
                if free_mem < mem || i64::from(h.devcore) - u.usedcores < cores || u.used >= i64::from(h.count) {
                    continue;
                }
                if (cores >= 100 && u.used > 0) || u.usedcores >= 100 {
                    continue;
                }
                if !p.hints.type_allowed(&n.devices[d].device_type.to_uppercase())
                    || !p.hints.uuid_allowed(&n.devices[d].id)
                {
                    continue;
                }
                fits.push((free_mem - mem, d));
            }
            if fits.len() < k {
                continue;
            }
            fits.sort_unstable();
            let mut free = np::live_free_milli(n);
            let mut leftover = 0;
            for &(left, d) in fits.iter().take(k) {
                let devmem = i64::from(n.hot[d].devmem).max(1);
                free[d] = (left.max(0) * MILLI) / devmem;
                leftover += left;
            }
            let after =
                self.memo.frag(&NodeShape { cpu_left: 0, gpu_free: &free, model: node_model(n) }, &self.s.workload);
            out.push((after - self.frags[t], leftover, t));
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        out
    }

    /// The engine's Fit of the (lifted) pod on node `t`, restricted to the allowed GPUs, the
    /// tightest first. Returns the new seat: on MIG GPUs, the instances the engine's Filter grants
    /// the replacement pinned to the chosen GPUs ([`pinned_mig_fit`]).
    fn fit_on(&self, pi: usize, t: usize, allowed: &dyn Fn(usize, usize, &GpuNode) -> bool) -> Option<Seat> {
        let p = &self.s.pods[pi];
        let n = &self.s.nodes[t];
        if host_shortfall(n, p.host.0, p.host.1) != [false; 3] {
            return None;
        }
        let mut hints = p.hints.clone();
        hints.use_uuids = n
            .devices
            .iter()
            .enumerate()
            .filter(|(d, dev)| allowed(t, *d, n) && p.hints.uuid_allowed(&dev.id))
            .map(|(_, dev)| dev.id.clone())
            .collect();
        if hints.use_uuids.is_empty() {
            return None;
        }
        hints.nouse_uuids.clear();
        let prefer = |node: &GpuNode, usage: &[DeviceUsage]| {
            let mut order: Vec<usize> = (0..node.devices.len()).collect();
            order.sort_by_key(|&d| (i64::from(node.hot[d].devmem) - usage[d].usedmem, d));
            Some(order)
        };
        let ctx = PodContext { device_preference: Some(&prefer), ..p.context(&hints) };
        let fit = fit_pod(n, &ctx).ok()?;
        let fit = if fit.mig.is_empty() { fit } else { pinned_mig_fit(n, &ctx, &fit)? };
        Some(Seat::of(&fit, p.request.init_count))
    }

    fn place_of(&self, node: usize, seat: &Seat) -> Place {
        Place {
            node: self.s.nodes[node].name.clone(),
            gpus: seat.footprint.iter().map(|c| c.uuid.to_string()).collect(),
            mig: seat.mig.clone(),
        }
    }

    /// The best target the Fit accepts for a lifted pod: (target node, seat there).
    fn relocate(
        &mut self,
        pi: usize,
        allowed: &dyn Fn(usize, usize, &GpuNode) -> bool,
        max_delta: f64,
    ) -> Option<(usize, Seat)> {
        let ranked = self.rank_targets(pi, allowed);
        for &(delta, _, t) in ranked.iter().take(8) {
            if delta > max_delta {
                break;
            }
            if let Some(seat) = self.fit_on(pi, t, allowed) {
                let p = &self.s.pods[pi];
                if t == p.node && seat.footprint.iter().map(|c| &c.uuid).eq(p.footprint.iter().map(|c| &c.uuid)) {
                    continue;
                }
                return Some((t, seat));
            }
        }
        None
    }

    fn record_move(&mut self, pi: usize, from_node: usize, from: &Seat) {
        let p = &self.s.pods[pi];
        let mv = Move { pod: p.key(), from: self.place_of(from_node, from), to: self.place_of(p.node, &p.seat()) };
        self.moves.push(mv);
        self.moved.insert(pi);
    }

    /// [`Self::drain`] again while a pass frees more: emptying one GPU can make another
    /// drainable (its pods now have somewhere to go).
    fn drain_until_stable(&mut self) {
        loop {
            let before = self.moves.len();
            self.drain();
            if self.moves.len() == before || self.moves.len() >= self.budget {
                return;
            }
        }
    }

    /// Empties partly used GPUs, cheapest (fewest pods, least memory) first.
    fn drain(&mut self) {
        let mut cands: Vec<(usize, i64, usize, usize)> = Vec::new();
        for (&(n, d), pods) in &self.on_gpu {
            let h = &self.s.nodes[n].hot[d];
            if pods.is_empty() || !h.has(HEALTHY) || h.has(CORDONED) {
                continue;
            }
            if pods.iter().any(|&pi| self.s.pods[pi].blocked.is_some()) {
                continue;
            }
            // A GPU is worth draining when its pods leave the rest of their GPUs no fuller.
            cands.push((pods.len(), self.s.nodes[n].usage[d].usedmem, n, d));
        }
        cands.sort_unstable();
        for (_, _, n, d) in cands {
            if self.moves.len() >= self.budget {
                break;
            }
            let pods: Vec<usize> = self.on_gpu.get(&(n, d)).cloned().unwrap_or_default();
            if pods.is_empty()
                || self.moves.len() + pods.len() > self.budget
                || pods.iter().any(|pi| self.moved.contains(pi))
            {
                continue;
            }
            if pods.iter().any(|&pi| self.s.pods[pi].blocked.is_some()) {
                continue;
            }
            let mut order = pods.clone();
            order.sort_by_key(|&pi| std::cmp::Reverse(demand(&self.s.pods[pi]).1));
            // Targets: partly used GPUs other than the ones being drained; whole free GPUs stay free.
            let allowed =
                move |t: usize, dev: usize, node: &GpuNode| (t, dev) != (n, d) && !is_whole_free(&node.usage[dev]);
            let mut done: Vec<(usize, usize, Seat)> = Vec::new();
            let mut ok = true;
            for &pi in &order {
                self.lift(pi);
                match self.relocate(pi, &allowed, f64::INFINITY) {
                    Some((t, seat)) => {
                        let (from, old) = (self.s.pods[pi].node, self.s.pods[pi].seat());
                        self.land(pi, t, seat);
                        done.push((pi, from, old));
                    }
                    None => {
                        let (from, old) = (self.s.pods[pi].node, self.s.pods[pi].seat());
                        self.land(pi, from, old);
                        ok = false;
                        break;
                    }
                }
            }
            if !ok || !is_whole_free(&self.s.nodes[n].usage[d]) {
                for (pi, from, old) in done.into_iter().rev() {
                    self.lift(pi);
                    self.land(pi, from, old);
                }
                continue;
            }
            let mut touched: Vec<usize> = vec![n];
            for (pi, from, old) in done {
                touched.push(self.s.pods[pi].node);
                self.record_move(pi, from, &old);
            }
            touched.sort_unstable();
            touched.dedup();
            for t in touched {
                self.refresh_frag(t);
            }
        }
    }

    /// Single moves onto partly used GPUs, each taken when it lowers the cluster fragment;
    /// pods on the most fragmented nodes first.
    fn greedy(&mut self) {
        let mut order: Vec<usize> = (0..self.s.pods.len()).filter(|pi| self.s.pods[*pi].blocked.is_none()).collect();
        order.sort_by(|&a, &b| {
            let (na, nb) = (self.s.pods[a].node, self.s.pods[b].node);
            self.frags[nb].total_cmp(&self.frags[na]).then(a.cmp(&b))
        });
        // Whole free GPUs stay free: filling one to lower the fragment would undo the point.
        let any = |_: usize, dev: usize, node: &GpuNode| !is_whole_free(&node.usage[dev]);
        for pi in order {
            if self.moves.len() >= self.budget {
                break;
            }
            if self.moved.contains(&pi) {
                continue;
            }
            let src = self.s.pods[pi].node;
            let before_src = self.frags[src];
            self.lift(pi);
            let lifted_src = node_frag(&self.s.nodes[src], &self.s.workload, &mut self.memo);
            let saved = self.frags[src];
            self.frags[src] = lifted_src;
            let gain = lifted_src - before_src;
            let threshold = -gain - 1.0;
            let target = self.relocate(pi, &any, threshold);
            self.frags[src] = saved;
            let old = self.s.pods[pi].seat();
            match target {
                Some((t, seat)) => {
                    self.land(pi, t, seat);
                    let total_before = self.frags[src] + if t != src { self.frags[t] } else { 0.0 };
                    let after_src = node_frag(&self.s.nodes[src], &self.s.workload, &mut self.memo);
                    let after_t =
                        if t != src { node_frag(&self.s.nodes[t], &self.s.workload, &mut self.memo) } else { 0.0 };
                    if after_src + after_t < total_before - 1.0 {
                        self.refresh_frag(src);
                        self.refresh_frag(t);
                        self.record_move(pi, src, &old);
                    } else {
                        self.lift(pi);
                        self.land(pi, src, old);
                    }
                }
                None => self.land(pi, src, old),
            }
        }
    }
}

/// Plans on a copy of the snapshot; `budget` = the most moves.
pub fn plan(snapshot: &Snapshot, budget: usize, strategy: Strategy) -> PlanResult {
    plan_on(&mut snapshot.clone(), budget, strategy)
}

/// [`plan`] in place: `work` is left in the state after the moves.
pub fn plan_on(work: &mut Snapshot, budget: usize, strategy: Strategy) -> PlanResult {
    let start = std::time::Instant::now();
    let mut planner = Planner::new(work, budget);
    let before = planner.s.measures_with(&planner.frags);
    match strategy {
        Strategy::FreeGpus => planner.drain_until_stable(),
        Strategy::Drain => {
            planner.drain();
            planner.greedy();
        }
        Strategy::Greedy => planner.greedy(),
    }
    let moves = std::mem::take(&mut planner.moves);
    let frags = planner.frags.clone();
    let after = planner.s.measures_with(&frags);
    PlanResult { planner: strategy.name(), moves, before, after, elapsed_ms: start.elapsed().as_secs_f64() * 1000.0 }
}

/// Re-runs a move sequence on a fresh copy of `snapshot`, checking each move with the engine's
/// Fit at the moment it runs (old copy released, target GPUs whitelisted). `Err` names the
/// first move that would not be accepted.
pub fn validate_moves(snapshot: &Snapshot, moves: &[Move]) -> Result<Measures, Rejection> {
    let mut work = snapshot.clone();
    let by_key: HashMap<String, usize> = work.pods.iter().enumerate().map(|(i, p)| (p.key(), i)).collect();
    let mut planner = Planner::new(&mut work, usize::MAX);
    for (k, mv) in moves.iter().enumerate() {
        let &pi = by_key.get(&mv.pod).ok_or_else(|| Rejection::PodNotInSnapshot { step: k, pod: mv.pod.clone() })?;
        let p = &planner.s.pods[pi];
        if let Some(why) = &p.blocked {
            return Err(Rejection::PodBlocked { step: k, pod: mv.pod.clone(), why: why.clone() });
        }
        let now = planner.place_of(p.node, &p.seat());
        if !now.same_gpus(&mv.from) {
            return Err(Rejection::PodElsewhere {
                step: k,
                pod: mv.pod.clone(),
                now: Box::new(now),
                from: Box::new(mv.from.clone()),
            });
        }
        let &t = planner
            .s
            .index
            .get(&mv.to.node)
            .ok_or_else(|| Rejection::TargetNodeMissing { step: k, node: mv.to.node.clone() })?;
        let targets: HashSet<String> = mv.to.gpus.iter().cloned().collect();
        planner.lift(pi);
        let allowed = |_: usize, d: usize, n: &GpuNode| targets.contains(&n.devices[d].id);
        let seat = planner.fit_on(pi, t, &allowed).ok_or_else(|| Rejection::MoveDoesNotFit {
            step: k,
            pod: mv.pod.clone(),
            to: mv.to.clone(),
        })?;
        planner.land(pi, t, seat);
        planner.refresh_frag(t);
        let src = planner.s.index[&mv.from.node];
        planner.refresh_frag(src);
    }
    let frags = planner.frags.clone();
    Ok(work.measures_with(&frags))
}

/// Validates a single placement target for one pod (the controller's pre-eviction check):
/// the node exists and is registered, every GPU exists and is healthy and not cordoned, and the
/// pod fits there once its old copy is gone. `gpus` are `gpu-N` indexes (an optional `/suffix`
/// is ignored) or UUIDs. Returns the resolved UUIDs.
pub fn validate_target(snapshot: &Snapshot, pod: &str, node: &str, gpus: &[String]) -> Result<Vec<String>, Rejection> {
    let &t = snapshot.index.get(node).ok_or_else(|| Rejection::NodeNotFound { node: node.into() })?;
    let n = &snapshot.nodes[t];
    if let Some(e) = &n.register_error {
        return Err(Rejection::NodeNotRegistered { node: node.into(), error: e.clone() });
    }
    let uuids = resolve_gpus(n, gpus)?;
    for u in &uuids {
        let d = n.device_index(u).expect("resolved above");
        if !n.hot[d].has(HEALTHY) {
            return Err(Rejection::GpuUnhealthy { gpu: u.clone(), node: node.into() });
        }
        if n.hot[d].has(CORDONED) {
            return Err(Rejection::GpuCordoned { gpu: u.clone(), node: node.into() });
        }
        if let Some((_, r)) = snapshot.holds.iter().find(|(_, r)| *r.node == *node && r.gpus.iter().any(|g| **g == **u))
        {
            return Err(Rejection::GpuHeld { gpu: u.clone(), node: node.into(), pending: r.pod.to_string() });
        }
    }
    let mut work = snapshot.clone();
    let mut planner = Planner::new(&mut work, usize::MAX);
    let Some(pi) = planner.s.pods.iter().position(|p| p.key() == pod) else {
        // The pod holds no GPU yet (or is not known): nothing to release, fit a request-less check.
        return Ok(uuids);
    };
    let (k, _, _) = demand(&planner.s.pods[pi]);
    if k != uuids.len() {
        return Err(Rejection::GpuCountMismatch { pod: pod.into(), uses: k, named: uuids.len() });
    }
    planner.lift(pi);
    let set: HashSet<&String> = uuids.iter().collect();
    let allowed = |_: usize, d: usize, n: &GpuNode| set.contains(&n.devices[d].id);
    if let Err(reason) = fit_host(&planner.s.nodes[t], planner.s.pods[pi].host.0, planner.s.pods[pi].host.1) {
        return Err(Rejection::HostDoesNotFit { pod: pod.into(), node: node.into(), reason: Box::new(reason) });
    }
    if planner.fit_on(pi, t, &allowed).is_none() {
        let p = &planner.s.pods[pi];
        let hints = p.hints.pinned_to(&uuids);
        let reason = fit_pod(&planner.s.nodes[t], &p.context(&hints)).err().map(|f| f.to_string()).unwrap_or_default();
        return Err(Rejection::GpusDoNotFit { pod: pod.into(), node: node.into(), gpus: uuids, reason });
    }
    Ok(uuids)
}

/// A device id as registered, or `gpu-N` / `gpu-N/x` (by index) on `node` -> the device ids, in
/// the given order. An id is matched whole first: registered ids may hold `/` (MIG ids of old
/// drivers, `MIG-GPU-<uuid>/7/0`) or look like `gpu-N` themselves.
pub fn resolve_gpus(n: &GpuNode, gpus: &[String]) -> Result<Vec<String>, Rejection> {
    if gpus.is_empty() {
        return Err(Rejection::NoGpus);
    }
    let by_index = |g: &str| {
        let (base, share) = g.split_once('/').map_or((g, None), |(b, s)| (b, Some(s)));
        let idx = base.strip_prefix("gpu-")?.parse::<u32>().ok()?;
        if share.is_some_and(|s| s.parse::<u32>().is_err()) {
            return None;
        }
        n.devices.iter().find(|d| d.index == idx)
    };
    let mut out = Vec::new();
    for g in gpus {
        let found = n.devices.iter().find(|d| d.id == *g).or_else(|| by_index(g));
        match found {
            Some(d) if !out.contains(&d.id) => out.push(d.id.clone()),
            Some(_) => return Err(Rejection::GpuNamedTwice { gpu: g.clone() }),
            None => return Err(Rejection::GpuNotOnNode { gpu: g.clone(), node: n.name.to_string() }),
        }
    }
    Ok(out)
}

/// How many pods stay put for each reason (the reason's text), so "0 movable" says why.
fn immovable_counts(pods: &[PlanPod]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for why in pods.iter().filter_map(|p| p.blocked.as_ref()) {
        *out.entry(why.to_string()).or_default() += 1;
    }
    out
}

/// The JSON of `hami-fast plan`: the chosen planner's moves and measures, the baseline beside.
pub fn plan_json(snapshot: &Snapshot, budget: usize, strategy: Strategy, baseline: bool) -> serde_json::Value {
    let main = plan(snapshot, budget, strategy);
    let movable = snapshot.pods.iter().filter(|p| p.blocked.is_none()).count();
    let objective = if strategy == Strategy::FreeGpus { Objective::FreeGpus } else { Objective::Frag };
    let mut out = serde_json::json!({
        "objective": objective.name(),
        "planner": main.planner,
        "max_moves": budget,
        "moves": main.moves,
        "before": main.before,
        "after": main.after,
        "elapsed_ms": round3(main.elapsed_ms),
        "pods": snapshot.pods.len(),
        "movable_pods": movable,
        "immovable": immovable_counts(&snapshot.pods),
        "nodes": snapshot.nodes.len(),
    });
    if baseline {
        let other = if strategy == Strategy::Greedy { Strategy::Drain } else { Strategy::Greedy };
        let b = plan(snapshot, budget, other);
        out["baseline"] = serde_json::json!({
            "planner": b.planner,
            "moves": b.moves.len(),
            "after": b.after,
            "elapsed_ms": round3(b.elapsed_ms),
        });
    }
    out
}

/// Options of [`plan_bytes`] (JSON): `{"max_moves": N | null, "max_moves_pct": 5.0,
/// "objective": "free-gpus"|"frag", "workload": "typical"|"whole-gpu"|[task types],
/// "planner": "drain"|"greedy", "baseline": true, "for_pod": {a Pod} | null}`.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct PlanOptions {
    pub max_moves: Option<usize>,
    pub max_moves_pct: f64,
    pub objective: String,
    pub workload: serde_json::Value,
    pub planner: String,
    pub baseline: bool,
    pub for_pod: Option<serde_json::Value>,
    /// Objective `pending`: the most moves spent on one pending pod.
    pub max_moves_per_pod: Option<usize>,
    /// Only these pods (`namespace/name`) may be moved (the automatic mode's opt-in); all when absent.
    pub movable: Option<Vec<String>>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            max_moves: None,
            max_moves_pct: 5.0,
            objective: "free-gpus".into(),
            workload: serde_json::Value::Null,
            planner: "drain".into(),
            baseline: true,
            for_pod: None,
            max_moves_per_pod: None,
            movable: None,
        }
    }
}

/// Objective `pending`: moves one pending pod may take by default (cheap pods first is the
/// point: a pod that needs a whole node cleared waits for a bigger budget).
pub const PER_POD_DEFAULT_MOVES: usize = 8;

/// `--for` budgets at least this many moves when none is given (5 % of a small cluster's pods is 0).
pub const FOR_MIN_DEFAULT_MOVES: usize = 10;

/// The binding's entry point (`hami-fast plan`, `kubectl hami plan`, `POST /api/v1/plan`):
/// objects in, plan JSON out.
pub fn plan_bytes(inputs: &[&[u8]], options: &[u8], config: &Config) -> Result<Vec<u8>> {
    let options: PlanOptions = if options.is_empty() {
        PlanOptions::default()
    } else {
        serde_json::from_slice(options).map_err(|e| Error::config("plan options", e))?
    };
    let objective = Objective::parse(&options.objective)?;
    let strategy = match (objective, Strategy::parse(&options.planner)?) {
        (_, Strategy::Greedy) => Strategy::Greedy,
        (Objective::FreeGpus | Objective::Pending, _) => Strategy::FreeGpus,
        (Objective::Frag, s) => s,
    };
    let mut snapshot = Snapshot::from_objects(inputs, config)?;
    if let Some(w) = workload_from_spec(&options.workload)? {
        snapshot.workload = w;
    }
    if let Some(allowed) = &options.movable {
        let allowed: HashSet<&str> = allowed.iter().map(String::as_str).collect();
        for p in snapshot.pods.iter_mut().filter(|p| p.blocked.is_none()) {
            if !allowed.contains(p.key().as_str()) {
                p.blocked = Some(Immovable::NotOptedIn);
            }
        }
    }
    let pct_budget = ((snapshot.pods.len() as f64) * options.max_moves_pct / 100.0).floor() as usize;
    let out = match &options.for_pod {
        Some(pod) => {
            let pending = PendingPod::from_value(pod, config)?;
            let budget = options.max_moves.unwrap_or(pct_budget.max(FOR_MIN_DEFAULT_MOVES));
            unblock(&snapshot, &pending, budget).to_json(&snapshot)
        }
        None if objective == Objective::Pending => {
            let budget = options.max_moves.unwrap_or(pct_budget);
            let per_pod = options.max_moves_per_pod.unwrap_or(PER_POD_DEFAULT_MOVES);
            let q = unblock_queue(&snapshot, &snapshot.pending, budget, per_pod);
            let baseline =
                options.baseline.then(|| baseline_queue(&snapshot, &snapshot.pending, budget, Strategy::Greedy));
            q.to_json(&snapshot, budget, baseline)
        }
        None => plan_json(&snapshot, options.max_moves.unwrap_or(pct_budget), strategy, options.baseline),
    };
    serde_json::to_vec(&out).map_err(Error::internal)
}

/// Cluster and per-node fragmentation as JSON (`/api/v1/fragmentation`).
pub fn fragmentation_bytes(inputs: &[&[u8]], config: &Config) -> Result<Vec<u8>> {
    let snapshot = Snapshot::from_objects(inputs, config)?;
    let out = serde_json::json!({
        "cluster": snapshot.measures(),
        "workload_types": snapshot.workload.types.len(),
        "nodes": snapshot.node_measures(),
    });
    serde_json::to_vec(&out).map_err(Error::internal)
}

/// Pre-eviction target check (`validate_target`) as bytes: `{"ok": bool, "uuids": [..], "message": ".."}`.
pub fn validate_target_bytes(
    inputs: &[&[u8]],
    pod: &str,
    node: &str,
    gpus: &[String],
    config: &Config,
) -> Result<Vec<u8>> {
    let snapshot = Snapshot::from_objects(inputs, config)?;
    let out = match validate_target(&snapshot, pod, node, gpus) {
        Ok(uuids) => serde_json::json!({"ok": true, "uuids": uuids, "message": ""}),
        Err(why) => serde_json::json!({"ok": false, "uuids": [], "message": why.to_string()}),
    };
    serde_json::to_vec(&out).map_err(Error::internal)
}
