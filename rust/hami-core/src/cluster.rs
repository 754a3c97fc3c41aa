//! Cluster state fed by watch events: nodes, reserved pods, quotas; per-device usage kept incrementally.

use crate::codec::{self, decode_pod_devices, PodHints};
use crate::config::Config;
use crate::fit::QuotaState;
use crate::k8s::{AnyObject, ListPage, Node, ObjectHead, Pod, ResourceQuota, WatchEvent};
use crate::model::{collapse, Collapsed, GpuNode};
use std::collections::{BTreeMap, HashMap, HashSet};

/// A pod whose devices count against its node: annotated by a scheduler, or reserved by Filter.
#[derive(Debug, Clone)]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub footprint: Vec<Collapsed>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct QuotaLimits {
    mem: Option<i64>,
    cores: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Cluster {
    pub config: Config,
    pub(crate) nodes: HashMap<String, GpuNode>,
    pods: HashMap<String, PodRecord>,
    node_pods: HashMap<String, HashSet<String>>,
    quotas: HashMap<String, BTreeMap<String, QuotaLimits>>,
    ns_usage: HashMap<String, (i64, i64)>,
}

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

fn object_name(bytes: &[u8]) -> String {
    #[derive(serde::Deserialize, Default)]
    struct Named {
        #[serde(default)]
        kind: Option<String>,
        #[serde(default)]
        metadata: Option<crate::k8s::ObjectMeta>,
    }
    let n: Named = serde_json::from_slice(bytes).unwrap_or_default();
    let meta = n.metadata.unwrap_or_default();
    let kind = n.kind.unwrap_or_else(|| "object".into());
    if meta.namespace.is_empty() {
        format!("{kind} {:?}", meta.name)
    } else {
        format!("{kind} {}/{}", meta.namespace, meta.name)
    }
}

impl Cluster {
    pub fn new(config: Config) -> Self {
        Self { config, ..Self::default() }
    }

    pub fn node(&self, name: &str) -> Option<&GpuNode> {
        self.nodes.get(name)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &GpuNode> {
        self.nodes.values()
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
        let head: AnyObject = serde_json::from_slice(bytes).map_err(|e| format!("decode object: {e}"))?;
        match head.kind.as_deref().unwrap_or("") {
            "Node" => self.apply_node(bytes).map(|_| Applied::Node),
            "Pod" => self.apply_pod(bytes),
            "ResourceQuota" => self.apply_quota(bytes).map(|_| Applied::Quota),
            kind if kind.ends_with("List") || head.items.is_some() => {
                let items = head.items.unwrap_or_default();
                let mut errors = Vec::new();
                for item in &items {
                    if let Err(e) = self.apply(item.get().as_bytes()) {
                        errors.push(e);
                    }
                }
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

    /// Removes a Node, Pod or ResourceQuota given its last known state.
    pub fn delete(&mut self, bytes: &[u8]) -> Result<(), String> {
        let head: AnyObject = serde_json::from_slice(bytes).map_err(|e| format!("decode object: {e}"))?;
        match head.kind.as_deref().unwrap_or("") {
            "Node" => {
                let node: Node = parse(bytes, "Node")?;
                self.nodes.remove(&node.metadata.name);
            }
            "Pod" => {
                let pod: Pod = parse(bytes, "Pod")?;
                self.release(&pod_key(&pod));
            }
            "ResourceQuota" => {
                let q: ResourceQuota = parse(bytes, "ResourceQuota")?;
                if let Some(m) = self.quotas.get_mut(&q.metadata.namespace) {
                    m.remove(&q.metadata.name);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// One line of a Kubernetes watch stream. Bad objects inside a valid event are reported in `error`.
    pub fn apply_watch_event(&mut self, line: &[u8]) -> Result<EventInfo, String> {
        let event: WatchEvent = serde_json::from_slice(line).map_err(|e| format!("decode watch event: {e}"))?;
        let object = event.object.get().as_bytes();
        let head: ObjectHead = serde_json::from_slice(object).unwrap_or_default();
        let outcome = match event.event_type.as_str() {
            "ADDED" | "MODIFIED" => self.apply(object).map(|_| ()),
            "DELETED" => self.delete(object),
            _ => Ok(()),
        };
        Ok(EventInfo {
            event_type: event.event_type,
            key: head.metadata.key(),
            resource_version: head.metadata.resource_version,
            code: head.code,
            error: outcome.err(),
        })
    }

    /// One page of a LIST response: applies every item, returns the list metadata and item keys.
    pub fn apply_list_page(&mut self, bytes: &[u8]) -> Result<ListInfo, String> {
        let page: ListPage = serde_json::from_slice(bytes).map_err(|e| format!("decode list: {e}"))?;
        let mut info = ListInfo { resource_version: page.metadata.resource_version, continue_token: page.metadata.continue_token, ..Default::default() };
        for item in page.items {
            let head: ObjectHead = serde_json::from_str(item.get()).unwrap_or_default();
            info.keys.push(head.metadata.key());
            let bytes = item.get().as_bytes();
            let applied = if head.kind.is_empty() { self.apply_kind(bytes, &page.kind) } else { self.apply(bytes).map(|_| ()) };
            if let Err(e) = applied {
                info.errors.push(e);
            }
        }
        Ok(info)
    }

    fn apply_kind(&mut self, bytes: &[u8], list_kind: &str) -> Result<(), String> {
        match list_kind.strip_suffix("List").unwrap_or("") {
            "Node" => self.apply_node(bytes),
            "Pod" => self.apply_pod(bytes).map(|_| ()),
            "ResourceQuota" => self.apply_quota(bytes),
            _ => Ok(()),
        }
    }

    /// After a re-list: forgets every object of `kind` whose key (`name` or `namespace/name`) is not in `keys`.
    pub fn retain(&mut self, kind: &str, keys: &HashSet<String>) -> usize {
        match kind {
            "Node" => {
                let gone: Vec<String> = self.nodes.keys().filter(|k| !keys.contains(*k)).cloned().collect();
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

    fn apply_node(&mut self, bytes: &[u8]) -> Result<(), String> {
        let node: Node = parse(bytes, "Node")?;
        if node.metadata.name.is_empty() {
            return Err("Node: metadata.name is empty".into());
        }
        let mut fresh = GpuNode::from_node(&node);
        match self.nodes.get(&fresh.name) {
            Some(old) if old.same_inventory(&fresh) => fresh.usage.clone_from(&old.usage),
            _ => self.rebuild_usage(&mut fresh),
        }
        self.nodes.insert(fresh.name.clone(), fresh);
        Ok(())
    }

    /// Recomputes one node's usage from the pods recorded on it (only when its GPUs changed).
    fn rebuild_usage(&self, node: &mut GpuNode) {
        for u in &mut node.usage {
            *u = Default::default();
        }
        for uid in self.node_pods.get(&node.name).into_iter().flatten() {
            if let Some(rec) = self.pods.get(uid) {
                node.account(&rec.footprint, 1);
            }
        }
    }

    fn apply_pod(&mut self, bytes: &[u8]) -> Result<Applied, String> {
        let pod: Pod = parse(bytes, "Pod")?;
        let key = pod_key(&pod);
        if pod.is_terminal() {
            self.release(&key);
            return Ok(Applied::Pod);
        }
        let ann = &pod.metadata.annotations;
        let (Some(node), Some(allocated)) = (ann.get(codec::VGPU_NODE_KEY), ann.get(codec::ALLOCATED_KEY)) else {
            return Ok(Applied::PodIgnored);
        };
        let slots = decode_pod_devices(allocated)
            .map_err(|e| format!("Pod {}: annotation {}: {e}", pod.key(), codec::ALLOCATED_KEY))?;
        let footprint = collapse(&slots, pod.spec.init_containers.len(), pod.init_containers_succeeded());
        self.reserve(key, PodRecord { namespace: pod.metadata.namespace.clone(), name: pod.metadata.name.clone(), node: node.clone(), footprint });
        Ok(Applied::Pod)
    }

    /// Records (or replaces) a pod's footprint on its node and in its namespace's quota usage.
    pub fn reserve(&mut self, uid: String, record: PodRecord) {
        self.release(&uid);
        if let Some(node) = self.nodes.get_mut(&record.node) {
            node.account(&record.footprint, 1);
        }
        self.node_pods.entry(record.node.clone()).or_default().insert(uid.clone());
        self.add_ns_usage(&record, 1);
        self.pods.insert(uid, record);
    }

    /// Drops a pod's footprint; true if it had one.
    pub fn release(&mut self, uid: &str) -> bool {
        let Some(record) = self.pods.remove(uid) else { return false };
        if let Some(node) = self.nodes.get_mut(&record.node) {
            node.account(&record.footprint, -1);
        }
        if let Some(set) = self.node_pods.get_mut(&record.node) {
            set.remove(uid);
            if set.is_empty() {
                self.node_pods.remove(&record.node);
            }
        }
        self.add_ns_usage(&record, -1);
        true
    }

    fn add_ns_usage(&mut self, record: &PodRecord, sign: i64) {
        let mem: i64 = record.footprint.iter().map(|c| c.mem).sum();
        let cores: i64 = record.footprint.iter().map(|c| c.cores).sum();
        let entry = self.ns_usage.entry(record.namespace.clone()).or_default();
        entry.0 = (entry.0 + sign * mem).max(0);
        entry.1 = (entry.1 + sign * cores).max(0);
    }

    fn apply_quota(&mut self, bytes: &[u8]) -> Result<(), String> {
        let q: ResourceQuota = parse(bytes, "ResourceQuota")?;
        let key_mem = format!("limits.{}", self.config.resource_memory_name);
        let key_cores = format!("limits.{}", self.config.resource_core_name);
        let limit = |key: &str| -> Result<Option<i64>, String> {
            q.spec.hard.get(key).map(|v| {
                v.as_int().ok_or_else(|| {
                    format!("ResourceQuota {}/{}: spec.hard[{key}]={:?} is not an integer", q.metadata.namespace, q.metadata.name, v.0)
                })
            }).transpose()
        };
        let limits = QuotaLimits { mem: limit(&key_mem)?, cores: limit(&key_cores)? };
        self.quotas.entry(q.metadata.namespace.clone()).or_default().insert(q.metadata.name.clone(), limits);
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

/// Reservations are keyed by UID; a manifest without one falls back to namespace/name.
pub fn pod_key(pod: &Pod) -> String {
    if pod.metadata.uid.is_empty() {
        pod.key()
    } else {
        pod.metadata.uid.clone()
    }
}

fn parse<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], kind: &str) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| {
        let name = object_name(bytes);
        let name = name.split_once(' ').map_or(name.as_str(), |(_, n)| n);
        format!("{kind} {name}: {e}")
    })
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
                registered: n.is_registered(),
                error: n.register_error.as_deref(),
                devices: n
                    .devices
                    .iter()
                    .zip(&n.usage)
                    .zip(&n.cordoned)
                    .map(|((d, u), &cordoned)| DeviceReport {
                        uuid: &d.id,
                        index: d.index,
                        device_type: &d.device_type,
                        numa: d.numa,
                        health: d.health,
                        cordoned,
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
