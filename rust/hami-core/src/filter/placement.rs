//! The pod-level inputs of one scheduling decision, and the cluster-wide policies they default to.

use crate::error::Result;
use crate::k8s::Pod;
use crate::policy::{GpuPolicy, NodePolicy, PodHints};
use crate::request::PodRequest;
use crate::state::reservations::Reservation;
use crate::state::ClusterState;

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
        let mut request = PodRequest::from_pod(pod, &state.config);
        request.vendor = crate::vendor::request::vendor_requests(pod, &state.backends);
        // HAMi passes a pod without vGPU requests through before it reads any hint annotation.
        let mut hints = if request.is_empty() {
            PodHints::default()
        } else {
            PodHints::from_annotations(&pod.metadata.annotations)
                .map_err(|e| e.in_object(format_args!("Pod {}", pod.key())))?
        };
        let node_policy = hints.node_policy.unwrap_or(policies.node);
        // The fit reads the policy where a backend's node score depends on it (MetaX GPU).
        hints.node_policy = Some(node_policy);
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
