//! AWS Neuron, HAMi's `awsneuron` section (`AWSNeuron`).
//!
//! No register annotation: one device per unit of the node's capacity of the count resource,
//! `<node>-AWSNeuron-<i>`, memory 0, with the node's cores per device (its core capacity over its
//! device count, rounded down) as slots and as a core bitmask, and the node's instance type
//! (label `node.kubernetes.io/instance-type`) in its custom info. A container asks whole devices
//! (the count resource) or cores (the core resource, split over devices); the Fit is
//! [`crate::fit::neuron`]. Written: `hami.io/aws-neuron-devices-allocated` (no to-allocate list),
//! `AWS_NEURON_IDS`, `NEURON_RESOURCE_TYPE`, `NEURON_ALLOCATED`, `NEURON_ALLOC_TIME` and
//! `aws.amazon.com/predicate-node`. No lock.
//!
//! HAMi keeps the cores per device of the first node it registers and applies them to every node
//! registered after it; hami-fast reads each node's own (docs/compatibility.md).

use super::request::VendorRequest;
use super::{Admission, Backend, FitChecks, NodeLock, PodExtras, RegisterFormat, RequestFormat};
use crate::codec::{Device, PodDevices};
use crate::device_config::DeviceConfig;
use crate::k8s::{Container, Quantity};
use std::sync::Arc;

pub const WORD: &str = "AWSNeuron";
pub const ALLOCATED_KEY: &str = "hami.io/aws-neuron-devices-allocated";
/// The custom info key of a device's instance type.
pub const NODE_TYPE: &str = "AWSNodeType";
const IDS_KEY: &str = "AWS_NEURON_IDS";
const RESOURCE_TYPE_KEY: &str = "NEURON_RESOURCE_TYPE";
const ALLOCATED_FLAG_KEY: &str = "NEURON_ALLOCATED";
const TIME_KEY: &str = "NEURON_ALLOC_TIME";
const NODE_KEY: &str = "aws.amazon.com/predicate-node";
/// HAMi splits a core request over devices of at most this many cores.
const MAX_SPLIT: i64 = 2;
const MAX_DEVICES: i64 = i32::MAX as i64;
/// More devices than any instance has (16): a capacity past this is refused, not registered.
pub const MAX_NODE_DEVICES: i64 = 4096;

/// What a request asks, in [`VendorRequest::mem_percentage`] (HAMi's is 0 for every Neuron
/// request): whole devices named in the limits, whole devices named in the requests only, or
/// cores (then `coresreq` holds the cores asked, split per node by [`resolve`]).
pub const DEVICES_IN_LIMITS: i64 = 0;
pub const DEVICES_IN_REQUESTS: i64 = 1;
pub const CORES: i64 = 2;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.awsneuron;
    (!section.resource_count_name.is_empty()).then(|| Backend {
        common_word: WORD.into(),
        allocated_key: ALLOCATED_KEY.into(),
        count_name: section.resource_count_name.clone(),
        core_name: section.resource_core_name.clone(),
        uuid_keys: ("aws.amazon.com/use-neuron-uuid".into(), "aws.amazon.com/nouse-neuron-uuid".into()),
        admission: Admission::NeuronAsk,
        register_format: RegisterFormat::NeuronCapacity,
        request_format: RequestFormat::Neuron,
        checks: FitChecks::Neuron,
        lock: NodeLock::None,
        extras: PodExtras::Neuron,
        ..Backend::default()
    })
}

/// HAMi's `validateResourceRequest`: an integer in 1..=max, else its message.
fn checked(q: &Quantity, name: &str, max: i64) -> Result<i64, String> {
    match q.as_int() {
        None => Err(format!("{name} must be an integer")),
        Some(v) if v <= 0 => Err(format!("{name} must be greater than 0")),
        Some(v) if v > max => Err(format!("{name} must not exceed {max}")),
        Some(v) => Ok(v),
    }
}

/// The cores per device a core request is split by, on devices of `cores_per_device` cores.
pub fn split_size(cores_per_device: i64) -> i64 {
    if cores_per_device <= 0 {
        MAX_SPLIT
    } else {
        cores_per_device.min(MAX_SPLIT)
    }
}

/// HAMi's `splitCoreRequest`: (devices, cores per device) for `cores`, or its message.
fn split(cores: i64, per: i64, core_name: &str) -> Result<(i64, i64), String> {
    if cores <= per {
        return Ok((1, cores));
    }
    if cores % per != 0 {
        return Err(format!("{core_name} must be 1 or a multiple of {per}, got {cores}"));
    }
    let nums = cores / per;
    if nums > MAX_DEVICES {
        return Err(format!("{core_name} needs {nums} devices, which exceeds the maximum of {MAX_DEVICES}"));
    }
    Ok((nums, per))
}

/// The webhook (HAMi's `MutateAdmission`): whether the container asks Neuron (either resource, in
/// its limits or requests), or the message of a request HAMi refuses; `split_by` as [`split_size`].
pub fn admission(c: &Container, b: &Backend, split_by: i64) -> Result<bool, String> {
    let res = c.resources();
    if let Some(q) = res.get(&b.count_name) {
        return checked(q, &b.count_name, MAX_DEVICES).map(|_| true);
    }
    let Some(q) = res.get(&b.core_name).filter(|_| !b.core_name.is_empty()) else { return Ok(false) };
    let cores = checked(q, &b.core_name, 2 * MAX_DEVICES)?;
    split(cores, split_by, &b.core_name).map(|_| true)
}

/// A container's Neuron request (devices, else cores; limits, then requests); `None` when it asks
/// none or HAMi drops it (not an integer, out of range). Cores are split per node ([`resolve`]).
pub fn container_request(c: &Container, b: &Arc<Backend>) -> Option<VendorRequest> {
    let res = c.resources();
    let request = |nums, kind, coresreq| VendorRequest {
        backend: b.clone(),
        backend_id: 0,
        nums,
        memreq: 0,
        mem_percentage: kind,
        coresreq,
    };
    if let Some(q) = res.get(&b.count_name) {
        let nums = checked(q, &b.count_name, MAX_DEVICES).ok()?;
        let kind = if res.limit(&b.count_name).is_some() { DEVICES_IN_LIMITS } else { DEVICES_IN_REQUESTS };
        return Some(request(nums, kind, 0));
    }
    let q = res.get(&b.core_name).filter(|_| !b.core_name.is_empty())?;
    Some(request(1, CORES, checked(q, &b.core_name, 2 * MAX_DEVICES).ok()?))
}

/// (devices, cores asked per device) of `r` on devices of `cores_per_device` cores: a device
/// request asks each device's cores, a core request is split ([`split_size`]); `None` when the
/// cores do not split.
pub fn resolve(r: &VendorRequest, cores_per_device: i64) -> Option<(i64, i64)> {
    if r.mem_percentage != CORES {
        return Some((r.nums, cores_per_device));
    }
    split(r.coresreq, split_size(cores_per_device), "").ok()
}

/// The node's cores per device, as its Neuron devices carry them (0 without any).
pub fn cores_per_device<'a>(mut devices: impl Iterator<Item = &'a Device>) -> i64 {
    devices.find(|d| d.device_type == WORD).map_or(0, |d| i64::from(d.count))
}

/// The cores per device the webhook reads for `pod`: the smallest among the nodes with Neuron
/// devices (HAMi: the first node registered; the same in a cluster of one instance family), 0
/// without any; not looked up for a pod that names no Neuron resource.
pub fn cluster_cores<'a>(
    pod: &crate::k8s::Pod,
    backends: &super::Backends,
    nodes: impl Iterator<Item = &'a crate::model::GpuNode>,
) -> i64 {
    let Some(b) = backends.iter().find(|b| b.common_word == WORD) else { return 0 };
    let names = |c: &Container| [&b.count_name, &b.core_name].iter().any(|n| c.resources().get(n).is_some());
    if !pod.spec.init_containers.iter().chain(&pod.spec.containers).any(names) {
        return 0;
    }
    nodes.map(|n| cores_per_device(n.devices.iter())).filter(|&c| c > 0).min().unwrap_or(0)
}

/// What a container asks of `b` as the webhook's quota check counts it (memory, cores), with
/// Neuron's request resolved on devices of `neuron_cores` cores.
pub fn quota_request(c: &Container, b: &Arc<Backend>, neuron_cores: i64) -> Option<(i64, i64)> {
    let r = super::request::container_request(c, b)?;
    let (nums, cores) = match b.request_format {
        RequestFormat::Neuron => resolve(&r, neuron_cores)?,
        _ => (r.nums, r.coresreq),
    };
    Some((r.memreq * nums, cores * nums))
}

/// HAMi's devices from capacity: `count` devices of `cores / count` cores each (HAMi's unsigned
/// division), slots that many, the core bitmask, no memory.
pub fn devices(node: &str, count: i64, cores: i64, instance_type: &str, id: u8) -> Vec<Device> {
    if count <= 0 {
        return Vec::new();
    }
    let per = (cores as u64) / (count as u64);
    let mask = if per >= 64 { u64::MAX } else { (1u64 << per) - 1 };
    let mut info = serde_json::Map::new();
    info.insert(NODE_TYPE.into(), serde_json::Value::String(instance_type.into()));
    (0..count)
        .map(|i| Device {
            id: format!("{node}-{WORD}-{i}"),
            index: i as u32,
            count: per as i32,
            devcore: mask as i32,
            device_type: WORD.into(),
            health: true,
            custom_info: Some(Box::new(info.clone())),
            vendor: id,
            ..Device::default()
        })
        .collect()
}

/// The instance type a device was registered with ("" without the label).
pub fn instance_type(d: &Device) -> &str {
    d.custom_info.as_deref().and_then(|i| i.get(NODE_TYPE)).and_then(serde_json::Value::as_str).unwrap_or("")
}

/// HAMi's `PatchAnnotations` beside the device list: `AWS_NEURON_IDS` lists, over the containers
/// in turn, the indexes of the devices of those that name the count resource in their limits, and
/// for the others the cores of each device's core bits 1 and 2 (`cores per device × index`, `+1`);
/// written with the time, `NEURON_ALLOCATED=false` and the node once any container adds to it.
pub fn extra_annotations(
    node: &crate::model::GpuNode,
    backend: &Backend,
    placed: &PodDevices,
    requests: &[Vec<VendorRequest>],
    now: i64,
) -> Vec<(String, String)> {
    let per = cores_per_device(node.devices.iter());
    let index = |uuid: &str| node.devices.iter().find(|d| d.id == uuid).map_or(0, |d| i64::from(d.index));
    let mut ids: Vec<i64> = Vec::new();
    let mut core_bits = false;
    for (slot, entries) in placed.iter().enumerate() {
        let asked = requests.get(slot).and_then(|rs| rs.iter().find(|r| r.backend.common_word == WORD));
        let by_limit = asked.is_some_and(|r| r.mem_percentage == DEVICES_IN_LIMITS);
        for e in entries {
            let at = index(&e.uuid);
            if by_limit {
                ids.push(at);
                continue;
            }
            for bit in [1, 2] {
                if e.usedcores & bit != 0 {
                    ids.push(per * at + i64::from(bit - 1));
                    core_bits = true;
                }
            }
        }
    }
    if ids.is_empty() {
        return Vec::new();
    }
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    let mut out = vec![
        (IDS_KEY.to_owned(), list.join(",")),
        (TIME_KEY.to_owned(), now.saturating_mul(1_000_000_000).to_string()),
        (ALLOCATED_FLAG_KEY.to_owned(), "false".to_owned()),
        (NODE_KEY.to_owned(), node.name.clone()),
    ];
    if core_bits {
        out.push((RESOURCE_TYPE_KEY.to_owned(), backend.core_name.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_carry_cores_per_device_as_slots_and_mask() {
        let d = devices("n", 4, 9, "inf1.xlarge", 3);
        assert_eq!(d.len(), 4);
        assert_eq!((d[1].id.as_str(), d[1].count, d[1].devcore, d[1].devmem), ("n-AWSNeuron-1", 2, 3, 0));
        assert_eq!(instance_type(&d[0]), "inf1.xlarge");
        assert!(devices("n", 0, 8, "", 3).is_empty());
        assert_eq!(devices("n", 2, 0, "", 3)[0].devcore, 0, "no core capacity: no cores");
        assert_eq!(devices("n", 1, 1 << 40, "", 3)[0].devcore, -1, "a mask past 32 bits, as HAMi's int32");
    }

    #[test]
    fn core_requests_split_by_at_most_two() {
        assert_eq!(split_size(8), 2);
        assert_eq!(split_size(1), 1);
        assert_eq!(split_size(0), 2, "no cores known: HAMi's cap");
        assert_eq!(split(1, 2, "c"), Ok((1, 1)));
        assert_eq!(split(6, 2, "c"), Ok((3, 2)));
        assert_eq!(split(3, 2, "c"), Err("c must be 1 or a multiple of 2, got 3".into()));
        assert_eq!(split(3, 1, "c"), Ok((3, 1)));
    }
}
