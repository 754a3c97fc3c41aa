//! Trace replay (`hami-fast simulate`): the summary of one replay, and the arrival stream.

use serde::Serialize;
use std::collections::BTreeMap;

/// One replay's summary (the CLI's `--output json` object plus curves for plots); the curves are
/// keyed by arrived GPU % as strings. Fields in alphabetical order, as the untyped object had them.
#[derive(Debug, Serialize)]
pub struct ReplaySummary {
    pub alloc_pct_by_arrived: BTreeMap<String, f64>,
    pub elapsed_s: f64,
    pub failed: usize,
    pub frag_pct_by_arrived: BTreeMap<String, f64>,
    pub frag_ratio_by_arrived: BTreeMap<String, f64>,
    pub pods: usize,
    pub policy: &'static str,
    pub seed: i64,
    pub total_gpus: i64,
    pub tune: f64,
    pub tuned: i64,
    pub typical_types: usize,
    pub unallocated_pct_at_100: Option<f64>,
}

/// The cluster and arrival stream a replay sees: nodes as `[name, cpu_milli, memory_mib, gpus,
/// model]`, pods in arrival order as `[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]`.
#[derive(Debug, Serialize)]
pub struct Arrivals {
    pub nodes: Vec<(String, i64, i64, usize, String)>,
    pub pods: Vec<(i64, i64, i64, u32, String)>,
    pub seed: i64,
    pub total_gpus: i64,
}
