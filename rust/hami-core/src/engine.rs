//! The engine: the cluster state plus the candidate cache, and every entry point the extender,
//! the webhook, `explain` and the planner call. Decisions live in [`crate::filter`] and
//! [`crate::mutate`]; wire formats in [`crate::k8s`] and [`crate::webhook`].

use crate::config::Config;
use crate::error::{Error, Result};
use crate::filter::{
    self, allocation_annotations, evaluate_candidates, evaluate_nodes, CandidateCache, FilterOutcome, Outcome,
    Placement, Policies,
};
use crate::health::HandshakeWrite;
use crate::k8s::extender::{parse_node_names, split_node_names, ExtenderArgs, ExtenderFilterResult};
use crate::k8s::Pod;
use crate::mutate::admit_pod;
use crate::policy::{GpuPolicy, NodePolicy};
use crate::preempt::{preemptions, PreemptPass, PREEMPT_PASS_BUDGET};
use crate::request::unsupported_vendor;
use crate::request_notes::{request_notes, RequestNote};
use crate::requeue::{fits_after_release, RequeuePass, REQUEUE_PASS_BUDGET};
use crate::state::waiting::WaitingPod;
use crate::state::{Applied, ClusterState, EventInfo, ListInfo, OwnFootprint};
use crate::wire::explain::{Explain, Headroom, Verdict};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

#[derive(Debug, Default)]
pub struct Engine {
    pub state: ClusterState,
    /// The last candidate list kube-scheduler sent, resolved to node ids.
    pub candidates: CandidateCache,
    /// The configured node and GPU policies, parsed once.
    pub policies: Policies,
}

impl Engine {
    pub fn new(config: Config) -> Self {
        let policies = Policies::new(&config.node_scheduler_policy, &config.gpu_scheduler_policy);
        Self { state: ClusterState::new(config), candidates: CandidateCache::default(), policies }
    }

    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// Drops a pod's reservation (for example after a failed annotation patch); true if it had one.
    pub fn release(&mut self, key: &str) -> bool {
        self.state.undo_host(key);
        self.state.release(key)
    }

    /// `/webhook`: AdmissionReview (v1 or v1beta1) in, AdmissionReview out in the same version.
    pub fn admit(&self, body: &[u8]) -> Vec<u8> {
        crate::webhook::admit(&self.state, body)
    }

    /// `/webhook` with the verdict: the AdmissionReview bytes and whether they admit the pod.
    pub fn review(&self, body: &[u8]) -> crate::webhook::Admission {
        crate::webhook::review(&self.state, body)
    }

    /// The node locks a Bind of this pod takes, in HAMi's order (annotation keys).
    pub fn bind_locks(&self, pod_bytes: &[u8]) -> Result<Vec<&'static str>> {
        let pod: crate::k8s::Pod = serde_json::from_slice(pod_bytes).map_err(|e| Error::decode("Pod", e))?;
        let mut request = crate::request::PodRequest::from_pod(&pod, &self.state.config);
        request.vendor = crate::vendor::request::vendor_requests(&pod, &self.state.backends);
        Ok(crate::filter::locks::bind_locks(&request))
    }

    /// The backends' own node locks (annotation key, seconds held), released by any failed Bind.
    pub fn stamp_locks(&self) -> Vec<(&'static str, i64)> {
        crate::filter::locks::stamp_locks(&self.state.backends)
    }

    /// The defragmentation plan of Kubernetes objects under this engine's configuration (JSON out).
    pub fn plan(&self, inputs: &[&[u8]], options: &[u8]) -> Result<Vec<u8>> {
        crate::plan::plan_bytes(inputs, options, &self.state.config)
    }
}

/// The state's ingest and reports, so that callers (the binding) need nothing but the engine.
impl Engine {
    /// A Node, Pod or ResourceQuota, or every item of a `List` (JSON bytes).
    pub fn apply(&mut self, bytes: &[u8]) -> Result<Applied> {
        self.state.apply(bytes)
    }

    /// Removes a Node, Pod or ResourceQuota (the object or its tombstone).
    pub fn delete(&mut self, bytes: &[u8]) -> Result<()> {
        self.state.delete(bytes)
    }

    pub fn apply_watch_event(&mut self, line: &[u8]) -> Result<EventInfo> {
        self.state.apply_watch_event(line)
    }

    pub fn apply_list_page(&mut self, page: &[u8]) -> Result<ListInfo> {
        self.state.apply_list_page(page)
    }

    /// After a re-list: forgets the objects of `kind` whose key is not in `keys`; how many.
    pub fn retain(&mut self, kind: &str, keys: &HashSet<String>) -> usize {
        self.state.retain(kind, keys)
    }

    /// How many pods Filter rejected wait for a release.
    pub fn waiting_count(&self) -> usize {
        self.state.waiting().len()
    }

    /// One of HAMi's registration passes at `now`: the handshake writes to make.
    pub fn registration_pass(&mut self, now: i64) -> Vec<HandshakeWrite> {
        self.state.registration_pass(now)
    }

    /// Per container of a pod: its request against the largest free GPU resources.
    pub fn headroom(&mut self, pod: &[u8]) -> Result<Headroom> {
        self.state.headroom(pod)
    }

    /// Per-node, per-device usage (JSON out).
    pub fn usage_json(&self) -> Vec<u8> {
        self.state.usage_json()
    }

    /// The live holds at `now`, lapsed ones dropped (JSON out).
    pub fn holds_json(&mut self, now: i64) -> Vec<u8> {
        self.state.holds_json(now)
    }

    /// Every counted pod's footprint and every vGPU quota's usage (JSON out).
    pub fn accounting_json(&self) -> Vec<u8> {
        self.state.accounting_json()
    }

    pub fn node_count(&self) -> usize {
        self.state.node_count()
    }

    pub fn pod_count(&self) -> usize {
        self.state.pod_count()
    }
}

impl Engine {
    /// `/filter`: ExtenderArgs bytes in, ExtenderFilterResult bytes out, plus the decision.
    pub fn filter(&mut self, body: &[u8], now: i64, record: bool) -> FilterOutcome {
        // kube-scheduler's spelling: the list cut off the body's end and read off its text (unread
        // when it is the cached list again), the rest parsed on its own (see `split_node_names`).
        let split = split_node_names(body, self.candidates.known_list(&self.state.nodes));
        let head = split.as_ref().and_then(|(doc, list)| {
            // Only with a pod: `{}` would stand for `{,"NodeNames":...}`, which is no JSON at all.
            let args = serde_json::from_slice::<ExtenderArgs>(doc).ok().filter(|a| a.pod.is_some())?;
            let repeated = self.candidates.refresh_plain(*list, &self.state.nodes)?;
            Some((args, repeated))
        });
        let repeated = head.as_ref().map(|(_, repeated)| *repeated);
        let known_names = repeated.is_some();
        let args: ExtenderArgs = match head.map_or_else(|| serde_json::from_slice(body), |(args, _)| Ok(args)) {
            Ok(a) => a,
            Err(e) => return FilterOutcome::error(Error::decode("ExtenderArgs", e)),
        };
        let Some(pod) = args.pod.as_ref() else {
            return FilterOutcome::error(Error::invalid("", "extender args missing pod"));
        };
        let placement = match Placement::new(&self.state, pod, &self.policies) {
            Ok(p) => p,
            Err(e) => return FilterOutcome::error(e),
        };
        if placement.request.is_empty() {
            if let Some(backend) = unsupported_vendor(pod, &self.state.config, &self.state.backends) {
                return FilterOutcome::error(Error::invalid(format!("Pod {}", pod.key()), backend.refusal()));
            }
            let names = match known_names {
                true => Ok(self.candidates.names().map(std::borrow::Cow::Borrowed).collect()),
                false => parse_node_names(args.node_names),
            };
            return match names {
                Ok(names) => FilterOutcome::passthrough(
                    ExtenderFilterResult { node_names: Some(names), ..Default::default() }.to_bytes(),
                ),
                Err(e) => FilterOutcome::error(e),
            };
        }
        if let Some(nodes) = args.nodes {
            return filter::filter_simulated(&self.state, &placement, nodes, now);
        }
        let key = pod.reservation_key();
        let state = &mut self.state;
        let cache = &mut self.candidates;
        match repeated {
            Some(true) => cache.rank_names(),
            Some(false) => {}
            None => {
                if let Err(e) = cache.refresh(args.node_names, &state.nodes) {
                    return FilterOutcome::error(e);
                }
            }
        }
        state.expire_holds(now);
        if placement.node_policy == NodePolicy::Scored(crate::policy::node::Scorer::FgdBalance) {
            state.prepare_arrivals();
        }
        let own = if record { OwnFootprint::Release } else { OwnFootprint::Restore };
        let total = cache.list.len();
        let eval = state.without_pod(&key, own, |state| evaluate_candidates(state, &placement, now, cache));
        let outcome = filter::decide(state, &placement, &eval, total, now, record, &key);
        if record {
            if let Some(node) = outcome.decision.as_ref().and_then(|d| d.node.as_deref()) {
                self.state.note_placement(pod, &placement.hints.use_types, node);
            }
            self.note_waiting(&outcome, key, pod);
        }
        outcome
    }

    /// A rejected pod waits for a release; a placed one waits no more.
    fn note_waiting(&mut self, outcome: &FilterOutcome, key: String, pod: &Pod) {
        match outcome.outcome {
            Outcome::Unschedulable => {
                let names = self.candidates.names();
                let candidates = self.state.waiting_mut().shared_candidates(names);
                let seen = self.state.nodes.log_position();
                let room = self.state.quota_room(&pod.metadata.namespace);
                let waiting = WaitingPod::new(Arc::new(pod.clone()), candidates, seen, room);
                self.state.remember_waiting(key, waiting);
            }
            Outcome::Scheduled => {
                self.state.forget_waiting(&key);
            }
            Outcome::Passthrough | Outcome::Error => {}
        }
    }

    /// After a release: the rejected pods that fit now, in kube-scheduler's queue order, each
    /// marked requeued (see [`crate::requeue`]).
    pub fn requeue(&mut self, now: i64) -> RequeuePass {
        fits_after_release(&mut self.state, &self.policies, now, REQUEUE_PASS_BUDGET)
    }

    /// The waiting pods that preemption unblocks now, with their victims; the GPUs chosen for each
    /// are held at once (see [`crate::preempt`]).
    pub fn preempt(&mut self, now: i64) -> PreemptPass {
        preemptions(&mut self.state, &self.policies, now, PREEMPT_PASS_BUDGET)
    }

    /// Drops the hold [`Engine::preempt`] took for a preemption not carried out; true if it had one.
    /// No node counts as changed: the pod is not looked at again before one does.
    pub fn unhold(&mut self, key: &str) -> bool {
        self.state.unhold_tentative(key)
    }

    /// Has preemption look for victims for this waiting pod at its next pass although no node changed
    /// (a preemption a disruption budget refused, tried again later); false if the pod is not waiting.
    pub fn look_again(&mut self, key: &str) -> bool {
        match self.state.waiting_mut().get_mut(key) {
            Some(w) => {
                (w.preempt_seen, w.preempt_from) = (None, None);
                true
            }
            None => false,
        }
    }

    /// Where would this pod (as a user submits it) go, and why not elsewhere. A pod the webhook
    /// denies, or one hami-fast does not schedule, is an error.
    pub fn explain(
        &mut self,
        pod_bytes: &[u8],
        now: i64,
        node_policy: Option<&str>,
        gpu_policy: Option<&str>,
    ) -> Result<Explain> {
        let mut pod: Pod = serde_json::from_slice(pod_bytes).map_err(|e| Error::decode("Pod", e))?;
        if pod.metadata.namespace.is_empty() {
            pod.metadata.namespace = "default".into();
        }
        // The webhook as `serve` applies it: its defaults, and its denials as the error.
        admit_pod(&self.state, &mut pod)?;
        let policies = Policies {
            node: node_policy.map_or(self.policies.node, NodePolicy::parse),
            gpu: gpu_policy.map_or_else(|| self.policies.gpu.clone(), GpuPolicy::parse),
        };
        let state = &mut self.state;
        let placement = Placement::new(state, &pod, &policies)?;
        let notes = request_notes(&pod, &state.config);
        if placement.request.is_empty() {
            if let Some(backend) = unsupported_vendor(&pod, &state.config, &state.backends) {
                return Err(Error::invalid(format!("Pod {}", pod.key()), backend.refusal()));
            }
            return Err(no_request_error(&pod, &notes));
        }
        // A snapshot is what a HAMi just started sees: one registration pass decides its nodes.
        state.registration_pass(now);
        let mut names: Vec<String> = state.nodes.names().cloned().collect();
        names.sort();
        let key = pod.reservation_key();
        state.expire_holds(now);
        let reserved = reserved_report(state, &key);
        let (chosen, scores, failed, ranked, verdicts) = state.without_pod(&key, OwnFootprint::Restore, |state| {
            let candidates = names.iter().map(|n| (n.as_str(), state.nodes.get(n)));
            let eval = evaluate_nodes(state, &placement, now, candidates, |n| state.nodes.get(n));
            let chosen = eval.chosen.as_ref().and_then(|(n, f)| {
                let node = state.nodes.get(n)?;
                Some((
                    (*n).to_owned(),
                    allocation_annotations(node, &state.backends, f, &placement.request, placement.pod, now),
                ))
            });
            let ranked = crate::filter::ranked(&eval.fits, placement.node_policy);
            let verdicts: BTreeMap<String, Verdict> =
                eval.failed.iter().map(|(n, f)| ((*n).to_owned(), f.verdict(state.nodes.get(n), now))).collect();
            (chosen, eval.scores(), eval.failed_map(), ranked, verdicts)
        });
        let preemption = match chosen {
            None => {
                let nodes: Vec<&str> = names.iter().map(String::as_str).collect();
                Some(crate::preempt::report(state, &placement, &key, &nodes, now))
            }
            Some(_) => None,
        };
        let (node, annotations) = chosen.map_or((None, BTreeMap::new()), |(n, a)| (Some(n), a));
        let node_policy = placement.node_policy.as_str().to_owned();
        let notes = notes.iter().map(ToString::to_string).collect();
        Ok(Explain { node, annotations, scores, failed, ranked, node_policy, reserved, verdicts, notes, preemption })
    }
}

/// A pod `explain` cannot place because HAMi reads no vGPU request in it: the field that dropped
/// the request when one did, else that kube-scheduler places it alone.
fn no_request_error(pod: &Pod, notes: &[RequestNote]) -> Error {
    let object = format!("Pod {}", pod.key());
    match notes.iter().find(|n| n.drops_request) {
        Some(note) => {
            Error::invalid(object, &note.message).field(format!("container {}: {}", note.container, note.field))
        }
        None => Error::invalid(object, "requests no vGPU resource; kube-scheduler places it without hami-fast"),
    }
}

/// Every held GPU, per node, with whom it is held for (`this pod` for `owner`'s own) and until when.
fn reserved_report(state: &ClusterState, owner: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (key, r) in state.reservations().iter() {
        let whom = if key == owner { "this pod".to_owned() } else { r.pod.clone() };
        let until = crate::state::reservations::format_rfc3339(r.expires);
        for gpu in &r.gpus {
            out.entry(r.node.to_string())
                .or_default()
                .insert(gpu.to_string(), format!("held for {whom} until {until}"));
        }
    }
    out
}
