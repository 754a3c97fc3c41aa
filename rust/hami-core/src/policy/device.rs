//! HAMi's scores and orderings: device score (§10.1), device order per GPU policy (§10.2), node score (§10.3).

use super::{GpuPolicy, ScoringWeights, SortKey};
use crate::codec::{Device, VENDOR_NVIDIA};
use crate::model::{DeviceUsage, GpuNode, Totals};
use crate::request::{ContainerRequest, PERCENT_UNSET};
use std::cmp::Ordering;

pub const WEIGHT: f64 = 10.0;

fn ratio(part: i64, whole: i64) -> f64 {
    part as f64 / whole as f64
}

/// Device utilisation score. The request only counts when the device type is exactly `NVIDIA`
/// (HAMi compares the model string with the vendor word; real models never match).
pub fn device_score(d: &Device, u: &DeviceUsage, r: &ContainerRequest, w: &ScoringWeights) -> f64 {
    let (count, core, mem) = (i64::from(d.count), i64::from(d.devcore), i64::from(d.devmem));
    if count == 0 || core == 0 || mem == 0 {
        return 0.0;
    }
    let (slots, cores, memory) = if d.device_type == VENDOR_NVIDIA {
        let m = if r.mem_percentage != 0 && r.mem_percentage != PERCENT_UNSET {
            mem * r.mem_percentage / 100
        } else {
            r.memreq
        };
        (1, r.coresreq, m)
    } else {
        (0, 0, 0)
    };
    WEIGHT
        * (w.slot as f64 * ratio(slots + u.used, count)
            + w.core as f64 * ratio(cores + u.usedcores, core)
            + w.memory as f64 * ratio(memory + u.usedmem, mem))
}

/// Node utilisation over all its devices, before the pod is placed.
pub fn node_score(t: &Totals) -> f64 {
    if t.count == 0 || t.core == 0 || t.mem == 0 {
        return 0.0;
    }
    WEIGHT * (ratio(t.used, t.count) + ratio(t.usedcores, t.core) + ratio(t.usedmem, t.mem))
}

fn by_key(key: SortKey, a: (f64, i32), b: (f64, i32)) -> Ordering {
    match key {
        SortKey::ScoreAscending => a.0.total_cmp(&b.0),
        SortKey::ScoreDescending => b.0.total_cmp(&a.0),
        SortKey::NumaAscending => a.1.cmp(&b.1),
    }
}

/// Device indexes in policy order; Fit tries them from the end. Final tiebreak: register order.
pub fn device_order(
    node: &GpuNode,
    usage: &[DeviceUsage],
    scores: &[f64],
    policy: &GpuPolicy,
    numa_bind: bool,
) -> Vec<usize> {
    let mut order: Vec<usize> = (0..node.devices.len()).collect();
    let key = |i: usize| (scores[i], node.hot[i].numa);
    let keys: Vec<SortKey> = if let Some(chain) = policy.chain_keys(numa_bind) {
        chain
    } else if policy.text == "mutex" {
        order.sort_by(|&a, &b| usage[b].used.cmp(&usage[a].used).then(key(a).1.cmp(&key(b).1)).then(a.cmp(&b)));
        return order;
    } else if numa_bind {
        if policy.text == "binpack" {
            order.sort_by(|&a, &b| key(b).1.cmp(&key(a).1).then(key(a).0.total_cmp(&key(b).0)).then(a.cmp(&b)));
            return order;
        }
        vec![SortKey::NumaAscending, SortKey::ScoreDescending]
    } else if policy.text == "binpack" {
        vec![SortKey::ScoreAscending, SortKey::NumaAscending]
    } else {
        vec![SortKey::ScoreDescending, SortKey::NumaAscending]
    };
    order.sort_by(|&a, &b| {
        keys.iter().fold(Ordering::Equal, |acc, k| acc.then_with(|| by_key(*k, key(a), key(b)))).then(a.cmp(&b))
    });
    order
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
        let u = DeviceUsage { used: 2, usedmem: 4000, usedcores: 30 };
        let r = ContainerRequest { nums: 1, memreq: 2000, mem_percentage: PERCENT_UNSET, coresreq: 20 };
        let w = ScoringWeights::default();
        assert!((device_score(&dev("NVIDIA-Tesla T4", 10, 16000), &u, &r, &w) - 7.5).abs() < 1e-9);
        assert!((device_score(&dev("NVIDIA", 10, 16000), &u, &r, &w) - 11.75).abs() < 1e-9);
        assert_eq!(device_score(&dev("NVIDIA", 0, 16000), &u, &r, &w), 0.0);
    }

    #[test]
    fn node_score_example() {
        let totals = Totals { count: 20, core: 200, mem: 32000, used: 3, usedcores: 50, usedmem: 8000 };
        assert!((node_score(&totals) - 6.5).abs() < 1e-9);
    }
}
