//! HAMi's standard Fit of the vendors beside NVIDIA (Hygon's, Iluvatar's, ...): one container's
//! request for one backend, on the node's device list as HAMi's `fitInDevices` walks it.

use super::{FitFailure, PodContext, QuotaState, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode, HEALTHY, RESERVED};
use crate::policy::device::sort_devices;
use crate::request::VendorRequest;
use crate::vendor::{Backend, FitChecks};

/// The pod's devices of a backend placed earlier in this phase (one entry per container, as HAMi
/// pads them), and the backend's namespace quota when its Fit checks it card by card (HAMi's
/// Cambricon `fitQuota`: those devices, then the container's picks and the candidate, collapsed
/// with the pod's init count).
pub struct Earlier<'a> {
    pub devices: &'a [Vec<ContainerDevice>],
    pub init_count: usize,
    pub quota: Option<QuotaState>,
}

impl Earlier<'_> {
    fn quota_exceeded(&self, picked: &[ContainerDevice], candidate: ContainerDevice) -> bool {
        let Some(q) = &self.quota else { return false };
        let mut seen: Vec<Vec<ContainerDevice>> = self.devices.to_vec();
        seen.push(picked.iter().cloned().chain(std::iter::once(candidate)).collect());
        let footprint = crate::model::collapse(&seen, self.init_count, false);
        let mem: i64 = footprint.iter().map(|c| c.mem).sum();
        let cores: i64 = footprint.iter().map(|c| c.cores).sum();
        q.limit_mem.is_some_and(|l| q.used_mem + mem > l) || q.limit_cores.is_some_and(|l| q.used_cores + cores > l)
    }

    /// Moore Threads' rule: every device the pod's earlier containers took is this one.
    fn all_on(&self, id: &str) -> bool {
        self.devices.iter().flatten().all(|e| e.uuid == id)
    }
}

/// Places one vendor request of a container: HAMi sorts the node's whole device list by the GPU
/// policy on the container's `scores` (computed once before its first request), keeps the devices whose type contains the request's type, and walks them from the end.
/// The usage of the devices taken is added to `usage` (HAMi's `AddResourceUsage`).
pub fn fit_request(
    node: &GpuNode,
    usage: &mut [DeviceUsage],
    order: &mut [usize],
    r: &VendorRequest,
    scores: &[f32],
    ctx: &PodContext,
    earlier: &Earlier,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let backend = &*r.backend;
    let request_type = backend.request_type();
    sort_devices(order, node, usage, scores, ctx.gpu_policy, ctx.hints.numa_bind);
    let typed: Vec<usize> =
        order.iter().copied().filter(|&i| of_type(&node.devices[i].device_type, request_type)).collect();
    if r.nums > typed.len() as i64 {
        return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
    }
    let picked = walk(node, usage, &typed, r, backend, ctx, earlier)?;
    // HAMi adds the usage to the first device of that id in its sorted list (two backends may
    // register one id).
    for d in &picked {
        if let Some(&i) = order.iter().find(|&&i| node.devices[i].id == d.uuid) {
            let u = &mut usage[i];
            u.used += 1;
            u.usedmem += i64::from(d.usedmem);
            u.usedcores += i64::from(d.usedcores);
        }
    }
    Ok(picked)
}

/// HAMi's `getNodeResources`: the device's type contains the request's, ignoring case.
fn of_type(device_type: &str, request_type: &str) -> bool {
    let (hay, needle) = (device_type.as_bytes(), request_type.as_bytes());
    needle.is_empty() || hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// The same verdict and reason string as [`fit_request`] for a pod whose only request is this
/// one (an app container's): whether it fits does not depend on the order HAMi walks the cards
/// in, so the cards are counted, not sorted. The chosen node alone needs the ordered walk.
pub fn quick_fit(node: &GpuNode, r: &VendorRequest, ctx: &PodContext) -> Result<f64, FitFailure> {
    let backend = &*r.backend;
    let cores = r.coresreq.min(100);
    let (mut typed, mut eligible) = (0usize, 0usize);
    let mut reasons = ReasonCounts::default();
    for (i, (d, u)) in node.devices.iter().zip(&node.usage).enumerate() {
        if !of_type(&d.device_type, backend.request_type()) {
            continue;
        }
        typed += 1;
        match card_check(node, i, u, backend, ctx, memory_of(r, d), cores, || true) {
            Some(reason) => reasons.bump(reason, 1),
            None => eligible += 1,
        }
    }
    let nums = usize::try_from(r.nums).unwrap_or(usize::MAX);
    if nums > typed {
        return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
    }
    if eligible >= nums {
        return Ok(crate::policy::device::node_score(&node.totals));
    }
    if eligible > 0 {
        reasons.bump(Reason::AllocatedCardsInsufficientRequest, eligible);
    }
    Err(FitFailure::Cards { counts: reasons, cards: typed })
}

/// The memory a request takes of one card: its MiB, else its share of the card.
fn memory_of(r: &VendorRequest, d: &crate::codec::Device) -> i64 {
    if r.memreq > 0 {
        r.memreq
    } else if r.mem_percentage != 101 {
        i64::from(d.devmem) * r.mem_percentage / 100
    } else {
        0
    }
}

/// The per-card checks, first failing one the reason, from the end of the typed list.
fn walk(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    r: &VendorRequest,
    backend: &Backend,
    ctx: &PodContext,
    earlier: &Earlier,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let cores = r.coresreq.min(100);
    let mut need = r.nums;
    let mut picked = Vec::new();
    let mut reasons = ReasonCounts::default();
    for &i in typed.iter().rev() {
        let (d, u) = (&node.devices[i], &usage[i]);
        let memreq = memory_of(r, d);
        let usedmem = if backend.checks == FitChecks::SlotsOnly { 0 } else { memreq as i32 };
        let device = ContainerDevice {
            uuid: d.id.clone(),
            device_type: backend.request_type().to_owned(),
            usedmem,
            usedcores: cores as i32,
        };
        let quota_fits = || !earlier.quota_exceeded(&picked, device.clone());
        if let Some(reason) = card_check(node, i, u, backend, ctx, memreq, cores, quota_fits) {
            reasons.bump(reason, 1);
            continue;
        }
        if backend.checks == FitChecks::SameDevice && !earlier.all_on(&d.id) {
            reasons.bump(Reason::CardNotFoundCustomFilterRule, 1);
            continue;
        }
        if need > 0 {
            need -= 1;
            picked.push(device);
        }
        if need == 0 {
            return Ok(picked);
        }
    }
    if !picked.is_empty() {
        reasons.bump(Reason::AllocatedCardsInsufficientRequest, picked.len());
    }
    Err(FitFailure::Cards { counts: reasons, cards: typed.len() })
}

/// `quota_fits` is asked where HAMi checks a per-card quota: after the slots, before the memory.
#[allow(clippy::too_many_arguments)]
fn card_check(
    node: &GpuNode,
    i: usize,
    u: &DeviceUsage,
    backend: &Backend,
    ctx: &PodContext,
    memreq: i64,
    cores: i64,
    quota_fits: impl FnOnce() -> bool,
) -> Option<Reason> {
    let (d, hot) = (&node.devices[i], &node.hot[i]);
    let hints = ctx.hints;
    let (total_mem, total_core) = (i64::from(d.devmem), i64::from(d.devcore));
    if !hot.has(HEALTHY) {
        Some(Reason::CardNotHealth)
    } else if hot.has(RESERVED) {
        Some(Reason::CardReserved)
    } else if backend.checks == FitChecks::Exclusive {
        (u.used > 0).then_some(Reason::ExclusiveDeviceAllocateConflict)
    } else if !type_allowed(backend, hints, &d.device_type) {
        Some(Reason::CardTypeMismatch)
    } else if !uuid_allowed(backend, hints, &d.id) {
        Some(Reason::CardUuidMismatch)
    } else if i64::from(d.count) <= u.used {
        Some(Reason::CardTimeSlicingExhausted)
    } else if ctx.gpu_policy.mutex && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else if backend.checks == FitChecks::SlotsOnly {
        None
    } else if !quota_fits() {
        Some(Reason::ResourceQuotaNotFit)
    } else if total_mem - u.usedmem < memreq {
        Some(Reason::CardInsufficientMemory)
    } else if total_core - u.usedcores < cores {
        Some(Reason::CardInsufficientCore)
    } else if total_core == 100 && cores == 100 && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else if total_core != 0 && u.usedcores == total_core && cores == 0 {
        Some(Reason::CardComputeUnitsExhausted)
    } else {
        None
    }
}

/// HAMi's `CheckType`: the use list must name a part of the device type, the nouse list none.
fn type_allowed(backend: &Backend, hints: &crate::policy::PodHints, device_type: &str) -> bool {
    let Some((use_key, nouse_key)) = &backend.type_keys else { return true };
    let upper = device_type.to_uppercase();
    let names = |key: &str| {
        hints
            .vendor_filter(key)
            .filter(|v| !v.trim().is_empty())
            .map(|v| v.split(',').map(str::trim).any(|t| !t.is_empty() && upper.contains(&t.to_uppercase())))
    };
    names(use_key) != Some(false) && names(nouse_key) != Some(true)
}

/// HAMi's `CheckUUID`: the use list must hold the UUID, the nouse list must not.
fn uuid_allowed(backend: &Backend, hints: &crate::policy::PodHints, id: &str) -> bool {
    let (use_key, nouse_key) = &backend.uuid_keys;
    let holds = |key: &str| {
        hints.vendor_filter(key).filter(|v| !v.trim().is_empty()).map(|v| v.split(',').any(|u| u.trim() == id))
    };
    holds(use_key) != Some(false) && holds(nouse_key) != Some(true)
}

#[cfg(test)]
#[path = "standard_tests.rs"]
mod tests;
