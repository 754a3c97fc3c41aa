//! vGPU-aware preemption: for a pending pod Filter rejected, the pods to evict so that it fits.
//!
//! On each node it was offered, the pods of lower priority (never equal or higher, never one
//! already terminating) are set aside, and the pod must then pass the engine's own Fit there;
//! they are then given back one by one, most important first (higher priority, then smaller,
//! then by key), each kept when the pod still fits without it. What is left are the victims: a
//! set from which no single pod could be spared. Among nodes the choice is kube-scheduler's
//! order: the lowest highest-priority victim, then the lowest sum of priorities (each shifted by
//! 2^31, so more victims never sum lower), then the fewest victims, then the node name.
//!
//! The evaluation is a what-if: set-aside pods are taken out untracked and put back before the
//! answer, so no node counts as changed. The pods a pass chooses are held at once (the GPUs the
//! Fit chose, as the descheduler's reservation holds them), so two preemptors never share victims;
//! that hold is tentative too, and dropping it (a PodDisruptionBudget forbids the evictions) is
//! no change that would make anyone look again: no retry loop.

use crate::filter::{evaluate_nodes, Placement, Policies};
use crate::state::reservations::Reservation;
use crate::state::{ClusterState, OwnFootprint, PodRecord};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// Fit looks one pass makes at most (each well under a microsecond's work per GPU): the engine is
/// locked meanwhile. A pass that stops short says so; the pods it did not reach come next.
pub const PREEMPT_PASS_BUDGET: usize = 5_000;

/// Fit looks one pod gets at most in a pass (its best node within them is taken).
pub const PREEMPT_POD_BUDGET: usize = 2_500;

/// Nodes where the pod would fit after evictions found before the best of them is taken, as
/// kube-scheduler stops its dry run after a sample of candidates (at least 100 of them there).
pub const PREEMPT_CANDIDATES: usize = 32;

/// How long the GPUs chosen for a preemptor stay held in the engine before the serving side
/// writes the reservation (which then decides the expiry) or drops it.
pub const PREEMPT_HOLD_SECONDS: i64 = 60;

pub use crate::wire::explain::PreemptionReport;
pub use crate::wire::preempt::{Choice, PreemptPass, Preemption, Victim};

/// Why a pod gets no victims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoVictims {
    /// `preemptionPolicy: Never`.
    PolicyNever,
    /// No pod of lower priority holds GPUs on the nodes it may use.
    NoLowerPriority,
    /// It does not fit even with every lower-priority pod gone.
    DoesNotFit,
    /// The pass's work ran out before every node was looked at.
    OutOfBudget,
}

impl std::fmt::Display for NoVictims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::PolicyNever => "its preemptionPolicy is Never",
            Self::NoLowerPriority => "no pod of lower priority holds GPUs on the nodes it may use",
            Self::DoesNotFit => "it does not fit on any node even with every lower-priority pod evicted",
            Self::OutOfBudget => "not every node was looked at (work bound)",
        })
    }
}

/// A lower-priority pod on a node, as the choice orders them.
#[derive(Debug, Clone)]
struct Lower {
    key: String,
    priority: i32,
    mem: i64,
}

/// The pods that may be evicted (not already terminating), by node: built once per pass.
#[derive(Debug, Default)]
pub struct Residents {
    by_node: FxHashMap<Arc<str>, Vec<Lower>>,
    /// The lowest priority among them: a pod at or below it has no victims anywhere.
    lowest: i32,
}

impl Residents {
    pub fn of(state: &ClusterState) -> Self {
        let mut out = Self { by_node: FxHashMap::default(), lowest: i32::MAX };
        for (key, rec) in state.pods() {
            if rec.terminating || key.starts_with('\0') {
                continue;
            }
            let mem = rec.footprint.iter().map(|c| c.mem).sum();
            out.lowest = out.lowest.min(rec.priority);
            let lower = Lower { key: key.clone(), priority: rec.priority, mem };
            out.by_node.entry(rec.node.clone()).or_default().push(lower);
        }
        out
    }

    /// The pods below `priority` on `node`.
    fn below(&self, node: &str, priority: i32) -> Vec<&Lower> {
        self.by_node.get(node).map_or_else(Vec::new, |pods| pods.iter().filter(|p| p.priority < priority).collect())
    }
}

/// Fit looks left, and the node (by name) where looking stopped when they ran out.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    pub left: usize,
    pub stopped_at: Option<String>,
}

impl Budget {
    pub fn new(left: usize) -> Self {
        Self { left, stopped_at: None }
    }
}

/// The victims for the pod of `placement` (key `key`, priority `priority`) on the best of `nodes`
/// (looked at by name), within `budget`: when it runs out, the best node found so far (else where
/// it stopped).
#[allow(clippy::too_many_arguments)]
pub fn choose_victims(
    state: &mut ClusterState,
    residents: &Residents,
    placement: &Placement,
    key: &str,
    priority: i32,
    nodes: &[&str],
    now: i64,
    budget: &mut Budget,
) -> Result<Choice, NoVictims> {
    if priority <= residents.lowest {
        return Err(NoVictims::NoLowerPriority);
    }
    let mut names = nodes.to_vec();
    names.sort_unstable();
    names.dedup();
    let mut best: Option<(Rank, Choice)> = None;
    let mut any_lower = false;
    let mut found = 0;
    for node in names {
        if found == PREEMPT_CANDIDATES {
            break;
        }
        let pods = residents.below(node, priority);
        if pods.is_empty() {
            continue;
        }
        any_lower = true;
        if budget.left < pods.len() + 2 {
            budget.stopped_at = Some(node.to_owned());
            break;
        }
        budget.left -= pods.len() + 2;
        let Some(choice) = victims_on_node(state, placement, key, node, pods, now) else { continue };
        found += 1;
        let rank = rank(&choice.victims);
        if best.as_ref().is_none_or(|(r, _)| rank < *r) {
            best = Some((rank, choice));
        }
    }
    match best {
        Some((_, choice)) => Ok(choice),
        None if !any_lower => Err(NoVictims::NoLowerPriority),
        None if budget.stopped_at.is_some() => Err(NoVictims::OutOfBudget),
        None => Err(NoVictims::DoesNotFit),
    }
}

/// A node's rank as a preemption target: lower is better.
type Rank = (i32, i64, usize);

/// kube-scheduler's order of candidate nodes, after PDB violations (checked at eviction here):
/// lowest highest priority, lowest shifted sum, fewest; node names break ties (nodes come in order).
fn rank(victims: &[Victim]) -> Rank {
    let highest = victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN);
    let sum = victims.iter().map(|v| i64::from(v.priority) + (1 << 31)).sum();
    (highest, sum, victims.len())
}

/// Sets every lower pod aside, then gives back the most important first while the pod still fits.
fn victims_on_node(
    state: &mut ClusterState,
    placement: &Placement,
    key: &str,
    node: &str,
    mut pods: Vec<&Lower>,
    now: i64,
) -> Option<Choice> {
    pods.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.mem.cmp(&b.mem)).then_with(|| a.key.cmp(&b.key)));
    let aside: Vec<(&Lower, PodRecord)> = pods
        .into_iter()
        .filter_map(|p| {
            let record = state.pod(&p.key)?.clone();
            state.release_tentative(&p.key);
            Some((p, record))
        })
        .collect();
    let choice = reprieve(state, placement, key, node, &aside, now);
    for (p, record) in aside {
        state.reserve_tentatively(p.key.clone(), record);
    }
    choice
}

/// With `aside` out of the node: each given back in order unless the pod no longer fits without it.
fn reprieve(
    state: &mut ClusterState,
    placement: &Placement,
    key: &str,
    node: &str,
    aside: &[(&Lower, PodRecord)],
    now: i64,
) -> Option<Choice> {
    fit_gpus(state, placement, key, node, now)?;
    let mut victims = Vec::new();
    for (p, record) in aside {
        state.reserve_tentatively(p.key.clone(), record.clone());
        if fit_gpus(state, placement, key, node, now).is_none() {
            state.release_tentative(&p.key);
            let (namespace, name) = (record.namespace.to_string(), record.name.to_string());
            victims.push(Victim { key: p.key.clone(), namespace, name, priority: p.priority });
        }
    }
    let gpus = fit_gpus(state, placement, key, node, now)?;
    victims.sort_by(|a, b| b.priority.cmp(&a.priority).then_with(|| a.key.cmp(&b.key)));
    Some(Choice { node: node.to_owned(), gpus, victims })
}

/// The GPUs the engine's Fit gives the pod on `node` as the state is (its own hold free), if it fits.
fn fit_gpus(state: &mut ClusterState, placement: &Placement, key: &str, node: &str, now: i64) -> Option<Vec<String>> {
    state.without_pod(key, OwnFootprint::Restore, |s| {
        let eval = evaluate_nodes(s, placement, now, std::iter::once((node, s.node(node))), |n| s.node(n));
        eval.chosen.map(|(_, fit)| {
            let mut gpus: Vec<String> = Vec::new();
            let devices = fit.slots.iter().chain(fit.vendor.iter().flat_map(|(_, d)| d.iter())).flatten();
            for d in devices {
                if !gpus.contains(&d.uuid) {
                    gpus.push(d.uuid.clone());
                }
            }
            gpus
        })
    })
}

/// The waiting pods that may preempt, in kube-scheduler's queue order: not requeued, not holding
/// GPUs already, not `Never`, and a node changed since preemption last looked for them.
fn eligible_in_queue_order(state: &ClusterState) -> Vec<String> {
    let position = state.nodes.log_position();
    let mut pods: Vec<_> = state
        .waiting()
        .iter()
        .filter(|(k, w)| {
            w.requeued.is_none()
                && w.may_preempt()
                && w.preempt_seen.is_none_or(|seen| seen < position)
                && state.reservations().get(k).is_none()
        })
        .collect();
    pods.sort_by(|(ka, a), (kb, b)| a.queue_order(b).then_with(|| ka.cmp(kb)));
    pods.into_iter().map(|(k, _)| k.clone()).collect()
}

/// One pass over the waiting pods: the preemptions to carry out, each held at once in the engine
/// for [`PREEMPT_HOLD_SECONDS`]; every pod looked at is not looked at again before a node changes.
pub fn preemptions(state: &mut ClusterState, policies: &Policies, now: i64, budget: usize) -> PreemptPass {
    if state.waiting().is_empty() {
        return PreemptPass::default();
    }
    state.expire_holds(now);
    let order = eligible_in_queue_order(state);
    if order.is_empty() {
        return PreemptPass::default();
    }
    let position = state.nodes.log_position();
    let residents = Residents::of(state);
    let mut out = PreemptPass::default();
    let mut left = budget;
    let mut taken: FxHashSet<String> = FxHashSet::default();
    for key in order {
        if left == 0 {
            out.more = true;
            break;
        }
        let Some(waiting) = state.waiting().get(&key).cloned() else { continue };
        let from = waiting.preempt_from.as_deref().unwrap_or("");
        let nodes: Vec<&str> =
            waiting.candidates.iter().map(String::as_str).filter(|n| !taken.contains(*n) && *n >= from).collect();
        let Ok(placement) = Placement::new(state, &waiting.pod, policies) else { continue };
        // Each pod gets at most its share, so that one pod with many nodes cannot stall the pass:
        // it gets the best node found within it (kube-scheduler samples candidates too), else the
        // next pass goes on from where this one stopped.
        let mut share = Budget::new(left.min(PREEMPT_POD_BUDGET));
        let before = share.left;
        let chosen = match placement.request.is_empty() {
            true => Err(NoVictims::NoLowerPriority),
            false => choose_victims(state, &residents, &placement, &key, waiting.priority, &nodes, now, &mut share),
        };
        left -= before - share.left;
        if let Some(w) = state.waiting_mut().get_mut(&key) {
            match (&chosen, share.stopped_at) {
                (Err(NoVictims::OutOfBudget), Some(at)) => {
                    w.preempt_from = Some(at);
                    out.more = true;
                }
                _ => (w.preempt_from, w.preempt_seen) = (None, Some(position)),
            }
        }
        let Ok(choice) = chosen else { continue };
        let meta = &waiting.pod.metadata;
        let hold = Reservation {
            pod: format!("{}/{}", meta.namespace, meta.name),
            node: Arc::from(choice.node.as_str()),
            gpus: choice.gpus.iter().map(|g| Box::from(g.as_str())).collect(),
            expires: now + PREEMPT_HOLD_SECONDS,
        };
        if state.hold_tentatively(&key, hold).is_err() {
            continue;
        }
        taken.insert(choice.node.clone());
        out.preemptions.push(Preemption {
            key,
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            priority: waiting.priority,
            choice,
        });
    }
    out
}

/// The preemption the serving side would carry out for this pod now, over `nodes` (a dry run).
pub fn report(
    state: &mut ClusterState,
    placement: &Placement,
    key: &str,
    nodes: &[&str],
    now: i64,
) -> PreemptionReport {
    let spec = &placement.pod.spec;
    let priority = spec.priority.unwrap_or(0);
    let chosen = match spec.preemption_policy.as_deref() {
        Some("Never") => Err(NoVictims::PolicyNever),
        _ => {
            let residents = Residents::of(state);
            let mut budget = Budget::new(PREEMPT_PASS_BUDGET);
            choose_victims(state, &residents, placement, key, priority, nodes, now, &mut budget)
        }
    };
    match chosen {
        Ok(c) => PreemptionReport {
            possible: true,
            priority,
            node: Some(c.node),
            gpus: c.gpus,
            victims: c.victims,
            reason: String::new(),
        },
        Err(why) => PreemptionReport {
            possible: false,
            priority,
            node: None,
            gpus: Vec::new(),
            victims: Vec::new(),
            reason: why.to_string(),
        },
    }
}
