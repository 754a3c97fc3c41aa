//! `explain` (`hami-fast explain`, `kubectl hami why`): where a pod would go and why not elsewhere,
//! and what would have to change for it to fit (`headroom`).

use super::preempt::Victim;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where a pod would go, and why not elsewhere.
#[derive(Debug, Serialize)]
pub struct Explain {
    pub node: Option<String>,
    pub annotations: BTreeMap<String, String>,
    pub failed: BTreeMap<String, String>,
    pub scores: BTreeMap<String, f64>,
    /// Fitting nodes, most preferred first; the node policy that ordered them.
    pub ranked: Vec<String>,
    pub node_policy: String,
    /// GPUs held by reservations, per node: `{uuid: "held for ns/pod until T"}` (hami-fast only).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub reserved: BTreeMap<String, BTreeMap<String, String>>,
    /// Each failing node once: the reason that decides it and its other reasons.
    pub verdicts: BTreeMap<String, Verdict>,
    /// Where HAMi reads the pod's request otherwise than written (a capped `gpucores`).
    pub notes: Vec<String>,
    /// When it fits nowhere: whether evicting lower-priority pods would make room, and which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionReport>,
}

/// Why one node does not take the pod, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// HAMi's reason word that decides the node.
    pub reason: &'static str,
    /// The node's other reasons (on other cards), in HAMi's check order.
    pub others: Vec<&'static str>,
    /// What the reason word means here, when it needs saying (an unregistered node's cause).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// What `explain` says of a pod that fits nowhere: whether preemption would unblock it, and how.
#[derive(Debug, Clone, Serialize)]
pub struct PreemptionReport {
    pub possible: bool,
    pub priority: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub victims: Vec<Victim>,
    /// Why not, when not possible.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// What would have to change for a pod to fit, per container.
#[derive(Debug, Default, Serialize)]
pub struct Headroom {
    pub pod: String,
    pub nodes: usize,
    pub gpus: usize,
    pub containers: Vec<ContainerHeadroom>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ContainerHeadroom {
    pub container: String,
    pub init: bool,
    pub nums: i64,
    /// MiB per GPU, or `None` when the request is a percentage of each card.
    pub memory_mib: Option<i64>,
    pub memory_percentage: Option<i64>,
    pub cores: i64,
    pub largest_free_memory: Option<FreeOn>,
    pub largest_free_cores: Option<FreeOn>,
    pub most_gpus_with_room: Option<GpusOn>,
    /// The GPU with the most memory in the cluster (`free`: its whole memory), used or not.
    pub largest_gpu: Option<FreeOn>,
    /// The node with the most usable GPUs, room or not.
    pub most_gpus_on_a_node: Option<GpusOn>,
    /// Which of `memory`, `cores`, `slots`, `gpus` no usable GPU (or node, for `gpus`) offers.
    /// `capacity` instead of `memory`: no GPU in the cluster has that much memory at all;
    /// `node_size` instead of `gpus`: no node has that many usable GPUs. Freeing room helps neither.
    pub blocking: Vec<&'static str>,
}

/// The GPU with the most of one free resource.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FreeOn {
    pub node: String,
    pub gpu: String,
    pub free: i64,
}

/// The node with the most GPUs that each have room for one container's per-GPU share.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct GpusOn {
    pub node: String,
    pub count: i64,
}
