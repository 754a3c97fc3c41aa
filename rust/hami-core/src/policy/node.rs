//! Node policies from the FGD paper's simulator (Weng et al., USENIX ATC '23): FGD and the
//! baselines it is compared with. Integer scores 0..=100 as the simulator's kube-scheduler
//! plugins return them (higher wins; ties are broken by the caller), and GPU choice inside the
//! chosen node (`gpuSelMethod`).
//!
//! All of them read a node as CPU left + per-GPU free milli (1000 = a whole GPU) + GPU model and
//! a pod as (CPU, per-GPU milli, GPU count, allowed models). Memory is not part of any score.

use crate::frag::{FragMemo, NodeShape, TaskType, Workload, MILLI};
use crate::model::{Collapsed, GpuNode};
use crate::request::PodRequest;

/// Normalisers of BestFit and DotProd: the largest node of the simulator's clusters.
pub const MAX_SPEC_CPU: f64 = 128_000.0;
pub const MAX_SPEC_GPU: i64 = 8000;
pub const MAX_NODE_SCORE: i64 = 100;

/// The policies that score with the simulator's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scorer {
    Fgd,
    BestFit,
    DotProd,
    Packing,
    Clustering,
    Random,
    /// FGD with an online workload and a CPU-balance tie-break ([`super::balance`]).
    FgdBalance,
}

impl Scorer {
    pub const ALL: [Scorer; 7] =
        [Self::Random, Self::DotProd, Self::Clustering, Self::Packing, Self::BestFit, Self::Fgd, Self::FgdBalance];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "fgd" => Self::Fgd,
            "bestfit" | "best-fit" => Self::BestFit,
            "dotprod" | "dotproduct" | "dot-product" => Self::DotProd,
            "packing" | "gpupacking" => Self::Packing,
            "clustering" | "gpuclustering" => Self::Clustering,
            "random" => Self::Random,
            "fgd-balance" => Self::FgdBalance,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fgd => "fgd",
            Self::BestFit => "bestfit",
            Self::DotProd => "dotprod",
            Self::Packing => "packing",
            Self::Clustering => "clustering",
            Self::Random => "random",
            Self::FgdBalance => "fgd-balance",
        }
    }

    /// How the GPU is picked inside the chosen node (the simulator's run scripts).
    pub fn gpu_selection(self) -> GpuSelection {
        match self {
            Self::Fgd | Self::FgdBalance => GpuSelection::Fgd,
            Self::Random => GpuSelection::Random,
            _ => GpuSelection::BestFit,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuSelection {
    BestFit,
    Fgd,
    Random,
}

/// A pod as the node policies see it.
#[derive(Debug, Clone, Copy)]
pub struct PodShape<'a> {
    pub cpu_milli: i64,
    /// Per-GPU share, 0..=1000.
    pub gpu_milli: i64,
    pub num_gpu: u32,
    pub gpu_spec: &'a str,
}

/// The GPU-affinity tag GpuClustering groups pods by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuTag {
    NoGpu,
    Share,
    Whole(u32),
}

impl PodShape<'_> {
    pub fn requests_gpu(&self) -> bool {
        self.gpu_milli > 0 && self.num_gpu > 0
    }

    pub fn is_share(&self) -> bool {
        self.num_gpu == 1 && self.gpu_milli < MILLI
    }

    pub fn total_milli(&self) -> i64 {
        self.gpu_milli * i64::from(self.num_gpu)
    }

    pub fn tag(&self) -> GpuTag {
        if self.num_gpu == 0 {
            GpuTag::NoGpu
        } else if self.is_share() {
            GpuTag::Share
        } else {
            GpuTag::Whole(self.num_gpu)
        }
    }

    pub fn task_type(&self) -> TaskType {
        TaskType {
            cpu_milli: self.cpu_milli,
            gpu_milli: self.gpu_milli,
            num_gpu: self.num_gpu,
            gpu_spec: self.gpu_spec.to_owned(),
        }
    }
}

/// A node as the node policies see it.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    pub shape: NodeShape<'a>,
    /// GPU tags of the pods already on the node, with counts (GpuClustering).
    pub tags: &'a [(GpuTag, u32)],
}

impl NodeView<'_> {
    fn free_total(&self) -> i64 {
        self.shape.gpu_free.iter().sum()
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Device indexes sorted by free milli ascending, ties by index (Go's stable sort).
fn ascending_free(free: &[i64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..free.len()).collect();
    idx.sort_by_key(|&i| (free[i], i));
    idx
}

/// The node after placing `pod` the simulator's way (`NodeResource.Sub`): CPU subtracted, then
/// per-GPU milli taken from the fitting GPUs with the least free first. `None` if it does not fit.
pub fn subtract(shape: &NodeShape, pod: &PodShape) -> Option<(i64, Vec<i64>)> {
    if shape.cpu_left < pod.cpu_milli || shape.gpu_free.len() < pod.num_gpu as usize {
        return None;
    }
    let mut free = shape.gpu_free.to_vec();
    let mut need = pod.num_gpu;
    if need > 0 {
        for i in ascending_free(shape.gpu_free) {
            if pod.gpu_milli <= free[i] {
                free[i] -= pod.gpu_milli;
                need -= 1;
                if need == 0 {
                    break;
                }
            }
        }
    }
    (need == 0).then_some((shape.cpu_left - pod.cpu_milli, free))
}

/// FGD: `int(100·sigmoid(−Δ/1000))` where Δ is the node's fragment increase. For a sharing pod
/// every fitting GPU is tried and the best (first on ties) is returned as the GPU to use.
pub fn fgd(node: &NodeView, pod: &PodShape, workload: &Workload, memo: &mut FragMemo) -> (i64, Option<usize>) {
    let before = memo.frag(&node.shape, workload);
    fgd_from(node, pod, workload, memo, before)
}

/// [`fgd`] with the node's current fragment already known (the replay keeps it per node).
pub fn fgd_from(
    node: &NodeView,
    pod: &PodShape,
    workload: &Workload,
    memo: &mut FragMemo,
    before: f64,
) -> (i64, Option<usize>) {
    let score_of = |after: f64| (sigmoid((before - after) / 1000.0) * MAX_NODE_SCORE as f64) as i64;
    if pod.num_gpu == 1 && pod.gpu_milli < MILLI {
        let mut best: Option<(i64, usize)> = None;
        let mut free = [0i64; 16];
        let free = if node.shape.gpu_free.len() <= 16 {
            free[..node.shape.gpu_free.len()].copy_from_slice(node.shape.gpu_free);
            &mut free[..node.shape.gpu_free.len()]
        } else {
            return fgd_share_slow(node, pod, workload, memo, before);
        };
        for i in 0..free.len() {
            // GPUs with equal free milli give the same state after placement: the first one decides.
            if free[i] < pod.gpu_milli || free[..i].contains(&free[i]) {
                continue;
            }
            free[i] -= pod.gpu_milli;
            let after = memo.frag(
                &NodeShape { cpu_left: node.shape.cpu_left - pod.cpu_milli, gpu_free: free, model: node.shape.model },
                workload,
            );
            free[i] += pod.gpu_milli;
            let s = score_of(after);
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, i));
            }
        }
        return best.map_or((0, None), |(s, i)| (s, Some(i)));
    }
    match subtract(&node.shape, pod) {
        Some((cpu_left, free)) => {
            (score_of(memo.frag(&NodeShape { cpu_left, gpu_free: &free, model: node.shape.model }, workload)), None)
        }
        None => (0, None),
    }
}

fn fgd_share_slow(
    node: &NodeView,
    pod: &PodShape,
    workload: &Workload,
    memo: &mut FragMemo,
    before: f64,
) -> (i64, Option<usize>) {
    let mut best: Option<(i64, usize)> = None;
    let mut free = node.shape.gpu_free.to_vec();
    for i in 0..free.len() {
        if free[i] >= pod.gpu_milli {
            free[i] -= pod.gpu_milli;
            let after = memo.frag(
                &NodeShape { cpu_left: node.shape.cpu_left - pod.cpu_milli, gpu_free: &free, model: node.shape.model },
                workload,
            );
            free[i] += pod.gpu_milli;
            let s = (sigmoid((before - after) / 1000.0) * MAX_NODE_SCORE as f64) as i64;
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, i));
            }
        }
    }
    best.map_or((0, None), |(s, i)| (s, Some(i)))
}

/// BestFit before normalisation: `int(100·(1 − ½(cpu_left−cpu)/128000 − ½(gpu_left−gpu)/8000))`.
pub fn best_fit(node: &NodeView, pod: &PodShape) -> i64 {
    let free = [node.shape.cpu_left as f64, node.free_total() as f64];
    let req = [pod.cpu_milli as f64, pod.total_milli() as f64];
    let max = [MAX_SPEC_CPU, MAX_SPEC_GPU as f64];
    let mut s = 0.0;
    for i in 0..2 {
        if free[i] < req[i] {
            return 0;
        }
        s += (free[i] - req[i]) / max[i] * 0.5;
    }
    ((1.0 - s) * MAX_NODE_SCORE as f64) as i64
}

/// The simulator's min-max `NormalizeScore` over all feasible nodes (all 0 when all equal).
pub fn normalize(scores: &mut [i64]) {
    let (Some(&hi), Some(&lo)) = (scores.iter().max(), scores.iter().min()) else {
        return;
    };
    let range = hi - lo;
    for s in scores.iter_mut() {
        *s = if range == 0 { 0 } else { (*s - lo) * MAX_NODE_SCORE / range };
    }
}

/// DotProd ("Tetris"): `int(100·(1 − ½·[cpu_left, gpu_left]·[cpu, gpu]))`, both vectors
/// normalised by (128000, 8000); 0 when CPU is short.
pub fn dot_product(node: &NodeView, pod: &PodShape) -> i64 {
    if node.shape.cpu_left < pod.cpu_milli {
        return 0;
    }
    let n = [node.shape.cpu_left as f64 / MAX_SPEC_CPU, node.free_total() as f64 / MAX_SPEC_GPU as f64];
    let p = [pod.cpu_milli as f64 / MAX_SPEC_CPU, pod.total_milli() as f64 / MAX_SPEC_GPU as f64];
    let dot = (n[0] * p[0] + n[1] * p[1]) / 2.0;
    ((1.0 - dot) * MAX_NODE_SCORE as f64) as i64
}

/// GpuPacking: prefer partially used GPUs (50..100), then free GPUs on used nodes (33..50), then
/// empty nodes (0..33). CPU-only pods score 0.
pub fn packing(node: &NodeView, pod: &PodShape) -> i64 {
    if pod.gpu_milli <= 0 {
        return 0;
    }
    let free = node.shape.gpu_free;
    let fully_free = free.iter().filter(|&&f| f == MILLI).count() as i64;
    if fully_free == free.len() as i64 {
        return (MAX_NODE_SCORE / 3 - fully_free).max(fully_free);
    }
    let mut need = pod.num_gpu;
    let mut fully_free_used = 0i64;
    let mut used = Vec::new();
    for i in ascending_free(free) {
        if need == 0 {
            break;
        }
        if pod.gpu_milli <= free[i] {
            need -= 1;
            used.push(i);
            if free[i] == MILLI {
                fully_free_used += 1;
            }
        }
    }
    if need != 0 {
        return 0;
    }
    if fully_free_used > 0 {
        return (MAX_NODE_SCORE / 2 - fully_free_used).max(MAX_NODE_SCORE / 3);
    }
    let ratio: i64 = used.iter().map(|&i| free[i] * 100 / MILLI).sum();
    (MAX_NODE_SCORE - ratio / 10).max(MAX_NODE_SCORE / 2)
}

/// GpuClustering: pack pods of the same GPU tag together; within a band, fuller nodes first.
pub fn clustering(node: &NodeView, pod: &PodShape) -> i64 {
    let tag = pod.tag();
    if tag == GpuTag::NoGpu {
        return 0;
    }
    let base = MAX_NODE_SCORE / 4 * (MAX_SPEC_GPU - node.free_total()) / MAX_SPEC_GPU;
    let kinds = node.tags.iter().filter(|(_, n)| *n > 0).count();
    let same = node.tags.iter().any(|(t, n)| *t == tag && *n > 0);
    match (same, kinds) {
        (true, 1) => base + MAX_NODE_SCORE * 3 / 4,
        (true, _) => base + MAX_NODE_SCORE * 2 / 4,
        (false, 0) => base + MAX_NODE_SCORE / 4,
        (false, _) => base,
    }
}

/// GPU preference for `gpuSelMethod: best`: a sharing pod takes the fitting GPU with the least
/// free milli (lowest index on ties); a whole-GPU pod the lowest-index fully free GPUs.
pub fn gpu_preference_best_fit(free: &[i64], pod: &PodShape) -> Vec<usize> {
    if pod.is_share() {
        ascending_free(free)
    } else {
        (0..free.len()).collect()
    }
}

/// A preference list that starts with `first`, then the best-fit order.
pub fn gpu_preference_first(first: usize, free: &[i64], pod: &PodShape) -> Vec<usize> {
    let mut out = vec![first];
    out.extend(gpu_preference_best_fit(free, pod).into_iter().filter(|&i| i != first));
    out
}

/// Live cluster: a node's GPUs as free milli, i.e. the share of device memory left × 1000.
/// HAMi registers memory, cores and split count per GPU; the simulator's policies see one
/// dimension, and memory is the one a vGPU request always carries.
pub fn live_free_milli(node: &GpuNode) -> Vec<i64> {
    node.devices
        .iter()
        .zip(&node.usage)
        .map(
            |(d, u)| {
                if d.devmem > 0 {
                    ((i64::from(d.devmem) - u.usedmem).max(0) * MILLI) / i64::from(d.devmem)
                } else {
                    0
                }
            },
        )
        .collect()
}

/// Live cluster: a pod's (GPU count, per-GPU milli) on `node`: the GPUs of its app containers and
/// the first one's memory request as a share of the node's first GPU (percentages map directly).
pub fn live_pod_gpus(request: &PodRequest, node: &GpuNode) -> (u32, i64) {
    live_pod_gpus_of(request, node.devices.first().map_or(0, |d| i64::from(d.devmem)))
}

/// [`live_pod_gpus`] on GPUs of `devmem` MiB (0: a whole GPU each).
pub fn live_pod_gpus_of(request: &PodRequest, devmem: i64) -> (u32, i64) {
    let app = &request.slots[request.init_count.min(request.slots.len())..];
    let nums: i64 = app.iter().flatten().map(|r| r.nums).sum();
    let Some(first) = app.iter().flatten().next() else { return (0, 0) };
    let milli = if devmem > 0 { first.resolved_memory(devmem) * MILLI / devmem } else { MILLI };
    (nums.clamp(0, i64::from(u32::MAX)) as u32, milli.clamp(1, MILLI))
}

/// Live cluster: the CPU the node policies read for a pod, kube-scheduler's non-zero rule for
/// scoring (a pod that requests no CPU counts 100 millicores), as the simulator reads a trace.
pub fn live_pod_cpu(cpu_request: i64) -> i64 {
    if cpu_request == 0 {
        100
    } else {
        cpu_request
    }
}

/// Live cluster: the GPU model the node policies compare a pod's named models with: the device
/// type of the node's first GPU without `NVIDIA-`, upper case (empty without GPUs).
pub fn live_model(node: &GpuNode) -> String {
    let t = node.devices.first().map_or("", |d| d.device_type.as_str());
    t.strip_prefix("NVIDIA-").unwrap_or(t).to_uppercase()
}

/// Live cluster: the task type of a pod seen (placed or not), for the policies that learn their
/// target workload from the pods seen: its CPU ([`live_pod_cpu`]), its GPUs on GPUs of `devmem`
/// MiB, and the models it names (`|`-joined, upper case).
pub fn live_arrival_type(request: &PodRequest, cpu_request: i64, models: &[String], devmem: i64) -> TaskType {
    let (num_gpu, gpu_milli) = live_pod_gpus_of(request, devmem);
    let gpu = num_gpu > 0 && gpu_milli > 0;
    TaskType {
        cpu_milli: live_pod_cpu(cpu_request),
        gpu_milli: if gpu { gpu_milli } else { 0 },
        num_gpu: if gpu { num_gpu } else { 0 },
        gpu_spec: if gpu { models.join("|") } else { String::new() },
    }
}

/// Live cluster: the task type a placed pod's footprint stands for (CPU not tracked; the per-GPU
/// share rounded to 1/20 GPU so that similar requests form one type).
pub fn live_task_type(node: &GpuNode, footprint: &[Collapsed]) -> Option<TaskType> {
    let first = footprint.first()?;
    let devmem = node.device_index(&first.uuid).map(|i| i64::from(node.devices[i].devmem)).filter(|&m| m > 0)?;
    let milli = ((first.mem * MILLI / devmem + 25) / 50 * 50).clamp(50, MILLI);
    Some(TaskType {
        cpu_milli: 0,
        gpu_milli: if footprint.len() > 1 { MILLI } else { milli },
        num_gpu: footprint.len() as u32,
        gpu_spec: String::new(),
    })
}

/// Live cluster: GpuClustering's tag of a placed pod, as the simulator tags a task: sharing when
/// it holds part of one GPU's memory, else the number of GPUs it holds.
pub fn live_tag(node: &GpuNode, footprint: &[Collapsed]) -> GpuTag {
    match footprint {
        [] => GpuTag::NoGpu,
        [one] => match node.device_index(&one.uuid).map(|i| i64::from(node.devices[i].devmem)) {
            Some(devmem) if one.mem < devmem => GpuTag::Share,
            _ => GpuTag::Whole(1),
        },
        many => GpuTag::Whole(many.len() as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view<'a>(cpu_left: i64, free: &'a [i64], tags: &'a [(GpuTag, u32)]) -> NodeView<'a> {
        NodeView { shape: NodeShape { cpu_left, gpu_free: free, model: "G2" }, tags }
    }

    fn pod(cpu: i64, milli: i64, n: u32) -> PodShape<'static> {
        PodShape { cpu_milli: cpu, gpu_milli: milli, num_gpu: n, gpu_spec: "" }
    }

    #[test]
    fn packing_cases() {
        // Case 1: only partially used GPUs needed.
        assert_eq!(packing(&view(1000, &[1000, 200, 1000, 500], &[]), &pod(1, 100, 1)), 98);
        // Case 2: a used node where a free GPU is needed.
        assert_eq!(packing(&view(1000, &[1000, 200, 1000, 500], &[]), &pod(1, 1000, 2)), 48);
        // Case 3: the node is entirely free.
        assert_eq!(packing(&view(1000, &[1000; 4], &[]), &pod(1, 1000, 1)), 29);
        assert_eq!(packing(&view(1000, &[1000; 8], &[]), &pod(1, 500, 1)), 25);
        assert_eq!(packing(&view(1000, &[1000; 4], &[]), &pod(1, 0, 0)), 0);
        assert_eq!(packing(&view(1000, &[1000, 30], &[]), &pod(1, 10, 1)), 100);
        assert_eq!(packing(&view(1000, &[1000, 930, 0], &[]), &pod(1, 10, 1)), 91);
    }

    #[test]
    fn clustering_bands() {
        let free = [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000];
        assert_eq!(clustering(&view(1, &free, &[]), &pod(1, 500, 1)), 25);
        let free = [0, 0, 0, 0, 1000, 1000, 1000, 1000];
        assert_eq!(clustering(&view(1, &free, &[(GpuTag::Share, 2)]), &pod(1, 500, 1)), 12 + 75);
        assert_eq!(clustering(&view(1, &free, &[(GpuTag::Share, 2), (GpuTag::Whole(1), 1)]), &pod(1, 500, 1)), 12 + 50);
        assert_eq!(clustering(&view(1, &free, &[(GpuTag::Whole(1), 1)]), &pod(1, 500, 1)), 12);
        assert_eq!(clustering(&view(1, &free, &[]), &pod(1, 0, 0)), 0);
    }

    #[test]
    fn best_fit_and_dot_product() {
        // s = ½·(64000−8000)/128000 + ½·(8000−1000)/8000 = 0.21875 + 0.4375 → 34.375 → 34
        assert_eq!(best_fit(&view(64000, &[1000; 8], &[]), &pod(8000, 1000, 1)), 34);
        // dot = (0.5·0.0625 + 1·0.125)/2 = 0.078125 → 92.1875 → 92
        assert_eq!(dot_product(&view(64000, &[1000; 8], &[]), &pod(8000, 1000, 1)), 92);
        assert_eq!(dot_product(&view(4000, &[1000; 8], &[]), &pod(8000, 1000, 1)), 0);
        let mut s = vec![30, 40, 50];
        normalize(&mut s);
        assert_eq!(s, vec![0, 50, 100]);
        let mut s = vec![7, 7];
        normalize(&mut s);
        assert_eq!(s, vec![0, 0]);
    }

    #[test]
    fn subtract_takes_tightest_gpus_first() {
        let shape = NodeShape { cpu_left: 10, gpu_free: &[1000, 300, 500, 300], model: "" };
        assert_eq!(subtract(&shape, &pod(4, 300, 1)), Some((6, vec![1000, 0, 500, 300])));
        assert_eq!(subtract(&shape, &pod(4, 1000, 2)), None);
        assert_eq!(subtract(&shape, &pod(11, 0, 0)), None);
        assert_eq!(gpu_preference_best_fit(&[1000, 300, 500, 300], &pod(1, 200, 1)), vec![1, 3, 2, 0]);
        assert_eq!(gpu_preference_first(2, &[1000, 300, 500, 300], &pod(1, 200, 1)), vec![2, 1, 3, 0]);
    }

    #[test]
    fn fgd_prefers_the_gpu_that_fragments_least() {
        // Half-GPU and whole-GPU tasks, equally popular. Before: F = ½·(500+700) = 600.
        let ty = |m| (TaskType { cpu_milli: 1, gpu_milli: m, num_gpu: 1, gpu_spec: String::new() }, 0.5);
        let w = Workload { types: vec![ty(500), ty(1000)] };
        let mut memo = FragMemo::default();
        let free = [1000, 500, 1000, 700];
        // 500 on GPU 1 closes it: F = 350, Δ = −250 → int(100·σ(0.25)) = 56 (GPU 3 → 53, GPU 0/2 → 43).
        assert_eq!(fgd(&view(100, &free, &[]), &pod(1, 500, 1), &w, &mut memo), (56, Some(1)));
        // 200 on GPU 3 leaves 500, still usable by half-GPU tasks: F = 500, Δ = −100 → 52.
        assert_eq!(fgd(&view(100, &free, &[]), &pod(1, 200, 1), &w, &mut memo), (52, Some(3)));
        // Whole GPU: subtract takes GPU 0; F stays ½·(500+700) = 600, Δ = 0 → 50.
        assert_eq!(fgd(&view(100, &free, &[]), &pod(1, 1000, 1), &w, &mut memo), (50, None));
    }
}
