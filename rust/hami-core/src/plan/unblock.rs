//! `plan --for POD`: the fewest moves after which one pending pod fits.
//!
//! Each node is costed first (no Fit calls): for every GPU the pod may use, the fewest pods to
//! move off it so that the pod's per-GPU memory, cores, a slot and exclusivity are free; the
//! node's cost is the union of those pods over its cheapest GPUs. Nodes are then tried cheapest
//! first: each evicted pod is relocated with the planner's Fit-checked `relocate` (never onto
//! the GPUs being cleared, whole free GPUs last), and the pending pod itself must then pass the
//! engine's Fit on the cleared GPUs. The first node that passes wins; a failed try is rolled back.

use super::{
    demand, is_whole_free, per_gpu_request, round3, Measures, Move, Place, Planner, Rejection, Seat, Snapshot,
};
use crate::codec::MigPlacement;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::fit::{fit_host, fit_pod, mig, PodContext};
use crate::k8s::Pod;
use crate::model::{GpuNode, CORDONED, HEALTHY, MIG_MODE, MIG_UNHEALTHY, NVIDIA, RESERVED};
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// How many cheapest candidate nodes are tried with real moves before giving up.
const MAX_TRIES: usize = 24;

/// The pod to unblock, as parsed from its manifest.
#[derive(Debug, Clone)]
pub struct PendingPod {
    pub key: String,
    pub uid: String,
    /// `metadata.creationTimestamp`: the queue is served oldest first, as the scheduler's FIFO.
    pub created: Option<String>,
    pub request: PodRequest,
    pub hints: PodHints,
    pub gpu_policy: GpuPolicy,
    pub host: (i64, i64),
}

impl PendingPod {
    pub fn from_value(pod: &serde_json::Value, config: &Config) -> Result<Self> {
        let parsed: Pod =
            serde_json::from_value(pod.clone()).map_err(|e| Error::decode("for_pod", format!("not a Pod: {e}")))?;
        Self::from_pod(&parsed, config)
    }

    pub fn from_pod(parsed: &Pod, config: &Config) -> Result<Self> {
        let ns = if parsed.metadata.namespace.is_empty() { "default" } else { parsed.metadata.namespace.as_str() };
        let key = format!("{ns}/{}", parsed.metadata.name);
        if parsed.metadata.name.is_empty() {
            return Err(Error::invalid("for_pod", "metadata.name is empty"));
        }
        let request = PodRequest::from_pod(parsed, config);
        if request.is_empty() {
            return Err(Error::invalid(
                format!("for_pod: pod {key}"),
                format!("spec.containers request no vGPU resource ({})", config.resource_count_name),
            ));
        }
        let hints = PodHints::from_annotations(&parsed.metadata.annotations)
            .map_err(|e| e.in_object(format!("for_pod: pod {key}")))?;
        let gpu_policy = hints.gpu_policy.clone().unwrap_or_else(|| GpuPolicy::parse(&config.gpu_scheduler_policy));
        Ok(Self {
            key,
            uid: parsed.metadata.uid.clone(),
            created: parsed.metadata.creation_timestamp.clone(),
            request,
            hints,
            gpu_policy,
            host: super::pod_host_request(parsed),
        })
    }

    /// The largest per-GPU demand of any container: (GPUs, memory on a card of `devmem`, cores).
    fn per_gpu(&self, devmem: i64) -> (usize, i64, i64) {
        per_gpu_request(&self.request, devmem)
    }

    /// Queue order: oldest first (pods without a creation time last), then by `namespace/name`.
    pub fn queue_order(&self, other: &Self) -> std::cmp::Ordering {
        (self.created.is_none(), &self.created, &self.key).cmp(&(other.created.is_none(), &other.created, &other.key))
    }

    pub(super) fn context<'a>(&'a self, hints: &'a PodHints) -> PodContext<'a> {
        PodContext { request: &self.request, hints, gpu_policy: &self.gpu_policy, quota: None, device_preference: None }
    }
}

/// The answer of `--for`.
#[derive(Debug, Clone, Serialize)]
pub struct Unblock {
    pub pod: String,
    pub uid: String,
    /// The pod fits once `moves` have run (or already fits: no moves).
    pub unblocked: bool,
    pub moves: Vec<Move>,
    /// Where the pod fits after the moves: the GPUs to hold for it (the reservation).
    pub target: Option<Place>,
    pub message: String,
    /// Why each node cannot take the pod within the budget (only when not unblocked).
    pub reasons: BTreeMap<String, String>,
    pub max_moves: usize,
    pub before: Measures,
    pub after: Measures,
    pub elapsed_ms: f64,
}

impl Unblock {
    pub fn to_json(&self, snapshot: &Snapshot) -> serde_json::Value {
        let mut out = serde_json::to_value(self).unwrap_or_default();
        out["objective"] = "for".into();
        out["nodes"] = snapshot.nodes.len().into();
        out["pods"] = snapshot.pods.len().into();
        out["elapsed_ms"] = round3(self.elapsed_ms).into();
        out["reservation"] = match &self.target {
            Some(t) if !self.moves.is_empty() => {
                serde_json::json!({"pod": self.pod, "uid": self.uid, "node": t.node, "gpus": t.gpus})
            }
            _ => serde_json::Value::Null,
        };
        out
    }
}

/// A node's estimated cost: pods to move (plan indexes) and the GPUs they clear.
struct Candidate {
    node: usize,
    evict: Vec<usize>,
    gpus: Vec<usize>,
    /// The node is short of CPU or memory for the pod: evicted pods must leave it.
    leave_node: bool,
}

/// The fewest moves (at most `budget`) after which `pending` fits, checked move by move.
pub fn unblock(snapshot: &Snapshot, pending: &PendingPod, budget: usize) -> Unblock {
    let start = std::time::Instant::now();
    let mut work = snapshot.clone();
    let mut planner = Planner::new(&mut work, budget);
    let before = planner.s.measures_with(&planner.frags);
    let (mut out, _) = unblock_in(&mut planner, pending, budget);
    out.before = before;
    out.after = if out.moves.is_empty() { before } else { planner.s.measures_with(&planner.frags) };
    out.elapsed_ms = start.elapsed().as_secs_f64() * 1000.0;
    out
}

/// Where the pod lands (node index, seat) once unblocked.
type Landing = Option<(usize, Seat)>;

/// [`unblock`] on a planner's state: on success the moves stay applied (the pod itself is not placed).
/// The pod's own hold (if it has one) is free for it meanwhile.
fn unblock_in(planner: &mut Planner, pending: &PendingPod, budget: usize) -> (Unblock, Landing) {
    own_hold(planner, pending, false);
    let out = unblock_held(planner, pending, budget);
    own_hold(planner, pending, true);
    out
}

/// Clears (`on = false`) or restores the RESERVED marks of the GPUs held for `pending`.
fn own_hold(planner: &mut Planner, pending: &PendingPod, on: bool) {
    let Some((_, r)) = planner.s.holds.iter().find(|(k, r)| *k == pending.uid || r.pod == pending.key) else {
        return;
    };
    let Some(&t) = planner.s.index.get(&*r.node) else { return };
    let node = &mut planner.s.nodes[t];
    for gpu in &r.gpus {
        if let Some(d) = node.device_index(gpu) {
            let flags = &mut node.hot[d].flags;
            *flags = if on { *flags | RESERVED } else { *flags & !RESERVED };
        }
    }
}

fn unblock_held(planner: &mut Planner, pending: &PendingPod, budget: usize) -> (Unblock, Landing) {
    let zero = planner.s.measures_with(&[]);
    let mut out = Unblock {
        pod: pending.key.clone(),
        uid: pending.uid.clone(),
        unblocked: false,
        moves: Vec::new(),
        target: None,
        message: String::new(),
        reasons: BTreeMap::new(),
        max_moves: budget,
        before: zero,
        after: zero,
        elapsed_ms: 0.0,
    };
    if let Some((t, seat)) = fits_now(planner, pending) {
        out.message = format!("pod {} fits now on {} without moves", pending.key, planner.s.nodes[t].name);
        out.unblocked = true;
        out.target = Some(planner.place_of(t, &seat));
        return (out, Some((t, seat)));
    }
    let mut by_node: Vec<Vec<usize>> = vec![Vec::new(); planner.s.nodes.len()];
    for (pi, p) in planner.s.pods.iter().enumerate() {
        by_node[p.node].push(pi);
    }
    let mut cands = Vec::new();
    for (t, on_node) in by_node.iter().enumerate() {
        match cost_node(planner, pending, t, on_node) {
            Ok(c) if c.evict.len() <= budget => cands.push(c),
            Ok(c) => {
                let n = c.evict.len();
                out.reasons.insert(planner.s.nodes[t].name.clone(), format!("needs {n} moves (budget {budget})"));
            }
            Err(why) => {
                out.reasons.insert(planner.s.nodes[t].name.clone(), why.to_string());
            }
        }
    }
    // Fewest moves first, then the least memory to rehouse (small pods find room more easily).
    let rehouse = |c: &Candidate| c.evict.iter().map(|&pi| demand(&planner.s.pods[pi]).1).sum::<i64>();
    cands.sort_by_cached_key(|c| (c.evict.len(), rehouse(c), c.node));
    let first_move = planner.moves.len();
    for c in cands.iter().take(MAX_TRIES) {
        match try_candidate(planner, pending, c) {
            Ok((t, seat)) => {
                out.unblocked = true;
                out.moves = planner.moves[first_move..].to_vec();
                out.message = format!(
                    "pod {} fits on {} after {} move(s)",
                    pending.key,
                    planner.s.nodes[t].name,
                    out.moves.len()
                );
                out.target = Some(planner.place_of(t, &seat));
                out.reasons.clear();
                return (out, Some((t, seat)));
            }
            Err(why) => {
                out.reasons.insert(planner.s.nodes[c.node].name.clone(), why.to_string());
            }
        }
    }
    for c in cands.iter().skip(MAX_TRIES) {
        out.reasons.insert(planner.s.nodes[c.node].name.clone(), "not tried (cheaper nodes were tried first)".into());
    }
    out.message = match crate::headroom::never_fits(&planner.s.nodes, &pending.request) {
        Some(why) => format!("pod {} can never fit, whatever moves: {why}", pending.key),
        None => format!("pod {} cannot be unblocked within {budget} moves", pending.key),
    };
    (out, None)
}

/// The pending queue, in order: each pod is unblocked with what is left of the budget (at most
/// `per_pod` moves each), its moves applied, and the pod placed on its target before the next.
#[derive(Debug, Clone, Serialize)]
pub struct QueueResult {
    pub pending: usize,
    /// Pods that fit with no move at all.
    pub fit_without_moves: usize,
    /// Pods that fit after moves.
    pub unblocked_by_moves: usize,
    pub moves: Vec<Move>,
    /// Each pod placed, with its GPUs (`reservation` for those that needed moves).
    pub placed: Vec<Unblock>,
    pub before: Measures,
    /// After the moves, before any pending pod is placed.
    pub after_moves: Measures,
    pub elapsed_ms: f64,
}

pub fn unblock_queue(snapshot: &Snapshot, queue: &[PendingPod], budget: usize, per_pod: usize) -> QueueResult {
    let start = std::time::Instant::now();
    let mut work = snapshot.clone();
    let mut planner = Planner::new(&mut work, budget);
    let before = planner.s.measures_with(&planner.frags);
    let mut landed: Vec<(usize, Seat, i64, i64)> = Vec::new();
    let (mut fit_without_moves, mut unblocked_by_moves) = (0, 0);
    let mut placed = Vec::new();
    for pending in queue {
        let left = budget.saturating_sub(planner.moves.len());
        let (r, landing) = unblock_in(&mut planner, pending, left.min(per_pod));
        let Some((t, seat)) = landing else { continue };
        if r.moves.is_empty() {
            fit_without_moves += 1;
        } else {
            unblocked_by_moves += 1;
        }
        occupy(&mut planner, t, &seat, pending.host, 1);
        landed.push((t, seat, pending.host.0, pending.host.1));
        placed.push(r);
    }
    let moves = std::mem::take(&mut planner.moves);
    for (t, seat, cpu, mem) in landed.iter().rev() {
        occupy(&mut planner, *t, seat, (*cpu, *mem), -1);
    }
    let after_moves = work.measures();
    QueueResult {
        pending: queue.len(),
        fit_without_moves,
        unblocked_by_moves,
        moves,
        placed,
        before,
        after_moves,
        elapsed_ms: start.elapsed().as_secs_f64() * 1000.0,
    }
}

/// Places (`sign = 1`) or removes a pod that is not one of the planner's (a pending pod) on node `t`.
fn occupy(planner: &mut Planner, t: usize, seat: &Seat, host: (i64, i64), sign: i64) {
    let n = &mut planner.s.nodes[t];
    n.account(&seat.footprint, sign);
    n.account_mig(&seat.footprint, &seat.holds(), sign);
    if let Some(h) = n.host.as_mut() {
        h.cpu_requested += sign * host.0;
        h.memory_requested += sign * host.1;
        h.pods_requested += sign;
    }
    planner.refresh_frag(t);
}

/// Where the scheduler's Fit puts the pod now, on the first node (by name) that takes it.
fn fits_now(planner: &Planner, pending: &PendingPod) -> Landing {
    let ctx = pending.context(&pending.hints);
    planner.s.nodes.iter().enumerate().find_map(|(t, n)| {
        if !n.is_registered() || fit_host(n, pending.host.0, pending.host.1).is_err() {
            return None;
        }
        let fit = fit_pod(n, &ctx).ok()?;
        Some((t, Seat::of(&fit, pending.request.init_count)))
    })
}

/// Why GPU `d` of `n` can never take the pod, whatever moves.
fn gpu_unusable(n: &GpuNode, d: usize, pending: &PendingPod, mem: i64, cores: i64) -> Option<&'static str> {
    let h = &n.hot[d];
    let dev = &n.devices[d];
    if !h.has(HEALTHY) || h.has(MIG_UNHEALTHY) {
        Some("unhealthy")
    } else if h.has(CORDONED) {
        Some("cordoned")
    } else if h.has(RESERVED) {
        Some("held for another pending pod")
    } else if !h.has(NVIDIA) || !pending.hints.type_allowed(&dev.device_type.to_uppercase()) {
        Some("type not allowed")
    } else if !pending.hints.uuid_allowed(&dev.id) {
        Some("UUID not allowed")
    } else if i64::from(h.devmem) < mem {
        Some("too little memory")
    } else if i64::from(h.devcore) < cores {
        Some("too few cores")
    } else if dev.mode == MIG_MODE && !dev.mig_profiles.iter().any(|p| i64::from(p.memory_mb) >= mem) {
        Some("no MIG profile has the memory")
    } else {
        None
    }
}

/// What a GPU must have free for the pod's share, as the Fit checks it: memory, cores, a slot,
/// no exclusive request on a shared card, no zero-core task on a card whose cores are all used.
struct Room {
    devmem: i64,
    devcore: i64,
    count: i64,
    mem: i64,
    cores: i64,
}

impl Room {
    fn of(n: &GpuNode, d: usize, mem: i64, cores: i64) -> Self {
        let h = &n.hot[d];
        Self { devmem: i64::from(h.devmem), devcore: i64::from(h.devcore), count: i64::from(h.count), mem, cores }
    }

    fn left_by(&self, used: i64, usedmem: i64, usedcores: i64) -> bool {
        let (mem, cores) = (self.mem, self.cores);
        self.devmem - usedmem >= mem
            && self.devcore - usedcores >= cores
            && used < self.count
            && !(self.devcore == 100 && cores == 100 && used > 0)
            && !(self.devcore != 0 && usedcores == self.devcore && cores == 0)
    }
}

/// The fewest pods to move off GPU `d` so the pod's share fits there (the Fit's slot, memory,
/// core, exclusivity and exhausted-cores checks); `Err` names the pod in the way.
fn clear_gpu(planner: &Planner, t: usize, d: usize, mem: i64, cores: i64) -> Result<Vec<usize>, Rejection> {
    let n = &planner.s.nodes[t];
    if n.devices[d].mode == MIG_MODE {
        return clear_mig_gpu(planner, t, d, (mem, cores), 1);
    }
    let u = n.usage[d];
    let room = Room::of(n, d, mem, cores);
    let satisfied = |used: i64, usedmem: i64, usedcores: i64| room.left_by(used, usedmem, usedcores);
    let mut on: Vec<usize> = planner.on_gpu.get(&(t, d)).cloned().unwrap_or_default();
    // Largest memory first: the fewest pods to free the memory.
    on.sort_by_key(|&pi| (std::cmp::Reverse(demand(&planner.s.pods[pi]).1), pi));
    let (mut used, mut usedmem, mut usedcores) = (u.used, u.usedmem, u.usedcores);
    let mut out = Vec::new();
    for &pi in &on {
        if satisfied(used, usedmem, usedcores) {
            break;
        }
        let p = &planner.s.pods[pi];
        if let Some(why) = &p.blocked {
            return Err(Rejection::GpuHoldsUnmovable { gpu: n.devices[d].id.clone(), pod: p.key(), why: why.clone() });
        }
        if let Some(c) = p.footprint.iter().find(|c| &*c.uuid == n.devices[d].id.as_str()) {
            if p.footprint.len() == 1 && c.mem >= mem && mem > 0 {
                // It needs as much room elsewhere as the pod would: where it could go, the pod could.
                return Err(Rejection::GpuHoldsAsLarge { gpu: n.devices[d].id.clone(), pod: p.key() });
            }
            used -= c.slots.max(1);
            usedmem -= c.mem;
            usedcores -= c.cores;
        }
        out.push(pi);
    }
    if satisfied(used, usedmem, usedcores) {
        Ok(out)
    } else {
        Err(Rejection::GpuStaysFull { gpu: n.devices[d].id.clone() })
    }
}

/// [`clear_gpu`] on a GPU in MIG mode, for `instances` instances of one container: memory, cores
/// and a slot are not enough, each instance HAMi chooses needs a free placement. The smallest set
/// of the card's pods (least memory among equals) after whose moves the card has the room and
/// HAMi's own choice ([`mig::fits`]) finds every instance.
fn clear_mig_gpu(
    planner: &Planner,
    t: usize,
    d: usize,
    (mem, cores): (i64, i64),
    instances: usize,
) -> Result<Vec<usize>, Rejection> {
    let n = &planner.s.nodes[t];
    let dev = &n.devices[d];
    let pods = &planner.s.pods;
    let room = Room::of(n, d, mem, cores);
    let mut on: Vec<usize> = planner.on_gpu.get(&(t, d)).cloned().unwrap_or_default();
    on.sort_by_key(|&pi| (pods[pi].blocked.is_some(), std::cmp::Reverse(demand(&pods[pi]).1), pi));
    on.truncate(MIG_CLEAR_MAX_PODS);
    let earlier = vec![mem; instances.saturating_sub(1)];
    let works = |evict: &[usize]| {
        let mut u = n.usage[d];
        let mut left: Vec<MigPlacement> = n.mig.occupied[d].clone();
        for &pi in evict {
            let (s, m, c) = share_on(&pods[pi], &dev.id);
            (u.used, u.usedmem, u.usedcores) = (u.used - s, u.usedmem - m, u.usedcores - c);
            for h in pods[pi].mig.iter().filter(|i| i.gpu == dev.id) {
                if let Some(k) = left.iter().position(|p| *p == h.placement) {
                    left.remove(k);
                }
            }
        }
        room.left_by(u.used, u.usedmem, u.usedcores) && mig::fits(&dev.mig_profiles, &left, &earlier, mem)
    };
    let movable = on.iter().take_while(|&&pi| pods[pi].blocked.is_none()).count();
    let rehouse = |evict: &[usize]| evict.iter().map(|&pi| share_on(&pods[pi], &dev.id).1).sum::<i64>();
    let subset = |mask: u32| (0..movable).filter(|i| mask & (1 << i) != 0).map(|i| on[i]).collect::<Vec<usize>>();
    let mut masks: Vec<u32> = (0..1u32 << movable).collect();
    masks.sort_by_key(|&m| m.count_ones());
    for size in masks.chunk_by(|a, b| a.count_ones() == b.count_ones()) {
        if let Some(evict) = size.iter().map(|&m| subset(m)).filter(|e| works(e)).min_by_key(|e| rehouse(e)) {
            return Ok(evict);
        }
    }
    let first_unmovable = on[movable..].first().and_then(|&pi| Some((pi, pods[pi].blocked.clone()?)));
    match first_unmovable {
        Some((pi, why)) if works(&on) => {
            Err(Rejection::GpuHoldsUnmovable { gpu: dev.id.clone(), pod: pods[pi].key(), why })
        }
        _ => Err(Rejection::GpuStaysFull { gpu: dev.id.clone() }),
    }
}

/// A MIG card holds a handful of instances; beyond this many pods on one card (broken data) only
/// the first (movable, largest) are considered for its clearing.
const MIG_CLEAR_MAX_PODS: usize = 12;

/// HAMi's `isMIGRequest` for `--for`: the pod does not rule MIG out and the node has a MIG GPU.
fn mig_request(n: &GpuNode, pending: &PendingPod) -> bool {
    n.has_mig
        && pending.hints.vgpu_mode.as_deref().is_none_or(|m| m.contains(MIG_MODE))
        && n.devices.iter().any(|d| d.mode == MIG_MODE)
}

/// A pod's (slots, memory, cores) on the GPU `uuid`.
fn share_on(p: &super::PlanPod, uuid: &str) -> (i64, i64, i64) {
    p.footprint.iter().find(|c| &*c.uuid == uuid).map_or((0, 0, 0), |c| (c.slots.max(1), c.mem, c.cores))
}

fn cost_node(planner: &Planner, pending: &PendingPod, t: usize, on_node: &[usize]) -> Result<Candidate, Rejection> {
    let n = &planner.s.nodes[t];
    if let Some(e) = &n.register_error {
        return Err(Rejection::NotRegistered { error: e.clone() });
    }
    let mut options: Vec<(Vec<usize>, usize)> = Vec::new();
    let mut why_not: BTreeSet<String> = BTreeSet::new();
    let mut k = 0;
    for d in 0..n.devices.len() {
        let (need, mem, cores) = pending.per_gpu(i64::from(n.hot[d].devmem));
        k = need;
        if let Some(why) = gpu_unusable(n, d, pending, mem, cores) {
            why_not.insert(format!("{why}: {}", n.devices[d].id));
            continue;
        }
        match clear_gpu(planner, t, d, mem, cores) {
            Ok(evict) => options.push((evict, d)),
            Err(why) => {
                why_not.insert(why.to_string());
            }
        }
    }
    if k > options.len() && !options.is_empty() && mig_request(n, pending) {
        // HAMi's isMIGRequest: more instances than cards may come from one card.
        let mut one_card: Vec<(Vec<usize>, usize)> = Vec::new();
        for &(_, d) in options.iter().filter(|(_, d)| n.devices[*d].mode == MIG_MODE) {
            let (_, mem, cores) = pending.per_gpu(i64::from(n.hot[d].devmem));
            match clear_mig_gpu(planner, t, d, (mem, cores), k) {
                Ok(evict) => one_card.push((evict, d)),
                Err(why) => {
                    why_not.insert(format!("{k} instances: {why}"));
                }
            }
        }
        options = one_card.into_iter().min_by_key(|(evict, d)| (evict.len(), *d)).into_iter().collect();
        k = options.len();
    }
    if k == 0 || options.len() < k {
        let detail: Vec<String> = why_not.into_iter().take(4).collect();
        let needs = pending.per_gpu(0).0.max(1);
        return Err(Rejection::TooFewGpus { usable: options.len(), total: n.devices.len(), needs, detail });
    }
    options.sort_by_key(|(evict, d)| (evict.len(), *d));
    let mut evict: Vec<usize> = Vec::new();
    let mut gpus = Vec::new();
    for (e, d) in options.into_iter().take(k) {
        gpus.push(d);
        for pi in e {
            if !evict.contains(&pi) {
                evict.push(pi);
            }
        }
    }
    let leave_node = fit_host(n, pending.host.0, pending.host.1).is_err();
    if leave_node {
        free_host(planner, pending, t, on_node, &mut evict)?;
    }
    Ok(Candidate { node: t, evict, gpus, leave_node })
}

/// Adds movable pods of node `t` (most CPU first) to `evict` until the node has the pod's CPU
/// and memory once they leave; `Err` with kube-scheduler's reason when even that is not enough.
fn free_host(
    planner: &Planner,
    pending: &PendingPod,
    t: usize,
    on_node: &[usize],
    evict: &mut Vec<usize>,
) -> Result<(), Rejection> {
    let Some(h) = planner.s.nodes[t].host else { return Ok(()) };
    let (cpu, mem) = pending.host;
    let pods = &planner.s.pods;
    let freed = |evict: &[usize]| evict.iter().fold((0, 0), |(c, m), &pi| (c + pods[pi].host.0, m + pods[pi].host.1));
    let short = |(c, m): (i64, i64)| (cpu > 0 && h.cpu_left() + c < cpu) || (mem > 0 && h.memory_left() + m < mem);
    let mut rest: Vec<usize> =
        on_node.iter().copied().filter(|pi| !evict.contains(pi) && pods[*pi].blocked.is_none()).collect();
    rest.sort_by_key(|&pi| (std::cmp::Reverse(pods[pi].host), pi));
    let mut rest = rest.into_iter();
    while short(freed(evict)) {
        match rest.next() {
            Some(pi) => evict.push(pi),
            None => {
                let reason = fit_host(&planner.s.nodes[t], cpu, mem).err().map(|e| e.to_string()).unwrap_or_default();
                return Err(Rejection::HostShort { reason });
            }
        }
    }
    Ok(())
}

/// Moves the candidate's pods off its GPUs, then checks the pod's Fit there; rolls back on failure.
fn try_candidate(planner: &mut Planner, pending: &PendingPod, c: &Candidate) -> Result<(usize, Seat), Rejection> {
    let cleared: HashSet<usize> = c.gpus.iter().copied().collect();
    let t = c.node;
    let mut done: Vec<(usize, usize, Seat)> = Vec::new();
    let mut failed = None;
    let mut order = c.evict.clone();
    order.sort_by_key(|&pi| std::cmp::Reverse(demand(&planner.s.pods[pi]).1));
    let off_limits = |tn: usize, d: usize| tn == t && (c.leave_node || cleared.contains(&d));
    for &pi in &order {
        planner.lift(pi);
        let keep_free = |tn: usize, d: usize, node: &GpuNode| !off_limits(tn, d) && !is_whole_free(&node.usage[d]);
        let anywhere = |tn: usize, d: usize, _: &GpuNode| !off_limits(tn, d);
        let to =
            planner.relocate(pi, &keep_free, f64::INFINITY).or_else(|| planner.relocate(pi, &anywhere, f64::INFINITY));
        let (from, old) = (planner.s.pods[pi].node, planner.s.pods[pi].seat());
        match to {
            Some((dest, seat)) => {
                planner.land(pi, dest, seat);
                done.push((pi, from, old));
            }
            None => {
                planner.land(pi, from, old);
                failed = Some(Rejection::NowhereToGo { pod: planner.s.pods[pi].key() });
                break;
            }
        }
    }
    let fitted = match failed {
        Some(why) => Err(why),
        None => fit_cleared(planner, pending, t, &cleared),
    };
    match fitted {
        Ok(landing) => {
            let mut touched = vec![t];
            for (pi, from, old) in done {
                touched.push(planner.s.pods[pi].node);
                touched.push(from);
                planner.record_move(pi, from, &old);
            }
            touched.sort_unstable();
            touched.dedup();
            touched.into_iter().for_each(|n| planner.refresh_frag(n));
            Ok(landing)
        }
        Err(why) => {
            for (pi, from, old) in done.into_iter().rev() {
                planner.lift(pi);
                planner.land(pi, from, old);
            }
            Err(why)
        }
    }
}

/// The engine's Fit of the pending pod on node `t`, restricted to the cleared GPUs.
fn fit_cleared(
    planner: &Planner,
    pending: &PendingPod,
    t: usize,
    cleared: &HashSet<usize>,
) -> Result<(usize, Seat), Rejection> {
    let n = &planner.s.nodes[t];
    fit_host(n, pending.host.0, pending.host.1).map_err(|e| Rejection::Host(Box::new(e)))?;
    let mut hints = pending.hints.clone();
    hints.use_uuids = n
        .devices
        .iter()
        .enumerate()
        .filter(|(d, dev)| cleared.contains(d) && pending.hints.uuid_allowed(&dev.id))
        .map(|(_, dev)| dev.id.clone())
        .collect();
    hints.nouse_uuids.clear();
    let fit = fit_pod(n, &pending.context(&hints)).map_err(|r| Rejection::StillDoesNotFit(Box::new(r)))?;
    Ok((t, Seat::of(&fit, pending.request.init_count)))
}

impl QueueResult {
    pub fn to_json(
        &self,
        snapshot: &Snapshot,
        budget: usize,
        baseline: Option<serde_json::Value>,
    ) -> serde_json::Value {
        let placements: Vec<serde_json::Value> = self
            .placed
            .iter()
            .filter_map(|r| {
                let t = r.target.as_ref()?;
                let mut placed =
                    serde_json::json!({"pod": r.pod, "uid": r.uid, "node": t.node, "gpus": t.gpus, "moves": r.moves.len()});
                if !t.mig.is_empty() {
                    placed["mig"] = serde_json::to_value(&t.mig).unwrap_or_default();
                }
                Some(placed)
            })
            .collect();
        let mut out = serde_json::json!({
            "objective": "pending",
            "pending": self.pending,
            "max_moves": budget,
            "unblocked_by_moves": self.unblocked_by_moves,
            "fit_without_moves": self.fit_without_moves,
            "moves": self.moves,
            "placements": placements,
            "queue": queue_json(&snapshot.pending, &snapshot.nodes),
            "before": self.before,
            "after": self.after_moves,
            "freed_whole_gpus": self.after_moves.free_whole_gpus as i64 - self.before.free_whole_gpus as i64,
            "nodes": snapshot.nodes.len(),
            "pods": snapshot.pods.len(),
            "elapsed_ms": round3(self.elapsed_ms),
        });
        if let Some(b) = baseline {
            out["baseline"] = b;
        }
        out
    }
}

/// The pending vGPU pods the queue was planned for, in queue order, with what each container
/// asks for (`mem_percentage` null when not given): the GPU map lists them.
/// Each pending pod's request, and (`never`) why it can never fit in this cluster, if so.
fn queue_json(queue: &[PendingPod], nodes: &[GpuNode]) -> Vec<serde_json::Value> {
    queue
        .iter()
        .map(|p| {
            let containers: Vec<serde_json::Value> = p
                .request
                .slots
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let r = r.as_ref()?;
                    let pct = (r.mem_percentage != crate::request::PERCENT_UNSET).then_some(r.mem_percentage);
                    Some(serde_json::json!({"init": p.request.is_init(i), "gpus": r.nums, "memoryMiB": r.memreq,
                        "memoryPercentage": pct, "cores": r.coresreq}))
                })
                .collect();
            let never = crate::headroom::never_fits(nodes, &p.request);
            serde_json::json!({"pod": p.key, "uid": p.uid, "containers": containers, "never": never})
        })
        .collect()
}

/// The baseline for the pending queue: a `strategy` plan within the budget (pending pods
/// unknown to it), then each pending pod placed where it fits, in order.
pub fn baseline_queue(
    snapshot: &Snapshot,
    queue: &[PendingPod],
    budget: usize,
    strategy: super::Strategy,
) -> serde_json::Value {
    let start = std::time::Instant::now();
    let mut work = snapshot.clone();
    let plan = super::plan_on(&mut work, budget, strategy);
    let mut planner = Planner::new(&mut work, 0);
    let mut unblocked = 0;
    for pending in queue {
        if let Some((t, fp)) = fits_now(&planner, pending) {
            occupy(&mut planner, t, &fp, pending.host, 1);
            unblocked += 1;
        }
    }
    serde_json::json!({
        "planner": plan.planner,
        "moves": plan.moves.len(),
        "unblocked": unblocked,
        "after": plan.after,
        "freed_whole_gpus": plan.after.free_whole_gpus as i64 - plan.before.free_whole_gpus as i64,
        "elapsed_ms": round3(start.elapsed().as_secs_f64() * 1000.0),
    })
}
