//! Kubernetes objects the unit tests feed the engine (the integration tests have
//! `tests/common/mod.rs`).

use serde_json::{json, Value};

/// A node whose device plugin registered `devices` (`hami.io/node-nvidia-register`).
pub(crate) fn nvidia_node(name: &str, devices: &[Value]) -> Value {
    json!({"kind": "Node", "metadata": {"name": name, "annotations": {
        "hami.io/node-nvidia-register": serde_json::to_string(devices).unwrap()}}})
}
