//! What a replay measures: allocation and fragmentation after each pod event, discretised by
//! arrived GPU % as the simulator's analysis scripts do.

use crate::frag::MILLI;
use crate::policy::NodePolicy;
use crate::wire::replay::ReplaySummary;
use serde::Serialize;
use std::collections::BTreeMap;

/// Cluster state after one pod event.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Event {
    /// Cumulative GPU milli of every pod attempted so far, failed ones included.
    pub arrived: i64,
    /// GPU milli allocated.
    pub used: i64,
    /// Cluster fragment (milli-GPU), FGD's measure against the target workload.
    pub frag: f64,
}

/// The result of one replay.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub policy: NodePolicy,
    pub seed: i64,
    pub tune: f64,
    pub pods: usize,
    pub failed: usize,
    /// Pods added (> 0) or removed (< 0) by tuning.
    pub tuned: i64,
    pub total_gpus: i64,
    pub typical_types: usize,
    pub events: Vec<Event>,
}

/// Python's `round(x, 0)` / `round(x, 2)` on the values involved (ties to even).
pub(super) fn round_to(x: f64, digits: i32) -> f64 {
    let k = 10f64.powi(digits);
    (x * k).round_ties_even() / k
}

impl Outcome {
    /// A per-event value discretised by arrived GPU % of capacity, as the simulator's analysis
    /// scripts do: for each integer x, the mean over events whose rounded arrived % is x, else
    /// over the window x±1; x from 0 to max(130, the last arrived %).
    pub fn discrete(&self, value: impl Fn(&Event) -> f64) -> BTreeMap<u32, f64> {
        let total = self.total_gpus as f64;
        if total == 0.0 {
            return BTreeMap::new();
        }
        let keyed: Vec<(i64, f64)> =
            self.events.iter().map(|e| (round_to(e.arrived as f64 / total / 10.0, 0) as i64, value(e))).collect();
        let last = keyed.iter().map(|k| k.0).max().unwrap_or(0).max(130);
        let mut out = BTreeMap::new();
        for x in 0..=last {
            let mean = |lo: i64, hi: i64| {
                let (mut sum, mut n) = (0.0, 0usize);
                for (k, v) in &keyed {
                    if (lo..=hi).contains(k) {
                        sum += v;
                        n += 1;
                    }
                }
                (n > 0).then(|| sum / n as f64)
            };
            if let Some(m) = mean(x, x).or_else(|| mean(x - 1, x + 1)) {
                out.insert(x as u32, round_to(m, 2));
            }
        }
        out
    }

    /// Allocated GPU % of capacity by arrived %.
    pub fn alloc_by_arrived(&self) -> BTreeMap<u32, f64> {
        let total = self.total_gpus as f64;
        self.discrete(|e| round_to(e.used as f64 / total / 10.0, 2))
    }

    /// Fragment as % of cluster GPU capacity ("Frag / Total") by arrived %.
    pub fn frag_by_arrived(&self) -> BTreeMap<u32, f64> {
        let total = self.total_gpus as f64;
        self.discrete(|e| round_to(e.frag / total / 10.0, 2))
    }

    /// Fragment as % of idle GPU capacity ("fragment rate") by arrived %.
    pub fn frag_ratio_by_arrived(&self) -> BTreeMap<u32, f64> {
        let capacity = self.total_gpus as f64 * MILLI as f64;
        self.discrete(|e| {
            let idle = capacity - e.used as f64;
            round_to(if idle > 0.0 { 100.0 * e.frag / idle } else { 0.0 }, 2)
        })
    }

    /// 100 − allocated % at arrived = `pct` (the bar charts use 100).
    pub fn unallocated_at(&self, pct: u32) -> Option<f64> {
        self.alloc_by_arrived().get(&pct).map(|a| round_to(100.0 - a, 2))
    }

    /// The summary (the CLI's `--output json` object plus curves for plots).
    pub fn summary(&self, elapsed_s: f64) -> ReplaySummary {
        let keyed = |m: BTreeMap<u32, f64>| m.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        ReplaySummary {
            policy: self.policy.as_str(),
            seed: self.seed,
            tune: self.tune,
            pods: self.pods,
            failed: self.failed,
            tuned: self.tuned,
            total_gpus: self.total_gpus,
            typical_types: self.typical_types,
            unallocated_pct_at_100: self.unallocated_at(100),
            alloc_pct_by_arrived: keyed(self.alloc_by_arrived()),
            frag_pct_by_arrived: keyed(self.frag_by_arrived()),
            frag_ratio_by_arrived: keyed(self.frag_ratio_by_arrived()),
            elapsed_s,
        }
    }
}
