//! Cluster state fed by watch events: nodes, reserved pods, quotas; per-device usage kept incrementally.

use crate::codec::{self, decode_pod_devices, PodHints};
use crate::config::Config;
use crate::fit::QuotaState;
use crate::health::Registration;
use crate::k8s::{ListPage, Pod, QuotaSpec, WatchEvent};
use crate::model::{collapse, Collapsed, GpuNode, CORDONED};
use crate::nodes::NodeTable;
use crate::view::{parse_object, parse_raw, MetaView, NodeStatusView, ObjectView, PodSpecView, PodStatusView};
use rustc_hash::FxHashMap;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// A pod whose devices count against its node: annotated by a scheduler, or reserved by Filter.
#[derive(Debug, Clone)]
pub struct PodRecord {
    pub namespace: Arc<str>,
    pub name: Box<str>,
    pub node: Arc<str>,
    pub footprint: Box<[Collapsed]>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct QuotaLimits {
    mem: Option<i64>,
    cores: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Cluster {
    pub config: Config,
    pub(crate) nodes: NodeTable,
    pub(crate) candidates: crate::schedule::CandidateCache,
    pods: FxHashMap<String, PodRecord>,
    /// Namespace and node names shared by every record that mentions them.
    names: FxHashMap<Box<str>, Arc<str>>,
    quotas: HashMap<String, BTreeMap<String, QuotaLimits>>,
    ns_usage: HashMap<String, (i64, i64)>,
    /// Task types of the most recently placed pods: FGD's target workload in the live scheduler.
    recent: std::collections::VecDeque<crate::frag::TaskType>,
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
    pub error: Option<String>,
}

/// One page of a LIST.
#[derive(Debug, Clone, Default)]
pub struct ListInfo {
    pub resource_version: String,
    pub continue_token: String,
    pub keys: Vec<String>,
    pub errors: Vec<String>,
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

impl Cluster {
    pub fn new(config: Config) -> Self {
        Self { config, ..Self::default() }
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

    /// Adds or updates a Node, Pod, ResourceQuota, or every item of a List.
    pub fn apply(&mut self, bytes: &[u8]) -> Result<Applied, String> {
        let view = parse_object(bytes)?;
        self.apply_view(&view, "")
    }

    fn apply_view(&mut self, view: &ObjectView, list_kind: &str) -> Result<Applied, String> {
        let kind = if view.kind.is_empty() { list_kind.strip_suffix("List").unwrap_or("") } else { view.kind.as_ref() };
        match kind {
            "Node" => self.apply_node(view).map(|_| Applied::Node),
            "Pod" => self.apply_pod(view),
            "ResourceQuota" => self.apply_quota(view).map(|_| Applied::Quota),
            _ if view.kind.ends_with("List") || view.items.is_some() => {
                let items = view.items.as_deref().unwrap_or_default();
                let errors: Vec<String> =
                    items.iter().filter_map(|item| self.apply_raw_item(item, &view.kind).err()).collect();
                if errors.is_empty() {
                    Ok(Applied::List(items.len()))
                } else {
                    Err(errors.join("; "))
                }
            }
            "" => Err("decode object: field `kind` is missing".into()),
            _ => Ok(Applied::Other),
        }
    }

    fn apply_raw_item(&mut self, item: &RawValue, list_kind: &str) -> Result<Applied, String> {
        let view = parse_object(item.get().as_bytes())?;
        self.apply_view(&view, list_kind)
    }

    /// Removes a Node, Pod or ResourceQuota given its last known state.
    pub fn delete(&mut self, bytes: &[u8]) -> Result<(), String> {
        let view = parse_object(bytes)?;
        self.delete_view(&view);
        Ok(())
    }

    fn delete_view(&mut self, view: &ObjectView) {
        let meta = &view.metadata;
        match view.kind.as_ref() {
            "Node" => {
                self.nodes.remove(meta.name.as_ref());
            }
            "Pod" => {
                self.release(&view_pod_key(meta));
            }
            "ResourceQuota" => {
                if let Some(m) = self.quotas.get_mut(meta.namespace.as_ref()) {
                    m.remove(meta.name.as_ref());
                }
            }
            _ => {}
        }
    }

    /// One line of a Kubernetes watch stream. Bad objects inside a valid event are reported in `error`.
    pub fn apply_watch_event(&mut self, line: &[u8]) -> Result<EventInfo, String> {
        let event: WatchEvent = serde_json::from_slice(line).map_err(|e| format!("decode watch event: {e}"))?;
        let view = match parse_object(event.object.get().as_bytes()) {
            Ok(view) => view,
            Err(e) => return Ok(EventInfo { event_type: event.event_type, error: Some(e), ..EventInfo::default() }),
        };
        let outcome = match event.event_type.as_str() {
            "ADDED" | "MODIFIED" => self.apply_view(&view, "").map(|_| ()),
            "DELETED" => {
                self.delete_view(&view);
                Ok(())
            }
            _ => Ok(()),
        };
        Ok(EventInfo {
            event_type: event.event_type,
            key: view.metadata.key(),
            resource_version: view.metadata.resource_version.into_owned(),
            code: view.code,
            error: outcome.err(),
        })
    }

    /// One page of a LIST response: applies every item, returns the list metadata and item keys.
    pub fn apply_list_page(&mut self, bytes: &[u8]) -> Result<ListInfo, String> {
        let page: ListPage = serde_json::from_slice(bytes).map_err(|e| format!("decode list: {e}"))?;
        let mut info = ListInfo {
            resource_version: page.metadata.resource_version,
            continue_token: page.metadata.continue_token,
            ..Default::default()
        };
        for item in page.items {
            match parse_object(item.get().as_bytes()) {
                Ok(view) => {
                    info.keys.push(view.metadata.key());
                    if let Err(e) = self.apply_view(&view, &page.kind) {
                        info.errors.push(e);
                    }
                }
                Err(e) => info.errors.push(e),
            }
        }
        Ok(info)
    }

    /// After a re-list: forgets every object of `kind` whose key (`name` or `namespace/name`) is not in `keys`.
    pub fn retain(&mut self, kind: &str, keys: &HashSet<String>) -> usize {
        match kind {
            "Node" => {
                let gone: Vec<String> = self.nodes.names().filter(|k| !keys.contains(*k)).cloned().collect();
                gone.iter().for_each(|k| {
                    self.nodes.remove(k);
                });
                gone.len()
            }
            "Pod" => {
                let gone: Vec<String> = self
                    .pods
                    .iter()
                    .filter(|(_, r)| !keys.contains(&format!("{}/{}", r.namespace, r.name)))
                    .map(|(uid, _)| uid.clone())
                    .collect();
                gone.iter().for_each(|uid| {
                    self.release(uid);
                });
                gone.len()
            }
            "ResourceQuota" => {
                let mut removed = 0;
                for (ns, quotas) in &mut self.quotas {
                    let before = quotas.len();
                    quotas.retain(|name, _| keys.contains(&format!("{ns}/{name}")));
                    removed += before - quotas.len();
                }
                removed
            }
            _ => 0,
        }
    }

    fn apply_node(&mut self, view: &ObjectView) -> Result<(), String> {
        if view.metadata.name.is_empty() {
            return Err("Node: metadata.name is empty".into());
        }
        let mut fresh = GpuNode::from_annotations(&view.metadata.name, &view.metadata.annotations);
        let status: NodeStatusView = parse_raw(view.status).map_err(|e| format!("Node {}: status: {e}", fresh.name))?;
        let allocatable = status.allocatable.get(&self.config.resource_count_name).map(|q| q.0.as_str());
        let ann = &view.metadata.annotations;
        fresh.registration = Registration::read(ann.handshake.as_deref(), allocatable);
        fresh.registration.requesting_keys = ann.requesting_keys;
        fresh.registration.register_hash = ann.register.as_deref().map_or(0, |r| {
            use std::hash::{Hash, Hasher};
            let mut h = rustc_hash::FxHasher::default();
            r.hash(&mut h);
            h.finish() | 1
        });
        if let Some(old) = self.nodes.get(&fresh.name) {
            fresh.membership = old.membership;
        }
        match self.nodes.get(&fresh.name) {
            Some(old) if old.same_inventory(&fresh) => fresh.copy_usage_from(old),
            _ => self.rebuild_usage(&mut fresh),
        }
        self.nodes.insert(fresh);
        Ok(())
    }

    /// One of HAMi's registration passes (every 15 s, and on node events) at `now`: updates which
    /// nodes HAMi's cache holds and returns the handshake writes HAMi's scheduler makes.
    pub fn registration_pass(&mut self, now: i64) -> Vec<crate::health::HandshakeWrite> {
        let mut names: Vec<String> = self.nodes.names().cloned().collect();
        names.sort();
        let mut writes = Vec::new();
        for name in names {
            let Some(node) = self.nodes.get_mut(&name) else { continue };
            let has_devices = node.is_registered() && !node.devices.is_empty();
            let cleaned_up = node.membership.pass(&node.registration, has_devices, now);
            writes.extend(crate::health::handshake_writes(&name, &node.registration, cleaned_up, now));
        }
        writes
    }

    /// Recomputes one node's usage from the pods recorded on it (only when its GPUs changed).
    fn rebuild_usage(&self, node: &mut GpuNode) {
        node.clear_usage();
        let name = node.name.clone();
        for record in self.pods.values().filter(|r| *r.node == *name) {
            node.account(&record.footprint, 1);
        }
    }

    fn apply_pod(&mut self, view: &ObjectView) -> Result<Applied, String> {
        let meta = &view.metadata;
        let key = view_pod_key(meta);
        let pod_name = || format!("Pod {}/{}", meta.namespace, meta.name);
        let status: PodStatusView = parse_raw(view.status).map_err(|e| format!("{}: status: {e}", pod_name()))?;
        if status.is_terminal() {
            self.release(&key);
            return Ok(Applied::Pod);
        }
        let ann = &meta.annotations;
        let (Some(node), Some(allocated)) = (ann.vgpu_node.as_deref(), ann.allocated.as_deref()) else {
            return Ok(Applied::PodIgnored);
        };
        let spec: PodSpecView = parse_raw(view.spec).map_err(|e| format!("{}: spec: {e}", pod_name()))?;
        let mut slots = decode_pod_devices(allocated)
            .map_err(|e| format!("{}: annotation {}: {e}", pod_name(), codec::ALLOCATED_KEY))?;
        let init_count = spec.init_containers.len();
        if slots.len() < init_count + spec.containers.len() {
            if let Some(aligned) = self.align_unpadded(view.spec, &slots) {
                slots = aligned;
            }
        }
        let footprint = collapse(&slots, init_count, status.init_succeeded(init_count));
        let record = self.record(&meta.namespace, &meta.name, node, footprint);
        self.reserve(key, record);
        Ok(Applied::Pod)
    }

    /// HAMi writes one slot per GPU container, not one per container; its own reader then takes
    /// slot *i* for container *i*, so a GPU-less init container turns the first app container's
    /// GPUs into init usage that its shrink drops to 0 once init finishes (a HAMi bug). Read the
    /// slots onto the containers that request GPUs instead.
    fn align_unpadded(&self, spec: Option<&RawValue>, slots: &codec::PodDevices) -> Option<codec::PodDevices> {
        let spec: crate::k8s::PodSpec = parse_raw(spec).ok()?;
        let uses_gpu: Vec<bool> = spec
            .init_containers
            .iter()
            .chain(&spec.containers)
            .map(|c| crate::request::container_request(c, &self.config).is_some())
            .collect();
        codec::align_to_containers(slots, &uses_gpu)
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
            footprint: footprint.into_boxed_slice(),
        }
    }

    /// Records (or replaces) a pod's footprint on its node and in its namespace's quota usage.
    pub fn reserve(&mut self, uid: String, record: PodRecord) {
        self.release(&uid);
        if let Some(t) =
            self.nodes.get(&record.node).and_then(|n| crate::policy::node::live_task_type(n, &record.footprint))
        {
            if self.recent.len() == FGD_RECENT_PODS {
                self.recent.pop_front();
            }
            self.recent.push_back(t);
        }
        if let Some(node) = self.nodes.get_mut(&record.node) {
            node.account(&record.footprint, 1);
        }
        self.add_ns_usage(&record, 1);
        self.pods.insert(uid, record);
    }

    /// Drops a pod's footprint; true if it had one.
    pub fn release(&mut self, uid: &str) -> bool {
        let Some(record) = self.pods.remove(uid) else { return false };
        if let Some(node) = self.nodes.get_mut(&record.node) {
            node.account(&record.footprint, -1);
        }
        self.add_ns_usage(&record, -1);
        true
    }

    /// FGD's target workload: the task types of the last [`FGD_RECENT_PODS`] placements that
    /// cover 95 % of them, with their shares (empty before any placement).
    pub fn target_workload(&self) -> crate::frag::Workload {
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

    fn add_ns_usage(&mut self, record: &PodRecord, sign: i64) {
        let mem: i64 = record.footprint.iter().map(|c| c.mem).sum();
        let cores: i64 = record.footprint.iter().map(|c| c.cores).sum();
        let entry = self.ns_usage.entry(record.namespace.to_string()).or_default();
        entry.0 = (entry.0 + sign * mem).max(0);
        entry.1 = (entry.1 + sign * cores).max(0);
    }

    fn apply_quota(&mut self, view: &ObjectView) -> Result<(), String> {
        let meta = &view.metadata;
        let spec: QuotaSpec =
            parse_raw(view.spec).map_err(|e| format!("ResourceQuota {}/{}: spec: {e}", meta.namespace, meta.name))?;
        let limit = |resource: &str| -> Result<Option<i64>, String> {
            let key = format!("limits.{resource}");
            spec.hard
                .get(&key)
                .map(|v| {
                    v.as_int().ok_or_else(|| {
                        format!(
                            "ResourceQuota {}/{}: spec.hard[{key}]={:?} is not an integer",
                            meta.namespace, meta.name, v.0
                        )
                    })
                })
                .transpose()
        };
        let limits = QuotaLimits {
            mem: limit(&self.config.resource_memory_name)?,
            cores: limit(&self.config.resource_core_name)?,
        };
        self.quotas.entry(meta.namespace.to_string()).or_default().insert(meta.name.to_string(), limits);
        Ok(())
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

    pub fn hints_for(pod: &Pod) -> Result<PodHints, String> {
        PodHints::from_annotations(&pod.metadata.annotations).map_err(|e| format!("Pod {}: {e}", pod.key()))
    }
}

fn view_pod_key(meta: &MetaView) -> String {
    if meta.uid.is_empty() {
        format!("{}/{}", meta.namespace, meta.name)
    } else {
        meta.uid.to_string()
    }
}

/// Reservations are keyed by UID; a manifest without one falls back to namespace/name.
pub fn pod_key(pod: &Pod) -> String {
    if pod.metadata.uid.is_empty() {
        pod.key()
    } else {
        pod.metadata.uid.clone()
    }
}

#[derive(serde::Serialize)]
struct DeviceReport<'a> {
    uuid: &'a str,
    index: u32,
    #[serde(rename = "type")]
    device_type: &'a str,
    numa: i32,
    health: bool,
    cordoned: bool,
    count: i32,
    devmem: i32,
    devcore: i32,
    used: i64,
    usedmem: i64,
    usedcores: i64,
}

#[derive(serde::Serialize)]
struct NodeReport<'a> {
    name: &'a str,
    registered: bool,
    error: Option<&'a str>,
    devices: Vec<DeviceReport<'a>>,
}

impl Cluster {
    /// Per-node, per-device usage as JSON, nodes sorted by name.
    pub fn usage_json(&self) -> Vec<u8> {
        let mut nodes: Vec<&GpuNode> = self.nodes.values().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let report: Vec<NodeReport> = nodes
            .into_iter()
            .map(|n| NodeReport {
                name: &n.name,
                registered: n.is_registered() && n.membership.member != Some(false),
                error: n.register_error.as_deref(),
                devices: n
                    .devices
                    .iter()
                    .zip(&n.usage)
                    .zip(&n.hot)
                    .map(|((d, u), hot)| DeviceReport {
                        uuid: &d.id,
                        index: d.index,
                        device_type: &d.device_type,
                        numa: d.numa,
                        health: d.health,
                        cordoned: hot.has(CORDONED),
                        count: d.count,
                        devmem: d.devmem,
                        devcore: d.devcore,
                        used: u.used,
                        usedmem: u.usedmem,
                        usedcores: u.usedcores,
                    })
                    .collect(),
            })
            .collect();
        serde_json::to_vec(&report).unwrap_or_default()
    }
}

#[derive(serde::Serialize)]
struct PodDeviceReport<'a> {
    uuid: &'a str,
    usedmem: i64,
    usedcores: i64,
}

#[derive(serde::Serialize)]
struct PodReport<'a> {
    namespace: &'a str,
    name: &'a str,
    node: &'a str,
    devices: Vec<PodDeviceReport<'a>>,
}

#[derive(serde::Serialize)]
struct QuotaReport<'a> {
    namespace: &'a str,
    name: &'a str,
    resource: &'a str,
    limit: i64,
    used: i64,
}

impl Cluster {
    /// Every counted pod with its per-GPU footprint, and every vGPU quota with its namespace's usage (for metrics).
    pub fn accounting_json(&self) -> Vec<u8> {
        let mut pods: Vec<PodReport> = self
            .pods
            .values()
            .map(|r| PodReport {
                namespace: &r.namespace,
                name: &r.name,
                node: &r.node,
                devices: r
                    .footprint
                    .iter()
                    .map(|c| PodDeviceReport { uuid: &c.uuid, usedmem: c.mem, usedcores: c.cores })
                    .collect(),
            })
            .collect();
        pods.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
        let (mem_name, core_name) =
            (self.config.resource_memory_name.as_str(), self.config.resource_core_name.as_str());
        let mut quotas = Vec::new();
        for (namespace, by_name) in &self.quotas {
            let (used_mem, used_cores) = self.ns_usage.get(namespace).copied().unwrap_or_default();
            for (name, limits) in by_name {
                let entries = [(mem_name, limits.mem, used_mem), (core_name, limits.cores, used_cores)];
                for (resource, limit, used) in entries {
                    if let Some(limit) = limit {
                        quotas.push(QuotaReport { namespace, name, resource, limit, used });
                    }
                }
            }
        }
        quotas.sort_by(|a, b| (a.namespace, a.name, a.resource).cmp(&(b.namespace, b.name, b.resource)));
        serde_json::to_vec(&serde_json::json!({"pods": pods, "quotas": quotas})).unwrap_or_default()
    }
}
