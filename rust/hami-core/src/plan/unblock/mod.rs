//! `plan --for POD`: the fewest moves after which one pending pod fits.
//!
//! Each node is costed first (no Fit calls): for every GPU the pod may use, the fewest pods to
//! move off it so that the pod's per-GPU memory, cores, a slot and exclusivity are free; the
//! node's cost is the union of those pods over its cheapest GPUs. Nodes are then tried cheapest
//! first: each evicted pod is relocated with the planner's Fit-checked `relocate` (never onto
//! the GPUs being cleared, whole free GPUs last), and the pending pod itself must then pass the
//! engine's Fit on the cleared GPUs. The first node that passes wins; a failed try is rolled back.

mod cost;
mod pending;
mod queue;

pub use pending::PendingPod;
pub use queue::{baseline_queue, unblock_queue, QueueResult};

use super::{demand, is_whole_free, round3, Planner, Rejection, Seat, Snapshot};
use crate::error::Result;
use crate::fit::{fit_host, fit_pod, fit_pod_within};
use crate::model::{GpuNode, RESERVED};
pub use crate::wire::plan::Unblock;
use crate::wire::plan::{Reservation, UnblockPlan};
use cost::cost_node;
use std::collections::{BTreeMap, HashSet};

/// How many cheapest candidate nodes are tried with real moves before giving up.
const MAX_TRIES: usize = 24;

impl Unblock {
    /// The document of a plan for this pod (`--for`) on `snapshot`.
    pub fn to_plan(&self, snapshot: &Snapshot) -> UnblockPlan {
        let reservation = match &self.target {
            Some(t) if !self.moves.is_empty() => Some(Reservation {
                pod: self.pod.clone(),
                uid: self.uid.clone(),
                node: t.node.clone(),
                gpus: t.gpus.clone(),
            }),
            _ => None,
        };
        UnblockPlan {
            objective: "for",
            unblock: Unblock { elapsed_ms: round3(self.elapsed_ms), ..self.clone() },
            nodes: snapshot.nodes.len(),
            pods: snapshot.pods.len(),
            reservation,
        }
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
    let fit = if pending.request.asks_vendors() {
        // The pod comes with a reservation, not a UUID filter: the Filter's verdict on the node is
        // its Fit on every device (Kunlunxin's graph refuses eight cards of ten free), then it
        // takes the held ones.
        let ctx = pending.context(&pending.hints);
        fit_pod(n, &ctx).and_then(|_| fit_pod_within(n, &ctx, |d| cleared.contains(&d)))
    } else {
        let mut hints = pending.hints.clone();
        hints.use_uuids = n
            .devices
            .iter()
            .enumerate()
            .filter(|(d, dev)| cleared.contains(d) && pending.hints.uuid_allowed(&dev.id))
            .map(|(_, dev)| dev.id.clone())
            .collect();
        hints.nouse_uuids.clear();
        fit_pod(n, &pending.context(&hints))
    };
    let fit = fit.map_err(|r| Rejection::StillDoesNotFit(Box::new(r)))?;
    Ok((t, Seat::of(&fit, pending.request.init_count)))
}
