//! Retry at release: which of the pods Filter rejected fit now, by Fit over the state as it is,
//! in kube-scheduler's queue order (priority, then age).
//!
//! A pod is looked at again only on the nodes changed since Fit last looked at it (the node
//! change log), or on all its candidates when its namespace's quota room grew. The pods that fit
//! count against their node, in order, so that one freed GPU requeues one pod, not every pod that
//! wanted it; a requeued pod keeps counting until Filter sees it again or [`REQUEUE_HOLD_SECONDS`]
//! pass. A requeued pod is not requeued again before Filter rejects it again: no retry loops.

use crate::filter::{evaluate_nodes, Placement, Policies};
use crate::model::{collapse, MigHold};
use crate::state::waiting::{Requeued, WaitingPod};
use crate::state::{ClusterState, OwnFootprint, PodRecord};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

/// How long a requeued pod's expected placement counts against its node while kube-scheduler has
/// not brought it back to Filter (its backoff is at most 10 s by default).
pub const REQUEUE_HOLD_SECONDS: i64 = 30;

/// A waiting pod that fits now: to be put back in kube-scheduler's active queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Requeue {
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub priority: i32,
    /// Where Fit would place it now.
    pub node: String,
}

/// The waiting pods that fit at `now`, in queue order; each is marked requeued.
pub fn fits_after_release(state: &mut ClusterState, policies: &Policies, now: i64) -> Vec<Requeue> {
    if state.waiting().is_empty() {
        return Vec::new();
    }
    state.expire_holds(now);
    let held = count_requeued(state, now);
    let order = unrequeued_in_queue_order(state);
    let touched = last_touches(state, order.iter().filter_map(|k| state.waiting().get(k)).map(|w| w.seen));
    let mut out = Vec::new();
    for key in &order {
        let Some(waiting) = state.waiting().get(key).cloned() else { continue };
        let nodes = nodes_to_look_at(state, &waiting, &touched);
        let fit = if nodes.is_empty() { None } else { fit_on(state, policies, key, &waiting, &nodes, now) };
        let Some(record) = fit else { continue };
        out.push(requeue_of(key, &waiting, &record));
        state.reserve_tentatively(tentative_key(key), record.clone());
        if let Some(w) = state.waiting_mut().get_mut(key) {
            w.requeued = Some(Requeued { record: Some(record), until: now + REQUEUE_HOLD_SECONDS });
        }
    }
    for key in held.iter().chain(out.iter().map(|r| &r.key)) {
        state.release(&tentative_key(key));
    }
    // Everything this pass changed is undone: the pods still waiting have seen the state as it is.
    let position = state.nodes.log_position();
    for key in &order {
        let room = state.waiting().get(key).map(|w| state.quota_room(&w.pod.metadata.namespace));
        if let (Some(room), Some(w)) = (room, state.waiting_mut().get_mut(key)) {
            if w.requeued.is_none() {
                (w.seen, w.quota_room) = (position, room);
            }
        }
    }
    out
}

/// The key a requeued pod's expected footprint is counted under for the length of one pass.
fn tentative_key(key: &str) -> String {
    format!("\0requeued/{key}")
}

/// Counts the expected placements of the pods requeued within the hold; their keys. A hold that
/// has passed is dropped and its node marked changed: its room is released to the others.
fn count_requeued(state: &mut ClusterState, now: i64) -> Vec<String> {
    let mut held = Vec::new();
    let mut lapsed = Vec::new();
    for (key, waiting) in state.waiting_mut().iter_mut() {
        let Some(requeued) = waiting.requeued.as_mut() else { continue };
        match requeued.until > now {
            true => held.extend(requeued.record.clone().map(|r| (key.clone(), r))),
            false => lapsed.extend(requeued.record.take().map(|r| r.node)),
        }
    }
    for node in lapsed {
        state.nodes.get_mut(&node);
    }
    let keys = held.iter().map(|(k, _)| k.clone()).collect();
    for (key, record) in held {
        state.reserve_tentatively(tentative_key(&key), record);
    }
    keys
}

/// The keys of the pods not requeued yet, in kube-scheduler's queue order (ties by key).
fn unrequeued_in_queue_order(state: &ClusterState) -> Vec<String> {
    let mut pods: Vec<(&String, &WaitingPod)> = state.waiting().iter().filter(|(_, w)| w.requeued.is_none()).collect();
    pods.sort_by(|(ka, a), (kb, b)| a.queue_order(b).then_with(|| ka.cmp(kb)));
    pods.into_iter().map(|(k, _)| k.clone()).collect()
}

/// For each node id changed since the earliest of `seen`, the log position of its last change;
/// `None` when the log does not reach back that far (every node counts as changed then).
fn last_touches(state: &ClusterState, seen: impl Iterator<Item = u64>) -> Option<FxHashMap<u32, u64>> {
    let from = seen.min().unwrap_or_else(|| state.nodes.log_position());
    let changed = state.nodes.changed_since(from)?;
    Some(changed.iter().enumerate().map(|(i, &id)| (id, from + i as u64)).collect())
}

/// The candidates worth a look: all of them when the log is lost or the quota room grew, else
/// those changed since Fit last looked at the pod.
fn nodes_to_look_at(state: &ClusterState, waiting: &WaitingPod, touched: &Option<FxHashMap<u32, u64>>) -> Vec<String> {
    let room_grew = match (waiting.quota_room, state.quota_room(&waiting.pod.metadata.namespace)) {
        (Some((mem, cores)), Some((mem_now, cores_now))) => mem_now > mem || cores_now > cores,
        (Some(_), None) => true,
        _ => false,
    };
    let mut unique = FxHashSet::default();
    let changed_since = |name: &String| match (touched, state.nodes.id(name)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(touched), Some(id)) => touched.get(&id).is_some_and(|&at| at >= waiting.seen),
    };
    waiting
        .candidates
        .iter()
        .filter(|n| (room_grew && state.nodes.id(n).is_some()) || changed_since(n))
        .filter(|n| unique.insert(n.as_str()))
        .cloned()
        .collect()
}

/// Fit of the pod on `nodes`, as Filter decides it (its own hold free): the footprint it would
/// take on the chosen node, if any.
fn fit_on(
    state: &mut ClusterState,
    policies: &Policies,
    key: &str,
    waiting: &WaitingPod,
    nodes: &[String],
    now: i64,
) -> Option<PodRecord> {
    let placement = Placement::new(state, &waiting.pod, policies).ok()?;
    if placement.request.is_empty() {
        return None;
    }
    let init_count = placement.request.init_count;
    let chosen = state.without_pod(key, OwnFootprint::Restore, |s| {
        let candidates = nodes.iter().map(|n| (n.as_str(), s.nodes.get(n)));
        let eval = evaluate_nodes(s, &placement, now, candidates, |n| s.nodes.get(n));
        eval.chosen.map(|(node, fit)| {
            let mig: Box<[MigHold]> =
                fit.mig.iter().map(|a| MigHold { gpu: a.gpu_uuid.as_str().into(), placement: a.placement }).collect();
            (node.to_owned(), collapse(&fit.slots, init_count, false), mig)
        })
    })?;
    let (node, footprint, mig) = chosen;
    let meta = &waiting.pod.metadata;
    let mut record = state.record(&meta.namespace, &meta.name, &node, footprint);
    record.mig = mig;
    Some(record)
}

fn requeue_of(key: &str, waiting: &WaitingPod, record: &PodRecord) -> Requeue {
    let meta = &waiting.pod.metadata;
    Requeue {
        key: key.to_owned(),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        priority: waiting.priority,
        node: record.node.to_string(),
    }
}
