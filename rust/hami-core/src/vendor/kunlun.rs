//! Kunlunxin XPUs, two backends of HAMi's `kunlun` section.
//!
//! `kunlun` (whole cards): no register annotation; one card per unit of the node's capacity of the
//! count resource, `<node>-kunlun-<i>`, 98304 MiB, 100 cores, 100 slots, the upper half of the
//! cards on NUMA node 1. A card anyone uses is refused; the cards are chosen on the interconnect
//! graph ([`crate::fit::xpu`]). The node's score adds the bubble score of the cards taken
//! ([`bubble_score`]). Written: `hami.io/kunlun-allocated` and `BAIDU_COM_DEVICE_IDX`. No lock.
//!
//! `XPU` (vXPU slices): a JSON device list under `hami.io/node-register-xpu`, handshake
//! `hami.io/node-handshake-xpu`; memory rounded up to 24576, 49152 or 98304 MiB (the webhook
//! writes the rounded value into the limits and requests), cores its share of 98304; the slices on
//! one card all of one size; the same graph. Standard `hami.io/xpu-devices-*`; the shared lock.

use super::request::VendorRequest;
use super::{Admission, Backend, FitChecks, NodeLock, NodeScore, PodExtras, RegisterFormat, RequestFormat};
use crate::codec::{Device, PodDevices};
use crate::device_config::DeviceConfig;
use crate::k8s::{Container, Quantity};
use std::sync::Arc;

pub const CARD_WORD: &str = "kunlun";
pub const SLICE_WORD: &str = "XPU";
pub const DEVICE_IDX_KEY: &str = "BAIDU_COM_DEVICE_IDX";
/// The UUID pins both backends honour beside their own.
pub const BAIDU_UUID_KEYS: (&str, &str) = ("baidu.com/use-gpuuuid", "baidu.com/nouse-gpuuuid");
pub const CARD_MEMORY: i64 = 98304;
const SLICE_SIZES: [i64; 2] = [24576, 49152];

pub fn card_backend(config: &DeviceConfig) -> Option<Backend> {
    let count_name = &config.kunlun.resource_count_name;
    (!count_name.is_empty()).then(|| Backend {
        common_word: CARD_WORD.into(),
        allocated_key: crate::annotations::KUNLUN_ALLOCATED_KEY.into(),
        count_name: count_name.clone(),
        uuid_keys: xpu_uuid_keys(),
        register_format: RegisterFormat::KunlunCards,
        fixed_request: Some((0, 0)),
        checks: FitChecks::XpuCards,
        score: NodeScore::Bubble,
        lock: NodeLock::None,
        extras: PodExtras::Kunlun,
        ..Backend::default()
    })
}

pub fn slice_backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.kunlun;
    (!section.resource_vcount_name.is_empty()).then(|| Backend {
        common_word: SLICE_WORD.into(),
        register_key: "hami.io/node-register-xpu".into(),
        handshake_key: "hami.io/node-handshake-xpu".into(),
        to_allocate_key: "hami.io/xpu-devices-to-allocate".into(),
        allocated_key: "hami.io/xpu-devices-allocated".into(),
        count_name: section.resource_vcount_name.clone(),
        memory_name: section.resource_vmemory_name.clone(),
        uuid_keys: xpu_uuid_keys(),
        admission: Admission::XpuMemory,
        register_format: RegisterFormat::Json,
        request_format: RequestFormat::XpuMemory,
        checks: FitChecks::XpuSlices,
        ..Backend::default()
    })
}

/// The UUID pins of both backends (beside [`BAIDU_UUID_KEYS`]).
fn xpu_uuid_keys() -> (String, String) {
    ("hami.io/use-xpu-uuid".into(), "hami.io/no-use-xpu-uuid".into())
}

/// HAMi's rounding of a slice's memory: the smallest of 24576 and 49152 MiB that holds it, else a
/// whole card.
pub fn trim_memory(mib: i64) -> i64 {
    SLICE_SIZES.into_iter().find(|&s| mib <= s).unwrap_or(CARD_MEMORY)
}

/// A container's vXPU request: the count (limits, then requests), the memory (limits, then
/// requests) rounded by [`trim_memory`], cores its share of a card; no memory (or one that is not
/// an integer) asks a whole card.
pub fn container_request(c: &Container, b: &Arc<Backend>) -> Option<VendorRequest> {
    let res = c.resources();
    let nums = res.get(&b.count_name)?.as_int()?;
    if nums <= 0 {
        return None;
    }
    let memory = res.get(&b.memory_name).and_then(Quantity::as_int).map(trim_memory);
    let (memreq, mem_percentage, coresreq) = match memory {
        Some(m) => (m, 0, m * 100 / CARD_MEMORY),
        None => (CARD_MEMORY, 100, 100),
    };
    Some(VendorRequest { backend: b.clone(), backend_id: 0, nums, memreq, mem_percentage, coresreq })
}

/// HAMi's whole cards from capacity: `count` cards, the upper half (index at least count / 2) on
/// NUMA node 1.
pub fn cards(node: &str, backend: &Backend, count: i64, id: u8) -> Vec<Device> {
    (0..count.max(0))
        .map(|i| Device {
            id: format!("{node}-{CARD_WORD}-{i}"),
            index: i as u32,
            count: 100,
            devmem: CARD_MEMORY as i32,
            devcore: 100,
            device_type: backend.common_word.clone(),
            numa: i32::from(i >= count / 2),
            health: true,
            vendor: id,
            ..Device::default()
        })
        .collect()
}

/// `BAIDU_COM_DEVICE_IDX`: the card indexes of the last container that holds any, joined by `,`.
pub fn extra_annotations(node: &crate::model::GpuNode, placed: &PodDevices) -> Vec<(String, String)> {
    let index = |uuid: &str| node.devices.iter().find(|d| d.id == uuid).map_or(0, |d| d.index);
    let last = placed.iter().rev().find(|c| !c.is_empty());
    last.map(|c| {
        let list: Vec<String> = c.iter().map(|e| index(&e.uuid).to_string()).collect();
        vec![(DEVICE_IDX_KEY.to_owned(), list.join(","))]
    })
    .unwrap_or_default()
}

/// HAMi's kunlun `ScoreNode`: 0 unless every device of the node is a kunlun card; else how the
/// pod's cards (`taken`, indexes) change the bubbles of the cards in use (`busy`): one fewer 3000,
/// as many 2000, one more 1000, two more 0.
pub fn bubble_score(all_cards: bool, busy: &[u32], taken: &[u32]) -> f32 {
    if !all_cards {
        return 0.0;
    }
    match bubbles(&dedup(taken)) - bubbles(&dedup(busy)) {
        -1 => 3000.0,
        0 => 2000.0,
        2 => 0.0,
        _ => 1000.0,
    }
}

fn dedup(indexes: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(indexes.len());
    for &i in indexes {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// HAMi's `countbubble`: per wing (indexes below 4, and the rest) 0 for four cards, 2 for one, 1
/// otherwise (none included); 1 for no card at all.
fn bubbles(indexes: &[u32]) -> i64 {
    let left = indexes.iter().filter(|&&i| i < 4).count();
    let right = indexes.len() - left;
    if left == 0 && right == 0 {
        return 1;
    }
    let value = |n: usize| match n {
        4 => 0,
        1 => 2,
        _ => 1,
    };
    value(left) + value(right)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_rounded_to_a_slice_size() {
        assert_eq!(trim_memory(-5), 24576, "HAMi rounds any size up to the first that holds it");
        assert_eq!(trim_memory(24576), 24576);
        assert_eq!(trim_memory(24577), 49152);
        assert_eq!(trim_memory(49153), 98304);
        assert_eq!(trim_memory(1 << 40), 98304);
    }

    #[test]
    fn cards_split_numa_by_half() {
        let b = Backend { common_word: CARD_WORD.into(), ..Backend::default() };
        let numa: Vec<i32> = cards("n", &b, 5, 3).iter().map(|d| d.numa).collect();
        assert_eq!(numa, [0, 0, 1, 1, 1], "5 / 2 = 2: index 2 is already the upper half");
        let d = &cards("n", &b, 1, 3)[0];
        assert_eq!((d.id.as_str(), d.count, d.devmem, d.numa), ("n-kunlun-0", 100, 98304, 1));
    }

    #[test]
    fn bubble_score_compares_bubbles_before_and_after() {
        assert_eq!(bubble_score(true, &[], &[0]), 0.0, "1 bubble then 3: two more");
        assert_eq!(bubble_score(true, &[0, 1, 2], &[3]), 1000.0, "prev 1+1, cur 2+1");
        assert_eq!(bubble_score(true, &[0, 1, 2, 3], &[4, 5, 6, 7]), 2000.0);
        assert_eq!(bubble_score(true, &[0, 1, 2], &[0, 1, 2, 3]), 3000.0, "prev 1+1, cur 0+1");
        assert_eq!(bubble_score(true, &[0], &[0, 1, 2, 3]), 1000.0, "prev 2+1, cur 0+1: -2 is no case");
        assert_eq!(bubble_score(false, &[], &[0]), 0.0, "another vendor's device on the node");
    }
}
