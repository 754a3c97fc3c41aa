//! Checks of moves and placement targets with the engine's Fit, before anything is evicted.

use super::{demand, Measures, Move, Planner, Rejection, Snapshot};
use crate::annotations::USE_UUID_KEY;
use crate::error::Result;
use crate::fit::{fit_host, fit_pod, fit_pod_within};
use crate::model::{GpuNode, CORDONED, HEALTHY};
use crate::request::PodRequest;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Re-runs a move sequence on a fresh copy of `snapshot`, checking each move with the engine's
/// Fit at the moment it runs (old copy released, target GPUs whitelisted). `Err` names the
/// first move that would not be accepted.
pub fn validate_moves(snapshot: &Snapshot, moves: &[Move]) -> Result<Measures, Rejection> {
    let mut work = snapshot.clone();
    let by_key: HashMap<String, usize> = work.pods.iter().enumerate().map(|(i, p)| (p.key(), i)).collect();
    let mut planner = Planner::new(&mut work, usize::MAX);
    for (k, mv) in moves.iter().enumerate() {
        let &pi = by_key.get(&mv.pod).ok_or_else(|| Rejection::PodNotInSnapshot { step: k, pod: mv.pod.clone() })?;
        let p = &planner.s.pods[pi];
        if let Some(why) = &p.blocked {
            return Err(Rejection::PodBlocked { step: k, pod: mv.pod.clone(), why: why.clone() });
        }
        let now = planner.place_of(p.node, &p.seat());
        if !now.same_gpus(&mv.from) {
            return Err(Rejection::PodElsewhere {
                step: k,
                pod: mv.pod.clone(),
                now: Box::new(now),
                from: Box::new(mv.from.clone()),
            });
        }
        let &t = planner
            .s
            .index
            .get(&mv.to.node)
            .ok_or_else(|| Rejection::TargetNodeMissing { step: k, node: mv.to.node.clone() })?;
        let targets: HashSet<String> = mv.to.gpus.iter().cloned().collect();
        planner.lift(pi);
        let allowed = |_: usize, d: usize, n: &GpuNode| targets.contains(&n.devices[d].id);
        let seat = planner.fit_on(pi, t, &allowed).ok_or_else(|| Rejection::MoveDoesNotFit {
            step: k,
            pod: mv.pod.clone(),
            to: mv.to.clone(),
        })?;
        planner.land(pi, t, seat);
        planner.refresh_frag(t);
        let src = planner.s.index[&mv.from.node];
        planner.refresh_frag(src);
    }
    let frags = planner.frags.clone();
    Ok(work.measures_with(&frags))
}

/// Validates a single placement target for one pod (the controller's pre-eviction check):
/// the node exists and is registered, every GPU exists and is healthy and not cordoned, and the
/// pod fits there once its old copy is gone. `gpus` are `gpu-N` indexes (an optional `/suffix`
/// is ignored) or UUIDs. Returns the resolved UUIDs.
pub fn validate_target(snapshot: &Snapshot, pod: &str, node: &str, gpus: &[String]) -> Result<Vec<String>, Rejection> {
    let &t = snapshot.index.get(node).ok_or_else(|| Rejection::NodeNotFound { node: node.into() })?;
    let n = &snapshot.nodes[t];
    if let Some(e) = &n.register_error {
        return Err(Rejection::NodeNotRegistered { node: node.into(), error: e.clone() });
    }
    let uuids = resolve_gpus(n, gpus)?;
    for u in &uuids {
        let d = n.device_index(u).expect("resolved above");
        if !n.hot[d].has(HEALTHY) {
            return Err(Rejection::GpuUnhealthy { gpu: u.clone(), node: node.into() });
        }
        if n.hot[d].has(CORDONED) {
            return Err(Rejection::GpuCordoned { gpu: u.clone(), node: node.into() });
        }
        if let Some((_, r)) = snapshot.holds.iter().find(|(_, r)| *r.node == *node && r.gpus.iter().any(|g| **g == **u))
        {
            return Err(Rejection::GpuHeld { gpu: u.clone(), node: node.into(), pending: r.pod.to_string() });
        }
    }
    let mut work = snapshot.clone();
    let mut planner = Planner::new(&mut work, usize::MAX);
    let Some(pi) = planner.s.pods.iter().position(|p| p.key() == pod) else {
        // The pod holds no GPU yet (or is not known): nothing to release, fit a request-less check.
        return Ok(uuids);
    };
    let (k, _, _) = demand(&planner.s.pods[pi]);
    if k != uuids.len() && !devices_it_may_take(&planner.s.pods[pi].request).contains(&uuids.len()) {
        return Err(Rejection::GpuCountMismatch { pod: pod.into(), uses: k, named: uuids.len() });
    }
    planner.lift(pi);
    let set: HashSet<&String> = uuids.iter().collect();
    let allowed = |_: usize, d: usize, n: &GpuNode| set.contains(&n.devices[d].id);
    if let Err(reason) = fit_host(&planner.s.nodes[t], planner.s.pods[pi].host.0, planner.s.pods[pi].host.1) {
        return Err(Rejection::HostDoesNotFit { pod: pod.into(), node: node.into(), reason: Box::new(reason) });
    }
    if planner.fit_on(pi, t, &allowed).is_none() {
        let p = &planner.s.pods[pi];
        let n = &planner.s.nodes[t];
        let hints = p.hints.pinned_to(&uuids);
        let fit = if p.request.asks_vendors() {
            fit_pod_within(n, &p.context(&p.hints), |d| set.contains(&n.devices[d].id))
        } else {
            fit_pod(n, &p.context(&hints))
        };
        let reason = fit.err().map(|f| f.to_string()).unwrap_or_default();
        return Err(Rejection::GpusDoNotFit { pod: pod.into(), node: node.into(), gpus: uuids, reason });
    }
    Ok(uuids)
}

/// How many distinct devices a pod's Fit may give it: one at least (containers share devices,
/// and Kunlunxin's graph may give fewer cards than asked, as HAMi's does), every container's own
/// count at most.
fn devices_it_may_take(request: &PodRequest) -> std::ops::RangeInclusive<usize> {
    let nums = |n: i64| n.max(0) as usize;
    let most: usize = request.slots.iter().flatten().map(|r| nums(r.nums)).sum::<usize>()
        + request.vendor.iter().flatten().map(|r| nums(r.nums)).sum::<usize>();
    1..=most
}

/// The annotations that pin a replacement of `pod` to `uuids` on `node`, per backend whose Fit
/// reads a UUID filter: `nvidia.com/use-gpuuuid` with NVIDIA's GPUs, and each other backend the
/// pod asks its own use-UUID key with its devices. A pod the snapshot does not hold gets
/// NVIDIA's key with every UUID.
pub fn pin_annotations(snapshot: &Snapshot, pod: &str, node: &str, uuids: &[String]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let (Some(p), Some(&t)) = (snapshot.pods.iter().find(|p| p.key() == pod), snapshot.index.get(node)) else {
        out.insert(USE_UUID_KEY.to_owned(), uuids.join(","));
        return out;
    };
    let n = &snapshot.nodes[t];
    let of_kind = |kind: u8| -> Vec<&str> {
        let on_kind = |u: &&String| n.devices.iter().any(|d| d.id == **u && d.vendor == kind);
        uuids.iter().filter(on_kind).map(String::as_str).collect()
    };
    if !p.request.asks_no_nvidia() {
        out.insert(USE_UUID_KEY.to_owned(), of_kind(0).join(","));
    }
    for r in p.request.vendor.iter().flatten() {
        let key = &r.backend.uuid_keys.0;
        if !key.is_empty() && !out.contains_key(key) {
            out.insert(key.clone(), of_kind(r.backend_id).join(","));
        }
    }
    out
}

/// A device id as registered, or `gpu-N` / `gpu-N/x` (by index) on `node` -> the device ids, in
/// the given order. An id is matched whole first: registered ids may hold `/` (MIG ids of old
/// drivers, `MIG-GPU-<uuid>/7/0`) or look like `gpu-N` themselves.
pub fn resolve_gpus(n: &GpuNode, gpus: &[String]) -> Result<Vec<String>, Rejection> {
    if gpus.is_empty() {
        return Err(Rejection::NoGpus);
    }
    let by_index = |g: &str| {
        let (base, share) = g.split_once('/').map_or((g, None), |(b, s)| (b, Some(s)));
        let idx = base.strip_prefix("gpu-")?.parse::<u32>().ok()?;
        if share.is_some_and(|s| s.parse::<u32>().is_err()) {
            return None;
        }
        n.devices.iter().find(|d| d.index == idx)
    };
    let mut out = Vec::new();
    for g in gpus {
        let found = n.devices.iter().find(|d| d.id == *g).or_else(|| by_index(g));
        match found {
            Some(d) if !out.contains(&d.id) => out.push(d.id.clone()),
            Some(_) => return Err(Rejection::GpuNamedTwice { gpu: g.clone() }),
            None => return Err(Rejection::GpuNotOnNode { gpu: g.clone(), node: n.name.to_string() }),
        }
    }
    Ok(out)
}
