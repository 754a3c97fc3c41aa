//! A replay stopped part-way, as the Kubernetes objects of a `List` (`replay_snapshot`): Nodes
//! and Pods in the API's own casing, carrying only what the planner reads. Fields in alphabetical
//! order: the bytes stay those the untyped objects had.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
pub struct SnapshotList {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub items: Vec<SnapshotItem>,
    pub kind: &'static str,
    pub metadata: SnapshotListMeta,
}

#[derive(Debug, Serialize)]
pub struct SnapshotListMeta {
    /// The share of the cluster's GPU capacity the pods in the list asked for, in %.
    #[serde(rename = "arrivedPct")]
    pub arrived_pct: f64,
}

/// One item of the list: a Node or a Pod, each with its own `kind`.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum SnapshotItem {
    Node(SnapshotNode),
    Pod(SnapshotPod),
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotNode {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: SnapshotNodeMeta,
    pub status: SnapshotNodeStatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotNodeMeta {
    /// HAMi's registration and handshake.
    pub annotations: BTreeMap<String, String>,
    pub name: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotNodeStatus {
    pub allocatable: HostResources,
}

/// CPU and memory as Kubernetes quantities (`1000m`, `1024Mi`).
#[derive(Debug, Clone, Serialize)]
pub struct HostResources {
    pub cpu: String,
    pub memory: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotPod {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: SnapshotPodMeta,
    pub spec: SnapshotPodSpec,
    pub status: SnapshotPodStatus,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotPodMeta {
    /// HAMi's allocation annotations, and the GPU models the pod accepts.
    pub annotations: BTreeMap<String, String>,
    #[serde(rename = "creationTimestamp")]
    pub creation_timestamp: String,
    pub labels: BTreeMap<String, String>,
    pub name: String,
    pub namespace: &'static str,
    #[serde(rename = "ownerReferences")]
    pub owner_references: Vec<OwnerReference>,
    pub uid: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct OwnerReference {
    #[serde(rename = "apiVersion")]
    pub api_version: &'static str,
    pub controller: bool,
    pub kind: &'static str,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotPodSpec {
    pub containers: Vec<SnapshotContainer>,
    /// Absent while the pod is pending.
    #[serde(rename = "nodeName", skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(rename = "schedulerName")]
    pub scheduler_name: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotContainer {
    pub name: &'static str,
    pub resources: SnapshotResources,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotResources {
    /// The vGPU resources (`nvidia.com/gpu`, `nvidia.com/gpumem`); empty for a CPU-only pod.
    pub limits: BTreeMap<String, String>,
    pub requests: HostResources,
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotPodStatus {
    /// `Running` when placed, else `Pending`.
    pub phase: &'static str,
}
