//! Prefetch hints for evaluation, which is bound by memory latency on large clusters.

use super::list::CandidateList;
use crate::model::GpuNode;
use crate::state::ClusterState;

/// Evaluation is bound by memory latency on large clusters: start loading the device arrays of
/// the node a few candidates ahead, and that node's own struct further ahead.
#[inline]
pub(super) fn prefetch_ahead(candidates: &[(&str, Option<&GpuNode>)], k: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if let Some((_, Some(far))) = candidates.get(k + 8) {
            // SAFETY: prefetching is a hint; any address is allowed and nothing is dereferenced.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(*far).cast()) };
        }
    }
    if let Some((_, Some(near))) = candidates.get(k + 4) {
        prefetch_devices(near);
    }
}

/// Starts loading a node's device arrays (the part Fit reads first).
#[inline]
fn prefetch_devices(node: &GpuNode) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint; any address is allowed and nothing is dereferenced.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(node.hot.as_ptr().cast());
            _mm_prefetch::<_MM_HINT_T0>(node.usage.as_ptr().cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

#[inline]
pub(super) fn prefetch_ids(state: &ClusterState, list: &CandidateList, k: usize) {
    if let Some(node) = list.id(k + 4).and_then(|i| state.nodes.by_id(i)) {
        prefetch_devices(node);
    }
}
