//! The simulator-derived node policies (`NodePolicy::Scored`) over the live fits.

use super::placement::Placement;
use crate::frag::{FragMemo, NodeShape, Workload};
use crate::model::GpuNode;
use crate::policy::node as np;
use crate::policy::score::{self, Candidate, Randomness, Scoring};
use crate::request::PodRequest;
use crate::state::ClusterState;

/// The simulator-derived policies' view of the live fits: GPUs as shares of device memory
/// ([`np::live_free_milli`]), no CPU (kube-scheduler checks it). FGD's target workload is the
/// recent placements ([`ClusterState::target_workload`]), or the pod itself before any.
pub(super) struct LiveViews<'s> {
    frees: Vec<Vec<i64>>,
    pods: Vec<np::PodShape<'static>>,
    tags: std::collections::HashMap<&'s str, Vec<(np::GpuTag, u32)>>,
    pub(super) workload: Workload,
}

impl<'s> LiveViews<'s> {
    pub(super) fn new(state: &'s ClusterState, scorer: np::Scorer, request: &PodRequest, nodes: &[&GpuNode]) -> Self {
        let mut workload = match scorer {
            np::Scorer::Fgd => state.target_workload(),
            np::Scorer::FgdBalance => state.balance_workload(),
            _ => Workload::default(),
        };
        let tags = if scorer == np::Scorer::Clustering { state.gpu_tags_by_node() } else { Default::default() };
        let frees = nodes.iter().map(|n| np::live_free_milli(n)).collect();
        let pods: Vec<np::PodShape> = nodes
            .iter()
            .map(|node| {
                let (num_gpu, gpu_milli) = np::live_pod_gpus(request, node);
                np::PodShape { cpu_milli: 0, gpu_milli, num_gpu, gpu_spec: "" }
            })
            .collect();
        if let (true, Some(pod)) = (workload.types.is_empty(), pods.first()) {
            workload.types.push((pod.task_type(), 1.0));
        }
        Self { frees, pods, tags, workload }
    }

    pub(super) fn candidate<'a>(
        &'a self,
        name: &'a str,
        node: &'a GpuNode,
        i: usize,
        hami_score: f64,
    ) -> Candidate<'a> {
        let tags: &[(np::GpuTag, u32)] = self.tags.get(name).map_or(&[], Vec::as_slice);
        let model = node.devices.first().map_or("", |d| d.device_type.as_str());
        let view = np::NodeView { shape: NodeShape { cpu_left: 0, gpu_free: &self.frees[i], model }, tags };
        Candidate { name, view, pod: self.pods[i], hami_score, frag: None, shape_key: None }
    }
}

/// Replaces HAMi's node scores of the fits by the simulator-derived policy's ([`score::score_nodes`]).
pub(super) fn rescore(views: &LiveViews, placement: &Placement, fits: &mut [(&str, f64)], nodes: &[&GpuNode]) {
    let meta = &placement.pod.metadata;
    let (mut memo, mut shapes) = (FragMemo::default(), Default::default());
    let mut ctx = Scoring {
        workload: &views.workload,
        memo: &mut memo,
        random: Randomness::Hash { uid: &meta.uid, pod: &meta.name },
        shapes: &mut shapes,
    };
    let mut scores = Vec::with_capacity(fits.len());
    let candidates = fits.iter().zip(nodes).enumerate().map(|(i, ((n, s), node))| views.candidate(n, node, i, *s));
    score::score_nodes(placement.node_policy, candidates, &mut ctx, &mut scores);
    for ((_, score), s) in fits.iter_mut().zip(scores) {
        *score = s;
    }
}
