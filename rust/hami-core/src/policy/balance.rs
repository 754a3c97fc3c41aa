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
//!    pods seen so far ([`History`]: every GPU task type that names no model, with its count
//!    share), at half FGD's resolution: `int(50·sigmoid(−Δ/1000))`. Placements whose Δ differ by
//!    less than about 0.08 GPU count as equally good, which leaves room for steps 2 and 3. Types
//!    that name models are left out: FGD counts every idle GPU of a model a type cannot use as that
//!    type's fragment, in proportion to the type's popularity and whatever the model's size, so
//!    they would push the other pods onto the model named least (e.g. the few 128-core G3 nodes,
//!    the only home of the 120-core 8-GPU pods). The capacity those pods need is step 0's job.
//! 2. **Sharing pods: no dead room, then the tightest GPU, among equal scores.** What idles
//!    once the cluster is full is the room GPU slices leave beside each other. Among placements
//!    of equal score a sharing pod first avoids leaving a dead room on a GPU already in use: one
//!    of 100 milli or more that less than 5 % of the sharing pods seen fit (on openb the 210
//!    milli of 470 + 320, or 130 from 650 + 220: only the rare small slices fit those, and they
//!    also fit the 190 beside every 810; [`History::dead_rooms`]). Then it takes the GPU that
//!    keeps the least free (best fit), before the CPU balance. Only among equal scores: put
//!    above the score, the rule sends slices to free GPUs whenever a pairing would leave a dead
//!    room, and where such pairings are the common ones (most slices 450 milli: two leave 100)
//!    that takes the free GPUs whole-GPU pods need (twice FGD's unallocated share).
//! 3. **Breaks ties by CPU balance.** A node's CPU surplus is its CPU left minus what its free
//!    GPUs will need, at the CPU per GPU the GPU pods seen so far asked for (`c̄`). A GPU pod that
//!    asks for less CPU per GPU than `c̄` (CPU-light) goes where the surplus after placement is
//!    smallest, using up the GPUs of CPU-poor nodes. A CPU-heavy one goes where the surplus it
//!    leaves is smallest but not negative (best fit: its GPUs' CPU stays covered, and the
//!    CPU-richest nodes stay whole for the pods only they can host); where every tied node would
//!    go negative, to the largest surplus.
//! 4. **CPU-only pods** never use a GPU, so the only harm they can do is to take the CPU that a
//!    node's free GPUs need. They go where they make the least GPU capacity unusable: FGD's
//!    fragment increase Δ of taking their CPU alone, at a quarter of FGD's resolution (steps of
//!    about 0.16 GPU near Δ = 0). Among equal steps, the node whose CPU surplus they leave smallest
//!    but not negative, counting twice `c̄` for each free GPU (best fit: what the free GPUs will not
//!    need is packed, and a margin stays for CPU-heavy GPU pods); where every tied node would go
//!    negative, the largest surplus. Spreading them instead (the largest surplus) leaves CPU in
//!    pieces too small for them, and they end up on GPU-dense nodes where CPU is scarce
//!    (`cpu200`–`cpu300`: up to 0.4 pp worse than FGD; docs/policies.md).
//! 5. Remaining ties go to the smallest node name, as for every policy.
//!
//! Inside the node a sharing pod takes a GPU whose room stays usable if it has one (whatever
//! the score: the node then scores as that GPU does), then the best score, ties to the tightest
//! fit. Only the cluster state and the pods seen so far are used, never future arrivals.

use super::node::{subtract, NodeView, PodShape};
use crate::frag::{FragMemo, NodeShape, TaskType, Workload, MILLI};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// Score steps over the sigmoid's range (FGD uses 100).
pub const SCORE_STEPS: f64 = 50.0;

/// Score steps for a CPU-only pod's fragment increase: only a clear harm separates nodes.
pub const CPU_ONLY_SCORE_STEPS: f64 = 25.0;

/// The CPU a CPU-only pod leaves to each free GPU, in units of `c̄`.
pub const CPU_ONLY_GPU_MARGIN: f64 = 2.0;

/// A GPU slice's room below this is closed: too little to wait for a slice that fits it.
pub const CLOSED_ROOM: i64 = 100;

/// The part of the sharing pods seen that a room must be able to host not to count as dead.
pub const USABLE_ROOM_SHARE: f64 = 0.05;

/// The pods seen so far: task type counts and the CPU that GPU pods request per GPU.
#[derive(Debug, Default, Clone)]
pub struct History {
    counts: HashMap<TaskType, u64>,
    seen: u64,
    /// Sharing pods seen per GPU milli they ask for.
    slices: BTreeMap<i64, u64>,
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
        if t.num_gpu == 1 && t.gpu_milli > 0 && t.gpu_milli < MILLI {
            *self.slices.entry(t.gpu_milli).or_default() += 1;
        }
        *self.counts.entry(t).or_default() += 1;
    }

    /// The GPU rooms that are dead: too large to count as closed, yet too small for all but a
    /// few of the sharing pods seen (those asking for at most the room make up less than
    /// [`USABLE_ROOM_SHARE`] of them).
    pub fn dead_rooms(&self) -> DeadRooms {
        let needed = USABLE_ROOM_SHARE * self.slices.values().sum::<u64>() as f64;
        let mut hosted = 0;
        for (&milli, &n) in &self.slices {
            hosted += n;
            if hosted as f64 >= needed {
                return DeadRooms { below: milli };
            }
        }
        DeadRooms::default()
    }

    /// What [`cost`] uses of the pods seen besides the workload.
    pub fn learned(&self) -> Learned {
        Learned { cpu_per_gpu: self.cpu_per_gpu(), dead_rooms: self.dead_rooms() }
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

    /// Every GPU task type seen that names no GPU model, with its share of those pods; most common
    /// first, ties by the type tuple (descending), so the float sums are the same on every run.
    /// Types that name models are left out (see the module docs, step 1); their capacity is kept
    /// by the model reserve ([`keeps_reserve`]).
    pub fn workload(&self) -> Workload {
        let mut list: Vec<(TaskType, f64)> = self
            .counts
            .iter()
            .filter(|(t, _)| t.gpu_milli > 0 && t.num_gpu > 0 && t.gpu_spec.is_empty())
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

/// GPU rooms of at least [`CLOSED_ROOM`] and below `below` milli (none while `below` is at most
/// [`CLOSED_ROOM`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DeadRooms {
    pub below: i64,
}

impl DeadRooms {
    /// Whether a slice of `milli` on a GPU with `free` milli leaves a dead room. A free GPU never
    /// does: a slice that opens one leaves what it must.
    pub fn left_by(&self, free: i64, milli: i64) -> bool {
        let left = free - milli;
        free < MILLI && (CLOSED_ROOM..self.below).contains(&left)
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
    /// False when a sharing pod would leave a dead room on a GPU already in use
    /// ([`DeadRooms`]); true otherwise. Compared after the score.
    pub keeps_room_usable: bool,
    /// For a sharing pod, minus the free milli its GPU keeps after placement (the tightest GPU is
    /// the highest); 0 for other pods. Compared after the score.
    pub gpu_fit: i64,
    /// The CPU-balance tie-break (see the module docs): a CPU-heavy pod's best fit ranks above
    /// every placement that leaves a negative surplus ([`BEST_FIT`]).
    pub balance: f64,
}

impl Cost {
    /// `Greater` if `self` is the better placement.
    pub fn compare(&self, other: &Self) -> Ordering {
        self.keeps_reserve
            .cmp(&other.keeps_reserve)
            .then_with(|| self.score.cmp(&other.score))
            .then_with(|| self.keeps_room_usable.cmp(&other.keeps_room_usable))
            .then_with(|| self.gpu_fit.cmp(&other.gpu_fit))
            .then_with(|| self.balance.total_cmp(&other.balance))
    }

    /// One number for the extender's scores: the step score plus the room, the GPU fit and the
    /// balance squashed into [0, 1), so the order is the same as [`Cost::compare`].
    pub fn live_score(&self) -> f64 {
        let squashed = if self.balance >= BEST_FIT / 2.0 {
            // A best fit: above every other balance, the smaller surplus the higher.
            0.5 + 0.5 / (1.0 + ((BEST_FIT - self.balance) / 10_000.0).exp())
        } else {
            0.5 / (1.0 + (-self.balance / 10_000.0).exp())
        };
        let fit = (self.gpu_fit + MILLI).max(0) as f64;
        let usable = if self.keeps_room_usable { 1.0 } else { 0.0 };
        self.score as f64 + 0.5 * (usable + (fit + squashed) / (MILLI + 1) as f64)
    }
}

/// Where a CPU-heavy pod's non-negative surpluses rank: `BEST_FIT − surplus`, above every
/// negative surplus (CPU surpluses are far below it: 10⁹ milli-CPU is a million cores).
pub const BEST_FIT: f64 = 1e9;

/// A CPU-heavy pod's balance: the smallest non-negative surplus first, then the largest
/// negative one.
fn best_fit(surplus: f64) -> f64 {
    if surplus >= 0.0 {
        BEST_FIT - surplus
    } else {
        surplus
    }
}

fn step_score(delta: f64) -> i64 {
    steps(delta, SCORE_STEPS)
}

fn steps(delta: f64, count: f64) -> i64 {
    (count / (1.0 + (delta / 1000.0).exp())) as i64
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

/// The tie-break value of placing a GPU `pod` on a node with `surplus` after placement.
fn balance(pod: &PodShape, surplus: f64, cpu_per_gpu: f64) -> f64 {
    let heavy = pod.cpu_milli as f64 >= cpu_per_gpu * pod.total_milli() as f64 / MILLI as f64;
    if heavy {
        best_fit(surplus)
    } else {
        -surplus
    }
}

/// What [`cost`] uses of the pods seen besides the workload.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Learned {
    /// `c̄` ([`History::cpu_per_gpu`]); 0 where the node's CPU is not known.
    pub cpu_per_gpu: f64,
    pub dead_rooms: DeadRooms,
}

/// The cost of placing `pod` on `node` and, for a sharing pod, the GPU to use; `None` if it does
/// not fit. `before` is the node's fragment under `workload`.
pub fn cost(
    node: &NodeView,
    pod: &PodShape,
    workload: &Workload,
    memo: &mut FragMemo,
    before: f64,
    learned: Learned,
) -> Option<(Cost, Option<usize>)> {
    let shape = &node.shape;
    if shape.cpu_left < pod.cpu_milli {
        return None;
    }
    let cpu_per_gpu = learned.cpu_per_gpu;
    let cpu_left = shape.cpu_left - pod.cpu_milli;
    if !pod.requests_gpu() {
        let after = memo.frag(&NodeShape { cpu_left, gpu_free: shape.gpu_free, model: shape.model }, workload);
        let score = steps(after - before, CPU_ONLY_SCORE_STEPS);
        let balance = best_fit(cpu_surplus(shape, pod, CPU_ONLY_GPU_MARGIN * cpu_per_gpu));
        return Some((Cost { score, keeps_reserve: true, keeps_room_usable: true, gpu_fit: 0, balance }, None));
    }
    let balance = balance(pod, cpu_surplus(shape, pod, cpu_per_gpu), cpu_per_gpu);
    if pod.is_share() {
        let mut free = shape.gpu_free.to_vec();
        // (room stays usable, score, free milli of the GPU, index): inside the node a usable room
        // first (its score is then the node's), then the best score, ties to the tightest GPU.
        let mut best: Option<(bool, i64, i64, usize)> = None;
        for i in 0..free.len() {
            // GPUs with equal free milli leave the same node: the first one stands for all.
            let own = free[i];
            if own < pod.gpu_milli || free[..i].contains(&own) {
                continue;
            }
            free[i] -= pod.gpu_milli;
            let after = memo.frag(&NodeShape { cpu_left, gpu_free: &free, model: shape.model }, workload);
            free[i] = own;
            let usable = !learned.dead_rooms.left_by(own, pod.gpu_milli);
            let s = step_score(after - before);
            if best.is_none_or(|(b_usable, b, b_own, _)| (usable, s, -own) > (b_usable, b, -b_own)) {
                best = Some((usable, s, own, i));
            }
        }
        return best.map(|(keeps_room_usable, score, own, i)| {
            let gpu_fit = pod.gpu_milli - own;
            (Cost { score, keeps_reserve: true, keeps_room_usable, gpu_fit, balance }, Some(i))
        });
    }
    let (cpu_left, free) = subtract(shape, pod)?;
    let after = memo.frag(&NodeShape { cpu_left, gpu_free: &free, model: shape.model }, workload);
    let score = step_score(after - before);
    Some((Cost { score, keeps_reserve: true, keeps_room_usable: true, gpu_fit: 0, balance }, None))
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
        place_on("G2", cpu_left, free, p, w, cpu_per_gpu)
    }

    fn place_on(
        model: &str,
        cpu_left: i64,
        free: &[i64],
        p: &PodShape,
        w: &Workload,
        cpu_per_gpu: f64,
    ) -> Option<(Cost, Option<usize>)> {
        let shape = NodeShape { cpu_left, gpu_free: free, model };
        let before = node_frag(&shape, w);
        let learned = Learned { cpu_per_gpu, dead_rooms: DeadRooms::default() };
        cost(&NodeView { shape, tags: &[] }, p, w, &mut FragMemo::default(), before, learned)
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
    fn cpu_only_pod_packs_the_cpu_its_free_gpus_will_not_need() {
        // The workload needs 12 cores per whole GPU (c̄ = 12 cores). A 16-core CPU-only pod makes no
        // GPU unusable on any of these nodes (Δ = 0, a tie), so the surplus decides, at 2·c̄ per
        // free GPU: A (2 free GPUs, 100 cores) keeps 100 − 16 − 48 = 36 cores spare, B (no free
        // GPU, 20 cores) 4, C (8 free GPUs, 100 cores) would leave its GPUs 108 cores short.
        let w = Workload { types: vec![(ty(12000, 1000, 1), 1.0)] };
        let p = pod(16000, 0, 0);
        let a = place(100_000, &[1000, 1000], &p, &w, 12000.0).unwrap().0;
        let b = place(20_000, &[0, 0], &p, &w, 12000.0).unwrap().0;
        let c = place(100_000, &[1000; 8], &p, &w, 12000.0).unwrap().0;
        assert_eq!((a.score, b.score), (c.score, c.score), "no GPU made unusable anywhere");
        assert_eq!(b.compare(&a), Ordering::Greater, "the tightest node that keeps its GPUs' CPU");
        assert_eq!(a.compare(&c), Ordering::Greater, "never short before it must be");
        assert!((a.balance - (BEST_FIT - 36_000.0)).abs() < 1e-9);
        assert!((c.balance - (84_000.0 - 192_000.0)).abs() < 1e-9);
        assert!(b.live_score() > a.live_score() && a.live_score() > c.live_score());
    }

    #[test]
    fn cpu_only_pod_avoids_the_node_where_it_strands_gpus() {
        // The pods seen ask 1 core per GPU on average (c̄), but the common type asks 12. Node A: 2
        // free GPUs and 25 cores: a 16-core pod leaves 9, too few for that type, so both GPUs
        // become fragments (Δ = +2000), though its surplus (9 − 2·2·1 = 5 cores) is the tighter
        // fit. Node B: its GPUs are taken, 40 cores. The fragment step decides for B.
        let w = Workload { types: vec![(ty(12000, 1000, 1), 1.0)] };
        let p = pod(16000, 0, 0);
        let a = place(25_000, &[1000, 1000], &p, &w, 1000.0).unwrap().0;
        let b = place(40_000, &[0, 0], &p, &w, 1000.0).unwrap().0;
        assert!(a.balance > b.balance, "the surplus alone would take A");
        assert!(b.score > a.score);
        assert_eq!(b.compare(&a), Ordering::Greater);
        assert!(b.live_score() > a.live_score());
        // A Δ of 60 milli is no clear harm: the same step as none (FGD's 100 steps tell them apart).
        assert_eq!(steps(60.0, CPU_ONLY_SCORE_STEPS), steps(0.0, CPU_ONLY_SCORE_STEPS));
        assert!(steps(60.0, 100.0) < steps(0.0, 100.0));
        assert!(steps(1000.0, CPU_ONLY_SCORE_STEPS) < steps(0.0, CPU_ONLY_SCORE_STEPS));
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
        assert_eq!(b(&heavy).compare(&a(&heavy)), Ordering::Greater, "CPU-heavy: the node it leaves covered");
        assert_eq!(a(&light).compare(&b(&light)), Ordering::Greater, "CPU-light: the CPU-poor node");
        // Multi-GPU pods lean the same ways.
        let (heavy2, light2) = (pod(16000, 1000, 2), pod(2000, 1000, 2));
        assert_eq!(b(&heavy2).compare(&a(&heavy2)), Ordering::Greater);
        assert_eq!(a(&light2).compare(&b(&light2)), Ordering::Greater);
    }

    #[test]
    fn cpu_heavy_pod_takes_the_smallest_surplus_that_covers_the_free_gpus() {
        // c̄ = 4 cores per GPU; a 1-GPU pod asking for 16 cores. Each node has 4 free GPUs, so
        // after placement its 3 free GPUs need 12 cores: the surplus is CPU left − 16 − 12.
        let w = Workload { types: vec![(ty(1000, 1000, 1), 1.0)] };
        let heavy = pod(16000, 1000, 1);
        let at = |cores: i64| place(cores * 1000, &[1000; 4], &heavy, &w, 4000.0).unwrap().0;
        let (short, tight, roomy, rich) = (at(24), at(30), at(60), at(128));
        assert_eq!(tight.score, rich.score);
        // 2 cores to spare beats 32 and 100: the CPU-rich nodes stay for pods only they can host.
        assert_eq!(tight.compare(&roomy), Ordering::Greater);
        assert_eq!(roomy.compare(&rich), Ordering::Greater);
        // Leaving the free GPUs short of CPU (−4 cores) comes after any node that does not.
        assert_eq!(rich.compare(&short), Ordering::Greater);
        assert_eq!(at(26).compare(&short), Ordering::Greater, "short by less is better");
        // The live score keeps the order.
        assert!(tight.live_score() > roomy.live_score() && roomy.live_score() > rich.live_score());
        assert!(rich.live_score() > short.live_score());
    }

    #[test]
    fn learned_workload_leaves_out_types_that_name_models() {
        let mut h = History::default();
        for _ in 0..3 {
            h.observe(named("G2", 1000, 1));
        }
        h.observe(named("", 1000, 8));
        let w = h.workload();
        assert_eq!(w.types, vec![(named("", 1000, 8), 1.0)]);
        assert!(h.named_share("G2") > 0.0, "the named demand still sizes the reserve");
    }

    #[test]
    fn named_types_do_not_push_pods_onto_the_least_named_model() {
        // 8-GPU pods of 88 cores (G2's 96 or G3's 128 host them) and of 120 cores (only G3), and
        // many 1-GPU pods that name G2. An 88-core 8-GPU pod should take a whole G2 node and keep
        // the G3 node for the 120-core pods.
        let mut h = History::default();
        for _ in 0..6 {
            h.observe(TaskType { cpu_milli: 4000, ..named("G2", 1000, 1) });
        }
        h.observe(TaskType { cpu_milli: 88_000, ..named("", 1000, 8) });
        h.observe(TaskType { cpu_milli: 120_000, ..named("", 1000, 8) });
        let p = pod(88_000, 1000, 8);
        let on =
            |model: &str, cores: i64, w: &Workload| place_on(model, cores * 1000, &[1000; 8], &p, w, 0.0).unwrap().0;
        let w = h.workload();
        assert_eq!(on("G2", 96, &w).compare(&on("G3", 128, &w)), Ordering::Greater);
        // With the named type in the workload, FGD's rule (a model a type cannot use is all
        // fragment for it) would make the G3 node the better one.
        let mut all = w.clone();
        all.types = vec![
            (TaskType { cpu_milli: 4000, ..named("G2", 1000, 1) }, 0.75),
            (TaskType { cpu_milli: 88_000, ..named("", 1000, 8) }, 0.125),
            (TaskType { cpu_milli: 120_000, ..named("", 1000, 8) }, 0.125),
        ];
        assert_eq!(on("G3", 128, &all).compare(&on("G2", 96, &all)), Ordering::Greater);
    }

    #[test]
    fn fgd_score_still_comes_first() {
        // A whole-GPU pod: breaking an empty 8-GPU node costs an 8-GPU type its home (Δ = +3500
        // at share ½), however well the pod's CPU fits there (3 cores to spare against 177).
        let w = Workload { types: vec![(ty(1000, 1000, 1), 0.5), (ty(1000, 1000, 8), 0.5)] };
        let p = pod(20000, 1000, 1);
        let empty = place(30_000, &[1000; 8], &p, &w, 1000.0).unwrap().0;
        let used = place(200_000, &[0, 0, 0, 0, 1000, 1000, 1000, 1000], &p, &w, 1000.0).unwrap().0;
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

    #[test]
    fn sharing_pod_takes_the_tighter_gpu_before_the_cpu_balance() {
        // Only whole-GPU pods in the workload: a slice on the 600 GPU or on the 700 GPU lowers the
        // fragment by the same 500 milli, so both score alike. The CPU balance prefers node B (a
        // CPU-light pod goes where the surplus is smallest); the room left decides first: A keeps
        // 100 milli free on that GPU, B 200.
        let w = Workload { types: vec![(ty(1000, 1000, 1), 1.0)] };
        let p = pod(1000, 500, 1);
        let (a, gpu) = place(90_000, &[1000, 600], &p, &w, 4000.0).unwrap();
        let b = place(10_000, &[1000, 700], &p, &w, 4000.0).unwrap().0;
        assert_eq!((a.score, gpu), (b.score, Some(1)));
        assert!(b.balance > a.balance, "the balance alone would take B");
        assert_eq!((a.gpu_fit, b.gpu_fit), (-100, -200));
        assert_eq!(a.compare(&b), Ordering::Greater);
        assert!(a.live_score() > b.live_score());
        // A better score still comes first.
        let fresh = place(90_000, &[1000, 1000], &p, &w, 4000.0).unwrap().0;
        assert!(fresh.score < b.score && b.compare(&fresh) == Ordering::Greater);
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
        let eats = Cost { score: 40, keeps_reserve: false, keeps_room_usable: true, gpu_fit: 0, balance: 1e6 };
        let keeps = Cost { score: 10, keeps_reserve: true, keeps_room_usable: true, gpu_fit: 0, balance: -1e6 };
        assert_eq!(keeps.compare(&eats), Ordering::Greater);
        let better = Cost { score: 11, ..keeps };
        assert_eq!(better.compare(&keeps), Ordering::Greater);
    }

    #[test]
    fn dead_rooms_are_those_too_few_sharing_pods_fit() {
        let mut h = History::default();
        assert_eq!(h.dead_rooms(), DeadRooms::default(), "no sharing pod seen, no dead room");
        for _ in 0..4 {
            h.observe(ty(2000, 110, 1));
        }
        h.observe(ty(2000, 220, 1));
        for _ in 0..95 {
            h.observe(ty(8000, 470, 1));
        }
        h.observe(ty(12000, 1000, 1));
        h.observe(ty(96000, 1000, 8));
        // 4 % of the sharing pods fit a room of 110..219, 5 % one of 220: rooms of 100..219 are dead.
        let dead = h.dead_rooms();
        assert_eq!(dead, DeadRooms { below: 220 });
        assert!(dead.left_by(530, 320), "470 + 320 leaves 210 that only 110s could use");
        assert!(!dead.left_by(530, 310), "220 is left for a 220");
        assert!(!dead.left_by(530, 470), "60 is closed");
        assert!(!dead.left_by(1000, 810), "a slice that opens a GPU leaves what it must");
        assert_eq!(h.learned(), Learned { cpu_per_gpu: h.cpu_per_gpu(), dead_rooms: dead });
    }

    #[test]
    fn among_equal_scores_a_sharing_pod_leaves_no_dead_room() {
        // Whole-GPU pods only in the workload: a 320 on either GPU frees 320 of fragment (Δ alike).
        // On the 530 it leaves 210, which hardly any slice fits; on the 680 it leaves 360.
        let w = Workload { types: vec![(ty(4000, 1000, 1), 1.0)] };
        let p = pod(4000, 320, 1);
        let shape = NodeShape { cpu_left: 64_000, gpu_free: &[530, 680], model: "G2" };
        let before = node_frag(&shape, &w);
        let view = NodeView { shape, tags: &[] };
        let at = |dead_rooms| {
            let learned = Learned { cpu_per_gpu: 8000.0, dead_rooms };
            cost(&view, &p, &w, &mut FragMemo::default(), before, learned).unwrap()
        };
        let (tight, tight_gpu) = at(DeadRooms::default());
        assert_eq!(tight_gpu, Some(0), "without dead rooms: the tightest GPU");
        let (c, gpu) = at(DeadRooms { below: 220 });
        assert_eq!(gpu, Some(1));
        assert_eq!(c.score, tight.score, "the two GPUs score alike");
        assert!(c.keeps_room_usable);
        // Across nodes: a usable room beats a dead one at the same score, never a better score.
        let dead = Cost { score: 30, keeps_reserve: true, keeps_room_usable: false, gpu_fit: -10, balance: 0.0 };
        let usable = Cost { keeps_room_usable: true, gpu_fit: -680, ..dead };
        assert_eq!(usable.compare(&dead), Ordering::Greater);
        assert!(usable.live_score() > dead.live_score());
        let better_score = Cost { score: 31, ..dead };
        assert_eq!(better_score.compare(&usable), Ordering::Greater);
        assert!(better_score.live_score() > usable.live_score());
    }
}
