//! The planner's core: a snapshot's moves lifted, fitted with the engine's Fit and landed, and
//! the plan these moves make (the strategies are in `strategies`).

use super::pod::device_allowed;
use super::{node_frag, node_model, per_gpu_request, Measures, MigInstance, PlanPod, Seat, Snapshot};
use crate::error::{Error, Result};
use crate::fit::{fit_pod, fit_pod_within, host_shortfall, mig, NodeFit, PodContext};
use crate::frag::{FragMemo, NodeShape, MILLI};
use crate::model::{DeviceUsage, GpuNode, CORDONED, HEALTHY, MIG, MIG_UNHEALTHY, RESERVED};
use crate::policy::node as np;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

pub use crate::wire::plan::{Move, Place};

/// As derived, without `mig` when there is none (the texts of [`super::Rejection`] stay as they were).
impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Place");
        out.field("node", &self.node).field("gpus", &self.gpus);
        if !self.mig.is_empty() {
            out.field("mig", &self.mig);
        }
        out.finish()
    }
}

impl Place {
    /// Same node and GPUs (what a placement names; the instances follow from the Fit).
    pub(super) fn same_gpus(&self, other: &Self) -> bool {
        self.node == other.node && self.gpus == other.gpus
    }
}

/// How a plan is searched: `FreeGpus` drains GPUs only (objective free-gpus: every move must
/// help empty a GPU); `Drain` drains, then spends the leftover budget on fragment-lowering
/// single moves (objective frag); `Greedy` is the baseline (single fragment-lowering moves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    FreeGpus,
    Drain,
    Greedy,
}

impl Strategy {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "drain" => Ok(Self::Drain),
            "greedy" => Ok(Self::Greedy),
            other => Err(Error::config("", format!("unknown planner {other:?} (want drain or greedy)"))),
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::FreeGpus | Self::Drain => "drain",
            Self::Greedy => "greedy",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanResult {
    pub planner: &'static str,
    pub moves: Vec<Move>,
    pub before: Measures,
    pub after: Measures,
    pub elapsed_ms: f64,
}

/// The working state of one planning run.
pub(super) struct Planner<'s> {
    pub(super) s: &'s mut Snapshot,
    pub(super) memo: FragMemo,
    pub(super) frags: Vec<f64>,
    pub(super) moved: HashSet<usize>,
    pub(super) moves: Vec<Move>,
    pub(super) budget: usize,
    /// Pods per (node, device).
    pub(super) on_gpu: HashMap<(usize, usize), Vec<usize>>,
}

/// Per-GPU demand of a pod: (GPU count, memory, cores) per device, the largest entry.
pub(super) fn demand(p: &PlanPod) -> (usize, i64, i64) {
    let mem = p.footprint.iter().map(|c| c.mem).max().unwrap_or(0);
    let cores = p.footprint.iter().map(|c| c.cores).max().unwrap_or(0);
    (p.footprint.len(), mem, cores)
}

/// What a placed pod holds of one kind of device (NVIDIA 0, else a backend id): how many, and
/// the most memory and cores on one of them.
pub(super) struct KindDemand {
    pub kind: u8,
    pub count: usize,
    pub mem: i64,
    pub cores: i64,
}

/// The pod's footprint on `node` (its current node) per kind of device, NVIDIA's first.
pub(super) fn demand_by_kind(p: &PlanPod, node: &GpuNode) -> Vec<KindDemand> {
    let mut out: Vec<KindDemand> = Vec::new();
    for c in &p.footprint {
        let kind = node.device_index(&c.uuid).map_or(0, |d| node.devices[d].vendor);
        match out.iter_mut().find(|k| k.kind == kind) {
            Some(k) => (k.count, k.mem, k.cores) = (k.count + 1, k.mem.max(c.mem), k.cores.max(c.cores)),
            None => out.push(KindDemand { kind, count: 1, mem: c.mem, cores: c.cores }),
        }
    }
    out.sort_by_key(|k| k.kind);
    out
}

/// The memory device `d` of `n` would have left after taking the pod's share of `want`, when
/// it has room for it as the Fit checks (MIG cards by their instances); `None` otherwise.
fn room_left(n: &GpuNode, d: usize, p: &PlanPod, want: &KindDemand) -> Option<i64> {
    let (h, u) = (&n.hot[d], &n.usage[d]);
    if !h.has(HEALTHY) || h.has(CORDONED | RESERVED | MIG_UNHEALTHY) {
        return None;
    }
    if h.has(MIG) {
        return mig_room(n, d, p);
    }
    let (mem, cores) = (want.mem, want.cores);
    let free_mem = i64::from(h.devmem) - u.usedmem;
    if free_mem < mem || i64::from(h.devcore) - u.usedcores < cores || u.used >= i64::from(h.count) {
        return None;
    }
    if (cores >= 100 && u.used > 0) || u.usedcores >= 100 {
        return None;
    }
    Some(free_mem - mem)
}

/// Whether MIG GPU `d` of `n` has room for one instance of the pod as the Fit checks it (the
/// request's memory, cores and a slot, and a free placement of the profile HAMi would choose);
/// the memory the card has left after that instance.
fn mig_room(n: &GpuNode, d: usize, p: &PlanPod) -> Option<i64> {
    let (h, u, dev) = (&n.hot[d], &n.usage[d], &n.devices[d]);
    let (_, mem, cores) = per_gpu_request(&p.request, i64::from(h.devmem));
    let free_mem = i64::from(h.devmem) - u.usedmem;
    if free_mem < mem || i64::from(h.devcore) - u.usedcores < cores || u.used >= i64::from(h.count) {
        return None;
    }
    let allowed = p.hints.type_allowed(&dev.device_type.to_uppercase()) && p.hints.uuid_allowed(&dev.id);
    let pick = mig::select(&dev.mig_profiles, &n.mig.occupied[d], mem).filter(|_| allowed)?;
    Some(free_mem - i64::from(dev.mig_profiles[pick.profile].memory_mb))
}

/// The Fit the engine's Filter makes of a replacement pod pinned to the GPUs `fit` chose
/// (`nvidia.com/use-gpuuuid`), in HAMi's order. On MIG GPUs the order matters beyond which GPUs
/// are used: a MIG GPU that granted an instance is examined again, so the GPU walked first gives
/// as many instances as it can, and that decides the profiles and placements.
fn pinned_mig_fit(n: &GpuNode, ctx: &PodContext, fit: &NodeFit) -> Option<NodeFit> {
    let mut hints = ctx.hints.clone();
    hints.use_uuids.clear();
    for d in fit.slots.iter().flatten() {
        if !hints.use_uuids.contains(&d.uuid) {
            hints.use_uuids.push(d.uuid.clone());
        }
    }
    fit_pod(n, &PodContext { hints: &hints, device_preference: None, ..*ctx }).ok()
}

impl<'s> Planner<'s> {
    pub(super) fn new(s: &'s mut Snapshot, budget: usize) -> Self {
        let mut memo = FragMemo::default();
        let frags = s.nodes.iter().map(|n| node_frag(n, &s.workload, &mut memo)).collect();
        let mut on_gpu: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        for (pi, p) in s.pods.iter().enumerate() {
            for c in &p.footprint {
                if let Some(d) = s.nodes[p.node].device_index(&c.uuid) {
                    on_gpu.entry((p.node, d)).or_default().push(pi);
                }
            }
        }
        Self { s, memo, frags, moved: HashSet::new(), moves: Vec::new(), budget, on_gpu }
    }

    pub(super) fn refresh_frag(&mut self, node: usize) {
        self.frags[node] = node_frag(&self.s.nodes[node], &self.s.workload, &mut self.memo);
    }

    fn index_pod(&mut self, pi: usize, add: bool) {
        let p = &self.s.pods[pi];
        for c in &p.footprint {
            if let Some(d) = self.s.nodes[p.node].device_index(&c.uuid) {
                let list = self.on_gpu.entry((p.node, d)).or_default();
                if add {
                    list.push(pi);
                } else {
                    list.retain(|&x| x != pi);
                }
            }
        }
    }

    pub(super) fn lift(&mut self, pi: usize) {
        self.index_pod(pi, false);
        let p = &self.s.pods[pi];
        let (cpu, mem) = p.host;
        let n = &mut self.s.nodes[p.node];
        n.account(&p.footprint, -1);
        n.account_mig(&p.footprint, &p.mig.iter().map(MigInstance::hold).collect::<Vec<_>>(), -1);
        if let Some(h) = n.host.as_mut() {
            h.cpu_requested -= cpu;
            h.memory_requested -= mem;
            h.pods_requested -= 1;
        }
    }

    pub(super) fn land(&mut self, pi: usize, node: usize, seat: Seat) {
        let (cpu, mem) = self.s.pods[pi].host;
        let n = &mut self.s.nodes[node];
        n.account(&seat.footprint, 1);
        n.account_mig(&seat.footprint, &seat.holds(), 1);
        if let Some(h) = n.host.as_mut() {
            h.cpu_requested += cpu;
            h.memory_requested += mem;
            h.pods_requested += 1;
        }
        let p = &mut self.s.pods[pi];
        p.node = node;
        p.footprint = seat.footprint;
        p.mig = seat.mig;
        self.index_pod(pi, true);
    }

    /// Target nodes ranked by the estimated fragment change of placing the pod there (best
    /// fit on the allowed GPUs), cheapest first; only nodes with enough allowed devices of each
    /// kind the pod holds.
    fn rank_targets(&mut self, pi: usize, allowed: &dyn Fn(usize, usize, &GpuNode) -> bool) -> Vec<(f64, i64, usize)> {
        let p = &self.s.pods[pi];
        let kinds = demand_by_kind(p, &self.s.nodes[p.node]);
        let total: usize = kinds.iter().map(|k| k.count).sum();
        let mut out = Vec::new();
        let mut fits: Vec<(u8, i64, usize)> = Vec::with_capacity(16);
        for (t, n) in self.s.nodes.iter().enumerate() {
            if !n.is_registered() || n.devices.len() < total || host_shortfall(n, p.host.0, p.host.1) != [false; 3] {
                continue;
            }
            fits.clear();
            for d in 0..n.devices.len() {
                let kind = n.devices[d].vendor;
                let Some(want) = kinds.iter().find(|k| k.kind == kind) else { continue };
                // the cheap room check first: most devices of a busy cluster fail it
                let Some(left) = room_left(n, d, p, want) else { continue };
                if allowed(t, d, n) && device_allowed(&p.request, &p.hints, n, d) {
                    fits.push((kind, left, d));
                }
            }
            if fits.len() < total {
                continue;
            }
            fits.sort_unstable();
            let mut free = np::live_free_milli(n);
            let mut leftover = 0;
            let mut enough = true;
            for want in &kinds {
                let mut taken = 0;
                for &(_, left, d) in fits.iter().filter(|f| f.0 == want.kind).take(want.count) {
                    let devmem = i64::from(n.hot[d].devmem).max(1);
                    free[d] = (left.max(0) * MILLI) / devmem;
                    leftover += left;
                    taken += 1;
                }
                enough &= taken == want.count;
            }
            if !enough {
                continue;
            }
            let after =
                self.memo.frag(&NodeShape { cpu_left: 0, gpu_free: &free, model: node_model(n) }, &self.s.workload);
            out.push((after - self.frags[t], leftover, t));
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        out
    }

    /// The engine's Fit of the (lifted) pod on node `t`, restricted to the allowed GPUs, the
    /// tightest first. Returns the new seat: on MIG GPUs, the instances the engine's Filter grants
    /// the replacement pinned to the chosen GPUs ([`pinned_mig_fit`]).
    pub(super) fn fit_on(&self, pi: usize, t: usize, allowed: &dyn Fn(usize, usize, &GpuNode) -> bool) -> Option<Seat> {
        let p = &self.s.pods[pi];
        let n = &self.s.nodes[t];
        if host_shortfall(n, p.host.0, p.host.1) != [false; 3] {
            return None;
        }
        let prefer = |node: &GpuNode, usage: &[DeviceUsage]| {
            let mut order: Vec<usize> = (0..node.devices.len()).collect();
            order.sort_by_key(|&d| (i64::from(node.hot[d].devmem) - usage[d].usedmem, d));
            Some(order)
        };
        if p.request.asks_vendors() {
            // The replacement is pinned to the devices chosen (each backend's use-UUID key), which
            // its Fit then sees alone: a graph (Kunlunxin) may choose otherwise among fewer cards.
            let ctx = PodContext { device_preference: Some(&prefer), ..p.context(&p.hints) };
            let chosen = Seat::of(&fit_pod_within(n, &ctx, |d| allowed(t, d, n)).ok()?, p.request.init_count);
            let on_chosen = |d: usize| chosen.footprint.iter().any(|c| *c.uuid == *n.devices[d].id);
            let pinned = Seat::of(&fit_pod_within(n, &ctx, on_chosen).ok()?, p.request.init_count);
            return (pinned == chosen).then_some(pinned);
        }
        let mut hints = p.hints.clone();
        hints.use_uuids = n
            .devices
            .iter()
            .enumerate()
            .filter(|(d, dev)| allowed(t, *d, n) && p.hints.uuid_allowed(&dev.id))
            .map(|(_, dev)| dev.id.clone())
            .collect();
        if hints.use_uuids.is_empty() {
            return None;
        }
        hints.nouse_uuids.clear();
        let ctx = PodContext { device_preference: Some(&prefer), ..p.context(&hints) };
        let fit = fit_pod(n, &ctx).ok()?;
        let fit = if fit.mig.is_empty() { fit } else { pinned_mig_fit(n, &ctx, &fit)? };
        Some(Seat::of(&fit, p.request.init_count))
    }

    pub(super) fn place_of(&self, node: usize, seat: &Seat) -> Place {
        Place {
            node: self.s.nodes[node].name.clone(),
            gpus: seat.footprint.iter().map(|c| c.uuid.to_string()).collect(),
            mig: seat.mig.clone(),
        }
    }

    /// The best target the Fit accepts for a lifted pod: (target node, seat there).
    pub(super) fn relocate(
        &mut self,
        pi: usize,
        allowed: &dyn Fn(usize, usize, &GpuNode) -> bool,
        max_delta: f64,
    ) -> Option<(usize, Seat)> {
        let ranked = self.rank_targets(pi, allowed);
        for &(delta, _, t) in ranked.iter().take(8) {
            if delta > max_delta {
                break;
            }
            if let Some(seat) = self.fit_on(pi, t, allowed) {
                let p = &self.s.pods[pi];
                if t == p.node && seat.footprint.iter().map(|c| &c.uuid).eq(p.footprint.iter().map(|c| &c.uuid)) {
                    continue;
                }
                return Some((t, seat));
            }
        }
        None
    }

    pub(super) fn record_move(&mut self, pi: usize, from_node: usize, from: &Seat) {
        let p = &self.s.pods[pi];
        let mv = Move { pod: p.key(), from: self.place_of(from_node, from), to: self.place_of(p.node, &p.seat()) };
        self.moves.push(mv);
        self.moved.insert(pi);
    }
}

/// Plans on a copy of the snapshot; `budget` = the most moves.
pub fn plan(snapshot: &Snapshot, budget: usize, strategy: Strategy) -> PlanResult {
    plan_on(&mut snapshot.clone(), budget, strategy)
}

/// [`plan`] in place: `work` is left in the state after the moves.
pub fn plan_on(work: &mut Snapshot, budget: usize, strategy: Strategy) -> PlanResult {
    let start = std::time::Instant::now();
    let mut planner = Planner::new(work, budget);
    let before = planner.s.measures_with(&planner.frags);
    match strategy {
        Strategy::FreeGpus => planner.drain_until_stable(),
        Strategy::Drain => {
            planner.drain();
            planner.greedy();
        }
        Strategy::Greedy => planner.greedy(),
    }
    let moves = std::mem::take(&mut planner.moves);
    let frags = planner.frags.clone();
    let after = planner.s.measures_with(&frags);
    PlanResult { planner: strategy.name(), moves, before, after, elapsed_ms: start.elapsed().as_secs_f64() * 1000.0 }
}
