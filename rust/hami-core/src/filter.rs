//! Filter: evaluate the candidate nodes of one pod, choose one, build HAMi's annotations, the
//! merge patch and the events of the decision.

use crate::codec::{self, encode_pod_devices_as_hami, PodDevices};
use crate::error::{Error, Result};
use crate::fit::{fit_pod, order_free_request, quick_fit, FitFailure, NodeFit, PodContext, Reason};
use crate::frag::{FragMemo, NodeShape, Workload};
use crate::k8s::extender::{parse_node_names, ExtenderFilterResult, NodeItems};
use crate::k8s::view::ObjectView;
use crate::k8s::Pod;
use crate::model::{collapse, GpuNode, MigHold};
use crate::policy::node as np;
use crate::policy::score::{self, Candidate, Randomness, Scoring};
use crate::policy::{GpuPolicy, NodePolicy, PodHints};
use crate::request::PodRequest;
use crate::state::nodes::NodeTable;
use crate::state::reservations::Reservation;
use crate::state::ClusterState;
use serde::Serialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

mod ranked;
use ranked::{key_score, RankedFits, Verdict};

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
    /// The event's first fits, in its order ([`fit_list`]'s).
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

/// The pod-level inputs of one scheduling decision.
pub struct Placement<'a> {
    pub pod: &'a Pod,
    pub request: PodRequest,
    pub hints: PodHints,
    pub node_policy: NodePolicy,
    pub gpu_policy: GpuPolicy,
    /// The GPUs held for this pod, if a reservation names it: Filter tries them first.
    pub held: Option<Reservation>,
}

impl<'a> Placement<'a> {
    /// Policies: pod annotation, else the given override, else the configured default.
    pub fn new(state: &ClusterState, pod: &'a Pod, policies: &Policies) -> Result<Self> {
        let request = PodRequest::from_pod(pod, &state.config);
        // HAMi passes a pod without vGPU requests through before it reads any hint annotation.
        let hints = if request.is_empty() {
            PodHints::default()
        } else {
            PodHints::from_annotations(&pod.metadata.annotations)
                .map_err(|e| e.in_object(format_args!("Pod {}", pod.key())))?
        };
        let node_policy = hints.node_policy.unwrap_or(policies.node);
        let gpu_policy = hints.gpu_policy.clone().unwrap_or_else(|| policies.gpu.clone());
        let holds = state.reservations();
        let held =
            if holds.is_empty() || request.is_empty() { None } else { holds.get(&pod.reservation_key()).cloned() };
        Ok(Self { pod, request, hints, node_policy, gpu_policy, held })
    }
}

/// The cluster-wide policies, parsed once from the configuration (or an `explain` override).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policies {
    pub node: NodePolicy,
    pub gpu: GpuPolicy,
}

impl Policies {
    pub fn new(node: &str, gpu: &str) -> Self {
        Self { node: NodePolicy::parse(node), gpu: GpuPolicy::parse(gpu) }
    }
}

impl Default for Policies {
    fn default() -> Self {
        let config = crate::config::Config::default();
        Self::new(&config.node_scheduler_policy, &config.gpu_scheduler_policy)
    }
}

/// The winner among the fitting nodes (see [`score::choose`]).
pub fn choose(fits: &[(&str, f64)], policy: NodePolicy) -> Option<usize> {
    score::choose(fits.len(), |i| fits[i].0, |i| fits[i].1, policy)
}

/// [`choose`] on an evaluation, with its name ranks where it has them.
fn choose_in(eval: &Evaluation, policy: NodePolicy) -> Option<usize> {
    let fits = &eval.fits;
    match eval.name_order.len() == fits.len() {
        true => score::choose(fits.len(), |i| eval.name_order[i], |i| fits[i].1, policy),
        false => choose(fits, policy),
    }
}

/// The fitting nodes in the policy's order of preference: the first is the one [`choose`] picks.
pub fn ranked(fits: &[(&str, f64)], policy: NodePolicy) -> Vec<String> {
    let mut rest: Vec<(&str, f64)> = fits.to_vec();
    let mut order = Vec::with_capacity(rest.len());
    while let Some(i) = choose(&rest, policy) {
        order.push(rest.swap_remove(i).0.to_owned());
    }
    order
}

/// Evaluation is bound by memory latency on large clusters: start loading the device arrays of
/// the node a few candidates ahead, and that node's own struct further ahead.
#[inline]
fn prefetch_ahead(candidates: &[(&str, Option<&GpuNode>)], k: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if let Some((_, Some(far))) = candidates.get(k + 8) {
            // SAFETY: prefetching is a hint; any address is allowed and nothing is dereferenced.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(*far).cast()) };
        }
    }
    if let Some((_, Some(near))) = candidates.get(k + 4) {
        prefetch_devices(near);
    }
}

/// Starts loading a node's device arrays (the part Fit reads first).
#[inline]
fn prefetch_devices(node: &GpuNode) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint; any address is allowed and nothing is dereferenced.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(node.hot.as_ptr().cast());
            _mm_prefetch::<_MM_HINT_T0>(node.usage.as_ptr().cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

/// Candidate names resolved to node ids, kept while kube-scheduler keeps sending the same list,
/// with the verdicts of the last order-free request over it.
#[derive(Debug, Default)]
pub struct CandidateCache {
    /// The list as sent (JSON text), compared whole to recognise it again.
    raw: String,
    /// The node table's generation the ids were resolved at.
    generation: u64,
    pub(crate) entries: Vec<(String, Option<u32>)>,
    /// Per entry: its rank among the names in byte order (equal names share one).
    ranks: Vec<u32>,
    verdicts: Verdicts,
    ranked_fits: RankedFits,
}

impl CandidateCache {
    pub fn refresh(&mut self, raw: Option<&RawValue>, nodes: &NodeTable) -> Result<()> {
        let text = raw.map_or("", |r| r.get());
        if text != self.raw || nodes.generation() != self.generation || self.entries.is_empty() {
            let names = parse_node_names(raw)?;
            self.entries = names
                .into_iter()
                .map(|n| {
                    let id = nodes.id(&n);
                    (n.into_owned(), id)
                })
                .collect();
            self.ranks.clear(); // ranked at the first reuse (see `rank_names`)
            self.ranked_fits.clear();
            self.raw = text.to_owned();
            self.generation = nodes.generation();
        }
        Ok(())
    }

    /// `body` as a document without its `NodeNames`, when they are this cache's list unchanged
    /// over the same nodes: kube-scheduler encodes `ExtenderArgs` with the list last (Go's field
    /// order, no spaces) and sends the same list for pod after pod, so `{...,"NodeNames":[L]}`
    /// becomes `{...}` and the names need neither parsing nor hashing. `None` for anything else;
    /// the caller parses the whole body then (a head that is no document of its own included).
    pub fn without_known_names(&self, body: &[u8], nodes: &NodeTable) -> Option<Vec<u8>> {
        if self.entries.is_empty() || self.generation != nodes.generation() {
            return None;
        }
        let rest = body.trim_ascii_end().strip_suffix(b"}")?.strip_suffix(self.raw.as_bytes())?;
        let head = rest.strip_suffix(b",\"NodeNames\":")?;
        let mut doc = Vec::with_capacity(head.len() + 1);
        doc.extend_from_slice(head);
        doc.push(b'}');
        Some(doc)
    }

    /// Ranks the names for tie-breaking, once per list, when the list comes again: sorting costs
    /// more than one call's name comparisons, and pays off only over repeated calls.
    pub fn rank_names(&mut self) {
        if self.ranks.len() != self.entries.len() {
            self.ranks = name_ranks(&self.entries);
        }
    }

    /// The cached candidate names, in the order sent.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// How many nodes' verdicts a next call with the same request may reuse (if unchanged).
    pub fn reusable(&self) -> usize {
        self.verdicts.memo.iter().filter(|(kept, _)| *kept).count()
    }

    /// How many fits the next call over this list may read off their kept order (0: none kept).
    pub fn ranked_fits(&self) -> usize {
        if self.ranked_fits.valid {
            self.ranked_fits.fit_count()
        } else {
            0
        }
    }
}

fn name_ranks(entries: &[(String, Option<u32>)]) -> Vec<u32> {
    let mut by_name: Vec<usize> = (0..entries.len()).collect();
    by_name.sort_by(|&a, &b| entries[a].0.cmp(&entries[b].0));
    let mut ranks = vec![0u32; entries.len()];
    let mut rank = 0u32;
    for (k, pair) in by_name.windows(2).enumerate() {
        if entries[pair[0]].0 != entries[pair[1]].0 {
            rank += 1;
        }
        ranks[by_name[k + 1]] = rank;
    }
    ranks
}

/// What an order-free request's verdict on a node depends on besides the node itself.
#[derive(Debug, Clone, PartialEq)]
struct VerdictKey {
    request: PodRequest,
    hints: PodHints,
    gpu_policy: GpuPolicy,
}

/// The last order-free request's verdict per node, kept until the node changes. kube-scheduler
/// filters a workload's pods one after another, and between two of them only the nodes a decision
/// or an update touched have changed ([`NodeTable::changed_since`]), so the next pod re-checks
/// those nodes only, whatever order or subset of nodes its candidate list names (kube-scheduler
/// gathers feasible nodes in parallel: the order differs from cycle to cycle).
#[derive(Debug, Default)]
struct Verdicts {
    key: Option<VerdictKey>,
    /// By node id: (still valid, the verdict).
    memo: Vec<(bool, Verdict)>,
    /// The node change log's position the memo is valid at.
    seen: u64,
}

impl Verdicts {
    /// Brings the memo to the nodes as they are now: forgets everything unless it was made for
    /// this placement's request shape and the change log still reaches back to it, else drops the
    /// verdicts of the nodes changed since. The ids changed since if any verdict may be reused.
    fn prepare<'t>(&mut self, placement: &Placement, nodes: &'t NodeTable) -> Option<&'t [u32]> {
        let seen = std::mem::replace(&mut self.seen, nodes.log_position());
        let changed = nodes.changed_since(seen);
        let same = self.key.as_ref().is_some_and(|k| {
            k.request == placement.request && k.hints == placement.hints && k.gpu_policy == placement.gpu_policy
        });
        if let (true, Some(changed)) = (same, changed) {
            for &id in changed {
                if let Some(entry) = self.memo.get_mut(id as usize) {
                    entry.0 = false;
                }
            }
            return Some(changed);
        }
        self.key = Some(VerdictKey {
            request: placement.request.clone(),
            hints: placement.hints.clone(),
            gpu_policy: placement.gpu_policy.clone(),
        });
        self.memo.iter_mut().for_each(|entry| entry.0 = false);
        None
    }

    fn slot(&mut self, id: u32) -> &mut (bool, Verdict) {
        let at = id as usize;
        if at >= self.memo.len() {
            self.memo.resize(at + 1, (false, Ok(0.0)));
        }
        &mut self.memo[at]
    }
}

/// One candidate's verdict: HAMi's node score if the pod fits, else why not.
fn verdict(
    node: Option<&GpuNode>,
    ctx: &PodContext,
    order_free: Option<&crate::request::ContainerRequest>,
    now: i64,
) -> std::result::Result<f64, FitFailure> {
    match node.filter(|n| n.is_registered_at(now)) {
        None => Err(FitFailure::Node(Reason::NodeUnregistered)),
        Some(node) => match order_free {
            Some(r) => quick_fit(node, ctx, r),
            None => fit_pod(node, ctx).map(|fit| fit.score),
        },
    }
}

fn pod_context<'p>(state: &ClusterState, placement: &'p Placement) -> PodContext<'p> {
    PodContext {
        request: &placement.request,
        hints: &placement.hints,
        gpu_policy: &placement.gpu_policy,
        quota: state.quota_state(&placement.pod.metadata.namespace),
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
    let order_free = order_free_request(&ctx);
    let candidates: Vec<(&'n str, Option<&'c GpuNode>)> = candidates.collect();
    let mut eval = Evaluation { fits: Vec::with_capacity(candidates.len()), ..Evaluation::default() };
    let mut fit_nodes: Vec<&GpuNode> = Vec::with_capacity(candidates.len());
    for (k, &(name, node)) in candidates.iter().enumerate() {
        prefetch_ahead(&candidates, k);
        match verdict(node, &ctx, order_free, now) {
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
    let Some(order_free) = order_free_request(&ctx) else {
        let candidates = cache.entries.iter().map(|(n, id)| (n.as_str(), id.and_then(|i| state.nodes.by_id(i))));
        return evaluate_nodes(state, placement, now, candidates, |n| state.nodes.get(n));
    };
    let CandidateCache { entries, ranks, verdicts, ranked_fits, .. } = cache;
    let changed = verdicts.prepare(placement, &state.nodes);
    let ranked = ranks.len() == entries.len();
    // Kept in order where the choice reads only scores and names: no hold, no simulator policy.
    let by_order = ranked && placement.held.is_none() && !matches!(placement.node_policy, NodePolicy::Scored(_));
    if let Some(changed) = changed.filter(|_| by_order && ranked_fits.valid) {
        let ranked = Ranked { entries, ranks, fits: ranked_fits };
        if let Some(eval) = evaluate_ranked(state, placement, &ctx, order_free, now, ranked, verdicts, changed) {
            return eval;
        }
    }
    let warm = changed.is_some();
    let mut eval = Evaluation { fits: Vec::with_capacity(entries.len()), ..Evaluation::default() };
    if ranked {
        eval.name_order.reserve(entries.len());
    }
    let mut fit_ids: Vec<u32> = Vec::with_capacity(entries.len());
    for (k, (name, id)) in entries.iter().enumerate() {
        let Some(id) = *id else {
            eval.failed.push((name.as_str(), FitFailure::Node(Reason::NodeUnregistered)));
            continue;
        };
        let (kept, memo) = verdicts.slot(id);
        if !*kept {
            if !warm {
                prefetch_ids(state, entries, k);
            }
            let node = state.nodes.by_id(id);
            *memo = verdict(node, &ctx, Some(order_free), now).map_err(Box::new);
            // A node no registration pass has looked at yet may be registered or not by the clock.
            *kept = !node.is_some_and(GpuNode::registration_depends_on_time);
        }
        match memo {
            Ok(score) => {
                eval.fits.push((name.as_str(), *score));
                if ranked {
                    eval.name_order.push(ranks[k]);
                }
                fit_ids.push(id);
            }
            Err(reason) => eval.failed.push((name.as_str(), (**reason).clone())),
        }
    }
    // Ranked from the second pod of a shape over the same list on: a first one may be the last.
    if by_order && warm {
        let memo = &verdicts.memo;
        let verdict_at = |id: u32| memo.get(id as usize).map(|(kept, verdict)| (verdict, *kept));
        ranked_fits
            .rebuild(entries.iter().zip(ranks.iter()).map(|(&(_, id), &rank)| (id, id.and_then(verdict_at), rank)));
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
    entries: &'n [(String, Option<u32>)],
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
    order_free: &crate::request::ContainerRequest,
    now: i64,
    ranked: Ranked<'n, '_>,
    verdicts: &mut Verdicts,
    changed: &[u32],
) -> Option<Evaluation<'n>> {
    let Ranked { entries, ranks, fits } = ranked;
    let volatile: Vec<u32> = fits.volatile.iter().filter_map(|&pos| entries[pos as usize].1).collect();
    for &id in changed.iter().chain(&volatile) {
        let positions = fits.positions_of(id);
        if positions.is_empty() {
            continue;
        }
        let node = state.nodes.by_id(id);
        let slot = verdicts.slot(id);
        let old = std::mem::replace(&mut slot.1, verdict(node, ctx, Some(order_free), now).map_err(Box::new));
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
    let (name, id) = &entries[best.2 as usize];
    let fit = fit_pod(state.nodes.by_id((*id)?)?, ctx).ok()?;
    let shown = fits.shown(policy, EVENT_NODE_LIST);
    let summary = Summary {
        fit_count: fits.fit_count(),
        shown: shown.iter().map(|k| (entries[k.2 as usize].0.as_str(), key_score(k.0))).collect(),
        failed_reasons: fits.reasons().clone(),
    };
    Some(Evaluation { chosen: Some((name.as_str(), fit)), summary: Some(summary), ..Evaluation::default() })
}

#[inline]
fn prefetch_ids(state: &ClusterState, entries: &[(String, Option<u32>)], k: usize) {
    if let Some(node) = entries.get(k + 4).and_then(|(_, id)| id.and_then(|i| state.nodes.by_id(i))) {
        prefetch_devices(node);
    }
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
            let views = LiveViews::new(state, scorer, &placement.request, &fit_nodes);
            rescore(&views, placement, &mut eval.fits, &fit_nodes);
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
                let candidate = views.candidate(name, node, view, score);
                let fgd = score::fgd_gpu(&candidate, &views.workload, &mut FragMemo::default());
                let free = candidate.view.shape.gpu_free;
                let preference = score::gpu_preference(placement.node_policy, &candidate.pod, free, fgd, None);
                let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| preference.clone();
                let ctx = PodContext {
                    request: ctx.request,
                    hints: ctx.hints,
                    gpu_policy: ctx.gpu_policy,
                    quota: ctx.quota,
                    device_preference: Some(&prefer),
                };
                Some(fit_pod(node, &ctx))
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
    let mut order: Vec<usize> = held.gpus.iter().filter_map(|g| node.device_index(g)).collect();
    let rest: Vec<usize> = (0..node.devices.len()).filter(|d| !order.contains(d)).collect();
    order.extend(rest);
    let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| Some(order.clone());
    let pinned = PodContext {
        request: ctx.request,
        hints: ctx.hints,
        gpu_policy: ctx.gpu_policy,
        quota: ctx.quota,
        device_preference: Some(&prefer),
    };
    let fit = fit_pod(node, &pinned).ok()?;
    let on_held = fit.slots.iter().flatten().all(|d| held.gpus.iter().any(|g| **g == *d.uuid));
    on_held.then_some((fits[i].0, fit))
}

/// The simulator-derived policies' view of the live fits: GPUs as shares of device memory
/// ([`np::live_free_milli`]), no CPU (kube-scheduler checks it). FGD's target workload is the
/// recent placements ([`ClusterState::target_workload`]), or the pod itself before any.
struct LiveViews<'s> {
    frees: Vec<Vec<i64>>,
    pods: Vec<np::PodShape<'static>>,
    tags: std::collections::HashMap<&'s str, Vec<(np::GpuTag, u32)>>,
    workload: Workload,
}

impl<'s> LiveViews<'s> {
    fn new(state: &'s ClusterState, scorer: np::Scorer, request: &PodRequest, nodes: &[&GpuNode]) -> Self {
        let mut workload = match scorer {
            np::Scorer::Fgd => state.target_workload(),
            np::Scorer::FgdBalance => state.balance_workload(),
            _ => Workload::default(),
        };
        let tags = if scorer == np::Scorer::Clustering { state.gpu_tags_by_node() } else { Default::default() };
        let frees = nodes.iter().map(|n| np::live_free_milli(n)).collect();
        let pods: Vec<np::PodShape> = nodes
            .iter()
            .map(|node| {
                let (num_gpu, gpu_milli) = np::live_pod_gpus(request, node);
                np::PodShape { cpu_milli: 0, gpu_milli, num_gpu, gpu_spec: "" }
            })
            .collect();
        if let (true, Some(pod)) = (workload.types.is_empty(), pods.first()) {
            workload.types.push((pod.task_type(), 1.0));
        }
        Self { frees, pods, tags, workload }
    }

    fn candidate<'a>(&'a self, name: &'a str, node: &'a GpuNode, i: usize, hami_score: f64) -> Candidate<'a> {
        let tags: &[(np::GpuTag, u32)] = self.tags.get(name).map_or(&[], Vec::as_slice);
        let model = node.devices.first().map_or("", |d| d.device_type.as_str());
        let view = np::NodeView { shape: NodeShape { cpu_left: 0, gpu_free: &self.frees[i], model }, tags };
        Candidate { name, view, pod: self.pods[i], hami_score, frag: None, shape_key: None }
    }
}

/// Replaces HAMi's node scores of the fits by the simulator-derived policy's ([`score::score_nodes`]).
fn rescore(views: &LiveViews, placement: &Placement, fits: &mut [(&str, f64)], nodes: &[&GpuNode]) {
    let meta = &placement.pod.metadata;
    let (mut memo, mut shapes) = (FragMemo::default(), Default::default());
    let mut ctx = Scoring {
        workload: &views.workload,
        memo: &mut memo,
        random: Randomness::Hash { uid: &meta.uid, pod: &meta.name },
        shapes: &mut shapes,
    };
    let mut scores = Vec::with_capacity(fits.len());
    let candidates = fits.iter().zip(nodes).enumerate().map(|(i, ((n, s), node))| views.candidate(n, node, i, *s));
    score::score_nodes(placement.node_policy, candidates, &mut ctx, &mut scores);
    for ((_, score), s) in fits.iter_mut().zip(scores) {
        *score = s;
    }
}

/// The annotations Filter writes for a decision, with HAMi's bytes for GPU-less containers
/// (see [`encode_pod_devices_as_hami`]), and the MIG instances it reserved, if any.
/// `positional`: the node pads GPU-less containers ([`GpuNode::pads_device_lists`]).
pub fn allocation_annotations(node: &str, positional: bool, fit: &NodeFit, now: i64) -> BTreeMap<String, String> {
    let devices = encode_pod_devices_as_hami(&fit.slots, positional);
    let mut out = BTreeMap::from([
        (codec::VGPU_NODE_KEY.to_owned(), node.to_owned()),
        (codec::VGPU_TIME_KEY.to_owned(), now.to_string()),
        (codec::TO_ALLOCATE_KEY.to_owned(), devices.clone()),
        (codec::ALLOCATED_KEY.to_owned(), devices),
    ]);
    if !fit.mig.is_empty() {
        let written = as_written(&fit.mig, &fit.slots, positional);
        out.insert(codec::MIG_ALLOCATIONS_KEY.to_owned(), codec::encode_mig_allocations(&written));
    }
    out
}

/// The MIG instances with `containerIndex` counted in the device list as written: HAMi numbers
/// the entries of the list it encodes, which leaves GPU-less containers out unless the node pads.
fn as_written(mig: &[codec::MigAllocation], slots: &PodDevices, positional: bool) -> Vec<codec::MigAllocation> {
    let index_of = |slot: usize| if positional { slot } else { slots[..slot].iter().filter(|s| !s.is_empty()).count() };
    let mut out: Vec<codec::MigAllocation> = mig
        .iter()
        .map(|a| codec::MigAllocation { container_index: index_of(a.container_index as usize) as i64, ..a.clone() })
        .collect();
    out.sort_by_key(|a| (a.container_index, a.device_index));
    out
}

/// The pod a decision is about.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The pod's resourceVersion as kube-scheduler sent it: its Events' `involvedObject` carries it.
    #[serde(skip)]
    pub resource_version: String,
    /// Where its reservation is kept (UID, else `namespace/name`): what a rollback releases.
    #[serde(skip)]
    pub key: String,
    /// A PodGroup member ([`Pod::is_pod_group_member`]): its Bind retries the node lock.
    #[serde(skip)]
    pub pod_group: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub event_type: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// A scheduling decision about one pod: where it goes (or why nowhere) and the side effects to
/// perform (the merge patch, the events).
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    pub pod: PodRef,
    pub node: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// The JSON merge patch of the pod's annotations and label (empty without a node).
    pub patch: String,
    /// How many candidate nodes failed for each reason.
    pub failed_reasons: BTreeMap<&'static str, usize>,
    pub events: Vec<Event>,
}

/// What a `/filter` call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A node was chosen (and, when recording, reserved).
    Scheduled,
    /// No candidate fits; the response lists why per node.
    Unschedulable,
    /// Nothing to decide: the pod asks for no vGPU, or a cluster-autoscaler dry run.
    Passthrough,
    /// Bad input; the response's `Error` says what.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Unschedulable => "unschedulable",
            Self::Passthrough => "passthrough",
            Self::Error => "error",
        }
    }
}

/// The result of one `/filter` call: the response bytes, its outcome, and the decision to carry out.
#[derive(Debug, Clone)]
pub struct FilterOutcome {
    pub response: Vec<u8>,
    pub outcome: Outcome,
    pub decision: Option<Decision>,
}

impl FilterOutcome {
    pub fn error(error: Error) -> Self {
        Self {
            response: ExtenderFilterResult::error(error.to_string()).to_bytes(),
            outcome: Outcome::Error,
            decision: None,
        }
    }

    pub fn passthrough(response: Vec<u8>) -> Self {
        Self { response, outcome: Outcome::Passthrough, decision: None }
    }
}

/// `{"metadata":{"annotations":{...},"labels":{VGPU_NODE_KEY: node}}}`, serialized straight from borrows.
fn merge_patch(annotations: &BTreeMap<String, String>, node: &str) -> String {
    #[derive(Serialize)]
    struct Metadata<'a> {
        annotations: &'a BTreeMap<String, String>,
        labels: BTreeMap<&'static str, &'a str>,
    }
    #[derive(Serialize)]
    struct Patch<'a> {
        metadata: Metadata<'a>,
    }
    let patch = Patch { metadata: Metadata { annotations, labels: BTreeMap::from([(codec::VGPU_NODE_KEY, node)]) } };
    serde_json::to_string(&patch).unwrap_or_default()
}

/// Longest node list an event message carries; the counts stay exact.
const EVENT_NODE_LIST: usize = 20;

fn capped_list(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut shown: Vec<String> = items.take(EVENT_NODE_LIST).collect();
    if total > EVENT_NODE_LIST {
        shown.push(format!("... {} more", total - EVENT_NODE_LIST));
    }
    shown.join(",")
}

/// The fits by score then name (Spread: highest first), `name:score` for the first
/// [`EVENT_NODE_LIST`]. Only those are kept and ordered: (score, name) is a total order, so the
/// shown prefix is the full sort's. Equal scores are adjacent and formatted once.
fn fit_list(fits: &[(&str, f64)], name_order: &[u32], policy: NodePolicy) -> String {
    let ranked = name_order.len() == fits.len();
    let ascending = |a: usize, b: usize| {
        fits[a].1.total_cmp(&fits[b].1).then_with(|| match ranked {
            true => name_order[a].cmp(&name_order[b]),
            false => fits[a].0.cmp(fits[b].0),
        })
    };
    let order = |a: usize, b: usize| if policy == NodePolicy::Spread { ascending(b, a) } else { ascending(a, b) };
    // The best EVENT_NODE_LIST kept in order while scanning: one comparison per fit that does not
    // enter (the common case, and all of them on an already ordered list).
    let mut kept: Vec<usize> = Vec::with_capacity(EVENT_NODE_LIST + 1);
    for fit in 0..fits.len() {
        if kept.len() == EVENT_NODE_LIST && kept.last().is_some_and(|&worst| order(fit, worst).is_ge()) {
            continue;
        }
        let at = kept.partition_point(|&k| order(k, fit).is_le());
        kept.insert(at, fit);
        kept.truncate(EVENT_NODE_LIST);
    }
    let shown: Vec<(&str, f64)> = kept.iter().map(|&k| fits[k]).collect();
    fit_list_text(&shown, fits.len())
}

/// `name:score` for each shown fit, and how many more fit (`total` in all).
fn fit_list_text(shown: &[(&str, f64)], total: usize) -> String {
    let mut out = String::with_capacity(shown.len() * 16 + 16);
    let (mut bits, mut score) = (None, String::new());
    for (i, (name, s)) in shown.iter().enumerate() {
        if bits != Some(s.to_bits()) {
            (bits, score) = (Some(s.to_bits()), format!("{s:.2}"));
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push(':');
        out.push_str(&score);
    }
    if total > EVENT_NODE_LIST {
        out.push_str(&format!(",... {} more", total - EVENT_NODE_LIST));
    }
    out
}

fn succeed_event(eval: &Evaluation, chosen: &str, total: usize, policy: NodePolicy) -> Event {
    Event {
        event_type: "Normal",
        reason: "FilteringSucceed",
        message: format!(
            "find fit node({chosen}), {} nodes not fit, {} nodes fit({})",
            total.saturating_sub(eval.fit_count()),
            eval.fit_count(),
            match &eval.summary {
                Some(summary) => fit_list_text(&summary.shown, summary.fit_count),
                None => fit_list(&eval.fits, &eval.name_order, policy),
            }
        ),
    }
}

/// One `FilteringFailed` event per reason key, then the summary (§16).
fn failed_events(eval: &Evaluation, total: usize) -> Vec<Event> {
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (node, failure) in &eval.failed {
        for reason in failure.reasons() {
            by_reason.entry(reason.as_str()).or_default().push(node);
        }
    }
    let mut events: Vec<Event> = by_reason
        .into_iter()
        .map(|(reason, mut nodes)| {
            nodes.sort_unstable();
            Event {
                event_type: "Warning",
                reason: "FilteringFailed",
                message: format!(
                    "{} nodes {reason}({})",
                    nodes.len(),
                    capped_list(nodes.iter().map(|n| (*n).to_owned()))
                ),
            }
        })
        .collect();
    events.push(Event {
        event_type: "Warning",
        reason: "FilteringFailed",
        message: format!("no available node, {total} nodes do not meet"),
    });
    events
}

/// The decision for an evaluated pod: the response, and with a chosen node its reservation (when
/// `record`), annotations, merge patch and events.
pub fn decide(
    state: &mut ClusterState,
    placement: &Placement,
    eval: &Evaluation,
    total: usize,
    now: i64,
    record: bool,
    key: &str,
) -> FilterOutcome {
    let meta = &placement.pod.metadata;
    let pod = PodRef {
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        key: key.to_owned(),
        pod_group: placement.pod.is_pod_group_member(),
    };
    let Some((node, fit)) = &eval.chosen else {
        let response = ExtenderFilterResult { failed_nodes: Some(eval.failed_map()), ..Default::default() };
        let decision = Decision {
            pod,
            node: None,
            annotations: BTreeMap::new(),
            patch: String::new(),
            failed_reasons: eval.failed_reasons(),
            events: failed_events(eval, total),
        };
        return FilterOutcome {
            response: response.to_bytes(),
            outcome: Outcome::Unschedulable,
            decision: Some(decision),
        };
    };
    let positional = state.nodes.get(node).is_some_and(GpuNode::pads_device_lists);
    let annotations = allocation_annotations(node, positional, fit, now);
    if record {
        let footprint = collapse(&fit.slots, placement.request.init_count, false);
        let mut record = state.record(&meta.namespace, &meta.name, node, footprint);
        record.mig =
            fit.mig.iter().map(|a| MigHold { gpu: a.gpu_uuid.as_str().into(), placement: a.placement }).collect();
        state.reserve(key.to_owned(), record);
    }
    let response = ExtenderFilterResult { node_names: Some(vec![Cow::Borrowed(*node)]), ..Default::default() };
    let decision = Decision {
        pod,
        node: Some((*node).to_owned()),
        patch: merge_patch(&annotations, node),
        annotations,
        failed_reasons: eval.failed_reasons(),
        events: vec![succeed_event(eval, node, total, placement.node_policy)],
    };
    FilterOutcome { response: response.to_bytes(), outcome: Outcome::Scheduled, decision: Some(decision) }
}

/// Cluster-autoscaler dry run: Nodes given in full, no usage, no side effects (§7.4).
pub fn filter_simulated(state: &ClusterState, placement: &Placement, nodes: &RawValue, now: i64) -> FilterOutcome {
    #[derive(serde::Deserialize)]
    struct Items<'a> {
        #[serde(borrow, default)]
        items: Vec<&'a RawValue>,
    }
    let items: Items = match serde_json::from_str(nodes.get()) {
        Ok(i) => i,
        Err(e) => return FilterOutcome::error(Error::decode("ExtenderArgs.Nodes", e)),
    };
    let mut temp: Vec<(GpuNode, &RawValue)> = Vec::new();
    for raw in &items.items {
        match serde_json::from_str::<ObjectView>(raw.get()) {
            Ok(v) => temp.push((GpuNode::from_annotations(&v.metadata.name, &v.metadata.annotations), raw)),
            Err(e) => return FilterOutcome::error(Error::decode("ExtenderArgs.Nodes item", e)),
        }
    }
    let lookup = |name: &str| temp.iter().find(|(g, _)| g.name == name).map(|(g, _)| g);
    let eval = evaluate_nodes(state, placement, now, temp.iter().map(|(g, _)| (g.name.as_str(), Some(g))), lookup);
    let chosen =
        eval.chosen.as_ref().and_then(|(name, _)| temp.iter().find(|(g, _)| g.name == *name)).map(|(_, raw)| *raw);
    let response = ExtenderFilterResult {
        nodes: chosen.map(|raw| NodeItems { items: vec![raw] }),
        failed_nodes: Some(eval.failed_map()),
        ..Default::default()
    };
    FilterOutcome::passthrough(response.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event's list as first written: sort every fit, format every shown score.
    fn full_sort_list(fits: &[(&str, f64)], policy: NodePolicy) -> String {
        let mut all: Vec<&(&str, f64)> = fits.iter().collect();
        all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        if policy == NodePolicy::Spread {
            all.reverse();
        }
        capped_list(all.iter().map(|(n, s)| format!("{n}:{s:.2}")))
    }

    #[test]
    fn fit_list_shows_the_full_sorts_prefix() {
        let shuffled: Vec<String> = (0..60).map(|i| format!("node-{:02}", (i * 37) % 60)).collect();
        let ordered: Vec<String> = (0..60).map(|i| format!("node-{i:02}")).collect();
        for (names, len) in [&shuffled, &ordered].into_iter().flat_map(|n| [0, 1, 19, 20, 21, 60].map(|l| (n, l))) {
            // Ties (every third score repeats), a negative zero and a half-way value among them.
            let fits: Vec<(&str, f64)> = names[..len]
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), [4.81, -0.0, 0.125, 0.0, (i % 7) as f64 * 1.5][i % 5]))
                .collect();
            for policy in [NodePolicy::Binpack, NodePolicy::Spread] {
                let expected = full_sort_list(&fits, policy);
                assert_eq!(fit_list(&fits, &[], policy), expected, "{len} fits, {policy:?}");
                let ranks = name_ranks(&fits.iter().map(|(n, _)| ((*n).to_owned(), None)).collect::<Vec<_>>());
                assert_eq!(fit_list(&fits, &ranks, policy), expected, "{len} fits by rank, {policy:?}");
            }
        }
    }

    #[test]
    fn name_ranks_order_as_the_names_and_choose_agrees_with_them() {
        let names = ["n10", "n2", "n1", "n2", "a", "n10-x", ""];
        let entries: Vec<(String, Option<u32>)> = names.iter().map(|n| ((*n).to_owned(), None)).collect();
        let ranks = name_ranks(&entries);
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

    #[test]
    fn merge_patch_is_the_annotations_and_the_node_label() {
        let annotations = BTreeMap::from([("b".to_owned(), "2".to_owned()), ("a".to_owned(), "1\"".to_owned())]);
        assert_eq!(
            merge_patch(&annotations, "n1"),
            serde_json::json!({"metadata": {"annotations": annotations, "labels": {codec::VGPU_NODE_KEY: "n1"}}})
                .to_string()
        );
    }
}
