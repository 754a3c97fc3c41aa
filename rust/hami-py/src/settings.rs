//! Configuration inputs checked by the engine: manifests, HAMi's device config, policy names,
//! label selectors.

use crate::errors::{engine_error, run};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// YAML documents (as `kubectl get -o yaml` writes them) -> JSON array of the non-empty documents;
/// `name` (the file) is the object errors name.
#[pyfunction]
#[pyo3(signature = (text, name="manifest"))]
pub(crate) fn yaml_to_json<'py>(py: Python<'py>, text: &[u8], name: &str) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || hami_core::manifest::yaml_documents_to_json(name, text))?;
    Ok(PyBytes::new(py, &out))
}

/// HAMi's device config file (YAML) -> the checked config as JSON, for the engine config's
/// `device_config`. `file` (its path) is the object errors name.
#[pyfunction]
pub(crate) fn load_device_config<'py>(py: Python<'py>, text: &[u8], file: &str) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let config = hami_core::device_config::DeviceConfig::from_yaml(text, file)?;
        serde_json::to_vec(&config).map_err(hami_core::Error::internal)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Every valid node scheduler policy name, from the engine's own list.
#[pyfunction]
pub(crate) fn node_policy_names() -> Vec<&'static str> {
    hami_core::policy::NodePolicy::names()
}

/// A node scheduler policy given as a flag: its canonical name, or EngineError listing the valid ones.
#[pyfunction]
pub(crate) fn check_node_policy(value: &str) -> PyResult<&'static str> {
    hami_core::policy::NodePolicy::parse_strict(value).map(hami_core::policy::NodePolicy::as_str).map_err(engine_error)
}

/// A label selector (`app=web,env in (a,b)`) checked as the planner's opt-in parses it.
#[pyfunction]
pub(crate) fn check_label_selector(text: &str) -> PyResult<String> {
    hami_core::k8s::LabelSelector::parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| engine_error(hami_core::Error::config("label selector", e)))
}

/// A GPU scheduler policy given as a flag: the trimmed value, or EngineError listing the valid ones.
#[pyfunction]
pub(crate) fn check_gpu_policy(value: &str) -> PyResult<String> {
    hami_core::policy::GpuPolicy::parse_strict(value).map(|p| p.text).map_err(engine_error)
}
