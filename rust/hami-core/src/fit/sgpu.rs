//! MetaX sGPU's Fit ([`crate::vendor::sgpu`]): every card that passes is collected (walked from
//! the end of the typed list), then the cards are chosen among them.

use super::standard::Earlier;
use super::{FitFailure, PodContext, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode, HEALTHY, RESERVED};
use crate::request::VendorRequest;
use crate::vendor::sgpu::{self, AppClass, PodAsk};

/// The QoS policies placements asked cards to switch to, not yet shown by their registration
/// (by card UUID), as the Fit reads them.
pub type PendingQos<'a> = &'a [(Box<str>, Box<str>)];

pub fn fit(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    r: &VendorRequest,
    ctx: &PodContext,
    earlier: &Earlier,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let ask = PodAsk::read(|k| ctx.hints.vendor_filter(k));
    let mut reasons = ReasonCounts::default();
    let mut candidates = Vec::new();
    for &i in typed.iter().rev() {
        match card_check(node, usage, i, r, ctx, ask, earlier) {
            Some(reason) => reasons.bump(reason, 1),
            None => candidates.push(i),
        }
    }
    let nums = usize::try_from(r.nums).unwrap_or(usize::MAX);
    if candidates.len() < nums {
        if !candidates.is_empty() {
            reasons.bump(Reason::AllocatedCardsInsufficientRequest, candidates.len());
        }
        return Err(FitFailure::Cards { counts: reasons, cards: typed.len() });
    }
    let chosen = choose(node, usage, candidates, nums, r, ask);
    let cores = if ask.class == AppClass::Online { 0 } else { r.coresreq };
    Ok(chosen.into_iter().map(|i| entry(&node.devices[i], memory(r, &node.devices[i]), cores)).collect())
}

fn choose(
    node: &GpuNode,
    usage: &[DeviceUsage],
    mut candidates: Vec<usize>,
    nums: usize,
    r: &VendorRequest,
    ask: PodAsk,
) -> Vec<usize> {
    if candidates.len() > nums {
        if ask.class == AppClass::Online {
            let counts = |i: usize| (i64::from(usage[i].online), i64::from(usage[i].offline));
            prioritize_online(&mut candidates, counts);
        } else if ask.class == AppClass::Unset && r.coresreq == 100 {
            return sgpu::prioritize_exclusive(&candidates, nums, |i| sgpu::zone_of(&node.devices[i]));
        }
    }
    candidates.truncate(nums);
    candidates
}

fn card_check(
    node: &GpuNode,
    usage: &[DeviceUsage],
    i: usize,
    r: &VendorRequest,
    ctx: &PodContext,
    ask: PodAsk,
    earlier: &Earlier,
) -> Option<Reason> {
    let (d, u, hot) = (&node.devices[i], &usage[i], &node.hot[i]);
    let online = ask.class == AppClass::Online;
    let (total_mem, total_core) = (i64::from(d.devmem), i64::from(d.devcore));
    if !hot.has(HEALTHY) {
        Some(Reason::CardUnhealthy)
    } else if hot.has(RESERVED) {
        Some(Reason::CardReserved)
    } else if !sgpu::class_fits(ask.class, u.used, i64::from(u.online), i64::from(u.offline)) {
        Some(Reason::CardAppClassMismatch)
    } else if !online && !qos_fits(node, d, u, r, ask, earlier) {
        Some(Reason::CardQosPolicyMismatch)
    } else if !super::standard::uuid_allowed(&r.backend, ctx.hints, &d.id) {
        Some(Reason::CardUuidMismatch)
    } else if i64::from(d.count) <= u.used {
        Some(Reason::CardTimeSlicingExhausted)
    } else if ctx.gpu_policy.mutex && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else if total_mem - u.usedmem < memory(r, d) {
        Some(Reason::CardInsufficientMemory)
    } else if online {
        None
    } else if total_core - u.usedcores < r.coresreq {
        Some(Reason::CardInsufficientCore)
    } else if total_core == 100 && r.coresreq == 100 && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else if total_core != 0 && u.usedcores == total_core && r.coresreq == 0 {
        Some(Reason::CardComputeUnitsExhausted)
    } else {
        None
    }
}

/// HAMi's QoS check: an idle card, or a whole-card ask, takes any policy; else the card's policy
/// (a placement's pending switch first, then what an earlier app container of this pod set, then
/// its registration) must be none or the pod's.
fn qos_fits(
    node: &GpuNode,
    d: &crate::codec::Device,
    u: &DeviceUsage,
    r: &VendorRequest,
    ask: PodAsk,
    earlier: &Earlier,
) -> bool {
    if u.used == 0 || r.coresreq == 100 {
        return true;
    }
    let pending = node.sgpu_qos.iter().find(|(uuid, _)| **uuid == *d.id).map(|(_, q)| &**q);
    let card = match pending {
        Some(q) => q,
        // An earlier container of the pod set the card to its own policy or to none.
        None if earlier.same_phase && earlier.devices.iter().flatten().any(|e| e.uuid == d.id) => return true,
        None => sgpu::qos_of(d),
    };
    card.is_empty() || card == ask.qos
}

fn memory(r: &VendorRequest, d: &crate::codec::Device) -> i64 {
    if r.memreq > 0 {
        r.memreq
    } else {
        i64::from(d.devmem) * r.mem_percentage / 100
    }
}

fn entry(d: &crate::codec::Device, usedmem: i64, cores: i64) -> ContainerDevice {
    ContainerDevice {
        uuid: d.id.clone(),
        device_type: d.device_type.clone(),
        usedmem: usedmem as i32,
        usedcores: cores as i32,
    }
}

/// HAMi's order for online pods: cards with only offline pods last (fewer of them first), the
/// others by fewer online pods, then fewer offline pods. `counts(i)` = (online, offline).
fn prioritize_online(candidates: &mut [usize], counts: impl Fn(usize) -> (i64, i64)) {
    crate::policy::device::go_sort::sort(candidates, |a, b| {
        let ((ia, fa), (ib, fb)) = (counts(a), counts(b));
        let (only_a, only_b) = (ia == 0 && fa > 0, ib == 0 && fb > 0);
        match (only_a, only_b) {
            (true, true) => fa < fb,
            (true, false) => false,
            (false, true) => true,
            (false, false) if ia == ib => fa < fb,
            (false, false) => ia < ib,
        }
    });
}
