//! The simulator-derived node policies (`NodePolicy::Scored`) over the live fits, reading the
//! cluster as the trace replay does: GPUs as shares of device memory ([`np::live_free_milli`]),
//! each node's CPU left and the pod's CPU request where the node's allocatable is known
//! ([`crate::state::host`]), the models the pod names. FGD's target workload is the configured
//! one or the recent placements; `fgd-balance` learns from the pods seen
//! ([`crate::state::arrivals`]), as the replay does.

use super::placement::Placement;
use crate::frag::{FragMemo, NodeShape, Workload};
use crate::model::GpuNode;
use crate::policy::balance::{self as bal, History};
use crate::policy::node as np;
use crate::policy::score::{self, Candidate, Randomness, Scoring};
use crate::state::ClusterState;
use std::cmp::Ordering;

/// The policies' view of the fitting nodes, aligned with the fits.
pub(super) struct LiveViews<'s> {
    frees: Vec<Vec<i64>>,
    /// Per fit: (CPU left, the pod's CPU); `None` where the node's allocatable is unknown (no
    /// CPU term then: both read as 0).
    cpu: Vec<Option<(i64, i64)>>,
    /// Per fit: its GPU model ([`np::live_model`]), an index into `model_names`.
    models: Vec<usize>,
    model_names: Vec<String>,
    /// Per fit: (GPU count, per-GPU milli) of the pod on that node.
    gpus: Vec<(u32, i64)>,
    /// The models the pod names, `|`-joined.
    spec: String,
    tags: std::collections::HashMap<&'s str, Vec<(np::GpuTag, u32)>>,
    pub(super) workload: Workload,
    /// `fgd-balance`: every pod seen (with this one), for `c̄` and the models' reserves.
    history: Option<History>,
    /// `fgd-balance`: the GPU its cost chose on each fit (sharing pods).
    pub(super) balance_gpus: Vec<Option<usize>>,
}

impl<'s> LiveViews<'s> {
    pub(super) fn new(
        state: &'s ClusterState,
        scorer: np::Scorer,
        placement: &Placement,
        names: &[&str],
        nodes: &[&GpuNode],
    ) -> Self {
        let pod_cpu = np::live_pod_cpu(placement.pod.spec.host_request().0);
        let cpu =
            names.iter().map(|n| state.host().node(n).and_then(|h| h.cpu_left()).map(|left| (left, pod_cpu))).collect();
        let gpus: Vec<(u32, i64)> = nodes.iter().map(|node| np::live_pod_gpus(&placement.request, node)).collect();
        let spec = placement.hints.use_types.join("|");
        let (mut workload, history) = match scorer {
            np::Scorer::Fgd => (state.target_workload(), None),
            np::Scorer::FgdBalance => {
                let arrivals = state.arrivals();
                let this = (!state.host().knows(&placement.pod.key().to_string()))
                    .then(|| state.arrival_type(&placement.pod.spec, &placement.hints.use_types, None));
                let (w, h) = arrivals.with_pod(this.as_ref());
                (w, Some(h))
            }
            _ => (Workload::default(), None),
        };
        if let (true, Some(&(num_gpu, gpu_milli))) = (workload.types.is_empty(), gpus.first()) {
            let pod = np::PodShape { cpu_milli: pod_cpu, gpu_milli, num_gpu, gpu_spec: &spec };
            workload.types.push((pod.task_type(), 1.0));
        }
        let tags = if scorer == np::Scorer::Clustering { state.gpu_tags_by_node() } else { Default::default() };
        let (models, model_names) = model_ids(nodes);
        Self {
            frees: nodes.iter().map(|n| np::live_free_milli(n)).collect(),
            cpu,
            models,
            model_names,
            gpus,
            spec,
            tags,
            workload,
            history,
            balance_gpus: Vec::new(),
        }
    }

    pub(super) fn candidate<'a>(&'a self, name: &'a str, i: usize, hami_score: f64) -> Candidate<'a> {
        let tags: &[(np::GpuTag, u32)] = self.tags.get(name).map_or(&[], Vec::as_slice);
        let (cpu_left, cpu_milli) = self.cpu[i].unwrap_or((0, 0));
        let shape = NodeShape { cpu_left, gpu_free: &self.frees[i], model: &self.model_names[self.models[i]] };
        let (num_gpu, gpu_milli) = self.gpus[i];
        let pod = np::PodShape { cpu_milli, gpu_milli, num_gpu, gpu_spec: &self.spec };
        Candidate { name, view: np::NodeView { shape, tags }, pod, hami_score, frag: None, shape_key: None }
    }
}

/// Each node's GPU model as an index into the distinct models ([`np::live_model`] once per device type).
fn model_ids(nodes: &[&GpuNode]) -> (Vec<usize>, Vec<String>) {
    let mut types: Vec<&str> = Vec::new();
    let mut names = Vec::new();
    let ids = nodes
        .iter()
        .map(|n| {
            let t = n.devices.first().map_or("", |d| d.device_type.as_str());
            types.iter().position(|k| *k == t).unwrap_or_else(|| {
                types.push(t);
                names.push(np::live_model(n));
                names.len() - 1
            })
        })
        .collect();
    (ids, names)
}

/// Replaces HAMi's node scores of the fits by the simulator-derived policy's ([`score::score_nodes`]).
pub(super) fn rescore(state: &ClusterState, views: &mut LiveViews, placement: &Placement, fits: &mut [(&str, f64)]) {
    if placement.node_policy == crate::policy::NodePolicy::Scored(np::Scorer::FgdBalance) {
        return rescore_balance(state, views, fits);
    }
    let meta = &placement.pod.metadata;
    let (mut memo, mut shapes) = (FragMemo::default(), Default::default());
    let mut ctx = Scoring {
        workload: &views.workload,
        memo: &mut memo,
        random: Randomness::Hash { uid: &meta.uid, pod: &meta.name },
        shapes: &mut shapes,
    };
    let mut scores = Vec::with_capacity(fits.len());
    let candidates = fits.iter().enumerate().map(|(i, (n, s))| views.candidate(n, i, *s));
    score::score_nodes(placement.node_policy, candidates, &mut ctx, &mut scores);
    for ((_, score), s) in fits.iter_mut().zip(scores) {
        *score = s;
    }
}

/// `fgd-balance` as the replay chooses: each fit's [`bal::Cost`] (the model reserve, the room
/// left, the step score, the GPU fit, the CPU balance), compared exactly; the scores handed on
/// are the costs' dense ranks, 1 for the worst (equal costs, equal scores: ties go to the
/// smallest name), so the order is the replay's. Nodes where it does not fit by the policy's
/// view score `f64::MIN`.
fn rescore_balance(state: &ClusterState, views: &mut LiveViews, fits: &mut [(&str, f64)]) {
    let history = views.history.take().unwrap_or_default();
    let learned = history.learned();
    let reserve = model_reserve(state, &history, &views.spec, views.gpus.first().copied());
    let mut memo = FragMemo::default();
    let mut costs: Vec<Option<bal::Cost>> = Vec::with_capacity(fits.len());
    let mut gpus = Vec::with_capacity(fits.len());
    for (i, (name, _)) in fits.iter().enumerate() {
        let c = views.candidate(name, i, 0.0);
        let before = memo.frag(&c.view.shape, &views.workload);
        let cpu_per_gpu = if views.cpu[i].is_some() { learned.cpu_per_gpu } else { 0.0 };
        let cost =
            bal::cost(&c.view, &c.pod, &views.workload, &mut memo, before, bal::Learned { cpu_per_gpu, ..learned });
        gpus.push(cost.and_then(|c| c.1));
        costs.push(cost.map(|(mut cost, _)| {
            let model = &views.model_names[views.models[i]];
            cost.keeps_reserve = reserve.iter().find(|(m, _)| m == model).is_none_or(|(_, keeps)| *keeps);
            cost
        }));
    }
    let mut order: Vec<(usize, bal::Cost)> = costs.iter().enumerate().filter_map(|(i, c)| c.map(|c| (i, c))).collect();
    order.sort_by(|a, b| a.1.compare(&b.1));
    let mut rank = 1.0;
    for k in 0..order.len() {
        if k > 0 && order[k - 1].1.compare(&order[k].1) != Ordering::Equal {
            rank += 1.0;
        }
        fits[order[k].0].1 = rank;
    }
    for (i, c) in costs.iter().enumerate() {
        if c.is_none() {
            fits[i].1 = f64::MIN;
        }
    }
    views.balance_gpus = gpus;
}

/// Per GPU model of the cluster: whether the pod may take its GPUs without eating what the pods
/// naming the model are expected to need ([`bal::keeps_reserve`]), over every node's free GPU
/// capacity. Empty while no pod seen names a model (every placement keeps the reserve).
fn model_reserve(state: &ClusterState, history: &History, spec: &str, gpus: Option<(u32, i64)>) -> Vec<(String, bool)> {
    if !history.names_models() {
        return Vec::new();
    }
    let mut free: Vec<(String, f64)> = Vec::new();
    for node in state.nodes.values().filter(|n| !n.devices.is_empty()) {
        let model = np::live_model(node);
        let milli: i64 = np::live_free_milli(node).iter().sum();
        match free.iter_mut().find(|(m, _)| *m == model) {
            Some(e) => e.1 += milli as f64,
            None => free.push((model, milli as f64)),
        }
    }
    let cluster: f64 = free.iter().map(|e| e.1).sum();
    let (num_gpu, gpu_milli) = gpus.unwrap_or((0, 0));
    let pod = np::PodShape { cpu_milli: 0, gpu_milli, num_gpu, gpu_spec: spec };
    free.into_iter()
        .map(|(m, f)| {
            let keeps = bal::keeps_reserve(&pod, history.named_share(&m), f, cluster);
            (m, keeps)
        })
        .collect()
}
