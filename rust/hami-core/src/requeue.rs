//! Retry at release: which of the pods Filter rejected fit now, by Fit over the state as it is,
//! in kube-scheduler's queue order (priority, then age).
//!
//! A pod is looked at again only on the nodes changed since Fit last looked at it (the node
//! change log), or on all its candidates when its namespace's quota room grew. The pods that fit
//! count against their node, in order, so that one freed GPU requeues one pod, not every pod that
//! wanted it; a requeued pod keeps counting until Filter sees it again or [`REQUEUE_HOLD_SECONDS`]
//! pass. A requeued pod is not requeued again before Filter rejects it again: no retry loops.

use crate::filter::{evaluate_nodes, Placement, Policies};
use crate::model::MigHold;
use crate::state::waiting::{Requeued, WaitingPod};
use crate::state::{ClusterState, OwnFootprint, PodRecord};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::sync::Arc;

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

/// Node looks one pass makes at most (well under a microsecond each): the engine is locked
/// meanwhile and Filter waits. A pass that stops short says so; the pods it did not reach are
/// looked at by the next one.
pub const REQUEUE_PASS_BUDGET: usize = 100_000;

/// One pass: the pods to requeue, and whether waiting pods were left for the next pass.
#[derive(Debug, Default)]
pub struct RequeuePass {
    pub pods: Vec<Requeue>,
    pub more: bool,
}

/// The waiting pods that fit at `now`, in queue order; each is marked requeued. At most about
/// `budget` node looks (at least one pod's).
pub fn fits_after_release(state: &mut ClusterState, policies: &Policies, now: i64, budget: usize) -> RequeuePass {
    if state.waiting().is_empty() {
        return RequeuePass::default();
    }
    state.expire_holds(now);
    let held = count_requeued(state, now);
    let order = unrequeued_in_queue_order(state);
    let touched = last_touches(state, order.iter().filter_map(|k| state.waiting().get(k)).map(|w| w.seen));
    let mut ids = CandidateIds::default();
    let (mut out, mut left, mut reached) = (Vec::new(), budget, order.len());
    for (i, key) in order.iter().enumerate() {
        let Some(waiting) = state.waiting().get(key).cloned() else { continue };
        let nodes = nodes_to_look_at(state, &waiting, &touched, &mut ids);
        if nodes.is_empty() {
            continue;
        }
        if nodes.len() > left && left < budget {
            reached = i;
            break;
        }
        left = left.saturating_sub(nodes.len());
        let Some(record) = fit_on(state, policies, key, &waiting, &nodes, now) else { continue };
        out.push(requeue_of(key, &waiting, &record));
        state.reserve_tentatively(tentative_key(key), record.clone());
        if let Some(w) = state.waiting_mut().get_mut(key) {
            w.requeued = Some(Requeued { record: Some(record), until: now + REQUEUE_HOLD_SECONDS });
        }
    }
    for key in held.iter().chain(out.iter().map(|r| &r.key)) {
        state.release_tentative(&tentative_key(key));
    }
    // The pods looked at and still waiting have seen the state as it is now.
    let position = state.nodes.log_position();
    for key in &order[..reached] {
        let room = state.waiting().get(key).map(|w| state.quota_room(&w.pod.metadata.namespace));
        if let (Some(room), Some(w)) = (room, state.waiting_mut().get_mut(key)) {
            if w.requeued.is_none() {
                (w.seen, w.quota_room) = (position, room);
            }
        }
    }
    RequeuePass { pods: out, more: reached < order.len() }
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

/// The node ids of each candidate list met in one pass (the pods of a burst share one list).
#[derive(Default)]
struct CandidateIds(FxHashMap<*const String, FxHashSet<u32>>);

impl CandidateIds {
    fn of(&mut self, state: &ClusterState, list: &Arc<[String]>) -> &FxHashSet<u32> {
        self.0.entry(list.as_ptr()).or_insert_with(|| list.iter().filter_map(|n| state.nodes.id(n)).collect())
    }
}

/// The candidates worth a look: all of them when the log is lost or the quota room grew, else
/// those changed since Fit last looked at the pod.
fn nodes_to_look_at(
    state: &ClusterState,
    waiting: &WaitingPod,
    touched: &Option<FxHashMap<u32, u64>>,
    ids: &mut CandidateIds,
) -> Vec<String> {
    let room_grew = match (waiting.quota_room, state.quota_room(&waiting.pod.metadata.namespace)) {
        (Some((mem, cores)), Some((mem_now, cores_now))) => mem_now > mem || cores_now > cores,
        (Some(_), None) => true,
        _ => false,
    };
    if let Some(touched) = touched.as_ref().filter(|_| !room_grew) {
        if state.nodes.log_position() <= waiting.seen {
            return Vec::new();
        }
        let fresh: Vec<u32> = touched.iter().filter(|(_, &at)| at >= waiting.seen).map(|(&id, _)| id).collect();
        let candidates = ids.of(state, &waiting.candidates);
        let mut names: Vec<String> = fresh
            .into_iter()
            .filter(|id| candidates.contains(id))
            .filter_map(|id| state.nodes.by_id(id))
            .map(|n| n.name.clone())
            .collect();
        names.sort_unstable();
        return names;
    }
    let mut unique = FxHashSet::default();
    waiting.candidates.iter().filter(|n| state.nodes.id(n).is_some() && unique.insert(n.as_str())).cloned().collect()
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
            (node.to_owned(), fit.footprint(init_count), mig)
        })
    })?;
    let (node, footprint, mig) = chosen;
    let meta = &waiting.pod.metadata;
    let mut record = state.record_with_vendors(&meta.namespace, &meta.name, &node, footprint);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Engine};
    use serde_json::json;

    fn apply(e: &mut Engine, v: serde_json::Value) {
        e.state.apply(v.to_string().as_bytes()).unwrap();
    }

    #[test]
    fn a_pass_over_budget_stops_short_and_the_next_goes_on_where_it_stopped() {
        let mut e = Engine::new(Config::default());
        let names: Vec<String> = (0..4).map(|i| format!("n{i}")).collect();
        for name in &names {
            let gpu = [json!({"id": format!("GPU-{name}"), "index": 0, "count": 10, "devmem": 1000, "devcore": 100,
                              "type": "NVIDIA-T4", "mode": "hami-core", "health": true})];
            apply(&mut e, crate::testkit::nvidia_node(name, &gpu));
            apply(
                &mut e,
                json!({"kind": "Pod", "metadata": {"name": format!("h-{name}"), "namespace": "d",
                "uid": format!("h-{name}"), "annotations": {"hami.io/vgpu-node": name,
                "hami.io/vgpu-devices-allocated": format!("GPU-{name},NVIDIA,1000,0:;")}}, "spec": {}}),
            );
        }
        for w in 0..3 {
            let pod = json!({"metadata": {"name": format!("w{w}"), "namespace": "d", "uid": format!("w{w}")},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10"}}}]}});
            let args = json!({"Pod": pod, "Nodes": null, "NodeNames": names});
            assert_eq!(e.filter(args.to_string().as_bytes(), 0, true).outcome, crate::Outcome::Unschedulable);
        }
        for name in &names {
            e.state
                .delete(
                    json!({"kind": "Pod", "metadata": {"name": format!("h-{name}"), "namespace": "d",
                "uid": format!("h-{name}")}})
                    .to_string()
                    .as_bytes(),
                )
                .unwrap();
        }
        let mut requeued = Vec::new();
        let mut passes = 0;
        loop {
            let pass = fits_after_release(&mut e.state, &e.policies, 0, 5);
            requeued.extend(pass.pods.into_iter().map(|r| r.name));
            passes += 1;
            if !pass.more {
                break;
            }
        }
        assert_eq!(passes, 3, "4 node looks per pod, 5 per pass: one pod a pass");
        assert_eq!(requeued, ["w0", "w1", "w2"]);
    }
}
