//! The pod to unblock, as parsed from its manifest.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::fit::{PodContext, QuotaState};
use crate::k8s::Pod;
use crate::mutate::admit_pod;
use crate::plan::pod_host_request;
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::state::ClusterState;
use crate::vendor::request::vendor_requests;
use crate::vendor::Backends;

fn parse(pod: &serde_json::Value) -> Result<Pod> {
    serde_json::from_value(pod.clone()).map_err(|e| Error::decode("for_pod", format!("not a Pod: {e}")))
}

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
    /// Its namespace's vGPU quota and the per-card quota of a backend that checks one (Cambricon),
    /// as the Filter reads them: set where the cluster's quotas are known ([`Self::with_quotas`]).
    pub quota: Option<QuotaState>,
    pub card_quota: Option<QuotaState>,
}

impl PendingPod {
    pub fn from_value(pod: &serde_json::Value, config: &Config) -> Result<Self> {
        Self::from_pod(&parse(pod)?, config, &Backends::from_config(config))
    }

    /// A pod as the user wrote it, through the webhook as `serve` applies it (its defaults; a
    /// denial is the error): what the scheduler will be asked to place.
    pub fn admitted(pod: &serde_json::Value, cluster: &ClusterState) -> Result<Self> {
        let mut parsed = parse(pod)?;
        if parsed.metadata.namespace.is_empty() {
            parsed.metadata.namespace = "default".into();
        }
        let key = format!("{}/{}", parsed.metadata.namespace, parsed.metadata.name);
        admit_pod(cluster, &mut parsed).map_err(|e| e.in_object(format!("for_pod: pod {key}")))?;
        Ok(Self::from_pod(&parsed, &cluster.config, &cluster.backends)?.with_quotas(cluster))
    }

    /// The pod with its namespace's quotas as `cluster` has them now.
    pub fn with_quotas(self, cluster: &ClusterState) -> Self {
        let namespace = self.key.split_once('/').map_or("default", |(ns, _)| ns);
        let quota = cluster.quota_state(namespace);
        let card_quota = cluster.card_quota_state(namespace, &self.request);
        Self { quota, card_quota, ..self }
    }

    /// The pod as the planner makes room for it: what it asks of NVIDIA and of every backend in
    /// `backends`.
    pub fn from_pod(parsed: &Pod, config: &Config, backends: &Backends) -> Result<Self> {
        let ns = if parsed.metadata.namespace.is_empty() { "default" } else { parsed.metadata.namespace.as_str() };
        let key = format!("{ns}/{}", parsed.metadata.name);
        if parsed.metadata.name.is_empty() {
            return Err(Error::invalid("for_pod", "metadata.name is empty"));
        }
        let mut request = PodRequest::from_pod(parsed, config);
        request.vendor = vendor_requests(parsed, backends);
        if request.is_empty() {
            let why = format!("spec.containers request no vGPU resource ({})", config.resource_count_name);
            return Err(Error::invalid(format!("for_pod: pod {key}"), why));
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
            quota: None,
            card_quota: None,
        })
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
            quota: self.quota,
            card_quota: self.card_quota,
            device_preference: None,
        }
    }
}
