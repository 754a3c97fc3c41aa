//! HAMi's standard Fit of the vendors beside NVIDIA (Hygon's, Iluvatar's, ...): one container's
//! request for one backend, on the node's device list as HAMi's `fitInDevices` walks it.

use super::{FitFailure, PodContext, QuotaState, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode, HEALTHY, RESERVED};
use crate::policy::device::sort_devices;
use crate::request::VendorRequest;
use crate::vendor::{amd, vastai, Backend, FitChecks, NodeScore};

/// The pod's devices of a backend placed earlier in this phase (one entry per container, as HAMi
/// pads them), and the backend's namespace quota when its Fit checks it card by card (HAMi's
/// Cambricon `fitQuota`: those devices, then the container's picks and the candidate, collapsed
/// with the pod's init count).
#[derive(Default)]
pub struct Earlier<'a> {
    pub devices: &'a [Vec<ContainerDevice>],
    pub init_count: usize,
    pub quota: Option<QuotaState>,
    /// What the earlier containers took is on the usage this one sees (app containers; each init
    /// container starts from the node as it was).
    pub same_phase: bool,
}

impl Earlier<'_> {
    fn quota_exceeded<'d>(
        &self,
        picked: impl Iterator<Item = &'d ContainerDevice>,
        candidate: &ContainerDevice,
    ) -> bool {
        let Some(q) = &self.quota else { return false };
        let mut seen: Vec<Vec<ContainerDevice>> = self.devices.to_vec();
        seen.push(picked.cloned().chain(std::iter::once(candidate.clone())).collect());
        let footprint = crate::model::collapse(&seen, self.init_count, false);
        let mem: i64 = footprint.iter().map(|c| c.mem).sum();
        let cores: i64 = footprint.iter().map(|c| c.cores).sum();
        q.limit_mem.is_some_and(|l| q.used_mem + mem > l) || q.limit_cores.is_some_and(|l| q.used_cores + cores > l)
    }

    /// Moore Threads' and MetaX GPU's rule: every device the pod's earlier containers (of this
    /// phase) took is this one.
    fn all_on(&self, id: &str) -> bool {
        self.devices.iter().flatten().all(|e| e.uuid == id)
    }
}

/// Places one vendor request of a container: HAMi sorts the node's whole device list by the GPU
/// policy on the container's `scores` (computed once before its first request), keeps the devices
/// whose type contains the request's type, and walks them from the end.
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
    let graph = matches!(backend.checks, FitChecks::XpuCards | FitChecks::XpuSlices);
    // The slots a device taken counts within the pod: one, or the Enflame DRS profile's slices.
    let (picked, slots) = match backend.vnpu.as_deref() {
        Some(vnpu) => (super::vnpu::fit(node, usage, &typed, r, ctx, vnpu)?, 1),
        None if graph => (super::xpu::fit(node, usage, &typed, r, ctx)?, 1),
        None if backend.checks == FitChecks::DrsProfile => super::drs::fit(node, usage, &typed, r, ctx)?,
        None if backend.checks == FitChecks::Sgpu => (super::sgpu::fit(node, usage, &typed, r, ctx, earlier)?, 1),
        None => (walk(node, usage, &typed, r, ctx, earlier)?, 1),
    };
    // Kunlunxin's whole cards count only the slot taken (its `AddResourceUsage`).
    let slot_only = backend.checks == FitChecks::XpuCards;
    // HAMi adds the usage to the first device of that id in its sorted list (two backends may
    // register one id).
    for d in &picked {
        if let Some(&i) = order.iter().find(|&&i| node.devices[i].id == d.uuid) {
            let u = &mut usage[i];
            u.used += slots;
            if !slot_only {
                u.usedmem += i64::from(d.usedmem);
                u.usedcores += i64::from(d.usedcores);
            }
        }
    }
    Ok(picked)
}

/// HAMi's `getNodeResources`: the device's type contains the request's, ignoring case.
pub(super) fn of_type(device_type: &str, request_type: &str) -> bool {
    let (hay, needle) = (device_type.as_bytes(), request_type.as_bytes());
    needle.is_empty() || hay.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// The same verdict and reason string as [`fit_request`] for a pod whose only request is this
/// one (an app container's): whether it fits does not depend on the order HAMi walks the cards
/// in, so the cards are counted, not sorted. The chosen node alone needs the ordered walk.
pub fn quick_fit(node: &GpuNode, r: &VendorRequest, ctx: &PodContext) -> Result<f64, FitFailure> {
    let backend = &*r.backend;
    let (mut typed, mut eligible) = (0usize, 0usize);
    let mut reasons = ReasonCounts::default();
    for (i, (d, u)) in node.devices.iter().zip(&node.usage).enumerate() {
        if !of_type(&d.device_type, backend.request_type()) {
            continue;
        }
        typed += 1;
        let (memreq, cores) = share(r, d, backend);
        match card_check(node, i, u, backend, ctx, memreq, cores, false, || true) {
            Some(reason) => reasons.bump(reason, 1),
            None => eligible += 1,
        }
    }
    let nums = usize::try_from(r.nums).unwrap_or(usize::MAX);
    if nums > typed {
        return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
    }
    if eligible >= nums {
        return Ok(with_tables(crate::policy::device::node_score(&node.totals), node, ctx));
    }
    if eligible > 0 {
        reasons.bump(Reason::AllocatedCardsInsufficientRequest, eligible);
    }
    Err(FitFailure::Cards { counts: reasons, cards: typed })
}

/// What a request takes of one card, (MiB, cores), as its backend counts them; cores the card
/// cannot give are `i64::MAX` (no card has that many free).
pub(crate) fn share(r: &VendorRequest, d: &crate::codec::Device, backend: &Backend) -> (i64, i64) {
    if backend.checks == FitChecks::ComputeUnits {
        let (total_mem, total_core) = (i64::from(d.devmem), i64::from(d.devcore));
        let memory = amd::card_memory(r.memreq, total_mem);
        return (memory, amd::card_cores(r.coresreq, memory, total_mem, total_core).unwrap_or(i64::MAX));
    }
    (memory_of(r, d), r.coresreq.min(100))
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
    ctx: &PodContext,
    earlier: &Earlier,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let backend = &*r.backend;
    let dies = backend.checks == FitChecks::Dies && vastai::die_mode(typed.first().map(|&i| &node.devices[i]));
    let rule = WalkRule { collect_all: dies, dies, earlier: Some(earlier), ..WalkRule::default() };
    let scan = scan(node, usage, typed, r, backend, ctx, rule);
    let nums = usize::try_from(r.nums).unwrap_or(usize::MAX);
    if scan.complete || (dies && scan.picked.len() >= nums) {
        let (collected, picked): (Vec<usize>, Vec<ContainerDevice>) = scan.picked.into_iter().unzip();
        return Ok(if dies { keep_dies(node, nums, &collected, picked) } else { picked });
    }
    Err(scan.failure(typed.len()))
}

/// How a walk takes the cards that pass: the first `nums` (HAMi's standard Fit), or every one for a
/// backend that chooses among them afterwards; whether the card's cores count as 100 (Ascend's
/// soft split); Vastai's die mode; what the pod's earlier containers took (per-card quota, one card).
#[derive(Clone, Copy, Default)]
pub(super) struct WalkRule<'a> {
    pub collect_all: bool,
    pub soft_split: bool,
    pub dies: bool,
    pub earlier: Option<&'a Earlier<'a>>,
}

/// The cards a walk took (node device index and the entry written), and why the others failed.
pub(super) struct Scan {
    pub picked: Vec<(usize, ContainerDevice)>,
    pub reasons: ReasonCounts,
    /// The request's `nums` cards were taken (never set when collecting all).
    pub complete: bool,
}

impl Scan {
    /// HAMi's reason when too few cards were taken.
    pub fn failure(mut self, cards: usize) -> FitFailure {
        if !self.picked.is_empty() {
            self.reasons.bump(Reason::AllocatedCardsInsufficientRequest, self.picked.len());
        }
        FitFailure::Cards { counts: self.reasons, cards }
    }
}

pub(super) fn scan(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    r: &VendorRequest,
    backend: &Backend,
    ctx: &PodContext,
    rule: WalkRule,
) -> Scan {
    let busy_cards: Vec<&str> = match rule.dies && ctx.gpu_policy.mutex {
        true => {
            typed.iter().filter(|&&i| usage[i].used > 0).filter_map(|&i| vastai::card_of(&node.devices[i])).collect()
        }
        false => Vec::new(),
    };
    let mut need = r.nums;
    let mut scan = Scan { picked: Vec::new(), reasons: ReasonCounts::default(), complete: false };
    let one_card = matches!(backend.checks, FitChecks::SameDevice | FitChecks::SameDevices);
    for &i in typed.iter().rev() {
        let (d, u) = (&node.devices[i], &usage[i]);
        let (memreq, cores) = share(r, d, backend);
        let usedmem = if matches!(backend.checks, FitChecks::SlotsOnly | FitChecks::Dies) { 0 } else { memreq };
        let device = entry(backend, d, usedmem, cores);
        let quota_fits = || rule.earlier.is_none_or(|e| !e.quota_exceeded(scan.picked.iter().map(|(_, p)| p), &device));
        let on_busy_card = || vastai::card_of(d).is_some_and(|c| busy_cards.contains(&c));
        let another_card = || one_card && rule.earlier.is_some_and(|e| !e.all_on(&d.id));
        let check = card_check(node, i, u, backend, ctx, memreq, cores, rule.soft_split, quota_fits)
            .or_else(|| on_busy_card().then_some(Reason::ExclusiveDeviceAllocateConflict))
            .or_else(|| another_card().then_some(Reason::CardNotFoundCustomFilterRule));
        if let Some(reason) = check {
            scan.reasons.bump(reason, 1);
            continue;
        }
        if rule.dies {
            scan.picked.push((i, device));
            continue;
        }
        if need > 0 {
            if !rule.collect_all {
                need -= 1;
            }
            scan.picked.push((i, device));
        }
        if need == 0 && !rule.collect_all {
            scan.complete = true;
            return scan;
        }
    }
    scan
}

#[allow(clippy::too_many_arguments)]
fn card_check(
    node: &GpuNode,
    i: usize,
    u: &DeviceUsage,
    backend: &Backend,
    ctx: &PodContext,
    memreq: i64,
    cores: i64,
    soft_split: bool,
    quota_fits: impl FnOnce() -> bool,
) -> Option<Reason> {
    let (d, hot) = (&node.devices[i], &node.hot[i]);
    let hints = ctx.hints;
    let total_core = if soft_split { 100 } else { i64::from(d.devcore) };
    let total_mem = i64::from(d.devmem);
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
    } else if matches!(backend.checks, FitChecks::SlotsOnly | FitChecks::Dies) {
        None
    } else if !quota_fits() {
        Some(Reason::ResourceQuotaNotFit)
    } else if backend.checks == FitChecks::ComputeUnits {
        capacity_check(total_mem - u.usedmem, total_core - u.usedcores, memreq, cores)
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

/// An allocation entry for card `d`.
fn entry(backend: &Backend, d: &crate::codec::Device, usedmem: i64, cores: i64) -> ContainerDevice {
    ContainerDevice {
        uuid: d.id.clone(),
        device_type: entry_type(backend, d).to_owned(),
        usedmem: usedmem as i32,
        usedcores: cores as i32,
    }
}

/// The dies a die-mode request keeps of those collected: all when just enough, else HAMi's choice.
fn keep_dies(node: &GpuNode, nums: usize, collected: &[usize], picked: Vec<ContainerDevice>) -> Vec<ContainerDevice> {
    if picked.len() == nums {
        return picked;
    }
    let devices: Vec<&crate::codec::Device> = collected.iter().map(|&i| &node.devices[i]).collect();
    vastai::best_dies(nums, &devices).into_iter().map(|k| picked[k].clone()).collect()
}

/// HAMi's `ScoreNode` of the backends a pod was placed on, and of a node's score tables (every
/// pod gets those), added up (float32).
pub fn vendor_scores(
    node: &GpuNode,
    placed: &[(std::sync::Arc<Backend>, crate::codec::PodDevices)],
    ctx: &PodContext,
) -> f32 {
    let taken = |b: &Backend| placed.iter().filter(|(p, _)| **p == *b).flat_map(|(_, c)| c).map(Vec::len).sum();
    let tables = placed.iter().find(|(b, _)| b.score == NodeScore::Topology).map_or(0, |(b, _)| taken(b));
    let mut total = table_score(node, ctx, tables as i64);
    for (backend, containers) in placed {
        if backend.score == NodeScore::DieShare {
            let device = |uuid: &str| node.devices.iter().find(|d| d.id == uuid);
            let held: Vec<Vec<&crate::codec::Device>> =
                containers.iter().map(|c| c.iter().filter_map(|e| device(&e.uuid)).collect()).collect();
            total += vastai::die_share(&held);
        }
        if backend.score == NodeScore::Bubble {
            total += bubbles(node, containers);
        }
        if let NodeScore::Sgpu { topology_aware } = backend.score {
            total += sgpu_weighted(node, containers, ctx, topology_aware);
        }
    }
    total
}

/// MetaX sGPU's policy-neutral score as HAMi weights it: 10000 times, negated under spread.
fn sgpu_weighted(node: &GpuNode, containers: &crate::codec::PodDevices, ctx: &PodContext, topology: bool) -> f32 {
    let ask = crate::vendor::sgpu::PodAsk::read(|k| ctx.hints.vendor_filter(k));
    let score = crate::vendor::sgpu::node_score(node, containers, ask, topology) as f32;
    let spread = ctx.hints.node_policy == Some(crate::policy::NodePolicy::Spread);
    score * if spread { -10000.0 } else { 10000.0 }
}

/// Kunlunxin's bubble score of the cards a pod took, against those in use before it.
fn bubbles(node: &GpuNode, containers: &crate::codec::PodDevices) -> f32 {
    let all_cards = node.devices.iter().all(|d| d.device_type.contains(crate::vendor::kunlun::CARD_WORD));
    let busy: Vec<u32> =
        node.devices.iter().zip(&node.usage).filter(|(_, u)| u.used > 0).map(|(d, _)| d.index).collect();
    let index = |uuid: &str| node.devices.iter().find(|d| d.id == uuid).map(|d| d.index);
    let taken: Vec<u32> = containers.iter().flatten().filter_map(|e| index(&e.uuid)).collect();
    crate::vendor::kunlun::bubble_score(all_cards, &busy, &taken)
}

/// What the node's score tables add for a pod taking `taken` of its devices: the table of the pod's
/// node policy (binpack: losses, spread: scores), nothing for a node without one or another policy.
pub fn table_score(node: &GpuNode, ctx: &PodContext, taken: i64) -> f32 {
    let Some(tables) = node.score_tables.as_deref() else { return 0.0 };
    let table = match ctx.hints.node_policy.unwrap_or_default() {
        crate::policy::NodePolicy::Binpack => tables.binpack.as_deref(),
        crate::policy::NodePolicy::Spread => tables.spread.as_deref(),
        crate::policy::NodePolicy::Scored(_) => None,
    };
    table.map_or(0.0, |t| crate::vendor::metax::topology_score(t, taken))
}

/// A node score with what its score tables add for a pod that takes none of their devices.
pub fn with_tables(score: f64, node: &GpuNode, ctx: &PodContext) -> f64 {
    match node.score_tables.is_some() {
        false => score,
        true => f64::from(score as f32 + table_score(node, ctx, 0)),
    }
}

/// Free memory, then free cores, and nothing more.
fn capacity_check(free_mem: i64, free_cores: i64, memreq: i64, cores: i64) -> Option<Reason> {
    if free_mem < memreq {
        Some(Reason::CardInsufficientMemory)
    } else if free_cores < cores {
        Some(Reason::CardInsufficientCore)
    } else {
        None
    }
}

/// The type an allocation entry names: the request's, or the card's own model (AMD).
fn entry_type<'a>(backend: &'a Backend, d: &'a crate::codec::Device) -> &'a str {
    match backend.checks {
        FitChecks::ComputeUnits => &d.device_type,
        _ => backend.request_type(),
    }
}

/// Whether the pod's type and UUID filters for `backend` let it use device `d`.
pub(crate) fn device_allowed(backend: &Backend, hints: &crate::policy::PodHints, d: &crate::codec::Device) -> bool {
    type_allowed(backend, hints, &d.device_type) && uuid_allowed(backend, hints, &d.id)
}

/// HAMi's `CheckType`: the use list must name a part of the device type, the nouse list none.
fn type_allowed(backend: &Backend, hints: &crate::policy::PodHints, device_type: &str) -> bool {
    let Some((use_key, nouse_key)) = &backend.type_keys else { return true };
    let names = |key: &str| {
        hints.vendor_filter(key).filter(|v| !v.trim().is_empty()).map(|v| {
            let upper = device_type.to_uppercase();
            v.split(',').map(str::trim).any(|t| !t.is_empty() && upper.contains(&t.to_uppercase()))
        })
    };
    names(use_key) != Some(false) && names(nouse_key) != Some(true)
}

/// HAMi's `CheckUUID`: the use list must hold the UUID, the nouse list must not.
pub(super) fn uuid_allowed(backend: &Backend, hints: &crate::policy::PodHints, id: &str) -> bool {
    let (use_key, nouse_key) = &backend.uuid_keys;
    let holds = |key: &str| {
        hints.vendor_filter(key).filter(|v| !v.trim().is_empty()).map(|v| v.split(',').any(|u| u.trim() == id))
    };
    holds(use_key) != Some(false) && holds(nouse_key) != Some(true)
}

#[cfg(test)]
#[path = "standard_tests.rs"]
mod tests;
