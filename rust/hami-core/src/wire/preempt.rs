//! Preemptions (`Cluster.preempt`): the waiting pods that evicting lower-priority pods unblocks.

use serde::Serialize;

/// One pass: the preemptions, and whether waiting pods were left for the next pass.
#[derive(Debug, Default, Serialize)]
pub struct PreemptPass {
    pub preemptions: Vec<Preemption>,
    pub more: bool,
}

/// A preemption to carry out: the preemptor and its choice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preemption {
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub priority: i32,
    #[serde(flatten)]
    pub choice: Choice,
}

/// Where a pod fits once its victims are gone: the node, the GPUs its Fit takes there, the victims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Choice {
    pub node: String,
    pub gpus: Vec<String>,
    pub victims: Vec<Victim>,
}

/// A pod to evict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Victim {
    /// Its key in the engine: the UID, else `namespace/name`.
    pub key: String,
    pub namespace: String,
    pub name: String,
    pub priority: i32,
}
