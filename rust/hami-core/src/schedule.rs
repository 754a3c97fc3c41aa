//! Filter and explain: evaluate candidate nodes, choose one, build HAMi's annotations.

use crate::cluster::{pod_key, Cluster, PodRecord};
use crate::codec::{self, encode_pod_devices, GpuPolicy, NodePolicy, PodDevices, PodHints};
use crate::fit::{fit_pod, NodeFit, PodContext, NODE_UNREGISTERED};
use crate::k8s::{Node, Pod};
use crate::model::{collapse, GpuNode};
use crate::request::PodRequest;
use crate::webhook::apply_defaults;
use crate::wire::{ExtenderArgs, ExtenderFilterResult, NodeItems};
use serde::Serialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Every candidate's outcome and the chosen node.
#[derive(Debug, Default)]
pub struct Evaluation {
    pub fits: Vec<(String, NodeFit)>,
    pub failed: BTreeMap<String, String>,
    pub chosen: Option<usize>,
}

impl Evaluation {
    pub fn chosen(&self) -> Option<&(String, NodeFit)> {
        self.chosen.map(|i| &self.fits[i])
    }

    pub fn scores(&self) -> BTreeMap<String, f64> {
        self.fits.iter().map(|(n, f)| (n.clone(), f.score)).collect()
    }
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
    pub fn new(cluster: &Cluster, pod: &'a Pod, node_policy: Option<&str>, gpu_policy: Option<&str>) -> Result<Self, String> {
        let hints = Cluster::hints_for(pod)?;
        let node_policy = hints
            .node_policy
            .unwrap_or_else(|| NodePolicy::parse(node_policy.unwrap_or(&cluster.config.node_scheduler_policy)));
        let gpu_policy = hints
            .gpu_policy
            .clone()
            .unwrap_or_else(|| GpuPolicy::parse(gpu_policy.unwrap_or(&cluster.config.gpu_scheduler_policy)));
        let request = PodRequest::from_pod(pod, &cluster.config);
        Ok(Self { pod, request, hints, node_policy, gpu_policy })
    }
}

/// Binpack takes the highest node score, spread the lowest; ties go to the smallest node name.
pub fn choose(fits: &[(String, NodeFit)], policy: NodePolicy) -> Option<usize> {
    (0..fits.len()).min_by(|&a, &b| {
        let (na, sa) = (&fits[a].0, fits[a].1.score);
        let (nb, sb) = (&fits[b].0, fits[b].1.score);
        let by_score = match policy {
            NodePolicy::Binpack => sb.total_cmp(&sa),
            NodePolicy::Spread => sa.total_cmp(&sb),
        };
        by_score.then_with(|| na.cmp(nb))
    })
}

fn evaluate_nodes<'n>(cluster: &Cluster, placement: &Placement, nodes: impl Iterator<Item = (&'n str, Option<&'n GpuNode>)>) -> Evaluation {
    let ctx = PodContext {
        request: &placement.request,
        hints: &placement.hints,
        gpu_policy: &placement.gpu_policy,
        quota: cluster.quota_state(&placement.pod.metadata.namespace),
    };
    let mut eval = Evaluation::default();
    for (name, node) in nodes {
        match node.filter(|n| n.is_registered()) {
            None => {
                eval.failed.insert(name.to_owned(), NODE_UNREGISTERED.to_owned());
            }
            Some(node) => match fit_pod(node, &ctx) {
                Ok(fit) => eval.fits.push((name.to_owned(), fit)),
                Err(reason) => {
                    eval.failed.insert(name.to_owned(), reason);
                }
            },
        }
    }
    eval.chosen = choose(&eval.fits, placement.node_policy);
    eval
}

/// The annotations Filter writes for a decision.
pub fn allocation_annotations(node: &str, slots: &PodDevices, now: i64) -> BTreeMap<String, String> {
    let devices = encode_pod_devices(slots);
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
    scores: BTreeMap<String, f64>,
    failed: &'a BTreeMap<String, String>,
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

fn succeed_event(eval: &Evaluation, chosen: &str, total: usize, policy: NodePolicy) -> Event {
    let mut fits: Vec<&(String, NodeFit)> = eval.fits.iter().collect();
    fits.sort_by(|a, b| a.1.score.total_cmp(&b.1.score).then_with(|| a.0.cmp(&b.0)));
    if policy == NodePolicy::Spread {
        fits.reverse();
    }
    let list: Vec<String> = fits.iter().map(|(n, f)| format!("{n}:{:.2}", f.score)).collect();
    Event {
        event_type: "Normal",
        reason: "FilteringSucceed",
        message: format!(
            "find fit node({chosen}), {} nodes not fit, {} nodes fit({})",
            total.saturating_sub(eval.fits.len()),
            eval.fits.len(),
            list.join(",")
        ),
    }
}

/// One `FilteringFailed` event per reason key, then the summary (§16).
fn failed_events(failed: &BTreeMap<String, String>, total: usize) -> Vec<Event> {
    let mut by_reason: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (node, reason) in failed {
        for part in reason.split(", ") {
            let key = part.split_once(' ').filter(|(n, _)| n.contains('/')).map_or(part, |(_, k)| k);
            by_reason.entry(key.to_owned()).or_default().push(node);
        }
    }
    let mut events: Vec<Event> = by_reason
        .into_iter()
        .map(|(reason, nodes)| Event {
            event_type: "Warning",
            reason: "FilteringFailed",
            message: format!("{} nodes {reason}({})", nodes.len(), nodes.join(",")),
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
            let echo = ExtenderFilterResult { node_names: args.node_names.clone(), ..Default::default() };
            return FilterOutcome { response: echo.to_bytes(), decision: None };
        }
        if let Some(nodes) = &args.nodes {
            return self.filter_simulated(&placement, nodes);
        }
        let key = pod_key(pod);
        let names = args.node_names.clone().unwrap_or_default();
        let eval = if record {
            self.release(&key);
            evaluate_nodes(self, &placement, names.iter().map(|n| (n.as_str(), self.node(n))))
        } else {
            self.evaluate_excluding(&placement, &names, &key)
        };
        self.decide(&placement, &eval, names.len(), now, record, &key)
    }

    /// Evaluates `names` with the pod's own reservation set aside for the call, then restored.
    fn evaluate_excluding(&mut self, placement: &Placement, names: &[String], key: &str) -> Evaluation {
        let saved = self.pod(key).cloned();
        if saved.is_some() {
            self.release(key);
        }
        let eval = evaluate_nodes(self, placement, names.iter().map(|n| (n.as_str(), self.node(n))));
        if let Some(record) = saved {
            self.reserve(key.to_owned(), record);
        }
        eval
    }

    fn decide(&mut self, placement: &Placement, eval: &Evaluation, total: usize, now: i64, record: bool, key: &str) -> FilterOutcome {
        let meta = &placement.pod.metadata;
        let pod = PodRef { namespace: &meta.namespace, name: &meta.name, uid: &meta.uid };
        let Some((node, fit)) = eval.chosen() else {
            let response = ExtenderFilterResult { failed_nodes: Some(eval.failed.clone()), ..Default::default() };
            let decision = Decision {
                pod,
                node: None,
                annotations: BTreeMap::new(),
                patch: String::new(),
                scores: BTreeMap::new(),
                failed: &eval.failed,
                events: failed_events(&eval.failed, total),
            };
            return FilterOutcome { response: response.to_bytes(), decision: serde_json::to_vec(&decision).ok() };
        };
        let annotations = allocation_annotations(node, &fit.slots, now);
        if record {
            let footprint = collapse(&fit.slots, placement.request.init_count, false);
            self.reserve(key.to_owned(), PodRecord { namespace: meta.namespace.clone(), name: meta.name.clone(), node: node.clone(), footprint });
        }
        let response = ExtenderFilterResult { node_names: Some(vec![node.clone()]), ..Default::default() };
        let decision = Decision {
            pod,
            node: Some(node),
            patch: merge_patch(&annotations, node),
            annotations,
            scores: eval.scores(),
            failed: &eval.failed,
            events: vec![succeed_event(eval, node, total, placement.node_policy)],
        };
        FilterOutcome { response: response.to_bytes(), decision: serde_json::to_vec(&decision).ok() }
    }

    /// Cluster-autoscaler dry run: Nodes given in full, no usage, no side effects (§7.4).
    fn filter_simulated(&self, placement: &Placement, nodes: &RawValue) -> FilterOutcome {
        #[derive(serde::Deserialize)]
        struct Items<'a> {
            #[serde(borrow, default)]
            items: Vec<&'a RawValue>,
        }
        let items: Items = match serde_json::from_str(nodes.get()) {
            Ok(i) => i,
            Err(e) => return FilterOutcome::error(format!("decode ExtenderArgs.Nodes: {e}")),
        };
        let mut temp: Vec<(String, GpuNode, &RawValue)> = Vec::new();
        for raw in &items.items {
            match serde_json::from_str::<Node>(raw.get()) {
                Ok(n) => temp.push((n.metadata.name.clone(), GpuNode::from_node(&n), raw)),
                Err(e) => return FilterOutcome::error(format!("decode ExtenderArgs.Nodes item: {e}")),
            }
        }
        let eval = evaluate_nodes(self, placement, temp.iter().map(|(n, g, _)| (n.as_str(), Some(g))));
        let chosen = eval.chosen().and_then(|(name, _)| temp.iter().find(|(n, _, _)| n == name)).map(|(_, _, raw)| *raw);
        let response = ExtenderFilterResult {
            nodes: chosen.map(|raw| NodeItems { items: vec![raw] }),
            failed_nodes: Some(eval.failed.clone()),
            ..Default::default()
        };
        FilterOutcome { response: response.to_bytes(), decision: None }
    }

    /// Where would this pod (as a user submits it) go, and why not elsewhere. JSON out.
    pub fn explain(&mut self, pod_bytes: &[u8], now: i64, node_policy: Option<&str>, gpu_policy: Option<&str>) -> Vec<u8> {
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
            apply_defaults(&mut pod, &self.config)?;
            let placement = Placement::new(self, &pod, node_policy, gpu_policy)?;
            if placement.request.is_empty() {
                return Err(format!("Pod {} requests no vGPU resource; kube-scheduler places it without hami-fast", pod.key()));
            }
            let mut names: Vec<String> = self.nodes.keys().cloned().collect();
            names.sort();
            let key = pod_key(&pod);
            let eval = self.evaluate_excluding(&placement, &names, &key);
            let chosen = eval.chosen();
            Ok(Explain {
                node: chosen.map(|(n, _)| n.clone()),
                annotations: chosen.map(|(n, f)| allocation_annotations(n, &f.slots, now)).unwrap_or_default(),
                scores: eval.scores(),
                failed: eval.failed,
                error: String::new(),
            })
        })();
        let out = result.unwrap_or_else(|error| Explain { error, ..Default::default() });
        serde_json::to_vec(&out).unwrap_or_default()
    }
}
