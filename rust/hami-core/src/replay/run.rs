//! The replay loop: the stream ordered and tuned as the simulator does, then one scheduling
//! attempt per pod (candidates, the policy's choice, placement through the engine's Fit).

use super::csv::{NodeRow, PodRow};
use super::gorand::GoRand;
use super::{build_node, Event, Options, Outcome, SimNode, Task};
use crate::error::{Error, Result};
use crate::fit::{fit_pod, host_shortfall, PodContext};
use crate::frag::{FragMemo, FxHasher, TaskType, Workload, MILLI};
use crate::model::{collapse, DeviceUsage, GpuNode};
use crate::policy::balance::{self as bal, History};
use crate::policy::node::GpuTag;
use crate::policy::score::{self, ShapeKey};
use crate::policy::{GpuPolicy, NodePolicy};
use crate::wire::replay::Arrivals;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// A replay in progress: the cluster, the ordered pod stream and the RNG.
pub struct Replay {
    pub(super) nodes: Vec<SimNode>,
    pub(super) tasks: Vec<Task>,
    pub(super) order: Vec<usize>,
    pub(super) rng: GoRand,
    pub(super) workload: Workload,
    pub(super) memo: FragMemo,
    pub(super) options: Options,
    pub(super) tuned: i64,
    pub(super) total_gpus: i64,
    pub(super) shape_scores: HashMap<ShapeKey, i64, BuildHasherDefault<FxHasher>>,
    pub(super) scores: Vec<f64>,
    /// `fgd-balance`: its own online target workload (from the pods seen so far) and memo.
    pub(super) balance: BalanceState,
    /// The next arrival [`Replay::next_live_step`] runs.
    pub(super) cursor: usize,
}

#[derive(Default)]
pub(super) struct BalanceState {
    pub(super) history: History,
    pub(super) workload: Workload,
    pub(super) memo: FragMemo,
    pub(super) costs: HashMap<ShapeKey, Option<bal::Cost>, BuildHasherDefault<FxHasher>>,
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
            cursor: 0,
        })
    }

    /// Nodes that can host the task. A capacity index (host fit, allowed type, enough devices
    /// with enough free units) selects them — a necessary condition of the engine's Fit, which
    /// for replay GPUs (split count never binding, cores unused) is also sufficient. With
    /// `check_all` every candidate is confirmed by `fit_pod` and the index is asserted exact.
    pub(super) fn candidates(&self, task: &Task, out: &mut Vec<usize>) {
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
                    card_quota: None,
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

    /// The arrival stream and the cluster as the replay sees them (for offline bounds): the nodes
    /// as `[name, cpu_milli, memory_mib, gpus, model]` and the pods in arrival order as
    /// `[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]` (per-GPU milli clamped as replayed).
    pub fn arrivals(&self) -> Arrivals {
        let node = |n: &SimNode| {
            let h = n.gpu.host.unwrap_or_default();
            (n.name.clone(), h.cpu_milli, h.memory_mib, n.free.len(), n.model.clone())
        };
        let pod = |t: &Task| (t.cpu, t.memory, t.milli, t.num_gpu, t.spec.clone());
        Arrivals {
            seed: self.options.seed,
            total_gpus: self.total_gpus,
            nodes: self.nodes.iter().map(node).collect(),
            pods: self.order.iter().map(|&i| pod(&self.tasks[i])).collect(),
        }
    }

    /// GPU preference on the chosen node (the simulator's `gpuSelMethod`), or `None` for HAMi's order.
    fn gpu_preference(&mut self, task: &Task, node: usize, fgd_gpu: Option<usize>) -> Option<Vec<usize>> {
        let free = &self.nodes[node].free;
        let rng = &mut self.rng;
        score::gpu_preference(self.options.policy, &task.shape(), free, fgd_gpu, Some(&mut |n| rng.intn(n)))
    }

    /// Places the task on `node` through the engine's Fit and books it.
    pub(super) fn place(&mut self, task: &Task, node: usize, preference: Option<Vec<usize>>) -> Result<()> {
        let n = &mut self.nodes[node];
        if let Some(request) = &task.request {
            let policy = GpuPolicy::parse(if self.options.policy == NodePolicy::Spread { "spread" } else { "binpack" });
            let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| preference.clone();
            let ctx = PodContext {
                request,
                hints: &task.hints,
                gpu_policy: &policy,
                quota: None,
                card_quota: None,
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
    pub(super) fn step(&mut self, task: &Task, cands: &mut Vec<usize>) -> Result<Option<Placed>> {
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
pub(super) fn tune(
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
