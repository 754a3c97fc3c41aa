//! Defragmentation planner (the GPU descheduler's): from a cluster snapshot, a sequence of pod
//! moves that frees whole GPUs and lowers FGD's fragmentation, within a move budget.
//!
//! Every move is checked with the engine's own Fit ([`crate::fit::fit_pod`]) against the state
//! left by the moves before it, with the moved pod's old copy released and the target GPUs
//! whitelisted exactly as the pinning webhook will whitelist them (`nvidia.com/use-gpuuuid`): a
//! move that the planner emits is a move HAMi's Filter accepts at the moment it runs.
//! Fragmentation is [`crate::frag`]'s measure on the live view of GPUs
//! ([`crate::policy::node::live_free_milli`]) against the snapshot's own workload
//! ([`crate::policy::node::live_task_type`] of its pods), as the live FGD policy uses it.
//!
//! MIG GPUs are planned with the live engine's bookkeeping: each pod carries the instances it
//! holds (`hami.io/vgpu-mig-allocations`), lifting a pod frees their placements, and a pod that
//! lands takes the instance the engine's Fit grants ([`Seat`]), so no placement is granted twice.
//!
//! Two planners share this state: `drain` (empty the cheapest partly used GPUs first, then
//! polish with single fragmentation-lowering moves) and `greedy` (the baseline: single moves
//! only, each taken when it lowers the fragment).
//!
//! Files by role: `pod` and `snapshot` (the model and how it is built), `measures`, `planner`
//! (moves lifted, fitted and landed) with `strategies`, `validate` (moves and targets checked
//! before eviction), `unblock` (moves that make room for pending pods), `entry` (bytes in, JSON
//! out), `rejection` and `objective`.

mod entry;
mod evictee;
mod measures;
#[cfg(test)]
mod mig_tests;
mod objective;
mod objects;
#[cfg(test)]
mod objects_tests;
mod planner;
mod pod;
mod rejection;
mod snapshot;
mod strategies;
#[cfg(test)]
mod tests;
mod unblock;
mod validate;
#[cfg(test)]
mod vendor_tests;

pub use entry::{
    fragmentation_bytes, plan_bytes, plan_json, validate_target_bytes, PlanOptions, FOR_MIN_DEFAULT_MOVES,
    PER_POD_DEFAULT_MOVES,
};
pub use evictee::check_evictee;
pub use measures::{Measures, NodeMeasure};
pub use objective::{workload_from_spec, Objective};
pub use objects::{ObjectCache, WaitingPod};
pub use planner::{plan, plan_on, Move, Place, PlanResult, Strategy};
pub use pod::{Immovable, MigInstance, PlanPod, Seat};
pub use rejection::Rejection;
pub use snapshot::Snapshot;
pub use unblock::{baseline_queue, unblock, unblock_queue, PendingPod, QueueResult, Unblock};
pub use validate::{pin_annotations, resolve_gpus, validate_moves, validate_target};

use measures::{is_whole_free, node_frag, node_model, round3};
use planner::{demand, Planner};
use pod::{movable, owner_blocks, per_gpu_request, pod_host_request, resident_instances, Owner};

pub use crate::annotations::{DESCHEDULER_SKIP_KEY as SKIP_ANNOTATION, PREFER_NO_EVICTION_KEY as PREFER_NO_EVICTION};
