//! The pod to unblock, as parsed from its manifest.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::fit::PodContext;
use crate::k8s::Pod;
use crate::plan::{per_gpu_request, pod_host_request};
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;

/// The pod to unblock, as parsed from its manifest.
#[derive(Debug, Clone)]
pub struct PendingPod {
    pub key: String,
    pub uid: String,
    /// `metadata.creationTimestamp`: the queue is served oldest first, as the scheduler's FIFO.
    pub created: Option<String>,
    pub request: PodRequest,
    pub hints: PodHints,
    pub gpu_policy: GpuPolicy,
    pub host: (i64, i64),
}

impl PendingPod {
    pub fn from_value(pod: &serde_json::Value, config: &Config) -> Result<Self> {
        let parsed: Pod =
            serde_json::from_value(pod.clone()).map_err(|e| Error::decode("for_pod", format!("not a Pod: {e}")))?;
        Self::from_pod(&parsed, config)
    }

    pub fn from_pod(parsed: &Pod, config: &Config) -> Result<Self> {
        let ns = if parsed.metadata.namespace.is_empty() { "default" } else { parsed.metadata.namespace.as_str() };
        let key = format!("{ns}/{}", parsed.metadata.name);
        if parsed.metadata.name.is_empty() {
            return Err(Error::invalid("for_pod", "metadata.name is empty"));
        }
        let request = PodRequest::from_pod(parsed, config);
        if request.is_empty() {
            return Err(Error::invalid(format!("for_pod: pod {key}"), not_planned(parsed, config)));
        }
        let hints = PodHints::from_annotations(&parsed.metadata.annotations)
            .map_err(|e| e.in_object(format!("for_pod: pod {key}")))?;
        let gpu_policy = hints.gpu_policy.clone().unwrap_or_else(|| GpuPolicy::parse(&config.gpu_scheduler_policy));
        Ok(Self {
            key,
            uid: parsed.metadata.uid.clone(),
            created: parsed.metadata.creation_timestamp.clone(),
            request,
            hints,
            gpu_policy,
            host: pod_host_request(parsed),
        })
    }

    /// The largest per-GPU demand of any container: (GPUs, memory on a card of `devmem`, cores).
    pub(super) fn per_gpu(&self, devmem: i64) -> (usize, i64, i64) {
        per_gpu_request(&self.request, devmem)
    }

    /// Queue order: oldest first (pods without a creation time last), then by `namespace/name`.
    pub fn queue_order(&self, other: &Self) -> std::cmp::Ordering {
        (self.created.is_none(), &self.created, &self.key).cmp(&(other.created.is_none(), &other.created, &other.key))
    }

    pub(in crate::plan) fn context<'a>(&'a self, hints: &'a PodHints) -> PodContext<'a> {
        PodContext {
            request: &self.request,
            hints,
            gpu_policy: &self.gpu_policy,
            quota: None,
            card_quota: None,
            device_preference: None,
        }
    }
}

/// Why a pod without an NVIDIA vGPU request is not planned for: it asks another backend's devices
/// (which the planner does not move yet), or none at all.
fn not_planned(pod: &Pod, config: &Config) -> String {
    let backends = crate::vendor::Backends::from_config(config);
    let asked = crate::vendor::request::vendor_requests(pod, &backends);
    match asked.iter().flatten().next() {
        Some(r) => format!(
            "asks {} (HAMi's {} backend): the planner moves NVIDIA vGPU pods only; `hami-fast explain` gives its reasons",
            r.backend.count_name, r.backend.common_word
        ),
        None => format!("spec.containers request no vGPU resource ({})", config.resource_count_name),
    }
}
