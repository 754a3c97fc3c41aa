//! Iluvatar (one backend per `iluvatars[]` chip, only with `--enable-iluvatar`): registered under
//! `hami.io/node-<commonWord>-register`, memory requested in units of 256 MiB, no cores by default,
//! every device type accepted, UUIDs chosen by `hami.io/use-<commonWord>-uuid`.

use super::{Admission, Backend, FitChecks, MemoryUnit, NodeLock, PodExtras, RegisterFormat};
use crate::device_config::DeviceConfig;

pub fn backends(config: &DeviceConfig) -> Vec<Backend> {
    config
        .iluvatars
        .iter()
        .map(|chip| {
            let word = &chip.common_word;
            Backend {
                common_word: word.clone(),
                register_key: format!("hami.io/node-{word}-register"),
                handshake_key: format!("hami.io/node-handshake-{word}"),
                to_allocate_key: format!("hami.io/{word}-devices-to-allocate"),
                allocated_key: format!("hami.io/{word}-devices-allocated"),
                count_name: chip.resource_count_name.clone(),
                memory_name: chip.resource_memory_name.clone(),
                core_name: chip.resource_core_name.clone(),
                memory_unit: MemoryUnit::Fixed(256),
                default_cores: 0,
                count_checked: false,
                type_keys: None,
                uuid_keys: (format!("hami.io/use-{word}-uuid"), format!("hami.io/no-use-{word}-uuid")),
                admission: Admission::CoresPerCardAndContainerName,
                register_format: RegisterFormat::Legacy,
                devcore: None,
                fixed_request: None,
                checks: FitChecks::Standard,
                lock: NodeLock::Shared,
                extras: PodExtras::None,
                quota_per_card: false,
                split_over_cards: false,
            }
        })
        .collect()
}
