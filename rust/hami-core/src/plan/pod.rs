//! A pod of the snapshot as the planner sees it: where it sits, what it holds, whether it may move.

use super::{PREFER_NO_EVICTION, SKIP_ANNOTATION};
use crate::codec::decode_mig_allocations;
use crate::fit::{standard, NodeFit, PodContext};
use crate::k8s::{ObjectKey, Pod};
use crate::model::{Collapsed, GpuNode, MigHold};
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::vendor::FitChecks;
use std::collections::BTreeMap;

/// CPU and memory a pod requests of its node, as kube-scheduler counts them ([`crate::k8s::PodSpec::host_request`]).
pub(super) fn pod_host_request(pod: &Pod) -> (i64, i64) {
    pod.spec.host_request()
}

/// A pod's controlling owner (kind, name).
pub(super) type Owner = Option<(String, String)>;

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
    /// The webhook would refuse its replacement (its reason): a check its spec fails, or its
    /// namespace over a quota it is counted in.
    ReplacementDenied(String),
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
            Self::ReplacementDenied(why) => write!(f, "the webhook would refuse its replacement ({why})"),
        }
    }
}

impl PlanPod {
    /// The engine's Fit context of this pod under `hints` (its own, or pinned to GPUs).
    pub(crate) fn context<'a>(&'a self, hints: &'a PodHints) -> PodContext<'a> {
        PodContext {
            request: &self.request,
            hints,
            gpu_policy: &self.gpu_policy,
            quota: None,
            card_quota: None,
            device_preference: None,
        }
    }

    pub fn key(&self) -> String {
        ObjectKey::namespaced(&self.namespace, &self.name).to_string()
    }

    pub(super) fn seat(&self) -> Seat {
        Seat { footprint: self.footprint.clone(), mig: self.mig.clone() }
    }
}

pub use crate::wire::plan::MigInstance;

impl MigInstance {
    pub(super) fn hold(&self) -> MigHold {
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
    /// The seat a Fit grants on `node`: NVIDIA's devices, then the other backends'.
    pub(super) fn of(fit: &NodeFit, init_count: usize) -> Self {
        let (mut footprint, vendor) = fit.footprint(init_count);
        footprint.extend(vendor.into_iter().flat_map(|(_, entries)| entries));
        let mig = fit
            .mig
            .iter()
            .map(|a| MigInstance { gpu: a.gpu_uuid.clone(), profile: a.profile.clone(), placement: a.placement })
            .collect();
        Self { footprint, mig }
    }

    pub(super) fn holds(&self) -> Vec<MigHold> {
        self.mig.iter().map(MigInstance::hold).collect()
    }
}

/// The instances a resident pod holds: the engine state's holds (what it booked), with the
/// profile names of the pod's annotation (the same list, in order, when the state could read it).
pub(super) fn resident_instances<'a>(
    holds: &[MigHold],
    annotation: impl FnOnce() -> Option<&'a String>,
) -> Vec<MigInstance> {
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
pub(super) fn per_gpu_request(request: &PodRequest, devmem: i64) -> (usize, i64, i64) {
    request.slots.iter().flatten().fold((0, 0, 0), |(k, m, c), r| {
        (k.max(r.nums.max(0) as usize), m.max(r.resolved_memory(devmem)), c.max(r.clamped_cores()))
    })
}

/// What a pod asks of one device, as estimated before a Fit: how many devices of its kind one
/// node must give, the memory and cores it takes of this one, and whether it takes it whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct DeviceDemand {
    pub count: usize,
    pub mem: i64,
    pub cores: i64,
    pub whole: bool,
}

/// The kinds of device a request asks (NVIDIA 0, else a backend id), each with how many devices
/// of that kind one node must give (its largest container's count).
pub(crate) fn kinds_asked(request: &PodRequest) -> Vec<(u8, usize)> {
    let mut kinds: Vec<(u8, usize)> = Vec::new();
    let mut want = |kind: u8, nums: i64| match kinds.iter_mut().find(|(k, _)| *k == kind) {
        Some(entry) => entry.1 = entry.1.max(nums.max(0) as usize),
        None => kinds.push((kind, nums.max(0) as usize)),
    };
    request.slots.iter().flatten().for_each(|r| want(0, r.nums));
    request.vendor.iter().flatten().for_each(|r| want(r.backend_id, r.nums));
    kinds.sort_unstable();
    kinds
}

/// What `request` asks of device `d` of `node` ([`DeviceDemand`]); `None` when it asks nothing of
/// that device's kind.
pub(crate) fn device_demand(request: &PodRequest, node: &GpuNode, d: usize) -> Option<DeviceDemand> {
    let dev = &node.devices[d];
    if dev.vendor == 0 {
        if request.asks_no_nvidia() {
            return None;
        }
        let (count, mem, cores) = per_gpu_request(request, i64::from(node.hot[d].devmem));
        return Some(DeviceDemand { count, mem, cores, whole: false });
    }
    let mut out: Option<DeviceDemand> = None;
    for r in request.vendor.iter().flatten().filter(|r| r.backend_id == dev.vendor) {
        let (mem, cores) = match r.backend.checks {
            FitChecks::SlotsOnly | FitChecks::Dies | FitChecks::Exclusive => (0, 0),
            _ => standard::share(r, dev, &r.backend),
        };
        let whole = r.backend.checks == FitChecks::Exclusive;
        let e = out.get_or_insert_with(DeviceDemand::default);
        *e = DeviceDemand {
            count: e.count.max(r.nums.max(0) as usize),
            mem: e.mem.max(mem),
            cores: e.cores.max(cores),
            whole: e.whole || whole,
        };
    }
    out
}

/// Whether the pod's type and UUID filters let it use device `d` of `node` (HAMi's `CheckType`
/// and `CheckUUID` of the device's backend).
pub(crate) fn device_allowed(request: &PodRequest, hints: &PodHints, node: &GpuNode, d: usize) -> bool {
    let dev = &node.devices[d];
    if dev.vendor == 0 {
        let type_ok = !hints.filters_types() || hints.type_allowed(&dev.device_type.to_uppercase());
        return type_ok && hints.uuid_allowed(&dev.id);
    }
    let backend = request.vendor.iter().flatten().find(|r| r.backend_id == dev.vendor);
    backend.is_none_or(|r| standard::device_allowed(&r.backend, hints, dev))
}

/// Why a pod's controller would not recreate it elsewhere: a bare pod is not recreated, a
/// DaemonSet's or a Node's comes back to the same node.
pub(super) fn owner_blocks(owner: &Owner) -> Option<Immovable> {
    match owner {
        None => Some(Immovable::BarePod),
        Some((kind, _)) if kind == "DaemonSet" || kind == "Node" => Some(Immovable::NodeBound(kind.clone())),
        _ => None,
    }
}

/// Whether a pod may be evicted and recreated elsewhere, or why not.
pub(super) fn movable(
    pod: &Pod,
    phase: &str,
    owner: &Option<(String, String)>,
    request: &PodRequest,
) -> Option<Immovable> {
    let ann = &pod.metadata.annotations;
    if pod.metadata.deletion_timestamp.is_some() {
        return Some(Immovable::Terminating);
    }
    if ann.get(SKIP_ANNOTATION).is_some_and(|v| v != "false") || ann.contains_key(PREFER_NO_EVICTION) {
        return Some(Immovable::OptedOut);
    }
    if let Some(why) = owner_blocks(owner) {
        return Some(why);
    }
    if request.is_empty() {
        return Some(Immovable::NoVgpuRequest);
    }
    if !matches!(phase, "Running" | "Pending" | "") {
        return Some(Immovable::Phase(phase.to_owned()));
    }
    None
}
