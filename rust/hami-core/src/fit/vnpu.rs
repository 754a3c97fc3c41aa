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
    let grouped = vnpu.network_groups && typed.iter().all(|&i| node.devices[i].network.is_present());
    let pairs = vnpu.card_pairs && want > 1;
    let rule = WalkRule { collect_all: grouped || pairs, soft_split: soft };
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
    own.and_then(|d| d.network.number())
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
            .map_or(crate::codec::NetworkId::Absent, |d| d.network)
    };
    let containers: Vec<Vec<_>> = slots.iter().map(|s| s.iter().map(|d| network(&d.uuid)).collect()).collect();
    network_score(&containers) * NETWORK_WEIGHT
}
