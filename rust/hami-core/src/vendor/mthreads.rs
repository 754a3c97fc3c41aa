//! Moore Threads (`Mthreads`): no register annotation; one device per 16 of the node's
//! `sgpu-core` capacity (rounded up), named `<node>-mthreads-<i>`, 100 slots and 16 cores each,
//! the node's `sgpu-memory` capacity (512 MiB units) shared out by cores. The webhook fixes the
//! sizes (a count over 1 takes whole cards, 16 cores and 96 units each; one card takes one of the
//! legal memory sizes, whole by default); memory and cores asked are shared out over the cards;
//! a pod's cards are one card across its containers. Only the `-allocated` list is written, with
//! `mthreads.com/gpu-index` and the `predicate-*` annotations. No node lock.

use super::{
    Admission, AdmissionEdit, Backend, CoreShares, FitChecks, MemoryUnit, NodeLock, PodExtras, RegisterFormat,
};
use crate::codec::PodDevices;
use crate::device_config::DeviceConfig;
use crate::model::GpuNode;

const CORES_PER_CARD: i64 = 16;
const MEMORY_PER_CARD: i64 = 96;
const MEMORY_UNIT: i64 = 512;
const LEGAL_MEMORY: [i64; 7] = [2, 4, 8, 16, 32, 64, 96];
pub const GPU_INDEX_KEY: &str = "mthreads.com/gpu-index";
pub const PREDICATE_NODE_KEY: &str = "mthreads.com/predicate-node";
pub const PREDICATE_TIME_KEY: &str = "mthreads.com/predicate-time";
pub const REQUEST_NUM_KEY: &str = "mthreads.com/request-gpu-num";

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.mthreads;
    (!section.resource_count_name.is_empty()).then(|| Backend {
        common_word: "Mthreads".into(),
        register_key: String::new(),
        handshake_key: String::new(),
        to_allocate_key: String::new(),
        allocated_key: "hami.io/mthreads-vgpu-devices-allocated".into(),
        count_name: section.resource_count_name.clone(),
        memory_name: section.resource_memory_name.clone(),
        core_name: section.resource_core_name.clone(),
        memory_unit: MemoryUnit::Fixed(MEMORY_UNIT),
        default_cores: 0,
        count_checked: false,
        type_keys: None,
        uuid_keys: ("mthreads.ai/use-gpuuuid".into(), "mthreads.ai/nouse-gpuuuid".into()),
        admission: Admission::CardSizes,
        register_format: RegisterFormat::CoreShares(CoreShares {
            cores_per_device: CORES_PER_CARD,
            memory_unit: MEMORY_UNIT,
            id_word: "mthreads",
            slots: 100,
        }),
        devcore: None,
        fixed_request: None,
        checks: FitChecks::SameDevice,
        lock: NodeLock::None,
        extras: PodExtras::Mthreads,
        quota_per_card: false,
        split_over_cards: true,
        ..Backend::default()
    })
}

/// HAMi's `MutateAdmission`: a count of 0 or less is an error; over 1, whole cards (16 cores and
/// 96 memory units each) and the count as a pod annotation; one card without a memory limit, a
/// whole card; one card with a memory limit, one of the legal sizes or an error.
pub fn admission_edit(b: &Backend, count: i64, memory: Option<i64>) -> Result<AdmissionEdit, String> {
    if count <= 0 {
        return Err(format!("{} must be greater than 0", b.count_name));
    }
    let whole = |count: i64| {
        vec![(b.core_name.clone(), count * CORES_PER_CARD), (b.memory_name.clone(), count * MEMORY_PER_CARD)]
    };
    if count > 1 {
        let pod_annotations = vec![(REQUEST_NUM_KEY.to_owned(), count.to_string())];
        return Ok(AdmissionEdit { limits: whole(count), pod_annotations });
    }
    match memory {
        None => Ok(AdmissionEdit { limits: whole(count), pod_annotations: Vec::new() }),
        Some(m) if LEGAL_MEMORY.contains(&m) => Ok(AdmissionEdit::default()),
        Some(_) => Err("sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]".into()),
    }
}

/// The card indexes of the last container holding any, its node and the time (nanoseconds).
pub fn extra_annotations(node: &GpuNode, placed: &PodDevices, now: i64) -> Vec<(String, String)> {
    let Some(last) = placed.iter().rev().find(|devices| !devices.is_empty()) else { return Vec::new() };
    let index_of = |uuid: &str| node.devices.iter().find(|d| d.id == uuid).map_or(0, |d| d.index);
    let indexes: Vec<String> = last.iter().map(|d| index_of(&d.uuid).to_string()).collect();
    vec![
        (GPU_INDEX_KEY.to_owned(), indexes.join(",")),
        (PREDICATE_TIME_KEY.to_owned(), (now.saturating_mul(1_000_000_000)).to_string()),
        (PREDICATE_NODE_KEY.to_owned(), node.name.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::ContainerDevice;
    use crate::vendor::core_share_devices;

    fn mthreads() -> Backend {
        backend(DeviceConfig::chart_default()).expect("the chart's config has a mthreads section")
    }

    #[test]
    fn devices_are_cut_from_the_core_capacity() {
        let b = mthreads();
        let RegisterFormat::CoreShares(shares) = b.register_format else { panic!("capacity backend") };
        let devices = core_share_devices("n1", &b, shares, 40, 192, 2);
        let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["n1-mthreads-0", "n1-mthreads-1", "n1-mthreads-2"]);
        // 192 x 512 MiB over 40 cores, 16 cores a card.
        assert!(devices.iter().all(|d| d.devmem == 39321 && d.devcore == 16 && d.count == 100));
    }

    #[test]
    fn the_webhook_fixes_card_sizes() {
        let b = mthreads();
        let two = admission_edit(&b, 2, Some(5)).unwrap();
        assert_eq!(two.limits, [("mthreads.com/sgpu-core".into(), 32), ("mthreads.com/sgpu-memory".into(), 192)]);
        assert_eq!(two.pod_annotations, [(REQUEST_NUM_KEY.to_owned(), "2".to_owned())]);
        assert_eq!(admission_edit(&b, 1, None).unwrap().limits[1].1, 96, "one card without memory: whole");
        assert_eq!(admission_edit(&b, 1, Some(8)).unwrap(), AdmissionEdit::default());
        assert_eq!(
            admission_edit(&b, 1, Some(5)).unwrap_err(),
            "sGPU memory request value is invalid, valid values are [2, 4, 8, 16, 32, 64, 96]"
        );
        assert_eq!(admission_edit(&b, 0, None).unwrap_err(), "mthreads.com/vgpu must be greater than 0");
    }

    #[test]
    fn requests_are_shared_out_over_the_cards() {
        let b = std::sync::Arc::new(mthreads());
        let c: crate::k8s::Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "resources": {"limits": {"mthreads.com/vgpu": "2", "mthreads.com/sgpu-memory": "192", "mthreads.com/sgpu-core": "32"}}
        }))
        .unwrap();
        let r = crate::vendor::request::container_request(&c, &b).unwrap();
        assert_eq!((r.nums, r.memreq, r.mem_percentage, r.coresreq), (2, 49152, 0, 16));
    }

    #[test]
    fn the_index_is_the_last_container_s() {
        let b = mthreads();
        let RegisterFormat::CoreShares(shares) = b.register_format else { panic!("capacity backend") };
        let node =
            GpuNode::from_annotations("n1", &Default::default(), core_share_devices("n1", &b, shares, 48, 96, 1));
        let held = |uuid: &str| ContainerDevice {
            uuid: uuid.into(),
            device_type: "Mthreads".into(),
            usedmem: 1,
            usedcores: 1,
        };
        let placed = vec![vec![held("n1-mthreads-0")], vec![held("n1-mthreads-2"), held("n1-mthreads-1")], vec![]];
        let out = extra_annotations(&node, &placed, 7);
        assert_eq!(out[0], (GPU_INDEX_KEY.to_owned(), "2,1".to_owned()));
        assert_eq!(out[1], (PREDICATE_TIME_KEY.to_owned(), "7000000000".to_owned()));
        assert_eq!(out[2], (PREDICATE_NODE_KEY.to_owned(), "n1".to_owned()));
        assert!(extra_annotations(&node, &vec![vec![]; 2], 7).is_empty(), "no card held: nothing");
    }
}
