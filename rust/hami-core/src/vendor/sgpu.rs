//! MetaX sGPU (`Metax-SGPU`): slices of MetaX cards.
//!
//! Registration: `metax-tech.com/node-gpu-devices`, a JSON list of cards (`uuid`, `totalDevCount`,
//! `totalCompute`, `totalVRam`, `numa`, `healthy`, `qosPolicy`, `linkZone`); no handshake, a node
//! whose list is missing, empty or spoilt has no sGPU devices. Request: the count (limits), cores
//! (limits, 100 when none), memory (limits: a bare number is GiB, a quantity with a unit is bytes).
//!
//! A pod may say it is `online` or `offline` (`metax-tech.com/sgpu-app-class`: then it asks one
//! card per container and the webhook checks it) and which QoS policy its card runs
//! (`metax-tech.com/sgpu-qos-policy`, `best-effort` set by the webhook when absent). Fit refuses a
//! card whose pods' classes the pod's class may not join, or whose QoS policy differs; online pods
//! take no cores and prefer cards with fewer online pods; a whole-card (100 cores) pod without a
//! class prefers cards within one MetaLink zone ([`prioritize_exclusive`]). The node score
//! ([`node_score`]) is policy-neutral: HAMi weights it by 10000, negated under spread.
//!
//! The QoS policy a placement asks a card to switch to is remembered until the card's
//! registration shows it ([`crate::state::ClusterState`]'s `sgpu_qos`, as HAMi's in-memory cache:
//! lost on a restart). Written: standard `hami.io/metax-sgpu-devices-*`,
//! `metax-tech.com/gpu-devices-allocated` (JSON per container) and `metax-tech.com/predicate-time`.
//! The shared node lock.

use super::request::VendorRequest;
use super::{Admission, Backend, FitChecks, MemoryUnit, NodeScore, PodExtras, RegisterFormat, RequestFormat};
use crate::codec::{ContainerDevice, Device, PodDevices};
use crate::device_config::DeviceConfig;
use crate::k8s::{Container, Quantity};
use serde_json::{Map, Value};
use std::sync::Arc;

pub const WORD: &str = "Metax-SGPU";
pub const NODE_DEVICES_KEY: &str = crate::annotations::SGPU_NODE_DEVICES_KEY;
pub const ALLOCATED_JSON_KEY: &str = "metax-tech.com/gpu-devices-allocated";
pub const PREDICATE_TIME_KEY: &str = "metax-tech.com/predicate-time";
pub const APP_CLASS_KEY: &str = crate::annotations::SGPU_APP_CLASS_KEY;
pub const QOS_KEY: &str = crate::annotations::SGPU_QOS_KEY;
pub const TOPOLOGY_KEY: &str = crate::annotations::SGPU_TOPOLOGY_KEY;
/// The pod annotations the Fit and the score read.
pub const POD_KEYS: [&str; 3] = [APP_CLASS_KEY, QOS_KEY, TOPOLOGY_KEY];
pub const QOS_POLICIES: [&str; 3] = ["best-effort", "fixed-share", "burst-share"];
const ONLINE: &str = "online";
const OFFLINE: &str = "offline";
const QOS_FIELD: &str = "QosPolicy";
const ZONE_FIELD: &str = "LinkZone";

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let s = &config.metax;
    (!s.resource_vcount_name.is_empty()).then(|| Backend {
        common_word: WORD.into(),
        register_key: NODE_DEVICES_KEY.into(),
        to_allocate_key: "hami.io/metax-sgpu-devices-to-allocate".into(),
        allocated_key: "hami.io/metax-sgpu-devices-allocated".into(),
        count_name: s.resource_vcount_name.clone(),
        memory_name: s.resource_vmemory_name.clone(),
        core_name: s.resource_vcore_name.clone(),
        memory_unit: MemoryUnit::Factor(1024),
        default_cores: 100,
        count_checked: true,
        uuid_keys: ("metax-tech.com/use-gpuuuid".into(), "metax-tech.com/nouse-gpuuuid".into()),
        admission: Admission::Sgpu,
        register_format: RegisterFormat::Sgpu,
        request_format: RequestFormat::Sgpu,
        checks: FitChecks::Sgpu,
        score: NodeScore::Sgpu { topology_aware: s.sgpu_topology_aware },
        extras: PodExtras::Sgpu,
        ..Backend::default()
    })
}

pub use crate::model::AppClass;

fn is_class(class: AppClass) -> bool {
    matches!(class, AppClass::Online | AppClass::Offline)
}

/// What a pod's annotations say to this backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodAsk<'a> {
    pub class: AppClass,
    pub qos: &'a str,
    pub topology: Option<&'a str>,
}

impl<'a> PodAsk<'a> {
    /// From the pod's annotations (`get` one by key).
    pub fn read(get: impl Fn(&str) -> Option<&'a str>) -> Self {
        Self { class: AppClass::read(get(APP_CLASS_KEY)), qos: get(QOS_KEY).unwrap_or(""), topology: get(TOPOLOGY_KEY) }
    }
}

/// A container's request: count (limits, an integer 1..=i32::MAX), cores (limits, 100 when none
/// or not an integer; out of range drops the request), memory (limits, see [`memory_mib`]).
pub fn container_request(c: &Container, b: &Arc<Backend>) -> Option<VendorRequest> {
    let res = c.resources();
    let max = i64::from(i32::MAX);
    let nums = res.limit(&b.count_name)?.as_int()?;
    if !(1..=max).contains(&nums) {
        return None;
    }
    let coresreq = match res.limit(&b.core_name).and_then(Quantity::as_int) {
        Some(v) if !(0..=max).contains(&v) => return None,
        Some(v) => v,
        None => 100,
    };
    let memreq = match res.limit(&b.memory_name) {
        Some(q) => memory_mib(q)?,
        None => 0,
    };
    let mem_percentage = if memreq == 0 { 100 } else { 0 };
    Some(VendorRequest { backend: b.clone(), backend_id: 0, nums, memreq, mem_percentage, coresreq })
}

/// The MiB a memory limit asks: a quantity whose canonical form has a unit counts bytes, a bare
/// number GiB; not an integer asks none; out of range drops the request (`None`).
pub fn memory_mib(q: &Quantity) -> Option<i64> {
    let max = i64::from(i32::MAX);
    let Some(v) = q.as_int() else { return Some(0) };
    let mib = if canonical_has_unit(&q.0, v) {
        v / 1024 / 1024
    } else {
        if !(0..=max / 1024).contains(&v) {
            return None;
        }
        v * 1024
    };
    (0..=max).contains(&mib).then_some(mib)
}

/// Whether Kubernetes prints the integer quantity `text` (value `v`) with a unit: binary-suffixed
/// values of 1024 and above when a multiple of 1024, others when a non-zero multiple of 1000.
fn canonical_has_unit(text: &str, v: i64) -> bool {
    let binary = text.trim().ends_with('i');
    if binary && v.unsigned_abs() >= 1024 {
        return v % 1024 == 0;
    }
    v != 0 && v % 1000 == 0
}

/// The cards a node's annotation registers; an empty list registers none. A value that is not a
/// JSON list of such cards is an error (the node's sGPU devices are then skipped).
pub fn devices(value: &str, id: u8) -> Result<Vec<Device>, String> {
    let parsed: Value = serde_json::from_str(value).map_err(|e| format!("invalid JSON: {e}"))?;
    let list = match parsed {
        Value::Null => return Ok(Vec::new()),
        Value::Array(list) => list,
        _ => return Err("not a JSON list".into()),
    };
    list.iter().enumerate().map(|(i, v)| card(v, i, id).map_err(|e| format!("card {i}: {e}"))).collect()
}

fn card(v: &Value, index: usize, id: u8) -> Result<Device, String> {
    let obj = v.as_object().ok_or("not a JSON object")?;
    let int = |name: &str| -> Result<i32, String> {
        match field(obj, name) {
            None | Some(Value::Null) => Ok(0),
            Some(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()).ok_or_else(|| format!("{name}: not an int32")),
        }
    };
    let text = |name: &str| -> Result<String, String> {
        match field(obj, name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(format!("{name}: not a string")),
        }
    };
    let healthy = match field(obj, "healthy") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err("healthy: not a boolean".into()),
    };
    let mut custom = Map::new();
    custom.insert(QOS_FIELD.into(), Value::String(text("qosPolicy")?));
    custom.insert(ZONE_FIELD.into(), Value::from(int("linkZone")?));
    custom.insert("Model".into(), Value::String(text("model")?));
    Ok(Device {
        id: text("uuid")?,
        index: index as u32,
        count: int("totalDevCount")?,
        devmem: int("totalVRam")?,
        devcore: int("totalCompute")?,
        device_type: WORD.into(),
        numa: int("numa")?,
        health: healthy,
        custom_info: Some(Box::new(custom)),
        vendor: id,
        ..Device::default()
    })
}

/// A JSON field as Go's decoder finds it: the exact name, else one equal ignoring case.
fn field<'v>(obj: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    obj.get(name).or_else(|| obj.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

/// The QoS policy a card registered ("" when none).
pub fn qos_of(d: &Device) -> &str {
    d.custom_info.as_deref().and_then(|c| c.get(QOS_FIELD)).and_then(Value::as_str).unwrap_or("")
}

/// The MetaLink zone a card registered (0: none).
pub fn zone_of(d: &Device) -> i64 {
    d.custom_info.as_deref().and_then(|c| c.get(ZONE_FIELD)).and_then(Value::as_i64).unwrap_or(0)
}

/// The webhook's checks on a container asking sGPU (count as `Value()` rounds it), and the QoS
/// annotation it sets; an error is HAMi's message (HTTP 500).
pub fn admit(class: Option<&str>, qos: Option<&str>, count: i64) -> Result<Option<(String, String)>, String> {
    if let Some(class) = class {
        if class != ONLINE && class != OFFLINE {
            return Err(format!("{APP_CLASS_KEY} must be set one of [{ONLINE}, {OFFLINE}]"));
        }
        if count != 1 {
            return Err("app-class pod must request single device".into());
        }
    }
    if class == Some(ONLINE) {
        return Ok(None);
    }
    match qos {
        None => Ok(Some((QOS_KEY.into(), QOS_POLICIES[0].into()))),
        Some(q) if QOS_POLICIES.contains(&q) => Ok(None),
        Some(_) => Err(format!("{QOS_KEY} must be set one of [{}]", QOS_POLICIES.join(", "))),
    }
}

/// `metax-tech.com/gpu-devices-allocated` (the cards per container, as Go marshals them) and the
/// predicate time.
pub fn extra_annotations(placed: &PodDevices, now_nanos: i64) -> Vec<(String, String)> {
    let container = |c: &Vec<ContainerDevice>| format!("[{}]", c.iter().map(metax_entry).collect::<Vec<_>>().join(","));
    let json = format!("[{}]", placed.iter().map(container).collect::<Vec<_>>().join(","));
    vec![(ALLOCATED_JSON_KEY.into(), json), (PREDICATE_TIME_KEY.into(), now_nanos.to_string())]
}

/// One card of a container: `uuid`, then `compute` and `vRam` when not 0 (Go's field order).
fn metax_entry(e: &ContainerDevice) -> String {
    let mut out = format!("{{\"uuid\":{}", Value::String(e.uuid.clone()));
    if e.usedcores != 0 {
        out += &format!(",\"compute\":{}", e.usedcores);
    }
    if e.usedmem != 0 {
        out += &format!(",\"vRam\":{}", e.usedmem);
    }
    out + "}"
}

/// The QoS policies a placement asks its cards to switch to: per entry (init containers first),
/// the pod's policy, or none for a whole card, where it differs from what the card shows at the
/// time (its registration, or what an earlier app container of the pod set). Online pods ask none.
pub fn qos_expectations(
    node: &crate::model::GpuNode,
    placed: &PodDevices,
    init_count: usize,
    ask: PodAsk,
) -> Vec<(String, String)> {
    if ask.class == AppClass::Online {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut app_set: Vec<(&str, &str)> = Vec::new();
    for (slot, entries) in placed.iter().enumerate() {
        for e in entries {
            let expected = if e.usedcores == 100 { "" } else { ask.qos };
            let registered = node.devices.iter().find(|d| d.id == e.uuid).map_or("", qos_of);
            let current = match slot >= init_count {
                true => app_set.iter().rev().find(|(u, _)| *u == e.uuid).map_or(registered, |(_, q)| q),
                false => registered,
            };
            if current != expected {
                out.push((e.uuid.clone(), expected.to_owned()));
            }
            if slot >= init_count {
                app_set.push((&e.uuid, expected));
            }
        }
    }
    out
}

/// Whether a card's pods' classes admit a pod of `class` (`used`: its slots taken, `online` and
/// `offline`: its resident pods of each class). A used card with no class takes only pods without
/// one; an online card takes no offline pod.
pub fn class_fits(class: AppClass, used: i64, online: i64, offline: i64) -> bool {
    if used == 0 {
        return true;
    }
    let classed = online > 0 || offline > 0;
    classed == is_class(class) && !(online > 0 && class == AppClass::Offline)
}

/// HAMi's choice of `nums` whole cards among `candidates` (walk order): the smallest MetaLink zone
/// holding them all, else zones from the smallest, then cards in no zone. HAMi keeps the zones in a
/// Go map: equal-sized zones (and the zones of no link) come in a rotation of their order of first
/// appearance in the walk; here that order itself, one HAMi gives.
pub fn prioritize_exclusive(candidates: &[usize], nums: usize, zone: impl Fn(usize) -> i64) -> Vec<usize> {
    let mut zones: Vec<(i64, Vec<usize>)> = Vec::new();
    for &i in candidates {
        let z = zone(i);
        match zones.iter_mut().find(|(k, _)| *k == z) {
            Some((_, members)) => members.push(i),
            None => zones.push((z, vec![i])),
        }
    }
    let (mut linked, other): (Vec<_>, Vec<_>) = zones.into_iter().partition(|(z, _)| *z > 0);
    linked.sort_by_key(|(_, m)| m.len());
    if let Some((_, members)) = linked.iter().find(|(_, m)| m.len() >= nums) {
        return members[..nums].to_vec();
    }
    let all = linked.iter().chain(&other).flat_map(|(_, m)| m.iter().copied());
    all.take(nums).collect()
}

/// MetaLink pairs among `cards` (uuid, zone): 10 for each two distinct cards in one zone.
pub fn link_score(cards: &[(&str, i64)]) -> i64 {
    let mut score = 0;
    for (i, (ua, za)) in cards.iter().enumerate() {
        for (ub, zb) in &cards[i + 1..] {
            if ua != ub && *za != 0 && za == zb {
                score += 10;
            }
        }
    }
    score
}

/// The node's policy-neutral score for a placement (before HAMi's weight): for an online pod the
/// resident pods on its cards (`-100` per offline pod on a card with only offline pods, else `-20`
/// per online and `-2` per offline); for a whole-card pod with topology awareness the MetaLink
/// pairs it takes less those it breaks among the idle cards; else 0.
pub fn node_score(node: &crate::model::GpuNode, placed: &PodDevices, ask: PodAsk, topology_aware: bool) -> i64 {
    let entries: Vec<&ContainerDevice> = placed.iter().flatten().collect();
    if ask.class == AppClass::Online && !entries.is_empty() {
        return online_score(node, &entries);
    }
    let Some(_) = entries.iter().find(|e| e.usedcores == 100) else { return 0 };
    let enabled = ask.topology.and_then(parse_go_bool).unwrap_or(topology_aware);
    if !enabled {
        return 0;
    }
    exclusive_score(node, &entries)
}

fn online_score(node: &crate::model::GpuNode, entries: &[&ContainerDevice]) -> i64 {
    let mut total = 0;
    for (d, u) in node.devices.iter().zip(&node.usage) {
        if !entries.iter().any(|e| e.uuid == d.id) {
            continue;
        }
        let (on, off) = (i64::from(u.online), i64::from(u.offline));
        total += if off > 0 && on == 0 { -100 * off } else { -20 * on - 2 * off };
    }
    total
}

fn exclusive_score(node: &crate::model::GpuNode, entries: &[&ContainerDevice]) -> i64 {
    let zone = |uuid: &str| node.devices.iter().find(|d| d.id == uuid && d.device_type == WORD).map_or(0, zone_of);
    let taken: Vec<(&str, i64)> =
        entries.iter().filter(|e| e.usedcores == 100).map(|e| (e.uuid.as_str(), zone(&e.uuid))).collect();
    let idle: Vec<(&str, i64)> = node
        .devices
        .iter()
        .zip(&node.usage)
        .filter(|(_, u)| u.used == 0)
        .map(|(d, _)| (d.id.as_str(), if d.device_type == WORD { zone_of(d) } else { 0 }))
        .collect();
    let rest: Vec<(&str, i64)> = idle.iter().copied().filter(|(u, _)| !taken.iter().any(|(t, _)| t == u)).collect();
    let (available, allocated, left) = (link_score(&idle), link_score(&taken), link_score(&rest));
    10 * allocated - (available - allocated - left)
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
#[path = "sgpu_tests.rs"]
mod tests;
