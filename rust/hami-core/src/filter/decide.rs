//! A decision: the reservation, HAMi's annotations, the merge patch and the extender response.

use super::evaluate::{evaluate_nodes, Evaluation};
use super::events::{failed_events, succeed_event, Event};
use super::placement::Placement;
use crate::codec::{self, encode_pod_devices_as_hami, PodDevices};
use crate::error::Error;
use crate::fit::NodeFit;
use crate::k8s::extender::{ExtenderFilterResult, NodeItems};
use crate::k8s::view::ObjectView;
use crate::model::{GpuNode, MigHold};
use crate::state::ClusterState;
use crate::vendor::{ascend, Backend, Backends};
use serde::Serialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The annotations Filter writes for a decision on `node`, with HAMi's bytes for GPU-less
/// containers (see [`encode_pod_devices_as_hami`]), and the MIG instances it reserved, if any.
///
/// Each backend's list is written when the pod asked for that backend, or when one of the node's
/// devices has exactly the backend's word as its type: HAMi then pads every container under that
/// word (an all-empty list on a pod that asked nothing of it), and pads positionally.
pub fn allocation_annotations(
    node: &GpuNode,
    backends: &Backends,
    fit: &NodeFit,
    request: &crate::request::PodRequest,
    pod: &crate::k8s::Pod,
    now: i64,
) -> BTreeMap<String, String> {
    let asked_nvidia = !request.asks_no_nvidia();
    let mut out = BTreeMap::from([
        (codec::VGPU_NODE_KEY.to_owned(), node.name.clone()),
        (codec::VGPU_TIME_KEY.to_owned(), now.to_string()),
    ]);
    let positional = node.pads_device_lists();
    if asked_nvidia || positional {
        let devices = encode_pod_devices_as_hami(&fit.slots, positional);
        out.insert(codec::TO_ALLOCATE_KEY.to_owned(), devices.clone());
        out.insert(codec::ALLOCATED_KEY.to_owned(), devices);
    }
    if !fit.mig.is_empty() {
        let written = as_written(&fit.mig, &fit.slots, positional);
        out.insert(codec::MIG_ALLOCATIONS_KEY.to_owned(), codec::encode_mig_allocations(&written));
    }
    let empty: PodDevices = vec![Vec::new(); fit.slots.len()];
    for backend in backends.iter() {
        let placed = fit.vendor.iter().find(|(b, _)| b == backend).map(|(_, d)| d);
        let padded = node.devices.iter().any(|d| d.device_type == backend.common_word);
        if placed.is_none() && !padded {
            continue;
        }
        let placed = placed.unwrap_or(&empty);
        let devices = backend_devices(placed, padded, request, backend);
        if !backend.to_allocate_key.is_empty() {
            out.insert(backend.to_allocate_key.clone(), devices.clone());
        }
        out.insert(backend.allocated_key.clone(), devices);
        if let Some(vnpu) = backend.vnpu.as_deref() {
            let runtime = ascend::runtime_annotation(vnpu, placed, fit.vnpu_soft_split);
            out.insert(format!("huawei.com/{}", backend.common_word), runtime);
            out.insert(ascend::PREDICATE_TIME_KEY.to_owned(), now.to_string());
        }
        out.extend(backend.extra_annotations(node, placed, &request.vendor, pod, now));
    }
    out
}

/// A backend's device list as HAMi writes it: positional where the node pads it, else an entry for
/// each container that asked the backend, empty when its Fit gave none (HAMi appends whatever the
/// Fit returned, so an Ascend request its topology path answers with no NPU still writes `;`).
fn backend_devices(
    placed: &PodDevices,
    padded: bool,
    request: &crate::request::PodRequest,
    backend: &Backend,
) -> String {
    if padded {
        return codec::encode_pod_devices(placed);
    }
    let asked = |i: usize| {
        request.vendor.get(i).is_some_and(|asks| asks.iter().any(|r| r.backend.common_word == backend.common_word))
    };
    let listed: PodDevices = placed
        .iter()
        .enumerate()
        .filter(|(i, slot)| !slot.is_empty() || asked(*i))
        .map(|(_, slot)| slot.clone())
        .collect();
    codec::encode_pod_devices(&listed)
}

/// MetaX sGPU: the pod's app class, and the QoS switches its placement on `node` asks.
fn sgpu_switches(
    state: &ClusterState,
    node: &str,
    fit: &NodeFit,
    placement: &Placement,
) -> (crate::vendor::sgpu::AppClass, Vec<(String, String)>) {
    use crate::vendor::sgpu;
    let ask = sgpu::PodAsk::read(|k| placement.hints.vendor_filter(k));
    let placed = fit.vendor.iter().find(|(b, _)| b.checks == crate::vendor::FitChecks::Sgpu);
    let switches = match (placed, state.nodes.get(node)) {
        (Some((_, devices)), Some(n)) => sgpu::qos_expectations(n, devices, placement.request.init_count, ask),
        _ => Vec::new(),
    };
    (ask.class, switches)
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
    /// A PodGroup member ([`crate::k8s::Pod::is_pod_group_member`]): its Bind retries the node lock.
    #[serde(skip)]
    pub pod_group: bool,
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
    /// The node locks its Bind takes, in HAMi's order ([`super::locks::bind_locks`]).
    #[serde(skip)]
    pub locks: Vec<&'static str>,
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
    /// With [`Outcome::Error`]: the error the response's `Error` reads (kube-scheduler must get
    /// its answer, so the error is carried, not raised).
    pub error: Option<Error>,
}

impl FilterOutcome {
    pub fn error(error: Error) -> Self {
        Self {
            response: ExtenderFilterResult::error(error.to_string()).to_bytes(),
            outcome: Outcome::Error,
            decision: None,
            error: Some(error),
        }
    }

    pub fn passthrough(response: Vec<u8>) -> Self {
        Self { response, outcome: Outcome::Passthrough, decision: None, error: None }
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
            locks: Vec::new(),
        };
        return FilterOutcome {
            response: response.to_bytes(),
            outcome: Outcome::Unschedulable,
            decision: Some(decision),
            error: None,
        };
    };
    let annotations = match state.nodes.get(node) {
        Some(n) => allocation_annotations(n, &state.backends, fit, &placement.request, placement.pod, now),
        None => BTreeMap::new(),
    };
    if record {
        let footprint = fit.footprint(placement.request.init_count);
        let mut record = state.record_with_vendors(&meta.namespace, &meta.name, node, footprint);
        let switches = sgpu_switches(state, node, fit, placement);
        record.footprint.iter_mut().for_each(|c| c.app_class = switches.0);
        state.note_sgpu_qos(node, switches.1);
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
        locks: super::locks::bind_locks(&placement.request),
    };
    FilterOutcome { response: response.to_bytes(), outcome: Outcome::Scheduled, decision: Some(decision), error: None }
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
            Ok(v) => temp.push((GpuNode::from_annotations(&v.metadata.name, &v.metadata.annotations, Vec::new()), raw)),
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
