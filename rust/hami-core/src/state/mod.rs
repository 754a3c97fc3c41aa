//! The cluster state fed by watch events: nodes, reserved pods, quotas; per-device usage kept
//! incrementally. Pure data and accounting: no scheduling decisions live here.

pub mod arrivals;
pub mod host;
mod ingest;
pub mod nodes;
mod policy_view;
mod report;
pub mod reservations;
mod sgpu_qos;
pub mod waiting;

use crate::config::Config;
use crate::error::Error;
use crate::fit::QuotaState;
use crate::model::{Collapsed, GpuNode, MigHold};
use nodes::NodeTable;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A pod whose devices count against its node: annotated by a scheduler, or reserved by Filter.
#[derive(Debug, Clone)]
pub struct PodRecord {
    pub namespace: Arc<str>,
    pub name: Box<str>,
    pub node: Arc<str>,
    pub footprint: Box<[Collapsed]>,
    /// How many of `footprint`'s entries are NVIDIA's (the first ones); the rest are the other
    /// backends', whose usage NVIDIA's quota does not count.
    pub nvidia_len: u32,
    /// What it uses of the other backends' quota resources (`hygon.com/dcumem`, ...).
    pub vendor_usage: Box<[(Arc<str>, i64)]>,
    /// The MIG instances it holds (`hami.io/vgpu-mig-allocations`), in annotation order.
    pub mig: Box<[MigHold]>,
    /// `spec.priority` (0 when unset): who may preempt it.
    pub priority: i32,
    /// In its termination grace period: already going, never chosen to go again.
    pub terminating: bool,
}

pub use crate::vendor::VendorFootprint;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct QuotaLimits {
    pub(crate) mem: Option<i64>,
    pub(crate) cores: Option<i64>,
}

#[derive(Debug, Default)]
pub struct ClusterState {
    pub config: Config,
    /// The backends beside NVIDIA the device config sets up.
    pub backends: crate::vendor::Backends,
    pub(crate) nodes: NodeTable,
    pods: FxHashMap<String, PodRecord>,
    /// Namespace and node names shared by every record that mentions them.
    names: FxHashMap<Box<str>, Arc<str>>,
    quotas: HashMap<String, BTreeMap<String, QuotaLimits>>,
    ns_usage: HashMap<String, (i64, i64)>,
    /// The other backends' quota limits per namespace and ResourceQuota (`limits.<resource>`).
    pub(crate) vendor_quotas: HashMap<String, BTreeMap<String, BTreeMap<String, i64>>>,
    /// The other backends' quota resources used per namespace.
    vendor_ns_usage: HashMap<String, BTreeMap<String, i64>>,
    /// Task types of the most recently placed pods: FGD's target workload in the live scheduler.
    recent: std::collections::VecDeque<crate::frag::TaskType>,
    /// GPUs held for pending pods ([`reservations`]).
    holds: reservations::Reservations,
    /// Pods Filter rejected, until they are placed, bind, end or are deleted ([`waiting`]).
    pub(crate) waiting: waiting::Waiting,
    /// MetaX sGPU's pending QoS switches by card UUID ([`sgpu_qos`]).
    sgpu_qos: BTreeMap<String, String>,
    /// Nodes' CPU and memory and the pods' requests on them ([`host`]), for the node policies.
    host: host::HostBook,
    /// The pods seen so far ([`arrivals`]): what `fgd-balance` learns from.
    arrivals: arrivals::Arrivals,
}

/// How many recent placements FGD learns its target workload from.
pub const FGD_RECENT_PODS: usize = 1000;

/// What one watch line carried, for the reflector's bookkeeping.
#[derive(Debug, Clone, Default)]
pub struct EventInfo {
    pub event_type: String,
    pub resource_version: String,
    pub key: String,
    /// HTTP code of an ERROR event's Status (410 means: re-list).
    pub code: i32,
    pub error: Option<Error>,
}

/// One page of a LIST.
#[derive(Debug, Clone, Default)]
pub struct ListInfo {
    pub resource_version: String,
    pub continue_token: String,
    pub keys: Vec<String>,
    pub errors: Vec<Error>,
}

/// What [`ClusterState::without_pod`] does with the pod's own footprint afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnFootprint {
    /// Puts it back: a dry run (`explain`, a `/filter` that records nothing, headroom).
    Restore,
    /// Leaves it out: the decision about to be recorded replaces it.
    Release,
}

/// What an `apply` did, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Node,
    Pod,
    PodIgnored,
    Quota,
    List(usize),
    Other,
}

impl ClusterState {
    pub fn new(config: Config) -> Self {
        let backends = crate::vendor::Backends::from_config(&config);
        Self { config, backends, ..Self::default() }
    }

    pub fn node(&self, name: &str) -> Option<&GpuNode> {
        self.nodes.get(name)
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    pub fn pod(&self, uid: &str) -> Option<&PodRecord> {
        self.pods.get(uid)
    }

    /// Every pod whose devices count, by key (UID, else `namespace/name`).
    pub fn pods(&self) -> impl Iterator<Item = (&String, &PodRecord)> {
        self.pods.iter()
    }

    fn shared(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.names.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        self.names.insert(name.into(), shared.clone());
        shared
    }

    /// A record with its namespace and node names shared with other records.
    pub fn record(&mut self, namespace: &str, name: &str, node: &str, footprint: Vec<Collapsed>) -> PodRecord {
        PodRecord {
            namespace: self.shared(namespace),
            name: name.into(),
            node: self.shared(node),
            nvidia_len: footprint.len() as u32,
            vendor_usage: Box::default(),
            footprint: footprint.into_boxed_slice(),
            mig: Box::default(),
            priority: 0,
            terminating: false,
        }
    }

    /// A record of NVIDIA's footprint followed by the other backends', with what those use of
    /// their quota resources.
    pub fn record_with_vendors(
        &mut self,
        namespace: &str,
        name: &str,
        node: &str,
        (mut footprint, vendor): (Vec<Collapsed>, VendorFootprint),
    ) -> PodRecord {
        let nvidia_len = footprint.len() as u32;
        let mut usage: Vec<(Arc<str>, i64)> = Vec::new();
        for (backend, entries) in vendor {
            let mem: i64 = entries.iter().map(|c| c.mem).sum();
            let cores: i64 = entries.iter().map(|c| c.cores).sum();
            for (resource, amount) in [(&backend.memory_name, mem), (&backend.core_name, cores)] {
                if !resource.is_empty() {
                    usage.push((Arc::from(resource.as_str()), amount));
                }
            }
            footprint.extend(entries);
        }
        let record = self.record(namespace, name, node, footprint);
        PodRecord { nvidia_len, vendor_usage: usage.into_boxed_slice(), ..record }
    }

    /// Runs `look` on the cluster as it is without the pod `key`: its footprint taken out and the
    /// GPUs held for it free. The hold comes back afterwards, and the footprint as `own` says.
    pub fn without_pod<T>(&mut self, key: &str, own: OwnFootprint, look: impl FnOnce(&Self) -> T) -> T {
        let saved = match own {
            OwnFootprint::Restore => self.set_aside(key),
            OwnFootprint::Release => {
                self.release(key);
                None
            }
        };
        let lifted = self.lift_hold(key);
        let out = look(self);
        self.restore_hold(lifted);
        if let Some(record) = saved {
            self.reserve(key.to_owned(), record);
        }
        out
    }

    /// Takes a pod's reservation out; the caller restores it.
    fn set_aside(&mut self, key: &str) -> Option<PodRecord> {
        let saved = self.pod(key).cloned();
        if saved.is_some() {
            self.release(key);
        }
        saved
    }

    /// Records (or replaces) a pod's footprint on its node and in its namespace's quota usage.
    pub fn reserve(&mut self, uid: String, record: PodRecord) {
        if let Some(t) =
            self.nodes.get(&record.node).and_then(|n| crate::policy::node::live_task_type(n, &record.footprint))
        {
            if self.recent.len() == FGD_RECENT_PODS {
                self.recent.pop_front();
            }
            self.recent.push_back(t);
        }
        self.count_footprint(uid, record, true);
    }

    /// [`Self::reserve`] for a what-if undone by [`Self::release_tentative`] within the same call:
    /// the footprint counts, but FGD's history of placements does not learn from it and the node
    /// change log does not see it (nothing derived from the node is stale afterwards).
    pub fn reserve_tentatively(&mut self, uid: String, record: PodRecord) {
        self.count_footprint(uid, record, false);
    }

    /// Undoes [`Self::reserve_tentatively`].
    pub fn release_tentative(&mut self, uid: &str) -> bool {
        self.drop_footprint(uid, false)
    }

    fn count_footprint(&mut self, uid: String, record: PodRecord, tracked: bool) {
        self.drop_footprint(&uid, tracked);
        if let Some(node) = self.node_mut(&record.node, tracked) {
            node.account(&record.footprint, 1);
            node.account_mig(&record.footprint, &record.mig, 1);
        }
        self.add_ns_usage(&record, 1);
        self.pods.insert(uid, record);
    }

    /// Drops a pod's footprint; true if it had one.
    pub fn release(&mut self, uid: &str) -> bool {
        self.drop_footprint(uid, true)
    }

    fn drop_footprint(&mut self, uid: &str, tracked: bool) -> bool {
        let Some(record) = self.pods.remove(uid) else { return false };
        if let Some(node) = self.node_mut(&record.node, tracked) {
            node.account(&record.footprint, -1);
            node.account_mig(&record.footprint, &record.mig, -1);
        }
        self.add_ns_usage(&record, -1);
        true
    }

    fn node_mut(&mut self, name: &str, tracked: bool) -> Option<&mut GpuNode> {
        match tracked {
            true => self.nodes.get_mut(name),
            false => self.nodes.get_mut_untracked(name),
        }
    }

    /// FGD's target workload: the configured one ([`Config::fgd_target_workload`]), else the task
    /// types of the last [`FGD_RECENT_PODS`] placements that cover 95 % of them, with their shares
    /// (empty before any placement).
    pub fn target_workload(&self) -> crate::frag::Workload {
        let given = &self.config.fgd_target_workload;
        if !given.is_empty() {
            let types = given.iter().map(|(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)| {
                let t = crate::frag::TaskType {
                    cpu_milli: *cpu_milli,
                    gpu_milli: *gpu_milli,
                    num_gpu: *num_gpu,
                    gpu_spec: gpu_spec.clone(),
                };
                (t, *share)
            });
            return crate::frag::Workload { types: types.collect() };
        }
        crate::frag::Workload::typical(self.recent.iter().cloned(), 95.0)
    }

    /// GpuClustering's view of the nodes: the GPU tags of the pods on each, with counts (one pass).
    pub fn gpu_tags_by_node(&self) -> HashMap<&str, Vec<(crate::policy::node::GpuTag, u32)>> {
        let mut out: HashMap<&str, Vec<(crate::policy::node::GpuTag, u32)>> = HashMap::new();
        for rec in self.pods.values() {
            let Some(gpu_node) = self.nodes.get(&rec.node) else { continue };
            let tag = crate::policy::node::live_tag(gpu_node, &rec.footprint);
            let tags = out.entry(&*rec.node).or_default();
            match tags.iter_mut().find(|(t, _)| *t == tag) {
                Some(e) => e.1 += 1,
                None => tags.push((tag, 1)),
            }
        }
        out
    }

    /// One of HAMi's registration passes (every 15 s, and on node events) at `now`: updates which
    /// nodes HAMi's cache holds and returns the handshake writes HAMi's scheduler makes.
    pub fn registration_pass(&mut self, now: i64) -> Vec<crate::health::HandshakeWrite> {
        let mut names: Vec<String> = self.nodes.names().cloned().collect();
        names.sort();
        let mut writes = Vec::new();
        for name in names {
            // Logged as changed only when the pass changes its membership: a pass that changes
            // nothing leaves the verdicts and the waiting pods' views of the node standing.
            let Some(node) = self.nodes.get_mut_untracked(&name) else { continue };
            let has_devices = node.is_registered() && !node.devices.is_empty();
            let before = node.membership;
            let cleaned_up = node.membership.pass(&node.registration, has_devices, now);
            writes.extend(crate::health::handshake_writes(&name, &node.registration, cleaned_up, now));
            if node.membership != before {
                let parked = node.park_nvidia(node.membership.member == Some(false));
                self.nodes.get_mut(&name);
                if parked {
                    self.recount(&name);
                }
            }
        }
        writes
    }

    /// Counts a node's usage again from its pods (its device list changed).
    fn recount(&mut self, name: &str) {
        let Some(mut node) = self.nodes.get(name).cloned() else { return };
        self.rebuild_usage(&mut node);
        self.mark_holds_on(&mut node);
        if let Some(slot) = self.nodes.get_mut(name) {
            *slot = node;
        }
    }

    fn add_ns_usage(&mut self, record: &PodRecord, sign: i64) {
        let nvidia = &record.footprint[..(record.nvidia_len as usize).min(record.footprint.len())];
        let mem: i64 = nvidia.iter().map(|c| c.mem).sum();
        let cores: i64 = nvidia.iter().map(|c| c.cores).sum();
        let entry = self.ns_usage.entry(record.namespace.to_string()).or_default();
        entry.0 = (entry.0 + sign * mem).max(0);
        entry.1 = (entry.1 + sign * cores).max(0);
        if record.vendor_usage.is_empty() {
            return;
        }
        let used = self.vendor_ns_usage.entry(record.namespace.to_string()).or_default();
        for (resource, amount) in record.vendor_usage.iter() {
            let total = used.entry(resource.to_string()).or_default();
            *total = (*total + sign * amount).max(0);
        }
    }

    /// Whether `amount` more of another backend's quota resource exceeds the namespace's tightest
    /// limit (times the backend's quota factor, as HAMi's `FitQuota` scales it).
    pub fn exceeds_vendor_quota(&self, namespace: &str, resource: &str, amount: i64, factor: i64) -> bool {
        let Some(quotas) = self.vendor_quotas.get(namespace) else { return false };
        let Some(limit) = quotas.values().filter_map(|q| q.get(resource)).min() else { return false };
        let limit = if factor > 1 { limit * factor } else { *limit };
        let used = self.vendor_ns_usage.get(namespace).and_then(|u| u.get(resource)).copied().unwrap_or(0);
        used + amount > limit
    }

    /// The namespace quota of the backend the pod asks whose Fit checks it card by card
    /// (HAMi's `fitQuota`: Cambricon), with the namespace's usage; `None` without limits.
    pub fn card_quota_state(&self, namespace: &str, request: &crate::request::PodRequest) -> Option<QuotaState> {
        let quotas = self.vendor_quotas.get(namespace)?;
        let backend = request.vendor.iter().flatten().map(|r| &r.backend).find(|b| b.quota_per_card)?;
        let tightest = |resource: &str| quotas.values().filter_map(|q| q.get(resource)).min().copied();
        let factor = backend.quota_factor();
        let limit_mem = tightest(&backend.memory_name).map(|m| if factor > 1 { m * factor } else { m });
        let limit_cores = tightest(&backend.core_name);
        if limit_mem.is_none() && limit_cores.is_none() {
            return None;
        }
        let used =
            |resource: &str| self.vendor_ns_usage.get(namespace).and_then(|u| u.get(resource)).copied().unwrap_or(0);
        Some(QuotaState {
            limit_mem,
            limit_cores,
            used_mem: used(&backend.memory_name),
            used_cores: used(&backend.core_name),
        })
    }

    /// Whether any ResourceQuota of the namespace limits a vGPU or another backend's resource.
    pub fn has_quotas(&self, namespace: &str) -> bool {
        self.quotas.get(namespace).is_some_and(|q| !q.is_empty())
            || self.vendor_quotas.get(namespace).is_some_and(|q| !q.is_empty())
    }

    /// The tightest vGPU quota of a namespace with its current usage; `None` without limits.
    pub fn quota_state(&self, namespace: &str) -> Option<QuotaState> {
        let quotas = self.quotas.get(namespace)?;
        let tightest = |f: fn(&QuotaLimits) -> Option<i64>| quotas.values().filter_map(f).min();
        let factor = self.config.memory_factor.max(1);
        let limit_mem = tightest(|q| q.mem).map(|m| m * factor);
        let limit_cores = tightest(|q| q.cores);
        if limit_mem.is_none() && limit_cores.is_none() {
            return None;
        }
        let (used_mem, used_cores) = self.ns_usage.get(namespace).copied().unwrap_or_default();
        Some(QuotaState { limit_mem, limit_cores, used_mem, used_cores })
    }
}
