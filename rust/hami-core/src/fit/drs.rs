//! HAMi's Enflame DRS Fit: the request's profile is chosen first from the profiles the node's
//! candidates carry (none: `ModeNotFit`, whatever the devices), then the candidates are walked from
//! the end for one with a free slot, the profile's memory and its share of cores.

use super::{FitFailure, PodContext, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode, HEALTHY, RESERVED};
use crate::request::VendorRequest;
use crate::vendor::enflame_drs::{self, Profile};

/// The device taken and the profile's slices, which HAMi counts as slots taken within the pod.
pub fn fit(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    r: &VendorRequest,
    ctx: &PodContext,
) -> Result<(Vec<ContainerDevice>, i64), FitFailure> {
    let candidates = enflame_drs::profiles(typed.iter().map(|&i| &node.devices[i]));
    let Some(profile) = enflame_drs::select(&candidates, r).filter(|p| in_range(p)) else {
        let mut counts = ReasonCounts::default();
        counts.bump(Reason::ModeNotFit, 1);
        return Err(FitFailure::Cards { counts, cards: typed.len() });
    };
    let (memory, cores) = (profile.memory_gb * 1024, profile.core_percent);
    let mut counts = ReasonCounts::default();
    for &i in typed.iter().rev() {
        match refusal(node, i, &usage[i], ctx, &r.backend.uuid_keys, memory, cores) {
            Some(reason) => counts.bump(reason, 1),
            None => {
                let entry = ContainerDevice {
                    uuid: node.devices[i].id.clone(),
                    device_type: r.backend.request_type().to_owned(),
                    usedmem: memory as i32,
                    usedcores: cores as i32,
                };
                return Ok((vec![entry], profile.size));
            }
        }
    }
    Err(FitFailure::Cards { counts, cards: typed.len() })
}

/// A profile HAMi can grant: its slices and MiB within int32.
fn in_range(p: &Profile) -> bool {
    p.size <= i64::from(i32::MAX) && p.memory_gb <= i64::from(i32::MAX / 1024)
}

/// Why device `i` cannot take the profile, in HAMi's order of checks.
fn refusal(
    node: &GpuNode,
    i: usize,
    u: &DeviceUsage,
    ctx: &PodContext,
    (use_key, nouse_key): &(String, String),
    memory: i64,
    cores: i64,
) -> Option<Reason> {
    let (d, hot) = (&node.devices[i], &node.hot[i]);
    let listed = |key: &str| {
        let value = ctx.hints.vendor_filter(key).filter(|v| !v.trim().is_empty())?;
        Some(value.split(',').any(|u| u.trim() == d.id))
    };
    let total_core = i64::from(d.devcore);
    if !hot.has(HEALTHY) {
        Some(Reason::CardNotHealth)
    } else if hot.has(RESERVED) {
        Some(Reason::CardReserved)
    } else if listed(use_key) == Some(false) || listed(nouse_key) == Some(true) {
        Some(Reason::CardUuidMismatch)
    } else if i64::from(d.count) <= u.used {
        Some(Reason::CardTimeSlicingExhausted)
    } else if ctx.gpu_policy.mutex && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else if i64::from(d.devmem) - u.usedmem < memory {
        Some(Reason::CardInsufficientMemory)
    } else if total_core > 0 && total_core - u.usedcores < cores {
        Some(Reason::CardInsufficientCore)
    } else {
        None
    }
}
