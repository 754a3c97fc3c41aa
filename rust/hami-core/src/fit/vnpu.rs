//! HAMi's Ascend Fit: the standard per-card checks (cores out of 100 in the soft split), the soft
//! split refused on a node without it, and the choice among passing NPUs by network group or by
//! whole 910C cards ([`crate::vendor::ascend_topology`]).

use super::standard::{scan, WalkRule};
use super::{FitFailure, PodContext, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode};
use crate::request::VendorRequest;
use crate::vendor::ascend::{self, Vnpu};
use crate::vendor::ascend_topology::{best_by_network, card_pairs, network_score, NETWORK_WEIGHT};

/// Whether the pod asks the soft split (`huawei.com/vnpu-mode: hami-core`).
pub fn soft_split(ctx: &PodContext) -> bool {
    ctx.hints.vendor_filter(ascend::MODE_KEY) == Some(ascend::HAMI_CORE)
}

pub fn fit(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    r: &VendorRequest,
    ctx: &PodContext,
    vnpu: &Vnpu,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let soft = soft_split(ctx);
    if soft && !ascend::node_supports_soft_split(vnpu, node.vnpu_core.as_deref()) {
        let mut counts = ReasonCounts::default();
        counts.bump(Reason::ModeNotFit, 1);
        return Err(FitFailure::Cards { counts, cards: typed.len() });
    }
    let want = usize::try_from(r.nums).unwrap_or(usize::MAX);
    let grouped = vnpu.network_groups && typed.iter().all(|&i| node.devices[i].network().is_present());
    let pairs = vnpu.card_pairs && want > 1;
    let rule = WalkRule { collect_all: grouped || pairs, soft_split: soft, ..WalkRule::default() };
    let scan = scan(node, usage, typed, r, &r.backend, ctx, rule);
    if scan.complete {
        return Ok(scan.picked.into_iter().map(|(_, d)| d).collect());
    }
    if pairs {
        let indexes: Vec<u32> = scan.picked.iter().map(|(i, _)| node.devices[*i].index).collect();
        let chosen = card_pairs(&indexes, want);
        if chosen.len() != want {
            return Err(FitFailure::Pairs { counts: scan.reasons, picked: chosen.len(), request: want });
        }
        return Ok(chosen.into_iter().map(|p| scan.picked[p].1.clone()).collect());
    }
    if grouped && scan.picked.len() >= want {
        if scan.picked.len() == want || want == 1 {
            return Ok(scan.picked.into_iter().take(want).map(|(_, d)| d).collect());
        }
        let networks: Vec<Option<i64>> =
            scan.picked.iter().map(|(_, d)| registered_network(node, r, &d.uuid)).collect();
        return Ok(best_by_network(&networks, want).into_iter().map(|p| scan.picked[p].1.clone()).collect());
    }
    Err(scan.failure(typed.len()))
}

/// The numeric `NetworkID` HAMi finds for a candidate: that of the device with its UUID among the
/// request's backend's own registered devices (the last such), none for another backend's.
fn registered_network(node: &GpuNode, r: &VendorRequest, uuid: &str) -> Option<i64> {
    let own = node.devices.iter().rfind(|d| d.id == uuid && d.vendor == r.backend_id);
    own.and_then(|d| d.network().number())
}

/// HAMi's Ascend `ScoreNode` of one backend's placement on `node`, weighted (0 but for `Ascend910*`).
pub fn score(node: &GpuNode, vnpu: &Vnpu, type_word: &str, slots: &[Vec<ContainerDevice>]) -> f32 {
    if !vnpu.network_groups {
        return 0.0;
    }
    let network = |uuid: &str| {
        node.devices
            .iter()
            .find(|d| d.id == uuid && super::standard::of_type(&d.device_type, type_word))
            .map_or(crate::codec::NetworkId::Absent, |d| d.network())
    };
    let containers: Vec<Vec<_>> = slots.iter().map(|s| s.iter().map(|d| network(&d.uuid)).collect()).collect();
    network_score(&containers) * NETWORK_WEIGHT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{Device, NetworkId};
    use crate::device_config::DeviceConfig;
    use crate::policy::{GpuPolicy, PodHints};
    use crate::request::PodRequest;
    use crate::vendor::Backend;
    use std::sync::Arc;

    fn chip(word: &str) -> Arc<Backend> {
        let all = ascend::backends(DeviceConfig::chart_default());
        Arc::new(all.into_iter().find(|b| b.common_word == word).unwrap())
    }

    /// `custominfo` as Ascend's plugin writes it for `network`.
    fn custom_info(network: NetworkId) -> Option<Box<serde_json::Map<String, serde_json::Value>>> {
        let id = match network {
            NetworkId::Absent => return None,
            NetworkId::Number(n) => serde_json::json!(n),
            NetworkId::Other => serde_json::json!("x"),
        };
        Some(Box::new(serde_json::Map::from_iter([("NetworkID".to_owned(), id)])))
    }

    fn npus(word: &str, networks: &[NetworkId], healthy: &[bool]) -> GpuNode {
        let devices = networks
            .iter()
            .zip(healthy)
            .enumerate()
            .map(|(i, (network, health))| Device {
                id: format!("npu-{i}"),
                index: i as u32,
                count: 4,
                devmem: 65536,
                devcore: 20,
                device_type: word.into(),
                health: *health,
                custom_info: custom_info(*network),
                vendor: 1,
                ..Device::default()
            })
            .collect();
        GpuNode::with_devices("n", devices, None)
    }

    fn request(b: &Arc<Backend>, nums: i64, coresreq: i64) -> VendorRequest {
        VendorRequest { backend: b.clone(), backend_id: 1, nums, memreq: 1000, mem_percentage: 0, coresreq }
    }

    fn run(node: &GpuNode, r: &VendorRequest, hints: &PodHints) -> Result<Vec<String>, String> {
        let pod = PodRequest::default();
        let policy = GpuPolicy::parse("spread");
        let ctx = PodContext {
            request: &pod,
            hints,
            gpu_policy: &policy,
            quota: None,
            card_quota: None,
            device_preference: None,
        };
        let typed: Vec<usize> = (0..node.devices.len()).collect();
        let vnpu = r.backend.vnpu.as_deref().unwrap();
        fit(node, &node.usage, &typed, r, &ctx, vnpu)
            .map(|devices| devices.into_iter().map(|d| d.uuid).collect())
            .map_err(|e| e.to_string())
    }

    fn soft_split() -> PodHints {
        PodHints { vendor_filters: vec![(ascend::MODE_KEY.into(), ascend::HAMI_CORE.into())], ..PodHints::default() }
    }

    #[test]
    fn soft_split_needs_the_node_and_counts_cores_out_of_100() {
        let b = chip("Ascend910B3");
        let mut node = npus("Ascend910B3", &[NetworkId::Absent; 2], &[true; 2]);
        assert_eq!(run(&node, &request(&b, 1, 50), &soft_split()), Err("1/2 ModeNotFit".into()));
        node.vnpu_core = Some("true".into());
        assert_eq!(run(&node, &request(&b, 1, 50), &soft_split()), Ok(vec!["npu-1".into()]));
        assert_eq!(
            run(&node, &request(&b, 1, 50), &PodHints::default()),
            Err("2/2 CardInsufficientCore".into()),
            "the hard split counts the card's 20 AI cores"
        );
    }

    #[test]
    fn several_npus_from_the_largest_network_group() {
        let b = chip("Ascend910B3");
        let n = NetworkId::Number;
        let node = npus("Ascend910B3", &[n(0), n(1), n(1), n(0), n(1)], &[true; 5]);
        let hints = PodHints::default();
        assert_eq!(run(&node, &request(&b, 2, 0), &hints), Ok(vec!["npu-4".into(), "npu-2".into()]));
        assert_eq!(run(&node, &request(&b, 1, 0), &hints), Ok(vec!["npu-4".into()]));
        let slots = vec![vec![crate::codec::ContainerDevice {
            uuid: "npu-4".into(),
            device_type: "Ascend910B3".into(),
            usedmem: 0,
            usedcores: 0,
        }]];
        assert_eq!(score(&node, b.vnpu.as_deref().unwrap(), "Ascend910B3", &slots), 10.0);
    }

    #[test]
    fn too_few_whole_910c_cards_say_how_many_npus_they_gave() {
        let b = chip("Ascend910C");
        let node = npus("Ascend910C", &[NetworkId::Number(0); 4], &[true, false, true, false]);
        assert_eq!(
            run(&node, &request(&b, 2, 0), &PodHints::default()),
            Err("0/2 AllocatedCardsInsufficientRequest, 2/2 CardNotHealth".into())
        );
    }
}
