//! The defragmentation planner's documents (`hami-fast plan`, `kubectl hami plan`, the
//! descheduler): a plan for an objective, a plan for one pending pod, a plan for the pending
//! queue, fragmentation measures, and a placement target's check.

use crate::codec::MigPlacement;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where a pod is or goes: the node and its GPUs.
#[derive(Clone, Serialize, PartialEq, Eq)]
pub struct Place {
    pub node: String,
    pub gpus: Vec<String>,
    /// The MIG instances among the GPUs (none on GPUs that are not in MIG mode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mig: Vec<MigInstance>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Move {
    pub pod: String,
    pub from: Place,
    pub to: Place,
}

/// One MIG instance a pod holds or is granted: its GPU, profile and placement.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct MigInstance {
    pub gpu: String,
    pub profile: String,
    pub placement: MigPlacement,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Measures {
    pub free_whole_gpus: usize,
    /// FGD's expected unusable GPU capacity, in GPUs.
    pub fragmentation: f64,
    pub fragmentation_pct_of_idle: f64,
    pub gpus: usize,
    pub healthy_gpus: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeMeasure {
    pub node: String,
    pub registered: bool,
    pub gpus: usize,
    pub free_whole_gpus: usize,
    pub partly_used_gpus: usize,
    pub fragmentation: f64,
    pub free_milli: Vec<i64>,
}

/// A plan for an objective (`free-gpus`, `frag`): the chosen planner's moves and measures.
#[derive(Debug, Serialize)]
pub struct Plan {
    pub objective: &'static str,
    pub planner: &'static str,
    pub max_moves: usize,
    pub moves: Vec<Move>,
    pub before: Measures,
    pub after: Measures,
    pub elapsed_ms: f64,
    pub pods: usize,
    pub movable_pods: usize,
    /// How many pods stay put for each reason (the reason's text).
    pub immovable: BTreeMap<String, usize>,
    pub nodes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<PlanBaseline>,
}

/// The other planner on the same budget, for comparison.
#[derive(Debug, Serialize)]
pub struct PlanBaseline {
    pub planner: &'static str,
    pub moves: usize,
    pub after: Measures,
    pub elapsed_ms: f64,
}

/// The planner's answer for one pending pod (`--for`): the moves after which it fits, and where.
#[derive(Debug, Clone, Serialize)]
pub struct Unblock {
    pub pod: String,
    pub uid: String,
    /// The pod fits once `moves` have run (or already fits: no moves).
    pub unblocked: bool,
    pub moves: Vec<Move>,
    /// Where the pod fits after the moves: the GPUs to hold for it (the reservation).
    pub target: Option<Place>,
    pub message: String,
    /// Why each node cannot take the pod within the budget (only when not unblocked).
    pub reasons: BTreeMap<String, String>,
    pub max_moves: usize,
    pub before: Measures,
    pub after: Measures,
    pub elapsed_ms: f64,
}

/// A plan for one pending pod (`--for`): the planner's answer on a snapshot of this size.
#[derive(Debug, Serialize)]
pub struct UnblockPlan {
    pub objective: &'static str,
    #[serde(flatten)]
    pub unblock: Unblock,
    pub nodes: usize,
    pub pods: usize,
    /// The GPUs to hold for the pod while the moves run (none when it needs no move).
    pub reservation: Option<Reservation>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reservation {
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub gpus: Vec<String>,
}

/// A plan for the pending queue (objective `pending`): each pod unblocked in order.
#[derive(Debug, Serialize)]
pub struct QueuePlan {
    pub objective: &'static str,
    pub pending: usize,
    pub max_moves: usize,
    pub unblocked_by_moves: usize,
    pub fit_without_moves: usize,
    pub moves: Vec<Move>,
    pub placements: Vec<QueuePlacement>,
    pub queue: Vec<QueuedPod>,
    pub before: Measures,
    /// After the moves, before any pending pod is placed.
    pub after: Measures,
    pub freed_whole_gpus: i64,
    pub nodes: usize,
    pub pods: usize,
    pub elapsed_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<QueueBaseline>,
}

/// Where a pending pod goes, and how many moves it took.
#[derive(Debug, Serialize)]
pub struct QueuePlacement {
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub gpus: Vec<String>,
    pub moves: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mig: Vec<MigInstance>,
}

/// A pending vGPU pod, its containers' asks, and why it can never fit in this cluster, if so.
#[derive(Debug, Serialize)]
pub struct QueuedPod {
    pub pod: String,
    pub uid: String,
    pub containers: Vec<QueuedContainer>,
    pub never: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct QueuedContainer {
    pub init: bool,
    pub gpus: i64,
    pub memory_mib: i64,
    /// Null when the container gives no percentage.
    pub memory_percentage: Option<i64>,
    pub cores: i64,
}

/// The baseline of the pending queue: a plan that knows no pending pod, then each placed in order.
#[derive(Debug, Serialize)]
pub struct QueueBaseline {
    pub planner: &'static str,
    pub moves: usize,
    pub unblocked: usize,
    pub after: Measures,
    pub freed_whole_gpus: i64,
    pub elapsed_ms: f64,
}

/// Cluster and per-node fragmentation.
#[derive(Debug, Serialize)]
pub struct Fragmentation {
    pub cluster: Measures,
    pub workload_types: usize,
    pub nodes: Vec<NodeMeasure>,
}

/// A placement target checked before any eviction.
#[derive(Debug, Serialize)]
pub struct TargetCheck {
    pub ok: bool,
    pub uuids: Vec<String>,
    /// Why not, in one line (empty when `ok`).
    pub message: String,
    /// The placement field that is wrong (`spec.nodeName`, `spec.gpuDevices`; empty when `ok`).
    pub field: &'static str,
    /// The annotations that pin the replacement pod to `uuids` (empty when not `ok`).
    pub pin: BTreeMap<String, String>,
}
