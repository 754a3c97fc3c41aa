//! Evaluation: every candidate's verdict, then the choice among the fits with the chosen node's
//! devices worked out in full.

use super::cache::{CandidateCache, Verdicts};
use super::choose;
use super::events::EVENT_NODE_LIST;
use super::list::CandidateList;
use super::placement::Placement;
use super::prefetch::{prefetch_ahead, prefetch_ids};
use super::ranked::{key_score, RankedFits};
use super::scored::{rescore, LiveViews};
use crate::fit::{
    fit_pod, fit_pod_within, order_free_request, order_free_vendor_request, quick_fit, FitFailure, NodeFit, PodContext,
    Reason,
};
use crate::frag::FragMemo;
use crate::model::GpuNode;
use crate::policy::score;
use crate::policy::NodePolicy;
use crate::request::ContainerRequest;
use crate::state::ClusterState;
use crate::vendor::request::VendorRequest;
use std::collections::BTreeMap;

/// Every candidate's outcome; devices are resolved for the chosen node only.
#[derive(Debug, Default)]
pub struct Evaluation<'n> {
    pub fits: Vec<(&'n str, f64)>,
    /// Each fit's rank among the candidate names in byte order, when the candidate cache knows
    /// it (empty otherwise): ties are broken on it instead of comparing the names themselves.
    pub name_order: Vec<u32>,
    pub failed: Vec<(&'n str, FitFailure)>,
    pub chosen: Option<(&'n str, NodeFit)>,
    /// What the decision reads of the fits and failures when they were kept ranked from the last
    /// call ([`RankedFits`]): `fits` and `failed` are left empty then.
    pub summary: Option<Summary<'n>>,
}

/// The fits and failures of an evaluation as far as a decision with a chosen node reads them.
#[derive(Debug, Default)]
pub struct Summary<'n> {
    pub fit_count: usize,
    /// The event's first fits, in its order (`events::fit_list`'s).
    pub shown: Vec<(&'n str, f64)>,
    pub failed_reasons: BTreeMap<&'static str, usize>,
}

impl Evaluation<'_> {
    pub fn scores(&self) -> BTreeMap<String, f64> {
        self.fits.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
    }

    pub fn failed_map(&self) -> BTreeMap<String, String> {
        self.failed.iter().map(|(n, r)| ((*n).to_owned(), r.to_string())).collect()
    }

    pub fn fit_count(&self) -> usize {
        self.summary.as_ref().map_or(self.fits.len(), |s| s.fit_count)
    }

    /// How many candidate nodes failed for each reason key (for metrics and events).
    pub fn failed_reasons(&self) -> BTreeMap<&'static str, usize> {
        if let Some(summary) = &self.summary {
            return summary.failed_reasons.clone();
        }
        let mut counts = BTreeMap::new();
        for (_, failure) in &self.failed {
            for reason in failure.reasons() {
                *counts.entry(reason.as_str()).or_default() += 1;
            }
        }
        counts
    }
}

/// [`choose`] on an evaluation, with its name ranks where it has them.
fn choose_in(eval: &Evaluation, policy: NodePolicy) -> Option<usize> {
    let fits = &eval.fits;
    match eval.name_order.len() == fits.len() {
        true => score::choose(fits.len(), |i| eval.name_order[i], |i| fits[i].1, policy),
        false => choose(fits, policy),
    }
}

/// A request whose verdict on a node depends on that node alone (its fit is counted, not walked
/// in order): the verdict is kept per node until the node changes (see [`Verdicts`]).
#[derive(Clone, Copy)]
enum Quick<'a> {
    Nvidia(&'a ContainerRequest),
    Vendor(&'a VendorRequest),
}

fn quick_request<'a>(ctx: &PodContext<'a>) -> Option<Quick<'a>> {
    order_free_request(ctx).map(Quick::Nvidia).or_else(|| order_free_vendor_request(ctx).map(Quick::Vendor))
}

/// One candidate's verdict: HAMi's node score if the pod fits, else why not.
fn verdict(
    node: Option<&GpuNode>,
    ctx: &PodContext,
    quick: Option<Quick>,
    now: i64,
) -> std::result::Result<f64, FitFailure> {
    let node = match node {
        Some(n) if n.is_registered_at(now) => Some(n),
        // HAMi's cache holds the node for another backend: NVIDIA's devices are not in it (a
        // registration pass parks them; before the first pass, no NVIDIA request may use them).
        Some(n) if n.holds_vendor_devices() && n.holds_nvidia_devices() && !ctx.request.asks_no_nvidia() => {
            return Err(FitFailure::Node(Reason::NodeInsufficientDevice));
        }
        Some(n) if n.holds_vendor_devices() => Some(n),
        _ => None,
    };
    let Some(node) = node else {
        return Err(FitFailure::Node(Reason::NodeUnregistered));
    };
    match quick {
        Some(Quick::Nvidia(r)) => quick_fit(node, ctx, r),
        Some(Quick::Vendor(r)) => crate::fit::standard::quick_fit(node, r, ctx),
        None => fit_pod(node, ctx).map(|fit| fit.score),
    }
}

fn pod_context<'p>(state: &ClusterState, placement: &'p Placement) -> PodContext<'p> {
    PodContext {
        request: &placement.request,
        hints: &placement.hints,
        gpu_policy: &placement.gpu_policy,
        quota: state.quota_state(&placement.pod.metadata.namespace),
        card_quota: state.card_quota_state(&placement.pod.metadata.namespace, &placement.request),
        device_preference: None,
    }
}

/// Every candidate's verdict at `now` (Unix seconds: registration is timed), then the chosen node's devices.
pub fn evaluate_nodes<'n, 'c>(
    state: &ClusterState,
    placement: &Placement,
    now: i64,
    candidates: impl Iterator<Item = (&'n str, Option<&'c GpuNode>)>,
    lookup: impl Fn(&str) -> Option<&'c GpuNode>,
) -> Evaluation<'n> {
    let ctx = pod_context(state, placement);
    let quick = quick_request(&ctx);
    let candidates: Vec<(&'n str, Option<&'c GpuNode>)> = candidates.collect();
    let mut eval = Evaluation { fits: Vec::with_capacity(candidates.len()), ..Evaluation::default() };
    let mut fit_nodes: Vec<&GpuNode> = Vec::with_capacity(candidates.len());
    for (k, &(name, node)) in candidates.iter().enumerate() {
        prefetch_ahead(&candidates, k);
        match verdict(node, &ctx, quick, now) {
            Ok(score) => {
                eval.fits.push((name, score));
                fit_nodes.extend(node);
            }
            Err(reason) => eval.failed.push((name, reason)),
        }
    }
    settle(state, placement, &ctx, eval, fit_nodes, lookup)
}

/// [`evaluate_nodes`] over the cached candidate list, reusing the verdicts of unchanged nodes
/// when the request is order-free (see [`Verdicts`]).
pub fn evaluate_candidates<'n>(
    state: &ClusterState,
    placement: &Placement,
    now: i64,
    cache: &'n mut CandidateCache,
) -> Evaluation<'n> {
    let ctx = pod_context(state, placement);
    let Some(quick) = quick_request(&ctx) else {
        let candidates = cache.list.iter().map(|(n, id)| (n, id.and_then(|i| state.nodes.by_id(i))));
        return evaluate_nodes(state, placement, now, candidates, |n| state.nodes.get(n));
    };
    let CandidateCache { list, ranks, verdicts, ranked_fits, index, .. } = cache;
    let changed = verdicts.prepare(placement, &state.nodes);
    let ranked = ranks.len() == list.len();
    // Kept in order where the choice reads only scores and names: no hold, no simulator policy.
    let by_order = ranked && placement.held.is_none() && !matches!(placement.node_policy, NodePolicy::Scored(_));
    if let Some(changed) = changed.filter(|_| by_order && ranked_fits.valid) {
        let ranked = Ranked { list, ranks, fits: ranked_fits };
        if let Some(eval) = evaluate_ranked(state, placement, &ctx, quick, now, ranked, verdicts, changed) {
            return eval;
        }
    }
    let warm = changed.is_some();
    let mut eval = Evaluation { fits: Vec::with_capacity(list.len()), ..Evaluation::default() };
    // Ties are broken on name ranks: the list's own once ranked, else every node's.
    eval.name_order.reserve(list.len());
    let mut fit_ids: Vec<u32> = Vec::with_capacity(list.len());
    for (k, (name, id)) in list.iter().enumerate() {
        let Some(id) = id else {
            eval.failed.push((name, FitFailure::Node(Reason::NodeUnregistered)));
            continue;
        };
        let (kept, memo) = verdicts.slot(id);
        if !*kept {
            if !warm {
                prefetch_ids(state, list, k);
            }
            let node = state.nodes.by_id(id);
            *memo = verdict(node, &ctx, Some(quick), now).map_err(Box::new);
            // A node no registration pass has looked at yet may be registered or not by the clock.
            *kept = !node.is_some_and(GpuNode::registration_depends_on_time);
        }
        match memo {
            Ok(score) => {
                eval.fits.push((name, *score));
                eval.name_order.push(if ranked { ranks[k] } else { index.rank(id) });
                fit_ids.push(id);
            }
            Err(reason) => eval.failed.push((name, (**reason).clone())),
        }
    }
    // Ranked from the second pod of a shape over the same list on: a first one may be the last.
    if by_order && warm {
        let memo = &verdicts.memo;
        let verdict_at = |id: u32| memo.get(id as usize).map(|(kept, verdict)| (verdict, *kept));
        ranked_fits.rebuild(list.iter().zip(ranks.iter()).map(|((_, id), &rank)| (id, id.and_then(verdict_at), rank)));
    } else {
        ranked_fits.clear();
    }
    // The fitting nodes themselves only where the choice reads them (a hold, a simulator policy).
    // Every fit's node exists: a removed node is in the change log, and so re-checked as unregistered.
    let fit_nodes = match placement.held.is_some() || matches!(placement.node_policy, NodePolicy::Scored(_)) {
        true => fit_ids.iter().filter_map(|&i| state.nodes.by_id(i)).collect(),
        false => Vec::new(),
    };
    settle(state, placement, &ctx, eval, fit_nodes, |n| state.nodes.get(n))
}

/// The cached list's names, their ranks and their fits in order, as [`evaluate_ranked`] reads them.
struct Ranked<'n, 'c> {
    list: &'n CandidateList,
    ranks: &'c [u32],
    fits: &'c mut RankedFits,
}

/// [`evaluate_candidates`] off the kept order ([`RankedFits`]): the nodes changed since the last
/// call and those registered by the clock are checked again, the winner is read at one end of the
/// order and the event's first fits off it. `None` where the full pass must answer: no fit (the
/// answer lists every failure), or a winner whose devices do not work out; the memo and the order
/// are brought up to date either way.
#[allow(clippy::too_many_arguments)]
fn evaluate_ranked<'n>(
    state: &ClusterState,
    placement: &Placement,
    ctx: &PodContext,
    quick: Quick,
    now: i64,
    ranked: Ranked<'n, '_>,
    verdicts: &mut Verdicts,
    changed: &[u32],
) -> Option<Evaluation<'n>> {
    let Ranked { list, ranks, fits } = ranked;
    let volatile: Vec<u32> = fits.volatile.iter().filter_map(|&pos| list.id(pos as usize)).collect();
    for &id in changed.iter().chain(&volatile) {
        let positions = fits.positions_of(id);
        if positions.is_empty() {
            continue;
        }
        let node = state.nodes.by_id(id);
        let slot = verdicts.slot(id);
        let old = std::mem::replace(&mut slot.1, verdict(node, ctx, Some(quick), now).map_err(Box::new));
        slot.0 = !node.is_some_and(GpuNode::registration_depends_on_time);
        for at in positions {
            let pos = fits.position(at);
            fits.update(pos, ranks[pos as usize], &old, &slot.1);
            fits.volatile.retain(|&p| p != pos);
            if !slot.0 {
                fits.volatile.push(pos);
            }
        }
    }
    let policy = placement.node_policy;
    let best = fits.choice(policy)?;
    let (name, id) = list.get(best.2 as usize);
    let fit = fit_pod(state.nodes.by_id(id?)?, ctx).ok()?;
    let shown = fits.shown(policy, EVENT_NODE_LIST);
    let summary = Summary {
        fit_count: fits.fit_count(),
        shown: shown.iter().map(|k| (list.get(k.2 as usize).0, key_score(k.0))).collect(),
        failed_reasons: fits.reasons().clone(),
    };
    Some(Evaluation { chosen: Some((name, fit)), summary: Some(summary), ..Evaluation::default() })
}

/// The choice among the fits: the held GPUs first, else the policy's order, the chosen node's
/// devices worked out in full. `fit_nodes` is aligned with `eval.fits` where the choice reads
/// nodes (a hold, a simulator-derived policy), and may be empty otherwise.
fn settle<'n, 'c>(
    state: &ClusterState,
    placement: &Placement,
    ctx: &PodContext,
    mut eval: Evaluation<'n>,
    mut fit_nodes: Vec<&GpuNode>,
    lookup: impl Fn(&str) -> Option<&'c GpuNode>,
) -> Evaluation<'n> {
    let views = match placement.node_policy {
        NodePolicy::Scored(scorer) => {
            let names: Vec<&str> = eval.fits.iter().map(|(n, _)| *n).collect();
            let mut views = LiveViews::new(state, scorer, placement, &names, &fit_nodes);
            rescore(state, &mut views, placement, &mut eval.fits);
            Some(views)
        }
        NodePolicy::Binpack | NodePolicy::Spread => None,
    };
    if let Some(fit) = held_fit(placement, ctx, &eval.fits, &fit_nodes) {
        eval.chosen = Some(fit);
        return eval;
    }
    let mut alive: Vec<usize> = (0..eval.fits.len()).collect();
    while let Some(i) = choose_in(&eval, placement.node_policy) {
        let (name, score) = eval.fits[i];
        let fit = match &views {
            // GPU choice inside the node as the simulator makes it: FGD's GPU for a sharing pod,
            // else the tightest fitting GPUs (lowest index first).
            Some(views) => {
                let (node, view) = (fit_nodes[i], alive[i]);
                let candidate = views.candidate(name, view, score);
                let fgd = match views.balance_gpus.get(view) {
                    Some(gpu) => *gpu,
                    None => score::fgd_gpu(&candidate, &views.workload, &mut FragMemo::default()),
                };
                let free = candidate.view.shape.gpu_free;
                let preference = score::gpu_preference(placement.node_policy, &candidate.pod, free, fgd, None);
                let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| preference.clone();
                Some(fit_pod(node, &ctx.preferring(&prefer)))
            }
            None => lookup(name).map(|node| fit_pod(node, ctx)),
        };
        if let Some(Ok(fit)) = fit {
            eval.chosen = Some((name, fit));
            break;
        }
        // Unreachable when quick_fit agrees with fit_pod; never hand out a node that does not fit.
        eval.fits.remove(i);
        if i < eval.name_order.len() {
            eval.name_order.remove(i);
        }
        if i < fit_nodes.len() {
            fit_nodes.remove(i);
        }
        alive.remove(i);
        if let Some(Err(reason)) = fit {
            eval.failed.push((name, reason));
        }
    }
    eval
}

/// The owner of a reservation goes to its held GPUs when its node is a candidate and it fits
/// there on them (tried first, in the reservation's order); otherwise it is placed like any pod.
fn held_fit<'n>(
    placement: &Placement,
    ctx: &PodContext,
    fits: &[(&'n str, f64)],
    nodes: &[&GpuNode],
) -> Option<(&'n str, NodeFit)> {
    let held = placement.held.as_ref()?;
    let i = fits.iter().position(|(n, _)| *n == &*held.node)?;
    let node = nodes[i];
    let on_held = |d: usize| held.gpus.iter().any(|g| **g == *node.devices[d].id);
    if ctx.request.asks_vendors() {
        // Other backends' Fits keep their own device order: the held GPUs are all they may use.
        return fit_pod_within(node, ctx, on_held).ok().map(|fit| (fits[i].0, fit));
    }
    let mut order: Vec<usize> = held.gpus.iter().filter_map(|g| node.device_index(g)).collect();
    let rest: Vec<usize> = (0..node.devices.len()).filter(|d| !order.contains(d)).collect();
    order.extend(rest);
    let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| Some(order.clone());
    let fit = fit_pod(node, &ctx.preferring(&prefer)).ok()?;
    let all_held = fit.slots.iter().flatten().all(|d| held.gpus.iter().any(|g| **g == *d.uuid));
    all_held.then_some((fits[i].0, fit))
}

#[cfg(test)]
mod tests {
    use super::super::cache::name_ranks;
    use super::*;

    #[test]
    fn name_ranks_order_as_the_names_and_choose_agrees_with_them() {
        let names = ["n10", "n2", "n1", "n2", "a", "n10-x", ""];
        let ranks = name_ranks(&CandidateList::of(&names));
        assert_eq!(ranks, vec![3, 5, 2, 5, 1, 4, 0]);
        for i in 0..names.len() {
            for j in 0..names.len() {
                assert_eq!(ranks[i].cmp(&ranks[j]), names[i].cmp(names[j]), "{} vs {}", names[i], names[j]);
            }
        }
        for policy in [NodePolicy::Binpack, NodePolicy::Spread] {
            for scores in [[1.0; 7], [0.5, 2.0, 2.0, 2.0, 1.0, 2.0, 0.0], [3.0, 1.0, 1.0, 0.0, 3.0, 2.0, 3.0]] {
                let fits: Vec<(&str, f64)> = names.iter().copied().zip(scores).collect();
                let eval = Evaluation { fits: fits.clone(), name_order: ranks.clone(), ..Evaluation::default() };
                assert_eq!(choose_in(&eval, policy), choose(&fits, policy), "{scores:?} {policy:?}");
            }
        }
    }
}
