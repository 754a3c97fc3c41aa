//! Cambricon MLU (`MLU`): no register annotation; one device per 100 of the node's
//! `mlu.smlu.vcore` capacity (rounded up), named `<node>-cambricon-mlu-<i>`, 100 slots each, the
//! node's `mlu.smlu.vmemory` capacity (256 MiB units) shared out by cores. Requests in units of
//! 256 MiB, 100 cores by default; the namespace quota is checked card by card in the Fit. Bind
//! takes Cambricon's own lock `cambricon.com/dsmlu.lock` (an RFC 3339 time, held 2 minutes),
//! and the pod carries `CAMBRICON_DSMLU_ASSIGNED` and `CAMBRICON_DSMLU_PROFILE`.

use super::{Admission, Backend, CoreShares, FitChecks, MemoryUnit, NodeLock, PodExtras, RegisterFormat};
use crate::codec::PodDevices;
use crate::device_config::DeviceConfig;
use crate::model::GpuNode;

pub const LOCK_KEY: &str = "cambricon.com/dsmlu.lock";
pub const ASSIGNED_KEY: &str = "CAMBRICON_DSMLU_ASSIGNED";
pub const PROFILE_KEY: &str = "CAMBRICON_DSMLU_PROFILE";
const MEMORY_UNIT: i64 = 256;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.cambricon;
    (!section.resource_count_name.is_empty()).then(|| Backend {
        common_word: "MLU".into(),
        register_key: String::new(),
        handshake_key: String::new(),
        to_allocate_key: "hami.io/cambricon-mlu-devices-to-allocate".into(),
        allocated_key: "hami.io/cambricon-mlu-devices-allocated".into(),
        count_name: section.resource_count_name.clone(),
        memory_name: section.resource_memory_name.clone(),
        core_name: section.resource_core_name.clone(),
        memory_unit: MemoryUnit::Fixed(MEMORY_UNIT),
        default_cores: 100,
        count_checked: false,
        type_keys: None,
        uuid_keys: ("cambricon.com/use-gpuuuid".into(), "cambricon.com/nouse-gpuuuid".into()),
        admission: Admission::Route,
        register_format: RegisterFormat::CoreShares(CoreShares {
            cores_per_device: 100,
            memory_unit: MEMORY_UNIT,
            id_word: "cambricon-mlu",
            slots: 100,
        }),
        devcore: None,
        fixed_request: None,
        checks: FitChecks::Standard,
        lock: NodeLock::Stamp { key: LOCK_KEY, expiry_secs: 120 },
        extras: PodExtras::Cambricon,
        quota_per_card: true,
        split_over_cards: false,
        ..Backend::default()
    })
}

/// Written whenever the pod's MLU list is (HAMi pads it on every node with MLU devices):
/// `ASSIGNED` is `false`; `PROFILE` is `<index>_<cores>_<memory/256>` of the first device of the
/// first container holding one.
pub fn extra_annotations(node: &GpuNode, placed: &PodDevices) -> Vec<(String, String)> {
    let mut out = vec![(ASSIGNED_KEY.to_owned(), "false".to_owned())];
    if let Some(d) = placed.iter().find_map(|devices| devices.first()) {
        let index = node.devices.iter().find(|n| n.id == d.uuid).map_or(0, |n| n.index);
        out.push((PROFILE_KEY.to_owned(), format!("{index}_{}_{}", d.usedcores, d.usedmem / 256)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::ContainerDevice;
    use crate::device_config::DeviceConfig;
    use crate::vendor::core_share_devices;

    fn mlu() -> Backend {
        backend(DeviceConfig::chart_default()).expect("the chart's config has a cambricon section")
    }

    #[test]
    fn devices_are_cut_from_the_core_capacity() {
        let b = mlu();
        let RegisterFormat::CoreShares(shares) = b.register_format else { panic!("capacity backend") };
        let devices = core_share_devices("n1", &b, shares, 250, 192, 3);
        let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["n1-cambricon-mlu-0", "n1-cambricon-mlu-1", "n1-cambricon-mlu-2"]);
        // 192 x 256 MiB shared over 250 cores, 100 cores a device.
        assert!(devices.iter().all(|d| d.devmem == 19660 && d.devcore == 100 && d.count == 100));
        assert!(devices.iter().all(|d| d.device_type == "MLU" && d.health && d.vendor == 3));
        assert_eq!(devices[2].index, 2);
        assert!(core_share_devices("n1", &b, shares, 0, 192, 3).is_empty(), "no cores, no devices");
    }

    #[test]
    fn profile_names_the_first_device_held() {
        let b = mlu();
        let RegisterFormat::CoreShares(shares) = b.register_format else { panic!("capacity backend") };
        let node =
            GpuNode::from_annotations("n1", &Default::default(), core_share_devices("n1", &b, shares, 200, 64, 1));
        let held =
            |uuid: &str| ContainerDevice { uuid: uuid.into(), device_type: "MLU".into(), usedmem: 2560, usedcores: 30 };
        let placed = vec![vec![], vec![held("n1-cambricon-mlu-1"), held("n1-cambricon-mlu-0")], vec![]];
        assert_eq!(
            extra_annotations(&node, &placed),
            [(ASSIGNED_KEY.to_owned(), "false".to_owned()), (PROFILE_KEY.to_owned(), "1_30_10".to_owned())]
        );
        let none = extra_annotations(&node, &vec![vec![]; 2]);
        assert_eq!(none, [(ASSIGNED_KEY.to_owned(), "false".to_owned())], "padded lists only: no profile");
    }

    #[test]
    fn requests_in_256_mib_units_with_100_cores_by_default() {
        let b = std::sync::Arc::new(mlu());
        let c: crate::k8s::Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "resources": {"limits": {"cambricon.com/vmlu": "2", "cambricon.com/mlu.smlu.vmemory": "10"}}
        }))
        .unwrap();
        let r = crate::vendor::request::container_request(&c, &b).unwrap();
        assert_eq!((r.nums, r.memreq, r.mem_percentage, r.coresreq), (2, 2560, 0, 100));
        let bad: crate::k8s::Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "resources": {"limits": {"cambricon.com/vmlu": "1", "cambricon.com/mlu.smlu.vmemory": "-1"}}
        }))
        .unwrap();
        assert!(crate::vendor::request::container_request(&bad, &b).is_none(), "a negative memory drops the request");
    }
}
