//! `hami_fast._native`: a thin PyO3 layer over hami-core. Bytes in, bytes out, GIL released (but for small `/filter` calls).

mod cluster;
mod codecs;
mod errors;
mod feed;
mod objects;
mod offline;
mod settings;

use cluster::{Cluster, FilterDecision, RequeuedPod};
use errors::EngineError;
use pyo3::prelude::*;

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    let keys = pyo3::types::PyDict::new(m.py());
    for (name, key) in hami_core::annotations::ALL {
        keys.set_item(name, key)?;
    }
    m.add("ANNOTATIONS", keys)?;
    let clearable: Vec<&str> =
        hami_core::fit::Reason::ALL.iter().filter(|r| r.moves_can_clear()).map(|r| r.as_str()).collect();
    m.add("REASONS_MOVES_CAN_CLEAR", pyo3::types::PyTuple::new(m.py(), clearable)?)?;
    m.add_class::<Cluster>()?;
    m.add_class::<objects::ObjectCache>()?;
    m.add_function(wrap_pyfunction!(settings::yaml_to_json, m)?)?;
    m.add_function(wrap_pyfunction!(settings::load_device_config, m)?)?;
    m.add_function(wrap_pyfunction!(settings::node_policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(settings::check_node_policy, m)?)?;
    m.add_function(wrap_pyfunction!(settings::check_gpu_policy, m)?)?;
    m.add_function(wrap_pyfunction!(settings::check_label_selector, m)?)?;
    m.add_class::<FilterDecision>()?;
    m.add_class::<RequeuedPod>()?;
    m.add_function(wrap_pyfunction!(codecs::decode_node_register, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::encode_node_register, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::decode_pod_devices, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::encode_pod_devices, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::parse_node_lock, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::format_node_lock, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::parse_binding_args, m)?)?;
    m.add_function(wrap_pyfunction!(codecs::is_pod_group_member, m)?)?;
    m.add_function(wrap_pyfunction!(offline::replay, m)?)?;
    m.add_function(wrap_pyfunction!(offline::replay_arrivals, m)?)?;
    m.add_function(wrap_pyfunction!(offline::policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(offline::node_frag, m)?)?;
    m.add_function(wrap_pyfunction!(offline::plan, m)?)?;
    m.add_function(wrap_pyfunction!(offline::fragmentation, m)?)?;
    m.add_function(wrap_pyfunction!(offline::validate_target, m)?)?;
    m.add_function(wrap_pyfunction!(offline::replay_snapshot, m)?)?;
    Ok(())
}
