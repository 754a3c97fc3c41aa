//! Enflame GCU (`GCU`), whole cards: no register annotation, one device per unit of the node's
//! capacity of the GCU resource (`<node>-GCU-<i>`, 100 "MiB" and 100 cores each); a request takes
//! all of a card, and a card in use is refused. No node lock, no handshake.

use super::{Admission, Backend, FitChecks, MemoryUnit, NodeLock, RegisterFormat};
use crate::device_config::DeviceConfig;

pub fn gcu_backend(config: &DeviceConfig) -> Option<Backend> {
    let count_name = &config.enflame.resource_name_gcu;
    (!count_name.is_empty()).then(|| Backend {
        common_word: "GCU".into(),
        register_key: String::new(),
        handshake_key: String::new(),
        to_allocate_key: "hami.io/enflame-gcu-devices-to-allocate".into(),
        allocated_key: "hami.io/enflame-gcu-devices-allocated".into(),
        count_name: count_name.clone(),
        memory_name: String::new(),
        core_name: String::new(),
        memory_unit: MemoryUnit::Factor(1),
        default_cores: 100,
        count_checked: false,
        type_keys: None,
        uuid_keys: (String::new(), String::new()),
        admission: Admission::Route,
        register_format: RegisterFormat::Capacity { devmem: 100, devcore: 100, id_word: "GCU" },
        devcore: None,
        fixed_request: Some((100, 100)),
        vnpu: None,
        checks: FitChecks::Exclusive,
        lock: NodeLock::None,
        ..Backend::default()
    })
}
