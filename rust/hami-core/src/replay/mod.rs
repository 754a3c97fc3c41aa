//! Trace replay: a cluster from a node list, a pod stream from a task list, a node policy;
//! per-event allocation and fragmentation metrics. The protocol is the one of the FGD paper's
//! simulator: seeded shuffle, tuning to `tune` × cluster GPU capacity, one scheduling attempt per
//! pod in order, no departures, no retries.
//!
//! Every GPU is registered with HAMi's model (1000 units of device memory = 1000 milli-GPU,
//! cores unused, a split count that never binds, the GPU model as device type); a task requests
//! `num_gpu` devices with `gpu_milli` units each and its `gpu_spec` as allowed types. Placement
//! goes through the engine's [`crate::fit::fit_pod`] (the extender's Fit) and the policies of
//! [`crate::policy`]; node CPU, memory and pod count are checked by [`crate::fit::fit_host`].
//!
//! Files by role: `cluster` (the simulated nodes and tasks), `run` (the loop) with `choice`
//! (the policy's pick), `metrics`, `csv` (the trace files), `snapshot` (a cluster at an arrived
//! %), `gorand` (Go's `math/rand`, for the simulator's draws).

mod choice;
mod cluster;
pub mod csv;
mod gocooked;
pub mod gorand;
mod metrics;
mod run;
pub mod snapshot;

pub use metrics::{Event, Outcome};
pub use run::{Placed, Replay};
pub use snapshot::LiveStep;

use crate::error::Result;
use crate::frag::MILLI;
use crate::policy::node::Scorer;
use crate::policy::NodePolicy;
use crate::wire::replay::{Arrivals, ReplaySummary};
use cluster::{build_node, SimNode, Task};

/// Device memory of a replay GPU: one unit per milli-GPU.
pub const DEVICE_UNITS: i32 = 1000;
/// Split count of a replay GPU: large enough never to bind.
pub const DEVICE_SPLIT: i32 = 1_000_000;
/// See [`Options::hidden_draws`].
pub const HIDDEN_DRAWS: usize = 10;
/// Pods per node, as in the simulator's node objects.
pub const PODS_PER_NODE: i64 = 1001;

/// Replay parameters.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy: NodePolicy,
    pub seed: i64,
    /// Target total GPU request as a multiple of cluster GPU capacity (`<= 0`: no tuning).
    pub tune: f64,
    pub shuffle: bool,
    /// FGD's target workload keeps the most common task types up to this % of tasks.
    pub typical_pct: f64,
    /// Values the published simulator's process draws from Go's global `math/rand` between
    /// tuning and the node permutation, outside its own code: client-go's reflectors draw a
    /// watch-timeout jitter (`rand.Float64`) when the scheduler's informers start. With 10, the
    /// per-seed curves of the published BestFit / GpuPacking runs are reproduced exactly.
    pub hidden_draws: usize,
    /// Confirm every candidate node with the engine's Fit, not only the chosen one (slower;
    /// the capacity index alone decides the candidates otherwise — see [`Replay::candidates`]).
    pub check_all: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            policy: NodePolicy::Scored(Scorer::Fgd),
            seed: 42,
            tune: 1.3,
            shuffle: true,
            typical_pct: 95.0,
            hidden_draws: HIDDEN_DRAWS,
            check_all: false,
        }
    }
}

/// Parses both CSVs and returns [`Replay::arrivals`] for `options` (no replay is run).
pub fn arrivals_csv(
    nodes_file: &str,
    nodes_csv: &str,
    pods_file: &str,
    pods_csv: &str,
    options: Options,
) -> Result<Arrivals> {
    let nodes = csv::parse_nodes(nodes_file, nodes_csv)?;
    let pods = csv::parse_pods(pods_file, pods_csv)?;
    Ok(Replay::new(&nodes, &pods, options)?.arrivals())
}

/// Parses both CSVs and replays: the entry point of the binding. Errors name file, line, column.
pub fn replay_csv(
    nodes_file: &str,
    nodes_csv: &str,
    pods_file: &str,
    pods_csv: &str,
    options: Options,
) -> Result<ReplaySummary> {
    let start = std::time::Instant::now();
    let nodes = csv::parse_nodes(nodes_file, nodes_csv)?;
    let pods = csv::parse_pods(pods_file, pods_csv)?;
    let outcome = Replay::new(&nodes, &pods, options)?.run()?;
    Ok(outcome.summary(start.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests;
