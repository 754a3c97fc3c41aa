//! HAMi's AWS Neuron Fit. The request is resolved on the node's cores per device
//! ([`neuron::resolve`]); then several devices are one run of free positions in the candidate
//! list as HAMi sorted it (any run on `inf*` instance types, else runs of 1, 4, 8 or 16 starting
//! at a multiple of their length), each position turned into the device whose *index* is that
//! position, whatever its state; one device is the first from the end with enough free core bits.
//!
//! HAMi keeps a per-device counter in the device's custom info while it places a pod (its
//! `awsusageinfo`), which decides the core bits an entry gets: [`Counters`].

use super::standard::{of_type, uuid_allowed};
use super::{FitFailure, PodContext, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode, HEALTHY, RESERVED};
use crate::policy::device::sort_devices;
use crate::request::VendorRequest;
use crate::vendor::neuron;

/// HAMi's `awsusageinfo` per device (node device index) in one phase of the pod's placement: absent
/// until the one-device walk passes the device (it then copies the device's used cores) or an
/// entry is added to it; read as 0 while absent.
#[derive(Debug, Default)]
pub struct Counters(Vec<Option<i64>>);

impl Counters {
    /// A phase starts from the node's usage: no counter set.
    pub fn reset(&mut self) {
        self.0.clear();
    }

    fn get(&self, i: usize) -> i64 {
        self.0.get(i).copied().flatten().unwrap_or(0)
    }

    fn slot(&mut self, i: usize) -> &mut Option<i64> {
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        &mut self.0[i]
    }
}

/// Places one container's Neuron request; the devices taken count one slot, their entry's cores
/// and its counter value each (HAMi's `AddResourceUsage`).
pub fn fit_request(
    node: &GpuNode,
    usage: &mut [DeviceUsage],
    order: &mut [usize],
    r: &VendorRequest,
    scores: &[f32],
    ctx: &PodContext,
    counters: &mut Counters,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    sort_devices(order, node, usage, scores, ctx.gpu_policy, ctx.hints.numa_bind);
    let typed: Vec<usize> =
        order.iter().copied().filter(|&i| of_type(&node.devices[i].device_type, neuron::WORD)).collect();
    let per = neuron::cores_per_device(node.devices.iter());
    // A core request that does not split on this node's devices (HAMi's webhook refuses it in a
    // cluster of one instance family).
    let (nums, coresreq) = neuron::resolve(r, per).ok_or(FitFailure::Node(Reason::NodeInsufficientDevice))?;
    if nums > typed.len() as i64 {
        return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
    }
    let picked = match nums > 1 {
        true => several(node, usage, &typed, nums as usize, coresreq, counters)?,
        false => vec![one(node, usage, &typed, (r, coresreq), ctx, counters)?],
    };
    let mut out = Vec::with_capacity(picked.len());
    for (i, entry, counted) in picked {
        let u = &mut usage[i];
        u.used += 1;
        u.usedcores += i64::from(entry.usedcores);
        let counter = counters.slot(i);
        *counter = Some(counter.unwrap_or(0) + counted);
        out.push(entry);
    }
    Ok(out)
}

/// A device taken: its node index, its entry, and what it adds to the device's counter.
type Taken = (usize, ContainerDevice, i64);

/// HAMi's `addCoreUsage`: the value an entry adds to a device's counter (`count`): a fresh counter
/// gives 3 for two cores and 1 for one, anything else `3 - count`.
fn core_usage(count: i64, cores: i64) -> i64 {
    match (count, cores) {
        (0, 2) => 3,
        (0, 1) => 1,
        _ => 3 - count,
    }
}

fn entry(node: &GpuNode, i: usize, usedcores: i64) -> ContainerDevice {
    ContainerDevice {
        uuid: node.devices[i].id.clone(),
        device_type: neuron::WORD.to_owned(),
        usedmem: 0,
        usedcores: usedcores as i32,
    }
}

/// Several devices: a free run of positions, then the device of each position's index, whole.
fn several(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    nums: usize,
    coresreq: i64,
    counters: &Counters,
) -> Result<Vec<Taken>, FitFailure> {
    let free: Vec<bool> =
        typed.iter().map(|&i| usage[i].used <= 0 && node.hot[i].has(HEALTHY) && !node.hot[i].has(RESERVED)).collect();
    let inf = typed.first().is_some_and(|&i| {
        let kind = neuron::instance_type(&node.devices[i]);
        kind.contains("inf") || kind.contains("Inf")
    });
    let Some(start) = free_run(&free, nums, inf) else {
        let mut counts = ReasonCounts::default();
        counts.bump(Reason::NumaNotFit, 1);
        return Err(FitFailure::Cards { counts, cards: typed.len() });
    };
    let with_index = |position: usize| typed.iter().copied().find(|&i| node.devices[i].index as usize == position);
    let taken = (start..start + nums).filter_map(with_index).map(|i| {
        let d = &node.devices[i];
        (
            i,
            ContainerDevice { usedmem: d.devmem, ..entry(node, i, i64::from(d.devcore)) },
            core_usage(counters.get(i), coresreq),
        )
    });
    Ok(taken.collect())
}

/// HAMi's `graphSelect`: the first position of `nums` free positions in a row; on `inf*` types
/// from any position, else only runs of 1, 4, 8 or 16 from a multiple of their length.
fn free_run(free: &[bool], nums: usize, inf: bool) -> Option<usize> {
    if !inf && ![1, 4, 8, 16].contains(&nums) {
        return None;
    }
    let step = if inf { 1 } else { nums };
    (0..free.len()).step_by(step).find(|&s| s + nums <= free.len() && free[s..s + nums].iter().all(|&f| f))
}

/// HAMi's `countMaskAvailable`: the bits set of a positive mask, 0 otherwise.
fn bits(mask: i64) -> i64 {
    let mask = mask as i32;
    if mask > 0 {
        i64::from(mask.count_ones())
    } else {
        0
    }
}

/// One device: from the end of the sorted list, the first that passes; each device passed sets
/// its counter to its used cores if unset.
fn one(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    (r, coresreq): (&VendorRequest, i64),
    ctx: &PodContext,
    counters: &mut Counters,
) -> Result<Taken, FitFailure> {
    let mut counts = ReasonCounts::default();
    for &i in typed.iter().rev() {
        let (d, u, hot) = (&node.devices[i], &usage[i], &node.hot[i]);
        let counter = counters.slot(i).get_or_insert(u.usedcores);
        let reason = if !hot.has(HEALTHY) {
            Some(Reason::CardNotHealth)
        } else if hot.has(RESERVED) {
            Some(Reason::CardReserved)
        } else if !uuid_allowed(&r.backend, ctx.hints, &d.id) {
            Some(Reason::CardUuidMismatch)
        } else if i64::from(d.count) <= u.used {
            Some(Reason::CardTimeSlicingExhausted)
        } else if ctx.gpu_policy.mutex && u.used > 0 {
            Some(Reason::ExclusiveDeviceAllocateConflict)
        } else if bits(i64::from(d.devcore)) - bits(u.usedcores) < coresreq {
            Some(Reason::CardInsufficientCore)
        } else {
            None
        };
        match reason {
            Some(reason) => counts.bump(reason, 1),
            None => {
                let counted = core_usage(*counter, coresreq);
                return Ok((i, entry(node, i, counted), counted));
            }
        }
    }
    Err(FitFailure::Cards { counts, cards: typed.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_start_anywhere_on_inf_else_aligned_and_of_the_usual_sizes() {
        let free = [false, true, true, true, true, true, false, false];
        assert_eq!(free_run(&free, 2, true), Some(1));
        assert_eq!(free_run(&free, 4, true), Some(1));
        assert_eq!(free_run(&free, 4, false), None, "runs of 4 start at 0 or 4 only");
        assert_eq!(free_run(&free, 3, false), None, "3 is no size HAMi takes off inf");
        assert_eq!(free_run(&[true; 16], 16, false), Some(0));
        assert_eq!(free_run(&[true; 4], 8, true), None);
    }

    #[test]
    fn core_bits_follow_hami_s_counter() {
        assert_eq!(core_usage(0, 1), 1);
        assert_eq!(core_usage(0, 2), 3);
        assert_eq!(core_usage(0, 8), 3, "a device request on a fresh device: both bits");
        assert_eq!(core_usage(1, 1), 2);
        assert_eq!(core_usage(3, 1), 0, "a full counter names no core");
        assert_eq!(core_usage(5, 2), -2);
        assert_eq!((bits(3), bits(15), bits(0), bits(-1)), (2, 4, 0, 0));
    }
}
