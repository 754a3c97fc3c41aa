//! What the simulator-derived node policies read beyond GPU usage, fed from the Node and Pod
//! watches and from Filter's own decisions: each node's CPU and memory ([`HostBook`]) and the
//! pods seen so far ([`Arrivals`]).

use super::arrivals::Arrivals;
use super::host::HostBook;
use super::ClusterState;
use crate::frag::TaskType;
use crate::k8s::{Pod, PodSpec};
use crate::policy::node as np;
use crate::request::PodRequest;

impl ClusterState {
    pub fn host(&self) -> &HostBook {
        &self.host
    }

    pub fn arrivals(&self) -> &Arrivals {
        &self.arrivals
    }

    /// Brings the learned workload of the pods seen up to date (before a decision reads it).
    pub fn prepare_arrivals(&mut self) {
        self.arrivals.prepare();
    }

    /// The largest GPU memory registered: what a pod not on a node yet asks a share of.
    fn largest_devmem(&self) -> i64 {
        self.nodes.values().flat_map(|n| n.devices.iter()).map(|d| i64::from(d.devmem)).max().unwrap_or(0)
    }

    /// The task type the pods-seen history records for a pod: its GPU share of `node`'s GPUs when
    /// it has a node, else of the largest GPU registered.
    pub fn arrival_type(&self, spec: &PodSpec, use_types: &[String], node: Option<&str>) -> TaskType {
        let pod = Pod { spec: spec.clone(), ..Pod::default() };
        let request = PodRequest::from_pod(&pod, &self.config);
        let devmem = node
            .and_then(|n| self.nodes.get(n))
            .and_then(|n| n.devices.first())
            .map_or_else(|| self.largest_devmem(), |d| i64::from(d.devmem));
        np::live_arrival_type(&request, spec.host_request().0, use_types, devmem)
    }

    /// A pod from the watch placed on a node, bound (`spec.nodeName`) or assigned (`assigned`: a
    /// scheduler's allocation annotations): learnt the first time, and its CPU and memory counted
    /// on that node. The spec is read only for a pod not counted on a node yet.
    pub(super) fn observe_pod(
        &mut self,
        (namespace, name, created): (&str, &str, &str),
        spec: Option<&serde_json::value::RawValue>,
        use_types: Option<&str>,
        assigned: Option<&str>,
    ) {
        let object = crate::k8s::ObjectKey::namespaced(namespace, name).to_string();
        if self.host.placed_on(&object).is_some() {
            return;
        }
        let Ok(spec) = crate::k8s::view::parse_raw::<PodSpec>(spec) else { return };
        let Some(node) = Some(spec.node_name.as_str()).filter(|n| !n.is_empty()).or(assigned) else { return };
        if !self.host.knows(&object) {
            let models: Vec<String> = use_types
                .map(|v| v.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_uppercase).collect())
                .unwrap_or_default();
            let t = self.arrival_type(&spec, &models, Some(node));
            self.arrivals.observe(&object, created, t);
        }
        let node = self.shared(node);
        self.host.place(&object, node, spec.host_request());
    }

    /// A pod that ended (its requests stop counting) or was deleted (forgotten: a pod of the same
    /// name would be learnt again).
    pub(super) fn forget_pod_host(&mut self, namespace: &str, name: &str, deleted: bool) {
        let object = crate::k8s::ObjectKey::namespaced(namespace, name).to_string();
        match deleted {
            true => {
                self.host.remove(&object);
            }
            false => self.host.uncount(&object),
        }
    }

    /// Filter's own decision about `pod` (recorded) when it placed it on `node`: the pod is learnt,
    /// and its requests count on the node at once, before the watch shows it bound.
    pub fn note_placement(&mut self, pod: &Pod, use_types: &[String], node: &str) {
        let object = pod.key().to_string();
        if !self.host.knows(&object) {
            let t = self.arrival_type(&pod.spec, use_types, Some(node));
            let created = pod.metadata.creation_timestamp.as_deref().unwrap_or("");
            self.arrivals.observe(&object, created, t);
        }
        let node = self.shared(node);
        self.host.place(&object, node, pod.spec.host_request());
    }

    /// A decision rolled back (the pod's reservation `key`): its requests no longer count.
    pub fn undo_host(&mut self, key: &str) {
        if let Some(r) = self.pod(key) {
            let object = crate::k8s::ObjectKey::namespaced(&r.namespace, &r.name).to_string();
            self.host.remove(&object);
        }
    }
}
