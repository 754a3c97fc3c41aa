//! HAMi's annotation formats: node registration, pair scores, pod device lists, node lock, pod hints.

pub mod devices;
pub mod hints;
pub mod lock;
pub mod register;

pub use devices::{
    align_to_containers, decode_pod_devices, encode_pod_devices, encode_pod_devices_as_hami, ContainerDevice,
    PodDevices,
};
pub use hints::{GpuPolicy, NodePolicy, PodHints, ScoringWeights};
pub use lock::{format_node_lock, parse_node_lock, NodeLock};
pub use register::{decode_node_register, decode_pair_scores, encode_node_register, Device, MigProfile};

pub const REGISTER_KEY: &str = "hami.io/node-nvidia-register";
pub const PAIR_SCORE_KEY: &str = "hami.io/node-nvidia-score";
pub const DEVICE_CORDON_KEY: &str = "hami.io/device-cordon";
pub const NODE_LOCK_KEY: &str = "hami.io/mutex.lock";
pub const VGPU_NODE_KEY: &str = "hami.io/vgpu-node";
pub const VGPU_TIME_KEY: &str = "hami.io/vgpu-time";
pub const TO_ALLOCATE_KEY: &str = "hami.io/vgpu-devices-to-allocate";
pub const ALLOCATED_KEY: &str = "hami.io/vgpu-devices-allocated";
pub const BIND_PHASE_KEY: &str = "hami.io/bind-phase";
pub const BIND_TIME_KEY: &str = "hami.io/bind-time";
pub const VENDOR_NVIDIA: &str = "NVIDIA";

/// Comma list with whitespace trimmed and empty tokens dropped.
pub fn split_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
}
