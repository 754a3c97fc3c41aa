//! The other vendors' requests of a pod, container by container (HAMi's `Resourcereqs` over its
//! backends, each backend's `GenerateResourceRequests`).

use super::{Backend, Backends, MemoryUnit};
use crate::k8s::{Container, Pod, Quantity};
use std::sync::Arc;

/// A container's request for one non-NVIDIA backend (HAMi's `ContainerDeviceRequest`), with the
/// backend that places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorRequest {
    pub backend: Arc<Backend>,
    /// The backend's id in the cluster's [`Backends`] (its devices carry it); 0 when read without them.
    pub backend_id: u8,
    pub nums: i64,
    pub memreq: i64,
    pub mem_percentage: i64,
    pub coresreq: i64,
}

/// Per container (init containers first), the backends it asks for; an empty outer list when the
/// pod asks none (the common case costs one lookup per container and backend).
pub fn vendor_requests(pod: &Pod, backends: &Backends) -> Vec<Vec<VendorRequest>> {
    if backends.is_empty() {
        return Vec::new();
    }
    let per_container: Vec<Vec<VendorRequest>> = pod
        .spec
        .init_containers
        .iter()
        .chain(&pod.spec.containers)
        .map(|c| {
            backends
                .with_ids()
                .zip(backends.iter())
                .filter_map(|((id, _), b)| container_request(c, b).map(|r| VendorRequest { backend_id: id, ..r }))
                .collect()
        })
        .collect();
    if per_container.iter().all(Vec::is_empty) {
        return Vec::new();
    }
    per_container
}

/// One backend's request of one container; `None` when it asks nothing of it or the request is
/// out of range (HAMi then drops it whole).
pub fn container_request(c: &Container, b: &Arc<Backend>) -> Option<VendorRequest> {
    if b.request_format == super::RequestFormat::CorePercent {
        return super::amd::container_request(c, b);
    }
    if b.request_format == super::RequestFormat::XpuMemory {
        return super::kunlun::container_request(c, b);
    }
    if b.request_format == super::RequestFormat::Neuron {
        return super::neuron::container_request(c, b);
    }
    if b.request_format == super::RequestFormat::DrsProfile {
        return super::enflame_drs::container_request(c, b);
    }
    if b.request_format == super::RequestFormat::Sgpu {
        return super::sgpu::container_request(c, b);
    }
    let res = c.resources();
    let nums = res.get(&b.count_name)?.as_int()?;
    if nums <= 0 || (b.count_checked && nums > i64::from(i32::MAX)) {
        return None;
    }
    if let Some((memreq, coresreq)) = b.fixed_request {
        return Some(VendorRequest { backend: b.clone(), backend_id: 0, nums, memreq, mem_percentage: 100, coresreq });
    }
    let memreq = memory(res.get(&b.memory_name), b)?;
    let coresreq = match res.get(&b.core_name).and_then(Quantity::as_int) {
        None => b.default_cores,
        Some(c) if b.count_checked && !(0..=i64::from(i32::MAX)).contains(&c) => return None,
        Some(c) => c,
    };
    let mem_percentage = if memreq == 0 { 100 } else { 0 };
    if b.split_over_cards {
        let (memreq, coresreq) = (memreq / nums, coresreq / nums);
        return Some(VendorRequest { backend: b.clone(), backend_id: 0, nums, memreq, mem_percentage, coresreq });
    }
    Some(VendorRequest { backend: b.clone(), backend_id: 0, nums, memreq, mem_percentage, coresreq })
}

/// The memory asked, in MiB; `None` when out of range (the request is dropped).
fn memory(quantity: Option<&Quantity>, b: &Backend) -> Option<i64> {
    let Some(q) = quantity else { return Some(0) };
    let max = i64::from(i32::MAX);
    match b.memory_unit {
        MemoryUnit::Factor(factor) => {
            let Some(m) = q.as_int() else { return Some(0) };
            if !(0..=max).contains(&m) {
                return None;
            }
            let scaled = if factor > 1 { m * factor } else { m };
            (scaled <= max).then_some(scaled)
        }
        MemoryUnit::Fixed(unit) => {
            let m = q.as_int()?;
            (0..=max / unit).contains(&m).then_some(m * unit)
        }
    }
}
