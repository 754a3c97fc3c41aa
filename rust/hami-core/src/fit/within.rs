//! The Fit of a pod restricted to some of a node's devices: a planner's target GPUs, a
//! reservation's GPUs.

use super::{fit_pod, FitFailure, NodeFit, PodContext};
use crate::model::{GpuNode, RESERVED};

/// [`fit_pod`] as if every device `allowed` rejects were held for another pod. Each backend's
/// Fit passes over a held device whatever its own device order, so this restricts every vendor
/// alike, where a UUID filter would reach NVIDIA's Fit only.
pub fn fit_pod_within(
    node: &GpuNode,
    ctx: &PodContext,
    allowed: impl Fn(usize) -> bool,
) -> Result<NodeFit, FitFailure> {
    let mut only = node.clone();
    for (d, hot) in only.hot.iter_mut().enumerate() {
        if !allowed(d) {
            hot.flags |= RESERVED;
        }
    }
    fit_pod(&only, ctx)
}
