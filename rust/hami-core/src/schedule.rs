//! Filter and explain: evaluate candidate nodes, choose one, build HAMi's annotations.

use crate::cluster::{pod_key, Cluster, PodRecord};
use crate::codec::{self, encode_pod_devices_as_hami, GpuPolicy, NodePolicy, PodDevices, PodHints};
use crate::fit::{fit_pod, order_free_request, quick_fit, NodeFit, PodContext, NODE_UNREGISTERED};
use crate::frag::{FragMemo, NodeShape, Workload};
use crate::k8s::Pod;
use crate::model::{collapse, GpuNode};
use crate::nodes::NodeTable;
use crate::policy::node as np;
use crate::request::PodRequest;
use crate::view::ObjectView;
use crate::wire::parse_node_names;
use crate::wire::{ExtenderArgs, ExtenderFilterResult, NodeItems};
use serde::Serialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// Every candidate's outcome; devices are resolved for the chosen node only.
#[derive(Debug, Default)]
pub struct Evaluation<'n> {
    pub fits: Vec<(&'n str, f64)>,
    pub failed: Vec<(&'n str, String)>,
    pub chosen: Option<(&'n str, NodeFit)>,
}

impl Evaluation<'_> {
    pub fn scores(&self) -> BTreeMap<String, f64> {
        self.fits.iter().map(|(n, s)| ((*n).to_owned(), *s)).collect()
    }

    pub fn failed_map(&self) -> BTreeMap<String, String> {
        self.failed.iter().map(|(n, r)| ((*n).to_owned(), r.clone())).collect()
    }

    /// How many candidate nodes failed for each reason key (for metrics and events).
    pub fn failed_reasons(&self) -> BTreeMap<&str, usize> {
        let mut counts = BTreeMap::new();
        for (_, reason) in &self.failed {
            for key in reason_keys(reason) {
                *counts.entry(key).or_default() += 1;
            }
        }
        counts
    }
}

/// `"1/4 CardInsufficientMemory, 3/4 X"` -> `["CardInsufficientMemory", "X"]`; bare reasons as they are.
pub fn reason_keys(reason: &str) -> impl Iterator<Item = &str> {
    reason.split(", ").map(|part| part.split_once(' ').filter(|(n, _)| n.contains('/')).map_or(part, |(_, k)| k))
}

/// The pod-level inputs of one scheduling decision.
pub struct Placement<'a> {
    pub pod: &'a Pod,
    pub request: PodRequest,
    pub hints: PodHints,
    pub node_policy: NodePolicy,
    pub gpu_policy: GpuPolicy,
}

impl<'a> Placement<'a> {
    /// Policies: pod annotation, else the given override, else the configured default.
    pub fn new(
        cluster: &Cluster,
        pod: &'a Pod,
        node_policy: Option<&str>,
        gpu_policy: Option<&str>,
    ) -> Result<Self, String> {
        let request = PodRequest::from_pod(pod, &cluster.config);
        // HAMi passes a pod without vGPU requests through before it reads any hint annotation.
        let hints = if request.is_empty() { PodHints::default() } else { Cluster::hints_for(pod)? };
        let node_policy = hints
            .node_policy
            .unwrap_or_else(|| NodePolicy::parse(node_policy.unwrap_or(&cluster.config.node_scheduler_policy)));
        let gpu_policy = hints
            .gpu_policy
            .clone()
            .unwrap_or_else(|| GpuPolicy::parse(gpu_policy.unwrap_or(&cluster.config.gpu_scheduler_policy)));
        Ok(Self { pod, request, hints, node_policy, gpu_policy })
    }
}

/// Binpack takes the highest node score, spread the lowest; ties go to the smallest node name.
/// The simulator-derived policies take the highest score of their own (see [`rescore`]).
pub fn choose(fits: &[(&str, f64)], policy: NodePolicy) -> Option<usize> {
    (0..fits.len()).min_by(|&a, &b| {
        let ((na, sa), (nb, sb)) = (fits[a], fits[b]);
        let by_score = match policy {
            NodePolicy::Binpack | NodePolicy::Scored(_) => sb.total_cmp(&sa),
            NodePolicy::Spread => sa.total_cmp(&sb),
        };
        by_score.then_with(|| na.cmp(nb))
    })
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
        if let Some((_, Some(near))) = candidates.get(k + 4) {
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(near.hot.as_ptr().cast());
                _mm_prefetch::<_MM_HINT_T0>(near.usage.as_ptr().cast());
            }
        }
    }
}

/// Candidate names resolved to node ids, kept while kube-scheduler keeps sending the same list.
#[derive(Debug, Default)]
pub struct CandidateCache {
    key: (u64, usize, u64),
    entries: Vec<(String, Option<u32>)>,
}

impl CandidateCache {
    fn refresh(&mut self, raw: Option<&RawValue>, nodes: &NodeTable) -> Result<(), String> {
        let text = raw.map_or("", |r| r.get());
        let mut hasher = rustc_hash::FxHasher::default();
        text.hash(&mut hasher);
        let key = (hasher.finish(), text.len(), nodes.generation());
        if key != self.key || self.entries.is_empty() {
            let names = parse_node_names(raw)?;
            self.entries = names
                .into_iter()
                .map(|n| {
                    let id = nodes.id(&n);
                    (n.into_owned(), id)
                })
                .collect();
            self.key = key;
        }
        Ok(())
    }
}

fn evaluate_nodes<'n, 'c>(
    cluster: &Cluster,
    placement: &Placement,
    now: i64,
    candidates: impl Iterator<Item = (&'n str, Option<&'c GpuNode>)>,
    lookup: impl Fn(&str) -> Option<&'c GpuNode>,
) -> Evaluation<'n> {
    let ctx = PodContext {
        request: &placement.request,
        hints: &placement.hints,
        gpu_policy: &placement.gpu_policy,
        quota: cluster.quota_state(&placement.pod.metadata.namespace),
        device_preference: None,
    };
    let order_free = order_free_request(&ctx);
    let mut eval = Evaluation::default();
    let mut fit_nodes: Vec<&GpuNode> = Vec::new();
    let candidates: Vec<(&'n str, Option<&'c GpuNode>)> = candidates.collect();
    for (k, &(name, node)) in candidates.iter().enumerate() {
        prefetch_ahead(&candidates, k);
        let verdict = match node.filter(|n| n.is_registered_at(now)) {
            None => Err(NODE_UNREGISTERED.to_owned()),
            Some(node) => match order_free {
                Some(r) => quick_fit(node, &ctx, r),
                None => fit_pod(node, &ctx).map(|fit| fit.score),
            },
        };
        match verdict {
            Ok(score) => {
                eval.fits.push((name, score));
                if let Some(node) = node {
                    fit_nodes.push(node);
                }
            }
            Err(reason) => eval.failed.push((name, reason)),
        }
    }
    let mut scored = match placement.node_policy {
        NodePolicy::Scored(scorer) => Some(rescore(cluster, placement, scorer, &mut eval.fits, &fit_nodes)),
        _ => None,
    };
    while let Some(i) = choose(&eval.fits, placement.node_policy) {
        let (name, _) = eval.fits[i];
        let fit = match &scored {
            // GPU choice inside the node as the simulator makes it: FGD's GPU for a sharing pod,
            // else the tightest fitting GPUs (lowest index first).
            Some(gpus) => {
                let node = fit_nodes[i];
                let free = np::live_free_milli(node);
                let (num_gpu, gpu_milli) = np::live_pod_gpus(&placement.request, node);
                let pod = np::PodShape { cpu_milli: 0, gpu_milli, num_gpu, gpu_spec: "" };
                let preference = match gpus[i] {
                    Some(g) => np::gpu_preference_first(g, &free, &pod),
                    None => np::gpu_preference_best_fit(&free, &pod),
                };
                let prefer = move |_: &GpuNode, _: &[crate::model::DeviceUsage]| Some(preference.clone());
                let ctx = PodContext {
                    request: ctx.request,
                    hints: ctx.hints,
                    gpu_policy: ctx.gpu_policy,
                    quota: ctx.quota,
                    device_preference: Some(&prefer),
                };
                Some(fit_pod(node, &ctx))
            }
            None => lookup(name).map(|node| fit_pod(node, &ctx)),
        };
        match fit {
            Some(Ok(fit)) => {
                eval.chosen = Some((name, fit));
                break;
            }
            // Unreachable when quick_fit agrees with fit_pod; never hand out a node that does not fit.
            Some(Err(reason)) => {
                eval.fits.remove(i);
                fit_nodes.remove(i);
                if let Some(g) = scored.as_mut() {
                    g.remove(i);
                }
                eval.failed.push((name, reason));
            }
            None => {
                eval.fits.remove(i);
                fit_nodes.remove(i);
            }
        }
    }
    eval
}

/// Replaces HAMi's node score by a simulator-derived policy's score (0..=100, higher wins).
/// The live cluster has no CPU view here (kube-scheduler checks CPU), so CPU terms are zero;
/// GPUs are seen as shares of device memory ([`np::live_free_milli`]). FGD's target workload is
/// the recent placements ([`Cluster::target_workload`]), or the pod itself before any.
/// `random` scores each node by a hash of (pod UID, node name): uniform, reproducible per pod.
/// Returns FGD's GPU of each fit for a sharing pod.
fn rescore(
    cluster: &Cluster,
    placement: &Placement,
    scorer: np::Scorer,
    fits: &mut [(&str, f64)],
    nodes: &[&GpuNode],
) -> Vec<Option<usize>> {
    let mut workload = if scorer == np::Scorer::Fgd { cluster.target_workload() } else { Workload::default() };
    let mut memo = FragMemo::default();
    let mut scores: Vec<i64> = Vec::with_capacity(fits.len());
    let mut gpus: Vec<Option<usize>> = Vec::with_capacity(fits.len());
    let tags_by_node = if scorer == np::Scorer::Clustering { cluster.gpu_tags_by_node() } else { Default::default() };
    for ((name, _), node) in fits.iter().zip(nodes) {
        let free = np::live_free_milli(node);
        let tags: &[(np::GpuTag, u32)] = tags_by_node.get(*name).map_or(&[], Vec::as_slice);
        let model = node.devices.first().map_or("", |d| d.device_type.as_str());
        let (num_gpu, gpu_milli) = np::live_pod_gpus(&placement.request, node);
        let pod = np::PodShape { cpu_milli: 0, gpu_milli, num_gpu, gpu_spec: "" };
        let view = np::NodeView { shape: NodeShape { cpu_left: 0, gpu_free: &free, model }, tags };
        if workload.types.is_empty() {
            workload.types.push((pod.task_type(), 1.0));
        }
        gpus.push(None);
        scores.push(match scorer {
            np::Scorer::Fgd => {
                let (score, gpu) = np::fgd(&view, &pod, &workload, &mut memo);
                *gpus.last_mut().expect("pushed above") = gpu;
                score
            }
            np::Scorer::BestFit => np::best_fit(&view, &pod),
            np::Scorer::DotProd => np::dot_product(&view, &pod),
            np::Scorer::Packing => np::packing(&view, &pod),
            np::Scorer::Clustering => np::clustering(&view, &pod),
            np::Scorer::Random => {
                use std::hash::{Hash, Hasher};
                let mut h = crate::frag::FxHasher::default();
                (placement.pod.metadata.uid.as_str(), placement.pod.metadata.name.as_str(), *name).hash(&mut h);
                (h.finish() % 1_000_003) as i64
            }
        });
    }
    if scorer == np::Scorer::BestFit {
        np::normalize(&mut scores);
    }
    for ((_, score), s) in fits.iter_mut().zip(scores) {
        *score = s as f64;
    }
    gpus
}

/// The annotations Filter writes for a decision, with HAMi's bytes for GPU-less containers
/// (see [`encode_pod_devices_as_hami`]).
/// `positional`: the node pads GPU-less containers ([`GpuNode::pads_device_lists`]).
pub fn allocation_annotations(node: &str, positional: bool, slots: &PodDevices, now: i64) -> BTreeMap<String, String> {
    let devices = encode_pod_devices_as_hami(slots, positional);
    BTreeMap::from([
        (codec::VGPU_NODE_KEY.to_owned(), node.to_owned()),
        (codec::VGPU_TIME_KEY.to_owned(), now.to_string()),
        (codec::TO_ALLOCATE_KEY.to_owned(), devices.clone()),
        (codec::ALLOCATED_KEY.to_owned(), devices),
    ])
}

#[derive(Serialize)]
struct PodRef<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

#[derive(Serialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub event_type: &'static str,
    pub reason: &'static str,
    pub message: String,
}

#[derive(Serialize)]
struct Decision<'a> {
    pod: PodRef<'a>,
    node: Option<&'a str>,
    annotations: BTreeMap<String, String>,
    patch: String,
    failed_reasons: BTreeMap<&'a str, usize>,
    events: Vec<Event>,
}

/// The result of one `/filter` call: response bytes plus the side effects to perform.
pub struct FilterOutcome {
    pub response: Vec<u8>,
    pub decision: Option<Vec<u8>>,
}

impl FilterOutcome {
    fn error(message: impl Into<String>) -> Self {
        Self { response: ExtenderFilterResult::error(message).to_bytes(), decision: None }
    }
}

fn merge_patch(annotations: &BTreeMap<String, String>, node: &str) -> String {
    serde_json::json!({"metadata": {"annotations": annotations, "labels": {codec::VGPU_NODE_KEY: node}}}).to_string()
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

fn succeed_event(eval: &Evaluation, chosen: &str, total: usize, policy: NodePolicy) -> Event {
    let mut fits: Vec<&(&str, f64)> = eval.fits.iter().collect();
    fits.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    if policy == NodePolicy::Spread {
        fits.reverse();
    }
    Event {
        event_type: "Normal",
        reason: "FilteringSucceed",
        message: format!(
            "find fit node({chosen}), {} nodes not fit, {} nodes fit({})",
            total.saturating_sub(eval.fits.len()),
            eval.fits.len(),
            capped_list(fits.iter().map(|(n, s)| format!("{n}:{s:.2}")))
        ),
    }
}

/// One `FilteringFailed` event per reason key, then the summary (§16).
fn failed_events(eval: &Evaluation, total: usize) -> Vec<Event> {
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (node, reason) in &eval.failed {
        for key in reason_keys(reason) {
            by_reason.entry(key).or_default().push(node);
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

impl Cluster {
    /// `/filter`: ExtenderArgs bytes in, ExtenderFilterResult bytes out, plus the decision.
    pub fn filter(&mut self, body: &[u8], now: i64, record: bool) -> FilterOutcome {
        let args: ExtenderArgs = match serde_json::from_slice(body) {
            Ok(a) => a,
            Err(e) => return FilterOutcome::error(format!("decode ExtenderArgs: {e}")),
        };
        let Some(pod) = args.pod.as_ref() else { return FilterOutcome::error("extender args missing pod") };
        let placement = match Placement::new(self, pod, None, None) {
            Ok(p) => p,
            Err(e) => return FilterOutcome::error(e),
        };
        if placement.request.is_empty() {
            return match parse_node_names(args.node_names) {
                Ok(names) => FilterOutcome {
                    response: ExtenderFilterResult { node_names: Some(names), ..Default::default() }.to_bytes(),
                    decision: None,
                },
                Err(e) => FilterOutcome::error(e),
            };
        }
        if let Some(nodes) = args.nodes {
            return self.filter_simulated(&placement, nodes, now);
        }
        let key = pod_key(pod);
        let mut cache = std::mem::take(&mut self.candidates);
        if let Err(e) = cache.refresh(args.node_names, &self.nodes) {
            return FilterOutcome::error(e);
        }
        let saved = if record {
            self.release(&key);
            None
        } else {
            self.set_aside(&key)
        };
        let eval = evaluate_nodes(
            self,
            &placement,
            now,
            cache.entries.iter().map(|(n, id)| (n.as_str(), id.and_then(|i| self.nodes.by_id(i)))),
            |n| self.nodes.get(n),
        );
        if let Some(record) = saved {
            self.reserve(key.clone(), record);
        }
        let outcome = self.decide(&placement, &eval, cache.entries.len(), now, record, &key);
        drop(eval);
        self.candidates = cache;
        outcome
    }

    /// Takes a pod's reservation out for the duration of a dry run; the caller restores it.
    fn set_aside(&mut self, key: &str) -> Option<PodRecord> {
        let saved = self.pod(key).cloned();
        if saved.is_some() {
            self.release(key);
        }
        saved
    }

    fn decide(
        &mut self,
        placement: &Placement,
        eval: &Evaluation,
        total: usize,
        now: i64,
        record: bool,
        key: &str,
    ) -> FilterOutcome {
        let meta = &placement.pod.metadata;
        let pod = PodRef { namespace: &meta.namespace, name: &meta.name, uid: &meta.uid };
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
            return FilterOutcome { response: response.to_bytes(), decision: serde_json::to_vec(&decision).ok() };
        };
        let positional = self.nodes.get(node).is_some_and(GpuNode::pads_device_lists);
        let annotations = allocation_annotations(node, positional, &fit.slots, now);
        if record {
            let footprint = collapse(&fit.slots, placement.request.init_count, false);
            let record = self.record(&meta.namespace, &meta.name, node, footprint);
            self.reserve(key.to_owned(), record);
        }
        let response = ExtenderFilterResult { node_names: Some(vec![Cow::Borrowed(*node)]), ..Default::default() };
        let decision = Decision {
            pod,
            node: Some(node),
            patch: merge_patch(&annotations, node),
            annotations,
            failed_reasons: eval.failed_reasons(),
            events: vec![succeed_event(eval, node, total, placement.node_policy)],
        };
        FilterOutcome { response: response.to_bytes(), decision: serde_json::to_vec(&decision).ok() }
    }

    /// Cluster-autoscaler dry run: Nodes given in full, no usage, no side effects (§7.4).
    fn filter_simulated(&self, placement: &Placement, nodes: &RawValue, now: i64) -> FilterOutcome {
        #[derive(serde::Deserialize)]
        struct Items<'a> {
            #[serde(borrow, default)]
            items: Vec<&'a RawValue>,
        }
        let items: Items = match serde_json::from_str(nodes.get()) {
            Ok(i) => i,
            Err(e) => return FilterOutcome::error(format!("decode ExtenderArgs.Nodes: {e}")),
        };
        let mut temp: Vec<(GpuNode, &RawValue)> = Vec::new();
        for raw in &items.items {
            match serde_json::from_str::<ObjectView>(raw.get()) {
                Ok(v) => temp.push((GpuNode::from_annotations(&v.metadata.name, &v.metadata.annotations), raw)),
                Err(e) => return FilterOutcome::error(format!("decode ExtenderArgs.Nodes item: {e}")),
            }
        }
        let lookup = |name: &str| temp.iter().find(|(g, _)| g.name == name).map(|(g, _)| g);
        let eval = evaluate_nodes(self, placement, now, temp.iter().map(|(g, _)| (g.name.as_str(), Some(g))), lookup);
        let chosen =
            eval.chosen.as_ref().and_then(|(name, _)| temp.iter().find(|(g, _)| g.name == *name)).map(|(_, raw)| *raw);
        let response = ExtenderFilterResult {
            nodes: chosen.map(|raw| NodeItems { items: vec![raw] }),
            failed_nodes: Some(eval.failed_map()),
            ..Default::default()
        };
        FilterOutcome { response: response.to_bytes(), decision: None }
    }

    /// Where would this pod (as a user submits it) go, and why not elsewhere. JSON out.
    pub fn explain(
        &mut self,
        pod_bytes: &[u8],
        now: i64,
        node_policy: Option<&str>,
        gpu_policy: Option<&str>,
    ) -> Vec<u8> {
        #[derive(Serialize, Default)]
        struct Explain {
            node: Option<String>,
            annotations: BTreeMap<String, String>,
            failed: BTreeMap<String, String>,
            scores: BTreeMap<String, f64>,
            error: String,
        }
        let result = (|| -> Result<Explain, String> {
            let mut pod: Pod = serde_json::from_slice(pod_bytes).map_err(|e| format!("decode Pod: {e}"))?;
            if pod.metadata.namespace.is_empty() {
                pod.metadata.namespace = "default".into();
            }
            // The webhook as `serve` applies it: its defaults, and its denials reported as the answer.
            self.admit_pod(&mut pod)?;
            let placement = Placement::new(self, &pod, node_policy, gpu_policy)?;
            if placement.request.is_empty() {
                return Err(format!(
                    "Pod {} requests no vGPU resource; kube-scheduler places it without hami-fast",
                    pod.key()
                ));
            }
            // A snapshot is what a HAMi just started sees: one registration pass decides its nodes.
            self.registration_pass(now);
            let mut names: Vec<String> = self.nodes.names().cloned().collect();
            names.sort();
            let key = pod_key(&pod);
            let saved = self.set_aside(&key);
            let eval =
                evaluate_nodes(self, &placement, now, names.iter().map(|n| (n.as_str(), self.nodes.get(n))), |n| {
                    self.nodes.get(n)
                });
            let chosen = eval.chosen.as_ref().map(|(n, f)| {
                let positional = self.nodes.get(n).is_some_and(GpuNode::pads_device_lists);
                ((*n).to_owned(), allocation_annotations(n, positional, &f.slots, now))
            });
            let (scores, failed) = (eval.scores(), eval.failed_map());
            drop(eval);
            if let Some(record) = saved {
                self.reserve(key, record);
            }
            let (node, annotations) = chosen.map_or((None, BTreeMap::new()), |(n, a)| (Some(n), a));
            Ok(Explain { node, annotations, scores, failed, error: String::new() })
        })();
        let out = result.unwrap_or_else(|error| Explain { error, ..Default::default() });
        serde_json::to_vec(&out).unwrap_or_default()
    }
}
