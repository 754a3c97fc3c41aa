//! Biren (`Biren`): registered as a JSON device list under `hami.io/node-biren-register` (every
//! device's cores set to 100), whole cards by count only: no memory or cores are asked or granted.

use super::{Admission, Backend, FitChecks, MemoryUnit, NodeLock, PodExtras, RegisterFormat};
use crate::device_config::DeviceConfig;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let count_name = &config.biren.resource_count_name;
    (!count_name.is_empty()).then(|| Backend {
        common_word: "Biren".into(),
        register_key: "hami.io/node-biren-register".into(),
        handshake_key: "hami.io/node-handshake-biren".into(),
        to_allocate_key: "hami.io/Biren-devices-to-allocate".into(),
        allocated_key: "hami.io/Biren-devices-allocated".into(),
        count_name: count_name.clone(),
        memory_name: String::new(),
        core_name: String::new(),
        memory_unit: MemoryUnit::Factor(1),
        default_cores: 0,
        count_checked: false,
        type_keys: None,
        uuid_keys: ("birentech.com/use-gpuuuid".into(), "birentech.com/nouse-gpuuuid".into()),
        admission: Admission::Route,
        register_format: RegisterFormat::Json,
        devcore: Some(100),
        fixed_request: None,
        checks: FitChecks::SlotsOnly,
        lock: NodeLock::Shared,
        extras: PodExtras::None,
        quota_per_card: false,
        split_over_cards: false,
    })
}
