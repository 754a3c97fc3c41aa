//! The offline engine: trace replay (`hami-fast simulate`), the planner and its checks (`plan`,
//! the descheduler), fragmentation.

use crate::errors::{run, to_json};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The node and pod CSVs as text; a CSV that is not UTF-8 is an error naming its file.
fn csv_texts<'a>(
    nodes_name: &str,
    nodes_csv: &'a [u8],
    pods_name: &str,
    pods_csv: &'a [u8],
) -> Result<(&'a str, &'a str), hami_core::Error> {
    Ok((hami_core::replay::csv::utf8(nodes_name, nodes_csv)?, hami_core::replay::csv::utf8(pods_name, pods_csv)?))
}

/// Trace replay (`hami-fast simulate`): node and pod CSV bytes in, the summary JSON out.
#[pyfunction]
#[pyo3(signature = (nodes_csv, pods_csv, policy, seed=42, tune=1.3, nodes_name="nodes.csv", pods_name="pods.csv", shuffle=true, check_all=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay<'py>(
    py: Python<'py>,
    nodes_csv: &[u8],
    pods_csv: &[u8],
    policy: &str,
    seed: i64,
    tune: f64,
    nodes_name: &str,
    pods_name: &str,
    shuffle: bool,
    check_all: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    use hami_core::replay;
    let out = run(py, || {
        let (nodes, pods) = csv_texts(nodes_name, nodes_csv, pods_name, pods_csv)?;
        let options = replay::Options {
            policy: hami_core::policy::NodePolicy::from_name(policy)?,
            seed,
            tune,
            shuffle,
            check_all,
            ..replay::Options::default()
        };
        to_json(&replay::replay_csv(nodes_name, nodes, pods_name, pods, options)?, "replay summary")
    })?;
    Ok(PyBytes::new(py, &out))
}

/// The node policy names the replay (and `--node-scheduler-policy`) accepts, in table order.
#[pyfunction]
pub(crate) fn policy_names() -> Vec<&'static str> {
    hami_core::policy::POLICY_NAMES.to_vec()
}

/// The replay's cluster and arrival stream for `seed` (no replay run): JSON
/// `{"seed", "total_gpus", "nodes": [[name, cpu_milli, memory_mib, gpus, model]], "pods": [[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]]}`.
#[pyfunction]
#[pyo3(signature = (nodes_csv, pods_csv, seed=42, tune=1.3, nodes_name="nodes.csv", pods_name="pods.csv"))]
pub(crate) fn replay_arrivals<'py>(
    py: Python<'py>,
    nodes_csv: &[u8],
    pods_csv: &[u8],
    seed: i64,
    tune: f64,
    nodes_name: &str,
    pods_name: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    use hami_core::replay;
    let out = run(py, || {
        let (nodes, pods) = csv_texts(nodes_name, nodes_csv, pods_name, pods_csv)?;
        let options = replay::Options { seed, tune, ..replay::Options::default() };
        to_json(&replay::arrivals_csv(nodes_name, nodes, pods_name, pods, options)?, "arrivals")
    })?;
    Ok(PyBytes::new(py, &out))
}

/// FGD's fragment of one node (milli-GPU) against a target workload of
/// `(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)` task types.
#[pyfunction]
pub(crate) fn node_frag(
    cpu_left: i64,
    gpu_free: Vec<i64>,
    model: &str,
    types: Vec<(i64, i64, u32, String, f64)>,
) -> f64 {
    use hami_core::frag::{node_frag, NodeShape, TaskType, Workload};
    let workload = Workload {
        types: types
            .into_iter()
            .map(|(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)| {
                (TaskType { cpu_milli, gpu_milli, num_gpu, gpu_spec }, share)
            })
            .collect(),
    };
    node_frag(&NodeShape { cpu_left, gpu_free: &gpu_free, model }, &workload)
}

pub(crate) fn config_of(config: Option<&[u8]>) -> Result<hami_core::Config, hami_core::Error> {
    hami_core::Config::from_json(config.unwrap_or(b""))
}

/// Defragmentation planner: Kubernetes objects (Lists or single Nodes/Pods, JSON bytes) in,
/// the plan JSON out (`hami-fast plan`, `POST /api/v1/plan`).
#[pyfunction]
#[pyo3(signature = (inputs, options=None, config=None))]
pub(crate) fn plan<'py>(
    py: Python<'py>,
    inputs: Vec<Vec<u8>>,
    options: Option<&[u8]>,
    config: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        hami_core::plan::plan_bytes(&refs, options.unwrap_or(b""), &config_of(config)?)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Cluster and per-node fragmentation of Kubernetes objects, JSON out.
#[pyfunction]
#[pyo3(signature = (inputs, config=None))]
pub(crate) fn fragmentation<'py>(
    py: Python<'py>,
    inputs: Vec<Vec<u8>>,
    config: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        hami_core::plan::fragmentation_bytes(&refs, &config_of(config)?)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// A placement target checked before any eviction: `{"ok", "uuids", "message"}` JSON.
#[pyfunction]
#[pyo3(signature = (inputs, pod, node, gpus, config=None))]
pub(crate) fn validate_target<'py>(
    py: Python<'py>,
    inputs: Vec<Vec<u8>>,
    pod: &str,
    node: &str,
    gpus: Vec<String>,
    config: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        hami_core::plan::validate_target_bytes(&refs, pod, node, &gpus, &config_of(config)?)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// A trace replay stopped at `arrived_pct` % of GPU capacity, as a Kubernetes `List` (JSON).
#[pyfunction]
#[pyo3(signature = (nodes_csv, pods_csv, policy, arrived_pct=90.0, seed=42, tune=1.3, nodes_name="nodes.csv", pods_name="pods.csv"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay_snapshot<'py>(
    py: Python<'py>,
    nodes_csv: &[u8],
    pods_csv: &[u8],
    policy: &str,
    arrived_pct: f64,
    seed: i64,
    tune: f64,
    nodes_name: &str,
    pods_name: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    use hami_core::replay;
    let out = run(py, || {
        let (nodes, pods) = csv_texts(nodes_name, nodes_csv, pods_name, pods_csv)?;
        let policy = hami_core::policy::NodePolicy::from_name(policy)?;
        let options = replay::Options { policy, seed, tune, ..replay::Options::default() };
        to_json(&replay::snapshot::snapshot_csv(nodes_name, nodes, pods_name, pods, options, arrived_pct)?, "snapshot")
    })?;
    Ok(PyBytes::new(py, &out))
}
