//! Kubernetes objects the integration tests feed the engine: nodes as HAMi's device plugin registers
//! them (`hami.io/node-nvidia-register`) and pods as users write them. Each test file has `mod common;`.
#![allow(dead_code)] // every test crate uses its own part

use serde_json::{json, Value};

pub const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";

/// One registered card of `count` slots, `devmem` MiB and 100 % cores, in hami-core mode, healthy.
pub fn card(id: &str, index: u32, count: u32, devmem: i64, model: &str, numa: i32) -> Value {
    json!({"id": id, "index": index, "count": count, "devmem": devmem, "devcore": 100, "type": model, "numa": numa,
           "mode": "hami-core", "health": true})
}

/// A node registering `devices`.
pub fn node(name: &str, devices: Vec<Value>) -> Value {
    json!({"kind": "Node", "apiVersion": "v1",
           "metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": Value::Array(devices).to_string()}}})
}

/// A node of `gpus` 32 GB V100s `GPU-<name>-<i>`, 10 slots each.
pub fn v100_node(name: &str, gpus: u32) -> Value {
    node(name, (0..gpus).map(|i| card(&format!("GPU-{name}-{i}"), i, 10, 32768, V100, 0)).collect())
}

/// A pod of one container asking `limits`.
pub fn pod(name: &str, limits: Value) -> Value {
    json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
           "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})
}

/// A pod asking one GPU of `mem` MiB.
pub fn vgpu_pod(name: &str, mem: &str) -> Value {
    pod(name, json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem}))
}
