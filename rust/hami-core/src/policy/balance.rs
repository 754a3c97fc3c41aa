//! `fgd-balance`: fragmentation gradient descent that also keeps each node's CPU in step with
//! its free GPUs.
//!
//! On the openb clusters most idle GPU capacity that FGD leaves behind is not only in GPU
//! fragments: a large part sits on nodes whose CPU is used up, where no GPU pod can start. FGD
//! sees CPU only as a yes/no per task type and breaks its many score ties by node name (a random
//! order), so CPU-only and CPU-heavy pods land on GPU-dense nodes as often as on CPU-rich ones.
//! This policy:
//!
//! 0. **Keeps each GPU model's reserve.** Pods that name their GPU models (`gpu_spec`,
//!    `nvidia.com/use-gputype`) can only use those; a pod that names none takes a model's GPUs
//!    only while the model keeps what the naming pods are expected to need: their share of the
//!    GPU demand seen so far ([`History::named_share`]) times the cluster's free GPU capacity.
//!    Placements that keep the reserve come first, whatever their score. Without such pods
//!    every placement keeps it and the policy is unchanged.
//! 1. **Scores FGD's fragment increase Δ** against a target workload **learned online** from the
//!    pods seen so far ([`History`]: every GPU task type with its count share), at half FGD's
//!    resolution: `int(50·sigmoid(−Δ/1000))`. Placements whose Δ differ by less than about 0.08
//!    GPU count as equally good, which leaves room for step 2.
//! 2. **Breaks ties by CPU balance.** A node's CPU surplus is its CPU left minus what its free
//!    GPUs will need, at the CPU per GPU the GPU pods seen so far asked for (`c̄`). A single-GPU
//!    pod that asks for more CPU per GPU than `c̄` (CPU-heavy) goes where the surplus after
//!    placement is largest; a lighter one where it is smallest, using up the GPUs of CPU-poor
//!    nodes. Multi-GPU pods keep FGD's order (they need whole nodes more than CPU).
//! 3. **CPU-only pods** go to the node with the largest CPU surplus: they never use a GPU, so the
//!    only harm they can do is to take the CPU that a node's free GPUs need.
//! 4. Remaining ties go to the smallest node name, as for every policy.
//!
//! Inside the node a sharing pod takes the GPU with the best score, ties to the tightest fit. Only the
//! cluster state and the pods seen so far are used, never future arrivals.

use super::node::{subtract, NodeView, PodShape};
use crate::frag::{FragMemo, NodeShape, TaskType, Workload, MILLI};
use std::cmp::Ordering;
use std::collections::HashMap;

/// Score steps over the sigmoid's range (FGD uses 100).
pub const SCORE_STEPS: f64 = 50.0;

/// The pods seen so far: task type counts and the CPU that GPU pods request per GPU.
#[derive(Debug, Default, Clone)]
pub struct History {
    counts: HashMap<TaskType, u64>,
    seen: u64,
    gpu_pod_cpu: f64,
    gpu_pod_milli: f64,
    /// GPU milli of the pods seen that name their models, split evenly over the models named.
    named_milli: HashMap<String, f64>,
}

impl History {
    pub fn observe(&mut self, t: TaskType) {
        self.seen += 1;
        if t.gpu_milli > 0 && t.num_gpu > 0 {
            let milli = t.gpu_milli as f64 * f64::from(t.num_gpu);
            self.gpu_pod_cpu += t.cpu_milli as f64;
            self.gpu_pod_milli += milli;
            let models: Vec<&str> = t.gpu_spec.split('|').filter(|m| !m.is_empty()).collect();
            for m in &models {
                *self.named_milli.entry((*m).to_owned()).or_default() += milli / models.len() as f64;
            }
        }
        *self.counts.entry(t).or_default() += 1;
    }

    /// The share of the GPU demand seen that can only run on `model` or a few models including
    /// it (its even part of each list naming it); 0 when no pod names models.
    pub fn named_share(&self, model: &str) -> f64 {
        match self.named_milli.get(model) {
            Some(m) if self.gpu_pod_milli > 0.0 => m / self.gpu_pod_milli,
            _ => 0.0,
        }
    }

    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Whether any GPU pod seen names the models it accepts.
    pub fn names_models(&self) -> bool {
        !self.named_milli.is_empty()
    }

    /// `c̄`: CPU milli that GPU pods ask for per whole GPU (0 before any GPU pod).
    pub fn cpu_per_gpu(&self) -> f64 {
        if self.gpu_pod_milli > 0.0 {
            self.gpu_pod_cpu / self.gpu_pod_milli * MILLI as f64
        } else {
            0.0
        }
    }

    /// When to rebuild the workload (it settles after a few hundred pods): at 1, 2, 4, …, 512
    /// pods seen, then every 512.
    pub fn refresh_due(&self) -> bool {
        self.seen > 0 && last_refresh(self.seen) == self.seen
    }

    /// Every GPU task type seen, with its share of the GPU pods seen; most common first, ties
    /// by the type tuple (descending), so the float sums are the same on every run.
    pub fn workload(&self) -> Workload {
        let mut list: Vec<(TaskType, f64)> = self
            .counts
            .iter()
            .filter(|(t, _)| t.gpu_milli > 0 && t.num_gpu > 0)
            .map(|(t, &n)| (t.clone(), n as f64))
            .collect();
        let total: f64 = list.iter().map(|e| e.1).sum();
        if total == 0.0 {
            return Workload::default();
        }
        list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        for e in &mut list {
            e.1 /= total;
        }
        Workload { types: list }
    }
}

/// The last rebuild of the workload at `seen` pods seen ([`History::refresh_due`]); 0 before any.
pub fn last_refresh(seen: u64) -> u64 {
    match seen {
        0 => 0,
        s if s < 512 => 1 << (63 - s.leading_zeros()),
        s => s - s % 512,
    }
}

/// How good a placement is; higher is better on both, compared in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// `int(50·sigmoid(−Δ/1000))`.
    pub score: i64,
    /// False when the pod names no model yet would take GPU capacity of a model that the pods
    /// naming it are expected to need ([`keeps_reserve`]); true otherwise. Compared first.
    pub keeps_reserve: bool,
    /// The CPU-balance tie-break (see the module docs); 0 when it does not apply.
    pub balance: f64,
}

impl Cost {
    /// `Greater` if `self` is the better placement.
    pub fn compare(&self, other: &Self) -> Ordering {
        self.keeps_reserve
            .cmp(&other.keeps_reserve)
            .then_with(|| self.score.cmp(&other.score))
            .then_with(|| self.balance.total_cmp(&other.balance))
    }

    /// One number for the extender's scores: the step score plus the balance squashed into
    /// (0, 1), so the order is the same as [`Cost::compare`].
    pub fn live_score(&self) -> f64 {
        self.score as f64 + 1.0 / (1.0 + (-self.balance / 10_000.0).exp())
    }
}

fn step_score(delta: f64) -> i64 {
    (SCORE_STEPS / (1.0 + (delta / 1000.0).exp())) as i64
}

/// Whether a pod may take GPU capacity on a node of `model` without eating into what the pods
/// naming that model will need. Those pods are expected to keep asking for their share of the
/// demand (`named_share`, learned from the pods seen) until the cluster is full, so the model's
/// remaining need is that share of the cluster's free GPU milli. A pod that names the model is
/// part of that need and always may; so may every pod while nobody names models.
pub fn keeps_reserve(pod: &PodShape, named_share: f64, model_free: f64, cluster_free: f64) -> bool {
    if !pod.requests_gpu() || !pod.gpu_spec.is_empty() {
        return true;
    }
    model_free - pod.total_milli() as f64 >= named_share * cluster_free
}

/// CPU left after placement minus what the node's then-free GPUs need at `cpu_per_gpu`.
fn cpu_surplus(shape: &NodeShape, pod: &PodShape, cpu_per_gpu: f64) -> f64 {
    let free_after: i64 = shape.gpu_free.iter().sum::<i64>() - pod.total_milli();
    (shape.cpu_left - pod.cpu_milli) as f64 - cpu_per_gpu * free_after as f64 / MILLI as f64
}

/// The tie-break value of placing `pod` on a node with `surplus` after placement.
fn balance(pod: &PodShape, surplus: f64, cpu_per_gpu: f64) -> f64 {
    if !pod.requests_gpu() {
        return surplus;
    }
    if pod.num_gpu > 1 {
        return 0.0;
    }
    let heavy = pod.cpu_milli as f64 >= cpu_per_gpu * pod.total_milli() as f64 / MILLI as f64;
    if heavy {
        surplus
    } else {
        -surplus
    }
}

/// The cost of placing `pod` on `node` and, for a sharing pod, the GPU to use; `None` if it does
/// not fit. `before` is the node's fragment under `workload`.
pub fn cost(
    node: &NodeView,
    pod: &PodShape,
    workload: &Workload,
    memo: &mut FragMemo,
    before: f64,
    cpu_per_gpu: f64,
) -> Option<(Cost, Option<usize>)> {
    let shape = &node.shape;
    if shape.cpu_left < pod.cpu_milli {
        return None;
    }
    let balance = balance(pod, cpu_surplus(shape, pod, cpu_per_gpu), cpu_per_gpu);
    if !pod.requests_gpu() {
        return Some((Cost { score: 0, keeps_reserve: true, balance }, None));
    }
    let cpu_left = shape.cpu_left - pod.cpu_milli;
    if pod.is_share() {
        let mut free = shape.gpu_free.to_vec();
        // (score, free milli of the GPU, index): the best score, ties to the tightest GPU.
        let mut best: Option<(i64, i64, usize)> = None;
        for i in 0..free.len() {
            // GPUs with equal free milli leave the same node: the first one stands for all.
            let own = free[i];
            if own < pod.gpu_milli || free[..i].contains(&own) {
                continue;
            }
            free[i] -= pod.gpu_milli;
            let after = memo.frag(&NodeShape { cpu_left, gpu_free: &free, model: shape.model }, workload);
            free[i] = own;
            let s = step_score(after - before);
            if best.is_none_or(|(b, b_own, _)| s > b || (s == b && own < b_own)) {
                best = Some((s, own, i));
            }
        }
        return best.map(|(score, _, i)| (Cost { score, keeps_reserve: true, balance }, Some(i)));
    }
    let (cpu_left, free) = subtract(shape, pod)?;
    let after = memo.frag(&NodeShape { cpu_left, gpu_free: &free, model: shape.model }, workload);
    Some((Cost { score: step_score(after - before), keeps_reserve: true, balance }, None))
}

/// The workload to score against: the learned one, or the pod alone before any GPU pod is seen.
pub fn workload_or_pod(learned: &Workload, pod: &PodShape) -> Workload {
    if learned.types.is_empty() && pod.requests_gpu() {
        Workload { types: vec![(pod.task_type(), 1.0)] }
    } else {
        learned.clone()
    }
}

/// The task type a pod stands for in the history.
pub fn task_type(pod: &PodShape) -> TaskType {
    let (gpu_milli, num_gpu) = if pod.requests_gpu() { (pod.gpu_milli.min(MILLI), pod.num_gpu) } else { (0, 0) };
    TaskType { cpu_milli: pod.cpu_milli, gpu_milli, num_gpu, gpu_spec: pod.gpu_spec.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frag::node_frag;

    fn ty(cpu: i64, milli: i64, n: u32) -> TaskType {
        TaskType { cpu_milli: cpu, gpu_milli: milli, num_gpu: n, gpu_spec: String::new() }
    }

    fn pod(cpu: i64, milli: i64, n: u32) -> PodShape<'static> {
        PodShape { cpu_milli: cpu, gpu_milli: milli, num_gpu: n, gpu_spec: "" }
    }

    fn place(
        cpu_left: i64,
        free: &[i64],
        p: &PodShape,
        w: &Workload,
        cpu_per_gpu: f64,
    ) -> Option<(Cost, Option<usize>)> {
        let shape = NodeShape { cpu_left, gpu_free: free, model: "G2" };
        let before = node_frag(&shape, w);
        cost(&NodeView { shape, tags: &[] }, p, w, &mut FragMemo::default(), before, cpu_per_gpu)
    }

    #[test]
    fn history_learns_count_shares_of_gpu_types_and_cpu_per_gpu() {
        let mut h = History::default();
        for _ in 0..3 {
            h.observe(ty(4000, 500, 1));
        }
        h.observe(ty(32000, 1000, 4));
        h.observe(ty(8000, 0, 0));
        let w = h.workload();
        assert_eq!(w.types.len(), 2, "CPU-only types are not part of the GPU workload");
        assert_eq!(w.types[0], (ty(4000, 500, 1), 0.75));
        assert_eq!(w.types[1], (ty(32000, 1000, 4), 0.25));
        // (3·4000 + 32000) CPU over (3·500 + 4000) GPU milli = 8000 per GPU.
        assert!((h.cpu_per_gpu() - 8000.0).abs() < 1e-9);
    }

    #[test]
    fn refresh_schedule() {
        let mut h = History::default();
        let due: Vec<u64> = (1..=1100)
            .filter(|_| {
                h.observe(ty(1, 1000, 1));
                h.refresh_due()
            })
            .collect();
        assert_eq!(due, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
        assert_eq!([0, 1, 3, 511, 512, 1023, 1536].map(last_refresh), [0, 1, 2, 256, 512, 512, 1536]);
    }

    #[test]
    fn coarser_score_than_fgd() {
        // Δ = −60 milli: FGD scores 51 against 50 for Δ = 0; half the steps tie them at 25.
        assert_eq!(step_score(0.0), 25);
        assert_eq!(step_score(-60.0), 25);
        assert_eq!(step_score(-100.0), 26);
    }

    #[test]
    fn cpu_only_pod_goes_where_cpu_is_spare() {
        // The workload needs 12 cores per whole GPU. Node A: 8 free GPUs, 100 cores (4 spare);
        // node B: 2 free GPUs, 100 cores (76 spare). FGD sees no fragment change on either
        // (Δ = 0, a tie it breaks by name); this policy takes B.
        let w = Workload { types: vec![(ty(12000, 1000, 1), 1.0)] };
        let p = pod(16000, 0, 0);
        let a = place(100_000, &[1000; 8], &p, &w, 12000.0).unwrap().0;
        let b = place(100_000, &[1000, 1000], &p, &w, 12000.0).unwrap().0;
        assert_eq!(b.compare(&a), Ordering::Greater);
        assert!((a.balance - (84_000.0 - 96_000.0)).abs() < 1e-9);
        assert!(b.live_score() > a.live_score());
    }

    #[test]
    fn heavy_and_light_pods_lean_opposite_ways() {
        let w = Workload { types: vec![(ty(1000, 1000, 1), 1.0)] };
        // Both nodes have 4 free GPUs and equal Δ for a whole-GPU pod; A has 20 cores, B 80.
        let (a, b) = (
            |p: &PodShape| place(20_000, &[1000; 4], p, &w, 4000.0).unwrap().0,
            |p: &PodShape| place(80_000, &[1000; 4], p, &w, 4000.0).unwrap().0,
        );
        let heavy = pod(16000, 1000, 1);
        let light = pod(2000, 1000, 1);
        assert_eq!(a(&heavy).score, b(&heavy).score);
        assert_eq!(b(&heavy).compare(&a(&heavy)), Ordering::Greater, "CPU-heavy: the CPU-rich node");
        assert_eq!(a(&light).compare(&b(&light)), Ordering::Greater, "CPU-light: the CPU-poor node");
        // Multi-GPU pods keep FGD's order: no balance term.
        assert_eq!(place(80_000, &[1000; 4], &pod(16000, 1000, 2), &w, 4000.0).unwrap().0.balance, 0.0);
    }

    #[test]
    fn fgd_score_still_comes_first() {
        // A whole-GPU pod: breaking an empty 8-GPU node costs an 8-GPU type its home (Δ = +3500
        // at share ½), however much spare CPU that node has.
        let w = Workload { types: vec![(ty(1000, 1000, 1), 0.5), (ty(1000, 1000, 8), 0.5)] };
        let p = pod(20000, 1000, 1);
        let empty = place(200_000, &[1000; 8], &p, &w, 1000.0).unwrap().0;
        let used = place(30_000, &[0, 0, 0, 0, 1000, 1000, 1000, 1000], &p, &w, 1000.0).unwrap().0;
        assert!(empty.balance > used.balance);
        assert_eq!(used.compare(&empty), Ordering::Greater);
    }

    #[test]
    fn sharing_pod_takes_the_best_gpu_tightest_on_ties_and_misfits_are_none() {
        let w = Workload { types: vec![(ty(1, 500, 1), 0.5), (ty(1, 1000, 1), 0.5)] };
        // 500 on GPU 1 (500 free) closes that GPU: Δ = −250 → 26, the best.
        assert_eq!(place(100, &[1000, 500, 1000, 700], &pod(1, 500, 1), &w, 0.0).unwrap().1, Some(1));
        // 100 on the 800 GPU or the 700 GPU: Δ = −50 on both (score 25); FGD takes the first index
        // (GPU 1), this policy the tighter GPU 2.
        assert_eq!(place(100, &[1000, 800, 700], &pod(1, 100, 1), &w, 0.0).unwrap().1, Some(2));
        assert!(place(100, &[500, 1000], &pod(1, 1000, 2), &w, 0.0).is_none());
        assert!(place(0, &[1000], &pod(1, 0, 0), &w, 0.0).is_none(), "no CPU left");
    }

    fn named(spec: &'static str, milli: i64, n: u32) -> TaskType {
        TaskType { cpu_milli: 1000, gpu_milli: milli, num_gpu: n, gpu_spec: spec.into() }
    }

    #[test]
    fn history_splits_named_demand_over_the_models_named() {
        let mut h = History::default();
        h.observe(named("T4", 1000, 1));
        h.observe(named("V100M16|V100M32", 1000, 2));
        h.observe(named("", 1000, 1));
        h.observe(named("", 0, 0));
        // 4000 GPU milli seen: T4 1000, each V100 1000 (half of the 2-GPU pod's 2000).
        assert!((h.named_share("T4") - 0.25).abs() < 1e-12);
        assert!((h.named_share("V100M32") - 0.25).abs() < 1e-12);
        assert_eq!(h.named_share("G2"), 0.0);
    }

    #[test]
    fn reserve_is_kept_for_the_pods_that_name_the_model() {
        let free_pod = pod(4000, 1000, 1);
        // T4 is named by 20 % of the demand; the cluster has 1,000 GPUs free, so T4 must keep 200.
        assert!(keeps_reserve(&free_pod, 0.2, 201_000.0, 1_000_000.0));
        assert!(!keeps_reserve(&free_pod, 0.2, 200_500.0, 1_000_000.0));
        let t4_pod = PodShape { gpu_spec: "T4", ..free_pod };
        assert!(keeps_reserve(&t4_pod, 0.2, 1000.0, 1_000_000.0), "the naming pods use their reserve");
        assert!(keeps_reserve(&pod(4000, 0, 0), 0.9, 0.0, 1_000_000.0), "CPU-only pods take no GPU");
        assert!(keeps_reserve(&free_pod, 0.0, 1000.0, 1_000_000.0), "nobody names the model");
    }

    #[test]
    fn keeping_the_reserve_outranks_the_score() {
        let eats = Cost { score: 40, keeps_reserve: false, balance: 1e6 };
        let keeps = Cost { score: 10, keeps_reserve: true, balance: -1e6 };
        assert_eq!(keeps.compare(&eats), Ordering::Greater);
        let better = Cost { score: 11, ..keeps };
        assert_eq!(better.compare(&keeps), Ordering::Greater);
    }
}
