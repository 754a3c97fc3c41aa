//! Trace replay: a cluster from a node list, a pod stream from a task list, a node policy;
//! per-event allocation and fragmentation metrics. The protocol is the one of the FGD paper's
//! simulator (see `spec/trace-replay.md`): seeded shuffle, tuning to `tune` × cluster GPU
//! capacity, one scheduling attempt per pod in order, no departures, no retries.
//!
//! Every GPU is registered with HAMi's model (1000 units of device memory = 1000 milli-GPU,
//! cores unused, a split count that never binds, the GPU model as device type); a task requests
//! `num_gpu` devices with `gpu_milli` units each and its `gpu_spec` as allowed types. Placement
//! goes through the engine's [`fit_pod`] (the extender's Fit) and the policies of
//! [`crate::policy`]; node CPU, memory and pod count are checked by [`crate::fit::fit_host`].

pub mod csv;
mod gocooked;
pub mod gorand;
pub mod snapshot;

use crate::codec::Device;
use crate::error::{Error, Result};
use crate::fit::{fit_pod, host_shortfall, PodContext};
use crate::frag::{FragMemo, FxHasher, NodeShape, TaskType, Workload, MILLI};
use crate::model::{collapse, DeviceUsage, GpuNode, HostResources};
use crate::policy::balance::{self as bal, History};
use crate::policy::device::node_score;
use crate::policy::node::{GpuTag, NodeView, PodShape, Scorer};
use crate::policy::score::{self, Candidate, Randomness, Scoring, ShapeKey};
use crate::policy::{GpuPolicy, NodePolicy, PodHints};
use crate::request::{ContainerRequest, PodRequest, PERCENT_UNSET};
use csv::{NodeRow, PodRow};
use gorand::GoRand;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

/// Device memory of a replay GPU: one unit per milli-GPU.
pub const DEVICE_UNITS: i32 = 1000;
/// Split count of a replay GPU: large enough never to bind.
pub const DEVICE_SPLIT: i32 = 1_000_000;
/// See [`Options::hidden_draws`].
pub const HIDDEN_DRAWS: usize = 10;
/// Pods per node, as in the simulator's node objects.
pub const PODS_PER_NODE: i64 = 1001;

/// Replay parameters.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy: NodePolicy,
    pub seed: i64,
    /// Target total GPU request as a multiple of cluster GPU capacity (`<= 0`: no tuning).
    pub tune: f64,
    pub shuffle: bool,
    /// FGD's target workload keeps the most common task types up to this % of tasks.
    pub typical_pct: f64,
    /// Values the published simulator's process draws from Go's global `math/rand` between
    /// tuning and the node permutation, outside its own code: client-go's reflectors draw a
    /// watch-timeout jitter (`rand.Float64`) when the scheduler's informers start. With 10, the
    /// per-seed curves of the published BestFit / GpuPacking runs are reproduced exactly.
    pub hidden_draws: usize,
    /// Confirm every candidate node with the engine's Fit, not only the chosen one (slower;
    /// the capacity index alone decides the candidates otherwise — see [`Replay::candidates`]).
    pub check_all: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            policy: NodePolicy::Scored(Scorer::Fgd),
            seed: 42,
            tune: 1.3,
            shuffle: true,
            typical_pct: 95.0,
            hidden_draws: HIDDEN_DRAWS,
            check_all: false,
        }
    }
}

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

#[derive(Debug, Clone)]
struct Task {
    cpu: i64,
    memory: i64,
    shape_cpu: i64,
    milli: i64,
    num_gpu: u32,
    spec: String,
    request: Option<PodRequest>,
    hints: PodHints,
}

impl Task {
    fn new(row: &PodRow) -> Self {
        // As the trace converter and the simulator read a row: GPU annotations only when
        // num_gpu > 0, per-GPU milli clamped to 1000, a CPU request of 0 counted as 100m.
        let (num_gpu, milli) = if row.num_gpu > 0 { (row.num_gpu, row.gpu_milli.min(MILLI)) } else { (0, 0) };
        let spec = if num_gpu > 0 {
            row.gpu_spec.split('|').filter(|t| !t.is_empty()).collect::<Vec<_>>().join("|")
        } else {
            String::new()
        };
        let request = (num_gpu > 0 && milli > 0).then(|| PodRequest {
            slots: vec![Some(ContainerRequest {
                nums: i64::from(num_gpu),
                memreq: milli,
                mem_percentage: PERCENT_UNSET,
                coresreq: 0,
            })],
            init_count: 0,
        });
        let hints = PodHints {
            use_types: spec.split('|').filter(|t| !t.is_empty()).map(str::to_uppercase).collect(),
            ..PodHints::default()
        };
        Self {
            cpu: row.cpu_milli,
            memory: row.memory_mib,
            shape_cpu: if row.cpu_milli == 0 { 100 } else { row.cpu_milli },
            milli,
            num_gpu,
            spec,
            request,
            hints,
        }
    }

    fn shape(&self) -> PodShape<'_> {
        PodShape { cpu_milli: self.shape_cpu, gpu_milli: self.milli, num_gpu: self.num_gpu, gpu_spec: &self.spec }
    }

    fn total_milli(&self) -> i64 {
        self.milli * i64::from(self.num_gpu)
    }
}

struct SimNode {
    /// `%04d-<name>` with the seed's random prefix: the tie-break order, as in the simulator.
    name: String,
    /// The GPUs' device type, upper case (empty without GPUs), for HAMi's type filters.
    type_upper: String,
    model_id: usize,
    packed: u128,
    gpu: GpuNode,
    model: String,
    free: Vec<i64>,
    tags: Vec<(GpuTag, u32)>,
    frag: f64,
    /// [`Self::shape_key`], kept up to date by every placement.
    key: ShapeKey,
}

impl SimNode {
    fn view(&self) -> NodeView<'_> {
        NodeView { shape: self.shape(), tags: &self.tags }
    }

    fn shape(&self) -> NodeShape<'_> {
        let cpu_left = self.gpu.host.map_or(0, |h| h.cpu_left());
        NodeShape { cpu_left, gpu_free: &self.free, model: &self.model }
    }

    fn refresh_free(&mut self) {
        for (f, (d, u)) in self.free.iter_mut().zip(self.gpu.devices.iter().zip(&self.gpu.usage)) {
            *f = i64::from(d.devmem) - u.usedmem;
        }
        self.packed = pack(&self.free);
    }

    fn candidate<'a>(&'a self, pod: PodShape<'a>, hami: bool) -> Candidate<'a> {
        Candidate {
            name: &self.name,
            view: self.view(),
            pod,
            hami_score: if hami { node_score(&self.gpu.totals) } else { 0.0 },
            frag: Some(self.frag),
            shape_key: Some(&self.key),
        }
    }

    fn shape_key(&self) -> ShapeKey {
        let cpu_left = self.gpu.host.map_or(0, |h| h.cpu_left());
        let exact = (self.free.len() > 8 || self.free.iter().any(|&f| !(0..=0xffff).contains(&f))).then(|| {
            let mut v = self.free.clone();
            v.sort_unstable();
            v
        });
        (self.model_id, cpu_left, self.packed, exact)
    }
}

/// Free milli per GPU, sorted descending, 16 bits each (exact for up to 8 GPUs of ≤ 65535).
fn pack(free: &[i64]) -> u128 {
    let mut sorted: Vec<u16> = free.iter().map(|&f| f.clamp(0, 0xffff) as u16).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.iter().take(8).fold(0u128, |acc, &f| (acc << 16) | u128::from(f))
}

fn build_node(row: &NodeRow, name: String, model_id: usize) -> SimNode {
    let devices = (0..row.gpu)
        .map(|i| Device {
            id: format!("{}-gpu{i}", row.name),
            index: i,
            count: DEVICE_SPLIT,
            devmem: DEVICE_UNITS,
            devcore: 100,
            device_type: format!("NVIDIA-{}", row.model),
            health: true,
            ..Device::default()
        })
        .collect();
    let host = HostResources {
        cpu_milli: row.cpu_milli,
        memory_mib: row.memory_mib,
        pods: PODS_PER_NODE,
        ..HostResources::default()
    };
    let gpu = GpuNode::with_devices(&name, devices, Some(host));
    let free = vec![i64::from(DEVICE_UNITS); row.gpu as usize];
    let packed = pack(&free);
    let type_upper = if row.gpu > 0 { format!("NVIDIA-{}", row.model).to_uppercase() } else { String::new() };
    let mut node = SimNode {
        name,
        type_upper,
        model_id,
        packed,
        gpu,
        model: row.model.clone(),
        free,
        tags: Vec::new(),
        frag: 0.0,
        key: (model_id, 0, 0, None),
    };
    node.key = node.shape_key();
    node
}

/// A replay in progress: the cluster, the ordered pod stream and the RNG.
pub struct Replay {
    nodes: Vec<SimNode>,
    tasks: Vec<Task>,
    order: Vec<usize>,
    rng: GoRand,
    workload: Workload,
    memo: FragMemo,
    options: Options,
    tuned: i64,
    total_gpus: i64,
    shape_scores: HashMap<ShapeKey, i64, BuildHasherDefault<FxHasher>>,
    scores: Vec<f64>,
    /// `fgd-balance`: its own online target workload (from the pods seen so far) and memo.
    balance: BalanceState,
}

#[derive(Default)]
struct BalanceState {
    history: History,
    workload: Workload,
    memo: FragMemo,
    costs: HashMap<ShapeKey, Option<bal::Cost>, BuildHasherDefault<FxHasher>>,
}

/// What one pod event did to the cluster.
pub struct Placed {
    pub node: usize,
    /// The node's device usage before the pod was placed.
    pub usage_before: Vec<DeviceUsage>,
    /// Change of the cluster fragment.
    pub frag_delta: f64,
}

impl Replay {
    /// Builds the cluster and the pod stream exactly as the simulator does for `seed`:
    /// `Seed(S)`, one `Int()`, `Shuffle` of the pods sorted by name, tuning, `Perm` of the nodes
    /// sorted by name (the `%04d-` prefixes that break score ties).
    pub fn new(node_rows: &[NodeRow], pod_rows: &[PodRow], options: Options) -> Result<Self> {
        if node_rows.is_empty() || pod_rows.is_empty() {
            return Err(Error::invalid("trace", "replay needs at least one node and one pod"));
        }
        let mut by_name: Vec<usize> = (0..pod_rows.len()).collect();
        by_name.sort_by(|&a, &b| pod_rows[a].name.cmp(&pod_rows[b].name));
        let tasks: Vec<Task> = pod_rows.iter().map(Task::new).collect();
        let workload = Workload::typical(
            by_name.iter().map(|&i| {
                let t = &tasks[i];
                TaskType { cpu_milli: t.shape_cpu, gpu_milli: t.milli, num_gpu: t.num_gpu, gpu_spec: t.spec.clone() }
            }),
            options.typical_pct,
        );
        let mut rng = GoRand::new(options.seed);
        let _ = rng.int();
        let mut order = by_name.clone();
        if options.shuffle {
            rng.shuffle(&mut order);
        }
        let node_milli: i64 = node_rows.iter().map(|n| i64::from(n.gpu) * MILLI).sum();
        let total_gpus: i64 = node_rows.iter().map(|n| i64::from(n.gpu)).sum();
        let tuned = tune(&mut order, &by_name, &tasks, &mut rng, options.tune, node_milli);
        let mut node_order: Vec<usize> = (0..node_rows.len()).collect();
        node_order.sort_by(|&a, &b| node_rows[a].name.cmp(&node_rows[b].name));
        for _ in 0..options.hidden_draws {
            rng.int63();
        }
        let perm = rng.perm(node_order.len());
        let mut memo = FragMemo::default();
        let mut models: Vec<&str> = Vec::new();
        let nodes = node_order
            .iter()
            .zip(perm)
            .map(|(&i, p)| {
                let model = node_rows[i].model.as_str();
                let model_id = models.iter().position(|m| *m == model).unwrap_or_else(|| {
                    models.push(model);
                    models.len() - 1
                });
                let mut n = build_node(&node_rows[i], format!("{p:04}-{}", node_rows[i].name), model_id);
                n.frag = memo.frag(&n.shape(), &workload);
                n
            })
            .collect();
        Ok(Self {
            nodes,
            tasks,
            order,
            rng,
            workload,
            memo,
            options,
            tuned,
            total_gpus,
            shape_scores: HashMap::default(),
            scores: Vec::new(),
            balance: BalanceState::default(),
        })
    }

    /// Nodes that can host the task. A capacity index (host fit, allowed type, enough devices
    /// with enough free units) selects them — a necessary condition of the engine's Fit, which
    /// for replay GPUs (split count never binding, cores unused) is also sufficient. With
    /// `check_all` every candidate is confirmed by `fit_pod` and the index is asserted exact.
    fn candidates(&self, task: &Task, out: &mut Vec<usize>) {
        out.clear();
        for (i, n) in self.nodes.iter().enumerate() {
            if host_shortfall(&n.gpu, task.cpu, task.memory) != [false; 3] {
                continue;
            }
            let Some(request) = &task.request else {
                out.push(i);
                continue;
            };
            let typed = !n.type_upper.is_empty() && task.hints.type_allowed(&n.type_upper);
            let index_fits = typed && n.free.iter().filter(|&&f| f >= task.milli).count() >= task.num_gpu as usize;
            if self.options.check_all {
                let policy = GpuPolicy::parse("binpack");
                let ctx = PodContext {
                    request,
                    hints: &task.hints,
                    gpu_policy: &policy,
                    quota: None,
                    device_preference: None,
                };
                let engine_fits = fit_pod(&n.gpu, &ctx).is_ok();
                assert_eq!(index_fits, engine_fits, "capacity index disagrees with fit_pod on node {}", n.name);
            }
            if index_fits {
                out.push(i);
            }
        }
    }

    /// Chooses among the candidates with the policy's scores ([`score::score_nodes`]); ties to
    /// the smallest (prefixed) node name. Returns the node and, for FGD, its GPU for a sharing pod.
    fn choose(&mut self, task: &Task, cands: &[usize]) -> Option<(usize, Option<usize>)> {
        if cands.is_empty() {
            return None;
        }
        match self.options.policy {
            NodePolicy::Scored(Scorer::FgdBalance) => return self.choose_balance(task, cands),
            NodePolicy::Scored(Scorer::Random) => {
                let rng = &mut self.rng;
                return score::drawn_winner(cands.len(), &mut |n| rng.intn(n)).map(|k| (cands[k], None));
            }
            _ => {}
        }
        let (policy, pod, nodes) = (self.options.policy, task.shape(), &self.nodes);
        let hami = matches!(policy, NodePolicy::Binpack | NodePolicy::Spread);
        let rng = &mut self.rng;
        let mut draw = |n: usize| rng.intn(n);
        let mut ctx = Scoring {
            workload: &self.workload,
            memo: &mut self.memo,
            random: Randomness::Draw(&mut draw),
            shapes: &mut self.shape_scores,
        };
        let candidates = cands.iter().map(|&i| nodes[i].candidate(pod, hami));
        score::score_nodes(policy, candidates, &mut ctx, &mut self.scores);
        let scores = &self.scores;
        let best = cands[score::choose(cands.len(), |k| &nodes[cands[k]].name, |k| scores[k], policy)?];
        let gpu = match policy {
            NodePolicy::Scored(Scorer::Fgd) => {
                score::fgd_gpu(&nodes[best].candidate(pod, false), &self.workload, &mut self.memo)
            }
            _ => None,
        };
        Some((best, gpu))
    }

    /// `fgd-balance`: learn from the arriving pod, then the best cost over the candidates, ties
    /// to the smallest name; nodes of equal shape are costed once.
    fn choose_balance(&mut self, task: &Task, cands: &[usize]) -> Option<(usize, Option<usize>)> {
        let shape = task.shape();
        let st = &mut self.balance;
        st.history.observe(bal::task_type(&shape));
        if st.history.refresh_due() {
            st.workload = st.history.workload();
            st.memo = FragMemo::default();
        }
        let workload = bal::workload_or_pod(&st.workload, &shape);
        let cpu_per_gpu = st.history.cpu_per_gpu();
        st.costs.clear();
        let mut best: Option<(usize, bal::Cost)> = None;
        for &i in cands {
            let n = &self.nodes[i];
            let c = match st.costs.get(&n.key) {
                Some(c) => *c,
                None => {
                    let before = st.memo.frag(&n.shape(), &workload);
                    let c = bal::cost(&n.view(), &shape, &workload, &mut st.memo, before, cpu_per_gpu).map(|c| c.0);
                    st.costs.insert(n.key.clone(), c);
                    c
                }
            };
            let Some(c) = c else { continue };
            let better = match &best {
                None => true,
                Some((b, bc)) => match c.compare(bc) {
                    Ordering::Greater => true,
                    Ordering::Equal => n.name < self.nodes[*b].name,
                    Ordering::Less => false,
                },
            };
            if better {
                best = Some((i, c));
            }
        }
        let Some((i, _)) = best else {
            // Only if the policy's CPU view disagrees with the capacity index: still place the pod.
            return cands.iter().min_by(|&&a, &&b| self.nodes[a].name.cmp(&self.nodes[b].name)).map(|&i| (i, None));
        };
        let n = &self.nodes[i];
        let before = st.memo.frag(&n.shape(), &workload);
        let gpu = bal::cost(&n.view(), &shape, &workload, &mut st.memo, before, cpu_per_gpu).and_then(|c| c.1);
        Some((i, gpu))
    }

    /// The arrival stream and the cluster as the replay sees them (for offline bounds): the nodes
    /// as `[name, cpu_milli, memory_mib, gpus, model]` and the pods in arrival order as
    /// `[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]` (per-GPU milli clamped as replayed).
    pub fn arrivals_json(&self) -> serde_json::Value {
        let nodes: Vec<serde_json::Value> = self
            .nodes
            .iter()
            .map(|n| {
                let h = n.gpu.host.unwrap_or_default();
                serde_json::json!([n.name, h.cpu_milli, h.memory_mib, n.free.len(), n.model])
            })
            .collect();
        let pods: Vec<serde_json::Value> = self
            .order
            .iter()
            .map(|&i| {
                let t = &self.tasks[i];
                serde_json::json!([t.cpu, t.memory, t.milli, t.num_gpu, t.spec])
            })
            .collect();
        serde_json::json!({ "seed": self.options.seed, "total_gpus": self.total_gpus, "nodes": nodes, "pods": pods })
    }

    /// GPU preference on the chosen node (the simulator's `gpuSelMethod`), or `None` for HAMi's order.
    fn gpu_preference(&mut self, task: &Task, node: usize, fgd_gpu: Option<usize>) -> Option<Vec<usize>> {
        let free = &self.nodes[node].free;
        let rng = &mut self.rng;
        score::gpu_preference(self.options.policy, &task.shape(), free, fgd_gpu, Some(&mut |n| rng.intn(n)))
    }

    /// Places the task on `node` through the engine's Fit and books it.
    fn place(&mut self, task: &Task, node: usize, preference: Option<Vec<usize>>) -> Result<()> {
        let n = &mut self.nodes[node];
        if let Some(request) = &task.request {
            let policy = GpuPolicy::parse(if self.options.policy == NodePolicy::Spread { "spread" } else { "binpack" });
            let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| preference.clone();
            let ctx = PodContext {
                request,
                hints: &task.hints,
                gpu_policy: &policy,
                quota: None,
                device_preference: Some(&prefer),
            };
            let fit = fit_pod(&n.gpu, &ctx)
                .map_err(|e| Error::internal(format!("node {}: engine Fit refused the chosen node: {e}", n.name)))?;
            let footprint = collapse(&fit.slots, request.init_count, false);
            n.gpu.account(&footprint, 1);
            n.refresh_free();
        }
        if let Some(h) = n.gpu.host.as_mut() {
            h.cpu_requested += task.cpu;
            h.memory_requested += task.memory;
            h.pods_requested += 1;
        }
        let tag = task.shape().tag();
        if tag != GpuTag::NoGpu {
            match n.tags.iter_mut().find(|(t, _)| *t == tag) {
                Some(entry) => entry.1 += 1,
                None => n.tags.push((tag, 1)),
            }
        }
        n.key = n.shape_key();
        Ok(())
    }

    /// One pod event, the same for the full replay and the snapshot: candidates, the policy's
    /// choice, the GPU preference, placement through the engine's Fit, the fragment update.
    /// `None` when no node can host the pod.
    fn step(&mut self, task: &Task, cands: &mut Vec<usize>) -> Result<Option<Placed>> {
        self.candidates(task, cands);
        let Some((node, fgd_gpu)) = self.choose(task, cands) else { return Ok(None) };
        let preference = self.gpu_preference(task, node, fgd_gpu);
        let usage_before = self.nodes[node].gpu.usage.clone();
        self.place(task, node, preference)?;
        let n = &mut self.nodes[node];
        let new = self.memo.frag(&n.shape(), &self.workload);
        let frag_delta = new - n.frag;
        n.frag = new;
        Ok(Some(Placed { node, usage_before, frag_delta }))
    }

    /// Runs the whole stream.
    pub fn run(mut self) -> Result<Outcome> {
        let mut events = Vec::with_capacity(self.order.len());
        let (mut arrived, mut used, mut failed) = (0i64, 0i64, 0usize);
        let mut frag: f64 = self.nodes.iter().map(|n| n.frag).sum();
        let mut cands = Vec::with_capacity(self.nodes.len());
        let order = std::mem::take(&mut self.order);
        let tasks = std::mem::take(&mut self.tasks);
        for &t in &order {
            let task = &tasks[t];
            arrived += task.total_milli();
            match self.step(task, &mut cands)? {
                None => failed += 1,
                Some(placed) => {
                    if task.request.is_some() {
                        used += task.total_milli();
                    }
                    frag += placed.frag_delta;
                }
            }
            events.push(Event { arrived, used, frag });
        }
        Ok(Outcome {
            policy: self.options.policy,
            seed: self.options.seed,
            tune: self.options.tune,
            pods: order.len(),
            failed,
            tuned: self.tuned,
            total_gpus: self.total_gpus,
            typical_types: self.workload.types.len(),
            events,
        })
    }
}

/// The simulator's workload tuning: sample originals (sorted by name) with replacement and append
/// until the next sample would exceed `ratio` × capacity (judged on its per-GPU milli, as the
/// simulator does), or remove random pods while the total exceeds it. Returns the pod delta.
fn tune(
    order: &mut Vec<usize>,
    originals: &[usize],
    tasks: &[Task],
    rng: &mut GoRand,
    ratio: f64,
    node_milli: i64,
) -> i64 {
    if ratio <= 0.0 {
        return 0;
    }
    let target = ratio * node_milli as f64;
    let mut total: i64 = order.iter().map(|&i| tasks[i].total_milli()).sum();
    let before = order.len() as i64;
    match (total as f64).partial_cmp(&target) {
        Some(Ordering::Greater) => {
            while total as f64 > target && !order.is_empty() {
                let idx = rng.intn(order.len());
                total -= tasks[order.remove(idx)].total_milli();
            }
        }
        Some(Ordering::Less) => loop {
            let pick = originals[rng.intn(originals.len())];
            if (total + tasks[pick].milli) as f64 > target {
                break;
            }
            total += tasks[pick].total_milli();
            order.push(pick);
        },
        _ => {}
    }
    order.len() as i64 - before
}

/// Python's `round(x, 0)` / `round(x, 2)` on the values involved (ties to even).
fn round_to(x: f64, digits: i32) -> f64 {
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

    /// The summary as JSON (the CLI's `--output json` object plus curves for plots).
    pub fn to_json(&self, elapsed_s: f64) -> serde_json::Value {
        let keyed = |m: BTreeMap<u32, f64>| {
            m.into_iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>()
        };
        serde_json::json!({
            "policy": self.policy.as_str(),
            "seed": self.seed,
            "tune": self.tune,
            "pods": self.pods,
            "failed": self.failed,
            "tuned": self.tuned,
            "total_gpus": self.total_gpus,
            "typical_types": self.typical_types,
            "unallocated_pct_at_100": self.unallocated_at(100),
            "alloc_pct_by_arrived": keyed(self.alloc_by_arrived()),
            "frag_pct_by_arrived": keyed(self.frag_by_arrived()),
            "frag_ratio_by_arrived": keyed(self.frag_ratio_by_arrived()),
            "elapsed_s": elapsed_s,
        })
    }
}

/// Parses both CSVs and returns [`Replay::arrivals_json`] for `options` (no replay is run).
pub fn arrivals_csv(
    nodes_file: &str,
    nodes_csv: &str,
    pods_file: &str,
    pods_csv: &str,
    options: Options,
) -> Result<serde_json::Value> {
    let nodes = csv::parse_nodes(nodes_file, nodes_csv)?;
    let pods = csv::parse_pods(pods_file, pods_csv)?;
    Ok(Replay::new(&nodes, &pods, options)?.arrivals_json())
}

/// Parses both CSVs and replays: the entry point of the binding. Errors name file, line, column.
pub fn replay_csv(
    nodes_file: &str,
    nodes_csv: &str,
    pods_file: &str,
    pods_csv: &str,
    options: Options,
) -> Result<serde_json::Value> {
    let start = std::time::Instant::now();
    let nodes = csv::parse_nodes(nodes_file, nodes_csv)?;
    let pods = csv::parse_pods(pods_file, pods_csv)?;
    let outcome = Replay::new(&nodes, &pods, options)?.run()?;
    Ok(outcome.to_json(start.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests;
