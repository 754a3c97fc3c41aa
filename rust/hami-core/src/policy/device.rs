//! HAMi's scores and orderings: device score (§10.1), device order per GPU policy (§10.2), node score (§10.3).

use super::{GpuPolicy, ScoringWeights, SortKey};
use crate::codec::{Device, VENDOR_NVIDIA};
use crate::model::{DeviceUsage, GpuNode, Totals};
use crate::request::{ContainerRequest, VendorRequest, PERCENT_UNSET};
use std::cmp::Ordering;

pub(crate) mod go_sort;

pub const WEIGHT: f32 = 10.0;

/// HAMi keeps usage in int32 and divides in float32; near-ties must round exactly as it does.
fn ratio(part: i64, whole: i64) -> f32 {
    part as i32 as f32 / whole as i32 as f32
}

/// Device utilisation score, in HAMi's float32 arithmetic. The request only counts when the
/// device type is exactly `NVIDIA` (HAMi compares the model string with the vendor word; real
/// models never match).
pub fn device_score(d: &Device, u: &DeviceUsage, r: &ContainerRequest, w: &ScoringWeights) -> f32 {
    typed_score(d, u, VENDOR_NVIDIA, (r.coresreq, r.memreq, r.mem_percentage), w)
}

/// HAMi's `ComputeScore` of a device for another vendor's request: it counts only on devices
/// whose type is exactly the request's type.
pub fn vendor_device_score(
    d: &Device,
    u: &DeviceUsage,
    r: &VendorRequest,
    request_type: &str,
    w: &ScoringWeights,
) -> f32 {
    typed_score(d, u, request_type, (r.coresreq, r.memreq, r.mem_percentage), w)
}

/// HAMi's scores of every device for a container asking another vendor (besides NVIDIA or not):
/// `ComputeScore` runs once per container, before any of its requests is placed, each device
/// counting the request of its own type; every request's sort then reads these scores.
pub fn container_scores(
    node: &crate::model::GpuNode,
    usage: &[DeviceUsage],
    nvidia: Option<&ContainerRequest>,
    vendor: &[VendorRequest],
    w: &ScoringWeights,
) -> Vec<f32> {
    node.devices
        .iter()
        .zip(usage)
        .map(|(d, u)| match vendor.iter().find(|r| r.backend.request_type() == d.device_type) {
            Some(r) => vendor_device_score(d, u, r, r.backend.request_type(), w),
            None => match nvidia {
                Some(r) => device_score(d, u, r, w),
                None => score_of(d, u, None, w),
            },
        })
        .collect()
}

/// HAMi's `ComputeScore` for one request of `request_type` asking (cores, MiB, memory %).
#[inline]
fn typed_score(d: &Device, u: &DeviceUsage, request_type: &str, request: (i64, i64, i64), w: &ScoringWeights) -> f32 {
    score_of(d, u, (d.device_type == request_type).then_some(request), w)
}

/// HAMi's `ComputeScore` of a device, counting `asked` (cores, MiB, memory %) when the container
/// asks a request of the device's type.
#[inline]
fn score_of(d: &Device, u: &DeviceUsage, asked: Option<(i64, i64, i64)>, w: &ScoringWeights) -> f32 {
    let (count, core, mem) = (i64::from(d.count), i64::from(d.devcore), i64::from(d.devmem));
    if count == 0 || core == 0 || mem == 0 {
        return 0.0;
    }
    let (slots, cores, memory) = match asked {
        Some((coresreq, memreq, mem_percentage)) => {
            let m = if mem_percentage != 0 && mem_percentage != PERCENT_UNSET {
                mem * mem_percentage / 100
            } else {
                memreq
            };
            (1, coresreq, m)
        }
        None => (0, 0, 0),
    };
    let slot_part = w.slot as f32 * ratio(slots + u.used, count);
    let core_part = w.core as f32 * ratio(cores + u.usedcores, core);
    let mem_part = w.memory as f32 * ratio(memory + u.usedmem, mem);
    WEIGHT * (slot_part + core_part + mem_part)
}

/// Node utilisation over all its devices, before the pod is placed (float32, as HAMi).
pub fn node_score(t: &Totals) -> f64 {
    if t.count as i32 == 0 || t.core as i32 == 0 || t.mem as i32 == 0 {
        return 0.0;
    }
    let sum = ratio(t.used, t.count) + ratio(t.usedcores, t.core) + ratio(t.usedmem, t.mem);
    f64::from(WEIGHT * sum)
}

/// One comparison of HAMi's `DeviceUsageList.Less`: `Less` when device `a` sorts before `b`.
fn by_key(key: SortKey, a: (f32, i32), b: (f32, i32)) -> Ordering {
    match key {
        SortKey::ScoreAscending => a.0.total_cmp(&b.0),
        SortKey::ScoreDescending => b.0.total_cmp(&a.0),
        SortKey::NumaAscending => a.1.cmp(&b.1),
    }
}

/// Sorts `order` (device indexes) in place by the GPU policy, as HAMi's `sort.Sort` over the
/// node's device list does for each container in turn: ties keep the order the previous
/// container's sort left up to 12 devices (an insertion sort), and beyond land where Go's
/// pattern-defeating quicksort leaves them ([`go_sort`]). Fit tries the devices from the end.
pub fn sort_devices(
    order: &mut [usize],
    node: &GpuNode,
    usage: &[DeviceUsage],
    scores: &[f32],
    policy: &GpuPolicy,
    numa_bind: bool,
) {
    let key = |i: usize| (scores[i], node.hot[i].numa);
    if let Some(chain) = policy.chain_keys(numa_bind) {
        // The chain ends with the registered `index` field as HAMi's deterministic tiebreak.
        go_sort::sort(order, |a, b| {
            chain
                .iter()
                .fold(Ordering::Equal, |acc, k| acc.then_with(|| by_key(*k, key(a), key(b))))
                .then(node.devices[a].index.cmp(&node.devices[b].index))
                .is_lt()
        });
        return;
    }
    if policy.text == "mutex" {
        go_sort::sort(order, |a, b| usage[b].used.cmp(&usage[a].used).then(key(a).1.cmp(&key(b).1)).is_lt());
        return;
    }
    let binpack = policy.text == "binpack";
    let keys: [SortKey; 2] = match (numa_bind, binpack) {
        (true, true) => {
            go_sort::sort(order, |a, b| key(b).1.cmp(&key(a).1).then(key(a).0.total_cmp(&key(b).0)).is_lt());
            return;
        }
        (true, false) => [SortKey::NumaAscending, SortKey::ScoreDescending],
        (false, true) => [SortKey::ScoreAscending, SortKey::NumaAscending],
        (false, false) => [SortKey::ScoreDescending, SortKey::NumaAscending],
    };
    go_sort::sort(order, |a, b| {
        keys.iter().fold(Ordering::Equal, |acc, k| acc.then_with(|| by_key(*k, key(a), key(b)))).is_lt()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(t: &str, count: i32, mem: i32) -> Device {
        Device {
            id: "x".into(),
            count,
            devmem: mem,
            devcore: 100,
            device_type: t.into(),
            health: true,
            ..Default::default()
        }
    }

    #[test]
    fn device_score_examples() {
        let u = DeviceUsage { used: 2, usedmem: 4000, usedcores: 30, ..DeviceUsage::default() };
        let r = ContainerRequest { nums: 1, memreq: 2000, mem_percentage: PERCENT_UNSET, coresreq: 20 };
        let w = ScoringWeights::default();
        assert_eq!(device_score(&dev("NVIDIA-Tesla T4", 10, 16000), &u, &r, &w), 7.5);
        assert_eq!(device_score(&dev("NVIDIA", 10, 16000), &u, &r, &w), 11.75);
        assert_eq!(device_score(&dev("NVIDIA", 0, 16000), &u, &r, &w), 0.0);
    }

    #[test]
    fn node_score_example() {
        let totals = Totals { count: 20, core: 200, mem: 32000, used: 3, usedcores: 50, usedmem: 8000 };
        assert!((node_score(&totals) - 6.5).abs() < 1e-6);
    }

    #[test]
    fn node_score_rounds_in_float32() {
        // HAMi's examples/3: equal in exact arithmetic, one float32 ulp apart as HAMi computes them.
        let mem = 8 * 32768;
        let a = Totals { count: 80, core: 800, mem, used: 2, usedcores: 50, usedmem: 2000 };
        let b = Totals { count: 80, core: 800, mem, used: 1, usedcores: 60, usedmem: 2000 };
        assert_eq!(node_score(&a), 0.9512939453125);
        assert_eq!(node_score(&b), 0.9512940049171448);
    }
}
