//! kube-scheduler's host checks (CPU, memory, pod count) on nodes whose host resources are known.

use super::{FitFailure, Reason};
use crate::model::GpuNode;

/// kube-scheduler's `NodeResourcesFit` for CPU, memory and pod count, on nodes whose host
/// resources are known; reasons as kube-scheduler words them, joined with `", "`.
pub fn fit_host(node: &GpuNode, cpu_milli: i64, memory_mib: i64) -> Result<(), FitFailure> {
    let short = host_shortfall(node, cpu_milli, memory_mib);
    if short == [false; 3] {
        return Ok(());
    }
    let reasons = [Reason::TooManyPods, Reason::InsufficientCpu, Reason::InsufficientMemory]
        .into_iter()
        .zip(short)
        .filter(|(_, s)| *s)
        .map(|(r, _)| r)
        .collect();
    Err(FitFailure::Host(reasons))
}

/// [`fit_host`] without the reason text: (too many pods, CPU short, memory short).
pub fn host_shortfall(node: &GpuNode, cpu_milli: i64, memory_mib: i64) -> [bool; 3] {
    let Some(h) = &node.host else { return [false; 3] };
    [
        h.pods_requested + 1 > h.pods,
        cpu_milli > 0 && h.cpu_left() < cpu_milli,
        memory_mib > 0 && h.memory_left() < memory_mib,
    ]
}
