//! HAMi's annotation formats: node registration, pair scores, pod device lists, node lock, pod hints.

pub mod devices;
pub mod lock;
pub mod mig;
pub mod register;

pub use devices::{
    align_to_containers, decode_pod_devices, encode_pod_devices, encode_pod_devices_as_hami, ContainerDevice,
    PodDevices,
};
pub use lock::{format_node_lock, parse_node_lock, NodeLock};
pub use mig::{decode_mig_allocations, encode_mig_allocations, MigAllocation};
pub use register::{
    decode_node_register, decode_pair_scores, decode_vendor_register, encode_node_register, Device, MigPlacement,
    MigProfile, NetworkId,
};

pub use crate::annotations::*;

pub const VENDOR_NVIDIA: &str = "NVIDIA";

/// Comma list with whitespace trimmed and empty tokens dropped.
pub fn split_list(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect()
}
