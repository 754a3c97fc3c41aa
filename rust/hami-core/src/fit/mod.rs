//! Fit of one pod on one node (spec §9.3–§9.5), with HAMi's reasons ([`reason`]).

pub mod drs;
mod host;
pub mod mig;
pub mod neuron;
mod nvidia;
pub mod reason;
pub mod sgpu;
pub mod standard;
pub mod verdict;
pub mod vnpu;
mod within;
pub mod xpu;

use crate::codec::{ContainerDevice, MigAllocation, MigPlacement, PodDevices, VENDOR_NVIDIA};
use crate::model::{
    collapse, DeviceHot, DeviceUsage, GpuNode, CORDONED, HEALTHY, MIG_MODE, MIG_UNHEALTHY, NVIDIA, RESERVED,
};
use crate::policy::device::{device_score, node_score, sort_devices};
use crate::policy::{GpuPolicy, PodHints};
use crate::request::{ContainerRequest, PodRequest};
pub use host::{fit_host, host_shortfall};
use nvidia::{capacity_check, identity_check, pick_devices, slot_check};
pub use reason::{FitFailure, Reason, ReasonCounts};
pub use within::fit_pod_within;

/// Namespace quota on vGPU memory and cores (limits already scaled by the memory factor).
#[derive(Debug, Clone, Copy, Default)]
pub struct QuotaState {
    pub limit_mem: Option<i64>,
    pub limit_cores: Option<i64>,
    pub used_mem: i64,
    pub used_cores: i64,
}

/// Overrides the GPU policy's device order on one node: returns device indexes in order of
/// preference (most preferred first), or `None` to keep the GPU policy's order. The Fit checks
/// still run on every device; only the order in which they are tried changes.
pub type DevicePreference<'a> = &'a (dyn Fn(&GpuNode, &[DeviceUsage]) -> Option<Vec<usize>> + Sync);

/// What is being placed and under which rules.
pub struct PodContext<'a> {
    pub request: &'a PodRequest,
    pub hints: &'a PodHints,
    pub gpu_policy: &'a GpuPolicy,
    pub quota: Option<QuotaState>,
    /// The namespace quota of the backend whose Fit checks it card by card (HAMi: Cambricon's).
    pub card_quota: Option<QuotaState>,
    pub device_preference: Option<DevicePreference<'a>>,
}

#[derive(Debug, Clone)]
pub struct NodeFit {
    pub score: f64,
    pub slots: PodDevices,
    /// The other vendors' devices, per backend (its common word): one entry per container slot,
    /// as HAMi's `PodDevices` holds them under the request type.
    pub vendor: Vec<(std::sync::Arc<crate::vendor::Backend>, PodDevices)>,
    /// The MIG instances chosen, `container_index` being the slot in `slots` (init containers
    /// first); [`crate::filter::allocation_annotations`] renumbers them as HAMi writes them.
    pub mig: Vec<MigAllocation>,
    /// The pod asks Ascend's soft split (its runtime annotation then names no template).
    pub vnpu_soft_split: bool,
}

impl<'a> PodContext<'a> {
    /// The same pod under the same rules, each node's devices tried in `prefer`'s order.
    pub fn preferring(&self, prefer: DevicePreference<'a>) -> Self {
        Self { device_preference: Some(prefer), ..*self }
    }
}

impl NodeFit {
    /// What the pod holds on the node's devices once placed (HAMi's collapse of init and app
    /// containers, per backend): NVIDIA's, and the other backends'.
    pub fn footprint(&self, init_count: usize) -> (Vec<crate::model::Collapsed>, crate::vendor::VendorFootprint) {
        let vendor = self.vendor.iter().map(|(b, devices)| (b.clone(), collapse(devices, init_count, false))).collect();
        (collapse(&self.slots, init_count, false), vendor)
    }
}

/// Placements held per device while a pod is placed (empty on a node without MIG devices).
type MigOccupancy = Vec<Vec<MigPlacement>>;

/// Places every container of the pod on `node`, or says why not.
///
/// As in HAMi, each init container starts from the node's registration order, while the app
/// containers share one device list that each container's sort leaves in place for the next.
///
/// A device preference only chooses among the ways HAMi's order fits: when the preferred order
/// does not fit (a quota met earlier, devices left by an earlier container), HAMi's order decides,
/// so a preference never turns HAMi's verdict on the node into a failure.
pub fn fit_pod(node: &GpuNode, ctx: &PodContext) -> Result<NodeFit, FitFailure> {
    let fit = fit_pod_in_order(node, ctx);
    if fit.is_ok() || ctx.device_preference.is_none() {
        return fit;
    }
    let hami_order = PodContext { device_preference: None, ..*ctx };
    fit_pod_in_order(node, &hami_order)
}

fn fit_pod_in_order(node: &GpuNode, ctx: &PodContext) -> Result<NodeFit, FitFailure> {
    let base = &node.usage;
    let score = node_score(&node.totals);
    let request = ctx.request;
    let registration_order = || (0..node.devices.len()).collect::<Vec<usize>>();
    let occupancy = || if node.has_mig { node.mig.occupied.clone() } else { Vec::new() };
    let mut slots: PodDevices = vec![Vec::new(); request.slots.len()];
    let mut vendor = VendorSlots::new(request);
    let mut mig = Vec::new();
    for slot in 0..request.init_count {
        if request.slots[slot].is_some() || !request.vendor_requests(slot).is_empty() {
            let mut scratch = Scratch { usage: base.clone(), occupied: occupancy(), mig: &mut mig };
            let mut order = registration_order();
            let scores = vendor_scores(node, &scratch.usage, ctx, slot);
            if let Some(r) = &request.slots[slot] {
                slots[slot] = fit_container(node, &mut scratch, &mut order, r, ctx, &slots, slot, scores.as_deref())?;
            }
            vendor.fit(node, &mut scratch.usage, &mut order, ctx, slot, scores.as_deref())?;
        }
    }
    let mut app = Scratch { usage: base.clone(), occupied: occupancy(), mig: &mut mig };
    let mut order = registration_order();
    for slot in request.init_count..request.slots.len() {
        let scores = vendor_scores(node, &app.usage, ctx, slot);
        if let Some(r) = &request.slots[slot] {
            slots[slot] = fit_container(node, &mut app, &mut order, r, ctx, &slots, slot, scores.as_deref())?;
        }
        vendor.fit(node, &mut app.usage, &mut order, ctx, slot, scores.as_deref())?;
    }
    // HAMi adds the backends' ScoreNode (Ascend's network groups, Vastai's dies, MetaX's
    // topology) to the node's score in float32.
    let extra = standard::vendor_scores(node, &vendor.placed, ctx) + vnpu_scores(node, &vendor.placed);
    let score = if extra == 0.0 { score } else { f64::from(score as f32 + extra) };
    Ok(NodeFit { score, slots, vendor: vendor.placed, mig, vnpu_soft_split: vnpu::soft_split(ctx) })
}

/// What Ascend's `ScoreNode` adds for the NPUs taken (its network groups).
fn vnpu_scores(node: &GpuNode, placed: &[(std::sync::Arc<crate::vendor::Backend>, PodDevices)]) -> f32 {
    placed.iter().filter_map(|(b, slots)| Some(vnpu::score(node, b.vnpu.as_deref()?, b.request_type(), slots))).sum()
}

/// The device scores of a container asking other vendors, computed once before its first
/// request as HAMi does ([`crate::policy::device::container_scores`]); `None` for NVIDIA alone.
fn vendor_scores(node: &GpuNode, usage: &[DeviceUsage], ctx: &PodContext, slot: usize) -> Option<Vec<f32>> {
    let vendor = ctx.request.vendor_requests(slot);
    let nvidia = ctx.request.slots[slot].as_ref();
    let weights = &ctx.hints.weights;
    (!vendor.is_empty()).then(|| crate::policy::device::container_scores(node, usage, nvidia, vendor, weights))
}

/// The other vendors' placements of a pod on one node, container by container.
struct VendorSlots<'r> {
    request: &'r PodRequest,
    placed: Vec<(std::sync::Arc<crate::vendor::Backend>, PodDevices)>,
    /// AWS Neuron's counters of the phase being placed.
    neuron: neuron::Counters,
}

impl<'r> VendorSlots<'r> {
    fn new(request: &'r PodRequest) -> Self {
        Self { request, placed: Vec::new(), neuron: neuron::Counters::default() }
    }

    /// Places container `slot`'s vendor requests after its NVIDIA one (HAMi takes a container's
    /// requests in Go map order; the backends' devices are disjoint, so only ties could differ).
    fn fit(
        &mut self,
        node: &GpuNode,
        usage: &mut [DeviceUsage],
        order: &mut [usize],
        ctx: &PodContext,
        slot: usize,
        scores: Option<&[f32]>,
    ) -> Result<(), FitFailure> {
        let scores = scores.unwrap_or(&[]);
        // Each init container starts from the node's usage, the app containers from one copy.
        if slot <= self.request.init_count {
            self.neuron.reset();
        }
        for r in self.request.vendor_requests(slot) {
            let at = match self.placed.iter().position(|(b, _)| b == &r.backend) {
                Some(at) => at,
                None => {
                    self.placed.push((r.backend.clone(), vec![Vec::new(); self.request.slots.len()]));
                    self.placed.len() - 1
                }
            };
            let init_count = self.request.init_count;
            let phase = if slot < init_count { 0 } else { init_count };
            let earlier = standard::Earlier {
                devices: &self.placed[at].1[phase..slot],
                init_count,
                quota: ctx.card_quota.filter(|_| r.backend.quota_per_card),
                same_phase: slot >= init_count,
            };
            let devices = match r.backend.checks {
                crate::vendor::FitChecks::Neuron => {
                    neuron::fit_request(node, usage, order, r, scores, ctx, &mut self.neuron)?
                }
                _ => standard::fit_request(node, usage, order, r, scores, ctx, &earlier)?,
            };
            self.placed[at].1[slot] = devices;
        }
        Ok(())
    }
}

/// The node as one phase of the pod's placement leaves it: device usage, MIG placements held,
/// and the MIG instances granted so far.
struct Scratch<'m> {
    usage: Vec<DeviceUsage>,
    occupied: MigOccupancy,
    mig: &'m mut Vec<MigAllocation>,
}

/// `scores`: the container's device scores when it asks other vendors too (else computed here).
#[allow(clippy::too_many_arguments)]
fn fit_container(
    node: &GpuNode,
    scratch: &mut Scratch,
    order: &mut Vec<usize>,
    r: &ContainerRequest,
    ctx: &PodContext,
    earlier: &PodDevices,
    slot: usize,
    scores: Option<&[f32]>,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let usage = &mut scratch.usage;
    let preferred = ctx.device_preference.and_then(|prefer| prefer(node, usage));
    let numa_bind = ctx.hints.numa_bind;
    if preferred.is_none() || numa_bind {
        match scores {
            Some(scores) => sort_devices(order, node, usage, scores, ctx.gpu_policy, numa_bind),
            None => {
                let weights = &ctx.hints.weights;
                let scores: Vec<f32> =
                    node.devices.iter().zip(usage.iter()).map(|(d, u)| device_score(d, u, r, weights)).collect();
                sort_devices(order, node, usage, &scores, ctx.gpu_policy, numa_bind);
            }
        }
    }
    if let Some(preferred) = preferred {
        apply_preference(node, order, preferred, numa_bind);
    }
    let typed: Vec<usize> = order.iter().copied().filter(|&i| node.hot[i].has(NVIDIA)).collect();
    if r.nums > typed.len() as i64 && !is_mig_request(node, &typed, ctx.hints) {
        return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
    }
    let picked = pick_devices(node, usage, &scratch.occupied, &typed, r, ctx, earlier, slot)?;
    let mut out = Vec::with_capacity(picked.len());
    for (k, p) in picked.into_iter().enumerate() {
        let device = &node.devices[p.index];
        let (mem, cores) = if device.mode == MIG_MODE {
            // HAMi's AddResourceUsage: the instance's profile replaces the request on the card.
            let held = &mut scratch.occupied[p.index];
            let pick = mig::select(&device.mig_profiles, held, p.mem)
                .ok_or_else(|| FitFailure::MigAllocation(device.id.clone()))?;
            held.push(pick.placement);
            let profile = &device.mig_profiles[pick.profile];
            scratch.mig.push(MigAllocation {
                container_index: slot as i64,
                device_index: k as i64,
                gpu_uuid: device.id.clone(),
                profile: profile.name.clone(),
                placement: pick.placement,
                ..MigAllocation::default()
            });
            (i64::from(profile.memory_mb), i64::from(profile.core))
        } else {
            (p.mem, p.cores)
        };
        let u = &mut usage[p.index];
        u.used += 1;
        u.usedmem += mem;
        u.usedcores += cores;
        out.push(ContainerDevice {
            uuid: device.id.clone(),
            device_type: VENDOR_NVIDIA.to_owned(),
            usedmem: mem as i32,
            usedcores: cores as i32,
        });
    }
    Ok(out)
}

/// Puts a device preference (most preferred first) into the order Fit walks, from the end.
///
/// Under numa-bind Fit starts over at every change of NUMA node along HAMi's order, and with
/// topology-aware only the last run it walks counts, so the runs must stay where HAMi's sort puts
/// them: the preference then only reorders the devices inside each run of one NUMA node.
fn apply_preference(node: &GpuNode, order: &mut Vec<usize>, mut preferred: Vec<usize>, numa_bind: bool) {
    preferred.reverse();
    if !numa_bind {
        *order = preferred;
        return;
    }
    // Walk position of each device; a device the preference leaves out is walked first in its run.
    let mut walk_rank = vec![0usize; node.devices.len()];
    for (position, &d) in preferred.iter().enumerate() {
        walk_rank[d] = position + 1;
    }
    for run in order.chunk_by_mut(|&a, &b| node.hot[a].numa == node.hot[b].numa) {
        run.sort_by_key(|&d| walk_rank[d]);
    }
}

/// HAMi's `isMIGRequest`: the pod does not rule MIG out (`nvidia.com/vgpu-mode` absent or naming
/// `mig`) and the node has a MIG GPU. Such a request may ask for more instances than the node has
/// GPUs, so the device-count check is skipped.
fn is_mig_request(node: &GpuNode, typed: &[usize], hints: &PodHints) -> bool {
    node.has_mig
        && hints.vgpu_mode.as_deref().is_none_or(|m| m.contains(MIG_MODE))
        && typed.iter().any(|&i| node.devices[i].mode == MIG_MODE)
}

/// The request of a pod whose fit does not depend on device order: one container (not an init
/// container) asks for devices, no NUMA binding, no namespace quota. Its fit is decided by
/// counting eligible cards; only the chosen node needs the ordered walk that picks them.
pub fn order_free_request<'a>(ctx: &PodContext<'a>) -> Option<&'a ContainerRequest> {
    let request = ctx.request;
    let mut with_devices = request.slots.iter().enumerate().filter(|(_, r)| r.is_some());
    let (slot, r) = with_devices.next()?;
    let single = with_devices.next().is_none();
    let nvidia_only = !request.asks_vendors();
    (single && nvidia_only && !request.is_init(slot) && !ctx.hints.numa_bind && ctx.quota.is_none())
        .then_some(r.as_ref()?)
}

/// The one vendor request of a pod whose fit does not depend on device order: one app container
/// asks for devices, of one backend only, with no namespace quota ([`standard::quick_fit`]).
pub fn order_free_vendor_request<'a>(ctx: &PodContext<'a>) -> Option<&'a crate::vendor::request::VendorRequest> {
    let request = ctx.request;
    if !request.asks_no_nvidia() || ctx.quota.is_some() || ctx.card_quota.is_some() {
        return None;
    }
    let mut asking = request.vendor.iter().enumerate().filter(|(_, r)| !r.is_empty());
    let (slot, requests) = asking.next()?;
    let single = asking.next().is_none() && requests.len() == 1;
    // A backend that scores the node by the devices taken needs them picked; Ascend chooses among
    // the cards that pass and scores the choice: walked in full.
    let unscored = requests.first().is_some_and(|r| r.backend.score == crate::vendor::NodeScore::Zero);
    // Kunlunxin's choice on its interconnect graph can refuse a node with enough free cards.
    // Kunlunxin's graph, AWS Neuron's runs of positions and core bits, and Enflame DRS's profile
    // (chosen from the node's, not the request's own sizes): walked in full.
    let graph = requests.first().is_some_and(|r| {
        use crate::vendor::FitChecks::{DrsProfile, Neuron, XpuSlices};
        matches!(r.backend.checks, XpuSlices | Neuron | DrsProfile)
    });
    (single && unscored && !graph && !request.is_init(slot) && requests[0].backend.vnpu.is_none()).then(|| &requests[0])
}

/// Same verdict and reason string as [`fit_pod`] for an order-free request. Success stops at the
/// `nums`-th eligible card; the reasons are only worked out for nodes that fail.
pub fn quick_fit(node: &GpuNode, ctx: &PodContext, r: &ContainerRequest) -> Result<f64, FitFailure> {
    if node.has_mig {
        // Instances, not cards: a MIG GPU can take several of the request's, so walk in full.
        return fit_pod(node, ctx).map(|fit| fit.score);
    }
    let nums = usize::try_from(r.nums).unwrap_or(usize::MAX);
    let cores = r.clamped_cores();
    let plain = !ctx.hints.filters_devices() && !ctx.hints.filters_uuids();
    let mutex = ctx.gpu_policy.mutex;
    let mut eligible = 0usize;
    for (h, u) in node.hot.iter().zip(&node.usage) {
        let usable = h.flags & (HEALTHY | NVIDIA | CORDONED | RESERVED | MIG_UNHEALTHY) == HEALTHY | NVIDIA;
        if plain && usable && fits_capacity(h, u, r.resolved_memory(i64::from(h.devmem)), cores, mutex) {
            eligible += 1;
            if eligible >= nums {
                return Ok(standard::with_tables(node_score(&node.totals), node, ctx));
            }
        } else if !plain {
            break;
        }
    }
    quick_verdict(node, ctx, r, nums)
}

/// Slots, mutex and checks 9–12 as one predicate, for cards that passed checks 1–5.
#[inline]
fn fits_capacity(h: &DeviceHot, u: &DeviceUsage, mem: i64, cores: i64, mutex: bool) -> bool {
    let (total_mem, total_core) = (i64::from(h.devmem), i64::from(h.devcore));
    i64::from(h.count) > u.used
        && !(mutex && u.used > 0)
        && total_mem - u.usedmem >= mem
        && total_core - u.usedcores >= cores
        && !(total_core == 100 && cores == 100 && u.used > 0)
        && !(total_core != 0 && u.usedcores == total_core && cores == 0)
}

/// The full per-card walk with reasons (hints present, or the node does not fit).
fn quick_verdict(node: &GpuNode, ctx: &PodContext, r: &ContainerRequest, nums: usize) -> Result<f64, FitFailure> {
    let mutex = ctx.gpu_policy.mutex;
    let (mut typed, mut eligible) = (0usize, 0usize);
    let mut reasons = ReasonCounts::default();
    let cores = r.clamped_cores();
    for (i, (h, u)) in node.hot.iter().zip(&node.usage).enumerate() {
        if !h.has(NVIDIA) {
            continue;
        }
        typed += 1;
        let mem = r.resolved_memory(i64::from(h.devmem));
        match identity_check(node, i, ctx.hints)
            .or_else(|| slot_check(node, i, u, ctx.hints, mutex))
            .or_else(|| capacity_check(node, i, u, mem, cores))
        {
            Some(reason) => reasons.bump(reason, 1),
            None => eligible += 1,
        }
    }
    if nums > typed {
        return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
    }
    if eligible >= nums {
        return Ok(standard::with_tables(node_score(&node.totals), node, ctx));
    }
    if eligible > 0 {
        reasons.bump(Reason::AllocatedCardsInsufficientRequest, eligible);
    }
    Err(FitFailure::Cards { counts: reasons, cards: typed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Device;
    use crate::request::PERCENT_UNSET;

    const A100: (&str, i32) = ("NVIDIA-A100-SXM4-80GB", 81920);
    const V100: (&str, i32) = ("NVIDIA-Tesla V100-PCIE-32GB", 32768);

    fn device(i: usize, index: u32, numa: i32, (model, memory): (&str, i32)) -> Device {
        Device {
            id: format!("GPU-node-0-{i}"),
            index,
            count: 10,
            devmem: memory,
            devcore: 100,
            device_type: model.into(),
            numa,
            mode: "hami-core".into(),
            health: true,
            ..Default::default()
        }
    }

    fn one_container(nums: i64, memreq: i64, mem_percentage: i64) -> PodRequest {
        PodRequest {
            slots: vec![Some(ContainerRequest { nums, memreq, mem_percentage, coresreq: 0 })],
            ..PodRequest::default()
        }
    }

    fn uuids(fit: &NodeFit) -> Vec<&str> {
        fit.slots.iter().flatten().map(|d| d.uuid.as_str()).collect()
    }

    /// Oracle seed 2004: a preference over all six cards (the FGD/best-fit order of an idle node)
    /// walked as it stands splits the NUMA-0 cards in two runs around the NUMA-1 card, and
    /// topology-aware keeps only the last run (two cards and the excluded one): no fit, where
    /// HAMi fits the pod on three NUMA-0 cards.
    #[test]
    fn preference_keeps_hami_s_numa_runs() {
        let devices = (0..6).map(|i| device(i, if i == 5 { 4 } else { i as u32 }, i32::from(i == 2), A100)).collect();
        let node = GpuNode::with_devices("node-0", devices, None);
        let request = one_container(3, 2000, PERCENT_UNSET);
        let hints = PodHints { numa_bind: true, nouse_uuids: vec!["GPU-node-0-4".into()], ..PodHints::default() };
        let policy = GpuPolicy::parse("topology-aware");
        let idle_order = |_: &GpuNode, _: &[DeviceUsage]| Some((0..6).collect::<Vec<usize>>());
        let ctx = PodContext {
            request: &request,
            hints: &hints,
            gpu_policy: &policy,
            quota: None,
            card_quota: None,
            device_preference: None,
        };
        let hami = fit_pod(&node, &ctx).expect("HAMi's order fits");
        assert_eq!(uuids(&hami), ["GPU-node-0-5", "GPU-node-0-3", "GPU-node-0-1"], "HAMi's own answer");
        let preferred = PodContext { device_preference: Some(&idle_order), ..ctx };
        let mut order: Vec<usize> = (0..6).collect();
        let scores = [0.0f32; 6];
        sort_devices(&mut order, &node, &node.usage, &scores, &policy, true);
        apply_preference(&node, &mut order, (0..6).collect(), true);
        assert_eq!(order, [5, 4, 3, 1, 0, 2], "NUMA 1 stays last, the NUMA-0 run follows the preference");
        let fit = fit_pod_in_order(&node, &preferred).expect("the preferred order fits as HAMi's does");
        assert_eq!(uuids(&fit), ["GPU-node-0-0", "GPU-node-0-1", "GPU-node-0-3"], "the most preferred NUMA-0 cards");
    }

    /// A quota met by the preferred card first: the preferred order cannot fit, HAMi's can, and
    /// the node still fits (on HAMi's cards).
    #[test]
    fn preference_that_cannot_fit_falls_back_to_hami_s_order() {
        let devices = vec![device(0, 0, 0, A100), device(1, 1, 0, V100), device(2, 2, 0, V100)];
        let node = GpuNode::with_devices("node-0", devices, None);
        let request = one_container(2, 0, 50);
        let hints = PodHints::default();
        let policy = GpuPolicy::parse("spread");
        let quota = QuotaState { limit_mem: Some(50000), ..QuotaState::default() };
        let a100_first = |_: &GpuNode, _: &[DeviceUsage]| Some(vec![0, 1, 2]);
        let ctx = PodContext {
            request: &request,
            hints: &hints,
            gpu_policy: &policy,
            quota: Some(quota),
            card_quota: None,
            device_preference: Some(&a100_first),
        };
        let preferred_only = fit_pod_in_order(&node, &ctx).unwrap_err().to_string();
        assert!(preferred_only.contains("ResourceQuotaNotFit"), "{preferred_only}");
        let fit = fit_pod(&node, &ctx).expect("HAMi's order fits within the quota");
        assert_eq!(uuids(&fit), ["GPU-node-0-2", "GPU-node-0-1"]);
    }
}
