//! Hygon DCU (`DCU`): registered by its device plugin under `hami.io/node-dcu-register` (HAMi's
//! colon/comma format), requests in MiB times the section's `memoryFactor`, 100 cores by default,
//! device types chosen by `hygon.com/use-dcutype`/`nouse-dcutype`.

use super::{Admission, Backend, FitChecks, MemoryUnit, NodeLock, PodExtras, RegisterFormat};
use crate::device_config::DeviceConfig;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.hygon;
    (!section.resource_count_name.is_empty()).then(|| Backend {
        common_word: "DCU".into(),
        register_key: "hami.io/node-dcu-register".into(),
        handshake_key: "hami.io/node-handshake-dcu".into(),
        to_allocate_key: "hami.io/dcu-devices-to-allocate".into(),
        allocated_key: "hami.io/dcu-devices-allocated".into(),
        count_name: section.resource_count_name.clone(),
        memory_name: section.resource_memory_name.clone(),
        core_name: section.resource_core_name.clone(),
        memory_unit: MemoryUnit::Factor(i64::from(section.memory_factor)),
        default_cores: 100,
        count_checked: true,
        type_keys: Some(("hygon.com/use-dcutype".into(), "hygon.com/nouse-dcutype".into())),
        uuid_keys: ("hygon.com/use-gpuuuid".into(), "hygon.com/nouse-gpuuuid".into()),
        admission: Admission::Route,
        register_format: RegisterFormat::Legacy,
        devcore: None,
        fixed_request: None,
        checks: FitChecks::Standard,
        lock: NodeLock::Shared,
        extras: PodExtras::None,
        quota_per_card: false,
        split_over_cards: false,
    })
}
