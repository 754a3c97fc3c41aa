//! HAMi's annotation formats (registration, device lists, node lock) and the extender's small
//! documents, read and written by the engine's codec.

use crate::errors::{annotation_error, engine_error};
use hami_core::codec;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[pyfunction]
pub(crate) fn decode_node_register<'py>(py: Python<'py>, value: &str) -> PyResult<Bound<'py, PyBytes>> {
    let devices = codec::decode_node_register(value).map_err(|e| annotation_error(codec::REGISTER_KEY, e))?;
    Ok(PyBytes::new(py, &serde_json::to_vec(&devices).unwrap_or_default()))
}

#[pyfunction]
pub(crate) fn encode_node_register(devices: &[u8]) -> PyResult<String> {
    let devices: Vec<codec::Device> =
        serde_json::from_slice(devices).map_err(|e| engine_error(hami_core::Error::decode("devices", e)))?;
    Ok(codec::encode_node_register(&devices))
}

#[pyfunction]
pub(crate) fn decode_pod_devices<'py>(py: Python<'py>, value: &str) -> PyResult<Bound<'py, PyBytes>> {
    let slots = codec::decode_pod_devices(value).map_err(|e| annotation_error(codec::ALLOCATED_KEY, e))?;
    Ok(PyBytes::new(py, &serde_json::to_vec(&slots).unwrap_or_default()))
}

#[pyfunction]
pub(crate) fn encode_pod_devices(containers: &[u8]) -> PyResult<String> {
    let slots: codec::PodDevices =
        serde_json::from_slice(containers).map_err(|e| engine_error(hami_core::Error::decode("containers", e)))?;
    Ok(codec::encode_pod_devices(&slots))
}

#[pyfunction]
pub(crate) fn parse_node_lock(value: &str) -> PyResult<(String, String, String)> {
    let lock = codec::parse_node_lock(value).map_err(|e| annotation_error(codec::NODE_LOCK_KEY, e))?;
    Ok((lock.timestamp, lock.namespace, lock.name))
}

/// ExtenderBindingArgs bytes -> (PodName, PodNamespace, PodUID, Node); keys matched case-insensitively.
#[pyfunction]
pub(crate) fn parse_binding_args(body: &[u8]) -> PyResult<(String, String, String, String)> {
    let a = hami_core::k8s::extender::parse_binding_args(body).map_err(engine_error)?;
    Ok((a.pod_name, a.pod_namespace, a.pod_uid, a.node))
}

/// Pod JSON bytes -> whether HAMi counts it a PodGroup member (its Bind retries the node lock).
#[pyfunction]
pub(crate) fn is_pod_group_member(pod: &[u8]) -> PyResult<bool> {
    let pod: hami_core::k8s::Pod =
        serde_json::from_slice(pod).map_err(|e| engine_error(hami_core::Error::decode("Pod", e)))?;
    Ok(pod.is_pod_group_member())
}

#[pyfunction]
pub(crate) fn format_node_lock(timestamp: &str, namespace: &str, name: &str) -> String {
    codec::format_node_lock(timestamp, namespace, name)
}
