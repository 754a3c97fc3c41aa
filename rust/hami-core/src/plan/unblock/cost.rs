//! What clearing room for the pod costs, node by node and GPU by GPU, before any Fit call.

use super::{Candidate, PendingPod};
use crate::codec::MigPlacement;
use crate::error::Result;
use crate::fit::{fit_host, mig};
use crate::model::{GpuNode, CORDONED, HEALTHY, MIG_MODE, MIG_UNHEALTHY, NVIDIA, RESERVED};
use crate::plan::pod::{device_allowed, device_demand, kinds_asked, DeviceDemand};
use crate::plan::{demand, PlanPod, Planner, Rejection};
use std::collections::{BTreeMap, BTreeSet};

/// Why device `d` of `n` can never take the pod, whatever moves.
fn gpu_unusable(n: &GpuNode, d: usize, pending: &PendingPod, want: &DeviceDemand) -> Option<&'static str> {
    let h = &n.hot[d];
    let dev = &n.devices[d];
    let nvidia = dev.vendor == 0;
    if !h.has(HEALTHY) || h.has(MIG_UNHEALTHY) {
        Some("unhealthy")
    } else if h.has(CORDONED) {
        Some("cordoned")
    } else if h.has(RESERVED) {
        Some("held for another pending pod")
    } else if nvidia && !h.has(NVIDIA) {
        Some("type not allowed")
    } else if !device_allowed(&pending.request, &pending.hints, n, d) {
        Some("type or UUID not allowed")
    } else if i64::from(h.devmem) < want.mem {
        Some("too little memory")
    } else if i64::from(h.devcore) < want.cores {
        Some("too few cores")
    } else if dev.mode == MIG_MODE && !dev.mig_profiles.iter().any(|p| i64::from(p.memory_mb) >= want.mem) {
        Some("no MIG profile has the memory")
    } else {
        None
    }
}

/// What a GPU must have free for the pod's share, as the Fit checks it: memory, cores, a slot,
/// no exclusive request on a shared card, no zero-core task on a card whose cores are all used;
/// nobody on it when the pod takes it whole.
struct Room {
    devmem: i64,
    devcore: i64,
    count: i64,
    mem: i64,
    cores: i64,
    whole: bool,
}

impl Room {
    fn of(n: &GpuNode, d: usize, want: &DeviceDemand) -> Self {
        let h = &n.hot[d];
        let (devmem, devcore, count) = (i64::from(h.devmem), i64::from(h.devcore), i64::from(h.count));
        Self { devmem, devcore, count, mem: want.mem, cores: want.cores, whole: want.whole }
    }

    fn left_by(&self, used: i64, usedmem: i64, usedcores: i64) -> bool {
        let (mem, cores) = (self.mem, self.cores);
        self.devmem - usedmem >= mem
            && self.devcore - usedcores >= cores
            && used < self.count
            && !(self.whole && used > 0)
            && !(self.devcore == 100 && cores == 100 && used > 0)
            && !(self.devcore != 0 && usedcores == self.devcore && cores == 0)
    }
}

/// The fewest pods to move off GPU `d` so the pod's share fits there (the Fit's slot, memory,
/// core, exclusivity and exhausted-cores checks); `Err` names the pod in the way.
fn clear_gpu(planner: &Planner, t: usize, d: usize, want: &DeviceDemand) -> Result<Vec<usize>, Rejection> {
    let n = &planner.s.nodes[t];
    if n.devices[d].mode == MIG_MODE {
        return clear_mig_gpu(planner, t, d, want, 1);
    }
    let u = n.usage[d];
    let room = Room::of(n, d, want);
    let mem = want.mem;
    let satisfied = |used: i64, usedmem: i64, usedcores: i64| room.left_by(used, usedmem, usedcores);
    let mut on: Vec<usize> = planner.on_gpu.get(&(t, d)).cloned().unwrap_or_default();
    // Largest memory first: the fewest pods to free the memory.
    on.sort_by_key(|&pi| (std::cmp::Reverse(demand(&planner.s.pods[pi]).1), pi));
    let (mut used, mut usedmem, mut usedcores) = (u.used, u.usedmem, u.usedcores);
    let mut out = Vec::new();
    for &pi in &on {
        if satisfied(used, usedmem, usedcores) {
            break;
        }
        let p = &planner.s.pods[pi];
        if let Some(why) = &p.blocked {
            return Err(Rejection::GpuHoldsUnmovable { gpu: n.devices[d].id.clone(), pod: p.key(), why: why.clone() });
        }
        if let Some(c) = p.footprint.iter().find(|c| &*c.uuid == n.devices[d].id.as_str()) {
            let as_large = c.mem >= mem && c.cores >= want.cores && !want.whole && want.cores < 100;
            if p.footprint.len() == 1 && as_large && mem > 0 {
                // It needs as much room elsewhere as the pod would (the pod takes no card whole):
                // where it could go, the pod could.
                return Err(Rejection::GpuHoldsAsLarge { gpu: n.devices[d].id.clone(), pod: p.key() });
            }
            used -= c.slots.max(1);
            usedmem -= c.mem;
            usedcores -= c.cores;
        }
        out.push(pi);
    }
    if satisfied(used, usedmem, usedcores) {
        Ok(out)
    } else {
        Err(Rejection::GpuStaysFull { gpu: n.devices[d].id.clone() })
    }
}

/// [`clear_gpu`] on a GPU in MIG mode, for `instances` instances of one container: memory, cores
/// and a slot are not enough, each instance HAMi chooses needs a free placement. The smallest set
/// of the card's pods (least memory among equals) after whose moves the card has the room and
/// HAMi's own choice ([`mig::fits`]) finds every instance.
fn clear_mig_gpu(
    planner: &Planner,
    t: usize,
    d: usize,
    want: &DeviceDemand,
    instances: usize,
) -> Result<Vec<usize>, Rejection> {
    let n = &planner.s.nodes[t];
    let dev = &n.devices[d];
    let pods = &planner.s.pods;
    let room = Room::of(n, d, want);
    let mem = want.mem;
    let mut on: Vec<usize> = planner.on_gpu.get(&(t, d)).cloned().unwrap_or_default();
    on.sort_by_key(|&pi| (pods[pi].blocked.is_some(), std::cmp::Reverse(demand(&pods[pi]).1), pi));
    on.truncate(MIG_CLEAR_MAX_PODS);
    let earlier = vec![mem; instances.saturating_sub(1)];
    let works = |evict: &[usize]| {
        let mut u = n.usage[d];
        let mut left: Vec<MigPlacement> = n.mig.occupied[d].clone();
        for &pi in evict {
            let (s, m, c) = share_on(&pods[pi], &dev.id);
            (u.used, u.usedmem, u.usedcores) = (u.used - s, u.usedmem - m, u.usedcores - c);
            for h in pods[pi].mig.iter().filter(|i| i.gpu == dev.id) {
                if let Some(k) = left.iter().position(|p| *p == h.placement) {
                    left.remove(k);
                }
            }
        }
        room.left_by(u.used, u.usedmem, u.usedcores) && mig::fits(&dev.mig_profiles, &left, &earlier, mem)
    };
    let movable = on.iter().take_while(|&&pi| pods[pi].blocked.is_none()).count();
    let rehouse = |evict: &[usize]| evict.iter().map(|&pi| share_on(&pods[pi], &dev.id).1).sum::<i64>();
    let subset = |mask: u32| (0..movable).filter(|i| mask & (1 << i) != 0).map(|i| on[i]).collect::<Vec<usize>>();
    let mut masks: Vec<u32> = (0..1u32 << movable).collect();
    masks.sort_by_key(|&m| m.count_ones());
    for size in masks.chunk_by(|a, b| a.count_ones() == b.count_ones()) {
        if let Some(evict) = size.iter().map(|&m| subset(m)).filter(|e| works(e)).min_by_key(|e| rehouse(e)) {
            return Ok(evict);
        }
    }
    let first_unmovable = on[movable..].first().and_then(|&pi| Some((pi, pods[pi].blocked.clone()?)));
    match first_unmovable {
        Some((pi, why)) if works(&on) => {
            Err(Rejection::GpuHoldsUnmovable { gpu: dev.id.clone(), pod: pods[pi].key(), why })
        }
        _ => Err(Rejection::GpuStaysFull { gpu: dev.id.clone() }),
    }
}

/// A MIG card holds a handful of instances; beyond this many pods on one card (broken data) only
/// the first (movable, largest) are considered for its clearing.
const MIG_CLEAR_MAX_PODS: usize = 12;

/// HAMi's `isMIGRequest` for `--for`: the pod does not rule MIG out and the node has a MIG GPU.
fn mig_request(n: &GpuNode, pending: &PendingPod) -> bool {
    n.has_mig
        && pending.hints.vgpu_mode.as_deref().is_none_or(|m| m.contains(MIG_MODE))
        && n.devices.iter().any(|d| d.mode == MIG_MODE)
}

/// A pod's (slots, memory, cores) on the GPU `uuid`.
fn share_on(p: &PlanPod, uuid: &str) -> (i64, i64, i64) {
    p.footprint.iter().find(|c| &*c.uuid == uuid).map_or((0, 0, 0), |c| (c.slots.max(1), c.mem, c.cores))
}

pub(super) fn cost_node(
    planner: &Planner,
    pending: &PendingPod,
    t: usize,
    on_node: &[usize],
) -> Result<Candidate, Rejection> {
    let n = &planner.s.nodes[t];
    if let Some(e) = &n.register_error {
        return Err(Rejection::NotRegistered { error: e.clone() });
    }
    let mut kinds = kinds_asked(&pending.request);
    let mut options: BTreeMap<u8, Vec<(Vec<usize>, usize)>> = BTreeMap::new();
    let mut why_not: BTreeSet<String> = BTreeSet::new();
    for d in 0..n.devices.len() {
        let Some(want) = device_demand(&pending.request, n, d) else { continue };
        if let Some(why) = gpu_unusable(n, d, pending, &want) {
            why_not.insert(format!("{why}: {}", n.devices[d].id));
            continue;
        }
        match clear_gpu(planner, t, d, &want) {
            Ok(evict) => options.entry(n.devices[d].vendor).or_default().push((evict, d)),
            Err(why) => {
                why_not.insert(why.to_string());
            }
        }
    }
    if let Some(nvidia) = kinds.iter_mut().find(|(kind, _)| *kind == 0) {
        mig_on_one_card(planner, pending, t, nvidia, &mut options, &mut why_not);
    }
    let mut evict: Vec<usize> = Vec::new();
    let mut gpus = Vec::new();
    for &(kind, need) in &kinds {
        let mut usable = options.remove(&kind).unwrap_or_default();
        if need == 0 || usable.len() < need {
            let detail: Vec<String> = why_not.into_iter().take(4).collect();
            let total = n.devices.iter().filter(|dev| dev.vendor == kind).count();
            return Err(Rejection::TooFewGpus { usable: usable.len(), total, needs: need.max(1), detail });
        }
        usable.sort_by_key(|(evict, d)| (evict.len(), *d));
        for (e, d) in usable.into_iter().take(need) {
            gpus.push(d);
            for pi in e {
                if !evict.contains(&pi) {
                    evict.push(pi);
                }
            }
        }
    }
    let leave_node = fit_host(n, pending.host.0, pending.host.1).is_err();
    if leave_node {
        free_host(planner, pending, t, on_node, &mut evict)?;
    }
    Ok(Candidate { node: t, evict, gpus, leave_node })
}

/// HAMi's isMIGRequest: more instances than cards may come from one card. Where the pod asks
/// more NVIDIA GPUs than can be cleared, the one MIG card that takes them all (fewest moves).
fn mig_on_one_card(
    planner: &Planner,
    pending: &PendingPod,
    t: usize,
    (_, need): &mut (u8, usize),
    options: &mut BTreeMap<u8, Vec<(Vec<usize>, usize)>>,
    why_not: &mut BTreeSet<String>,
) {
    let n = &planner.s.nodes[t];
    let Some(cleared) = options.get_mut(&0) else { return };
    if *need <= cleared.len() || cleared.is_empty() || !mig_request(n, pending) {
        return;
    }
    let k = *need;
    let mut one_card: Vec<(Vec<usize>, usize)> = Vec::new();
    for &(_, d) in cleared.iter().filter(|(_, d)| n.devices[*d].mode == MIG_MODE) {
        let want = device_demand(&pending.request, n, d).unwrap_or_default();
        match clear_mig_gpu(planner, t, d, &want, k) {
            Ok(evict) => one_card.push((evict, d)),
            Err(why) => {
                why_not.insert(format!("{k} instances: {why}"));
            }
        }
    }
    *cleared = one_card.into_iter().min_by_key(|(evict, d)| (evict.len(), *d)).into_iter().collect();
    *need = cleared.len();
}

/// Adds movable pods of node `t` (most CPU first) to `evict` until the node has the pod's CPU
/// and memory once they leave; `Err` with kube-scheduler's reason when even that is not enough.
fn free_host(
    planner: &Planner,
    pending: &PendingPod,
    t: usize,
    on_node: &[usize],
    evict: &mut Vec<usize>,
) -> Result<(), Rejection> {
    let Some(h) = planner.s.nodes[t].host else { return Ok(()) };
    let (cpu, mem) = pending.host;
    let pods = &planner.s.pods;
    let freed = |evict: &[usize]| evict.iter().fold((0, 0), |(c, m), &pi| (c + pods[pi].host.0, m + pods[pi].host.1));
    let short = |(c, m): (i64, i64)| (cpu > 0 && h.cpu_left() + c < cpu) || (mem > 0 && h.memory_left() + m < mem);
    let mut rest: Vec<usize> =
        on_node.iter().copied().filter(|pi| !evict.contains(pi) && pods[*pi].blocked.is_none()).collect();
    rest.sort_by_key(|&pi| (std::cmp::Reverse(pods[pi].host), pi));
    let mut rest = rest.into_iter();
    while short(freed(evict)) {
        match rest.next() {
            Some(pi) => evict.push(pi),
            None => {
                let reason = fit_host(&planner.s.nodes[t], cpu, mem).err().map(|e| e.to_string()).unwrap_or_default();
                return Err(Rejection::HostShort { reason });
            }
        }
    }
    Ok(())
}
