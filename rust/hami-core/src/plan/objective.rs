//! What a plan optimises (`--objective`) and the workload fragmentation is measured against
//! (`--workload`).

use crate::error::{Error, Result};
use crate::frag::{TaskType, Workload, MILLI};
use serde::Deserialize;

/// `free-gpus` (default): the most whole free healthy GPUs within the budget, ties broken by
/// fewer moves, then lower fragmentation. `frag`: FGD's fragment against the target workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    FreeGpus,
    Frag,
    /// The snapshot's pending vGPU pods, in order, each with the fewest moves (auto mode).
    Pending,
}

impl Objective {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "" | "free-gpus" => Ok(Self::FreeGpus),
            "frag" => Ok(Self::Frag),
            "pending" => Ok(Self::Pending),
            other => Err(Error::config(
                "plan options",
                format!("unknown objective {other:?} (want free-gpus, frag or pending)"),
            )
            .field("objective")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::FreeGpus => "free-gpus",
            Self::Frag => "frag",
            Self::Pending => "pending",
        }
    }
}

/// One entry of a workload file: a task type and its weight (shares are renormalised to 1).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSpec {
    /// Per-GPU share in milli-GPU (1000 = a whole GPU) ...
    #[serde(default)]
    gpu_milli: Option<i64>,
    /// ... or as a fraction (0.5).
    #[serde(default)]
    gpu: Option<f64>,
    #[serde(default = "one")]
    num_gpu: u32,
    #[serde(default = "unit")]
    weight: f64,
    #[serde(default)]
    gpu_spec: String,
}

fn one() -> u32 {
    1
}

fn unit() -> f64 {
    1.0
}

/// The workload of `--workload`: `null` / `"typical"` keep the snapshot's own (the 95 % most
/// common task types of its pods), `"whole-gpu"` is one whole GPU per task, an array is a list
/// of task types (`{"gpu_milli": 500, "num_gpu": 1, "weight": 3}`).
pub fn workload_from_spec(spec: &serde_json::Value) -> Result<Option<Workload>> {
    let bad = |field: String, message: String| Error::config("plan options", message).field(field);
    let tasks: Vec<TaskSpec> = match spec {
        serde_json::Value::Null => return Ok(None),
        serde_json::Value::String(s) if s == "typical" => return Ok(None),
        serde_json::Value::String(s) if s == "whole-gpu" => {
            let whole = TaskType { cpu_milli: 0, gpu_milli: MILLI, num_gpu: 1, gpu_spec: String::new() };
            return Ok(Some(Workload { types: vec![(whole, 1.0)] }));
        }
        serde_json::Value::String(s) => {
            return Err(bad("workload".into(), format!("unknown workload {s:?} (want typical, whole-gpu or a list)")))
        }
        other => serde_json::from_value(other.clone()).map_err(|e| bad("workload".into(), e.to_string()))?,
    };
    if tasks.is_empty() {
        return Err(bad("workload".into(), "the list is empty".into()));
    }
    let mut types = Vec::with_capacity(tasks.len());
    for (i, t) in tasks.iter().enumerate() {
        let milli = match (t.gpu_milli, t.gpu) {
            (Some(m), None) => m,
            (None, Some(f)) => (f * MILLI as f64).round() as i64,
            _ => return Err(bad(format!("workload[{i}]"), "give exactly one of gpu_milli or gpu".into())),
        };
        if !(1..=MILLI).contains(&milli) {
            return Err(bad(format!("workload[{i}].gpu_milli"), format!("{milli} is not in 1..=1000")));
        }
        if t.num_gpu == 0 || !(t.weight.is_finite() && t.weight > 0.0) {
            return Err(bad(format!("workload[{i}]"), "num_gpu and weight must be positive".into()));
        }
        let milli = if t.num_gpu > 1 { MILLI } else { milli };
        types.push((
            TaskType { cpu_milli: 0, gpu_milli: milli, num_gpu: t.num_gpu, gpu_spec: t.gpu_spec.clone() },
            t.weight,
        ));
    }
    let total: f64 = types.iter().map(|t| t.1).sum();
    types.iter_mut().for_each(|t| t.1 /= total);
    Ok(Some(Workload { types }))
}
