//! HAMi's NVIDIA device walk: the per-card checks in HAMi's order, MIG instances, the namespace
//! quota as `fitQuota` sees it, and the topology-aware choice among eligible cards.

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) struct Pick {
    pub(super) index: usize,
    pub(super) mem: i64,
    pub(super) cores: i64,
}

/// HAMi's NVIDIA Fit: walk the ordered devices from the end; the first failing check is the reason.
/// A MIG GPU that granted an instance is examined again, so one container can take several.
#[allow(clippy::too_many_arguments)]
pub(super) fn pick_devices(
    node: &GpuNode,
    usage: &[DeviceUsage],
    occupied: &MigOccupancy,
    typed: &[usize],
    r: &ContainerRequest,
    ctx: &PodContext,
    earlier: &PodDevices,
    slot: usize,
) -> Result<Vec<Pick>, FitFailure> {
    let hints = ctx.hints;
    let (topology, mutex) = (ctx.gpu_policy.topology, ctx.gpu_policy.mutex);
    let origin = r.nums as usize;
    let mut need = origin;
    let mut prev_numa: Option<i32> = None;
    let mut picked: Vec<Pick> = Vec::new();
    let mut reasons = ReasonCounts::default();
    let mut pos = typed.len();
    while pos > 0 {
        pos -= 1;
        let i = typed[pos];
        let u = &usage[i];
        if let Some(reason) = identity_check(node, i, hints) {
            reasons.bump(reason, 1);
            continue;
        }
        let d = &node.hot[i];
        if hints.numa_bind && prev_numa != Some(d.numa) {
            if need != origin {
                reasons.bump(Reason::NumaNotFit, picked.len());
            }
            need = origin;
            picked.clear();
            prev_numa = Some(d.numa);
        }
        if let Some(reason) = slot_check(node, i, u, hints, mutex) {
            reasons.bump(reason, 1);
            continue;
        }
        let cores = r.clamped_cores();
        let mem = r.resolved_memory(i64::from(d.devmem));
        if let Some(q) = &ctx.quota {
            if exceeds_quota(q, node, ctx.request, earlier, slot, &picked, Pick { index: i, mem, cores }) {
                reasons.bump(Reason::ResourceQuotaNotFit, 1);
                continue;
            }
        }
        if let Some(reason) = capacity_check(node, i, u, mem, cores) {
            reasons.bump(reason, 1);
            continue;
        }
        let is_mig = node.devices[i].mode == MIG_MODE;
        if is_mig && !mig_fits(node, i, occupied, &picked, mem) {
            reasons.bump(Reason::CardMigTopologyInfeasible, 1);
            continue;
        }
        if need > 0 {
            picked.push(Pick { index: i, mem, cores });
            if !topology {
                need -= 1;
            }
        }
        if need == 0 && !topology {
            return Ok(picked);
        }
        if is_mig && picked.iter().filter(|p| p.index == i).count() < mig::instance_bound(&node.devices[i].mig_profiles)
        {
            pos += 1;
        }
    }
    if topology && picked.len() >= origin {
        return Ok(choose_by_topology(node, picked, origin));
    }
    if !picked.is_empty() {
        reasons.bump(Reason::AllocatedCardsInsufficientRequest, picked.len());
    }
    Err(FitFailure::Cards { counts: reasons, cards: typed.len() })
}

/// HAMi's `CustomFilterRule` on a MIG GPU: this container's earlier picks of the GPU and the
/// request itself all get an instance, besides those resident pods and earlier containers hold.
fn mig_fits(node: &GpuNode, i: usize, occupied: &MigOccupancy, picked: &[Pick], mem: i64) -> bool {
    let earlier: Vec<i64> = picked.iter().filter(|p| p.index == i).map(|p| p.mem).collect();
    let held = occupied.get(i).map_or(&[][..], Vec::as_slice);
    mig::fits(&node.devices[i].mig_profiles, held, &earlier, mem)
}

/// Checks 1–3: health (as registered, and as resident pods' MIG data leave it), cordon, a hold
/// for another pod (hami-fast's), type and mode filters.
pub(super) fn identity_check(node: &GpuNode, i: usize, hints: &PodHints) -> Option<Reason> {
    let h = &node.hot[i];
    if !h.has(HEALTHY) || h.has(MIG_UNHEALTHY) {
        Some(Reason::CardNotHealth)
    } else if h.has(CORDONED) {
        Some(Reason::CardCordoned)
    } else if h.has(RESERVED) {
        Some(Reason::CardReserved)
    } else if hints.filters_devices() && !hints.device_allowed(&node.devices[i].device_type, &node.devices[i].mode) {
        Some(Reason::CardTypeMismatch)
    } else {
        None
    }
}

/// Checks 5–7: UUID filters, free time-slicing slot, mutex.
pub(super) fn slot_check(node: &GpuNode, i: usize, u: &DeviceUsage, hints: &PodHints, mutex: bool) -> Option<Reason> {
    if hints.filters_uuids() && !hints.uuid_allowed(&node.devices[i].id) {
        Some(Reason::CardUuidMismatch)
    } else if i64::from(node.hot[i].count) <= u.used {
        Some(Reason::CardTimeSlicingExhausted)
    } else if mutex && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else {
        None
    }
}

/// Checks 9–12: memory, cores, exclusive request on a shared card, zero-core task on a full card.
pub(super) fn capacity_check(node: &GpuNode, i: usize, u: &DeviceUsage, mem: i64, cores: i64) -> Option<Reason> {
    let h = &node.hot[i];
    let (total_mem, total_core) = (i64::from(h.devmem), i64::from(h.devcore));
    if total_mem - u.usedmem < mem {
        Some(Reason::CardInsufficientMemory)
    } else if total_core - u.usedcores < cores {
        Some(Reason::CardInsufficientCore)
    } else if total_core == 100 && cores == 100 && u.used > 0 {
        Some(Reason::ExclusiveDeviceAllocateConflict)
    } else if total_core != 0 && u.usedcores == total_core && cores == 0 {
        Some(Reason::CardComputeUnitsExhausted)
    } else {
        None
    }
}

/// Quota check (§13.3) on the pod as HAMi's `fitQuota` sees it: the containers placed so far in
/// this phase, then the candidate's container, collapsed with the pod's init-container count.
///
/// HAMi keeps init and app allocations apart until the node is scored, so an app container's
/// check counts no init container and its earlier app containers sit at indexes from 0 (one entry
/// each where the node pads device lists, else one per GPU container). The collapse still takes
/// the first `init_count` entries as init containers: their peak counts, not their sum.
fn exceeds_quota(
    q: &QuotaState,
    node: &GpuNode,
    request: &PodRequest,
    earlier: &PodDevices,
    slot: usize,
    picked: &[Pick],
    candidate: Pick,
) -> bool {
    let as_device = |p: &Pick| ContainerDevice {
        uuid: node.devices[p.index].id.clone(),
        device_type: VENDOR_NVIDIA.to_owned(),
        usedmem: p.mem as i32,
        usedcores: p.cores as i32,
    };
    let init_count = request.init_count;
    let phase = if slot < init_count { 0..slot } else { init_count..slot };
    let positional = node.pads_device_lists();
    let mut seen: PodDevices =
        phase.filter(|&s| positional || request.slots[s].is_some()).map(|s| earlier[s].clone()).collect();
    seen.push(picked.iter().chain(std::iter::once(&candidate)).map(as_device).collect());
    let footprint = collapse(&seen, init_count, false);
    let mem: i64 = footprint.iter().map(|c| c.mem).sum();
    let cores: i64 = footprint.iter().map(|c| c.cores).sum();
    q.limit_mem.is_some_and(|l| q.used_mem + mem > l) || q.limit_cores.is_some_and(|l| q.used_cores + cores > l)
}

/// Topology-aware choice among all eligible cards (§9.4 end).
fn choose_by_topology(node: &GpuNode, candidates: Vec<Pick>, origin: usize) -> Vec<Pick> {
    if candidates.len() == origin {
        return candidates;
    }
    let pair = |a: &Pick, b: &Pick| node.pair_score(a.index, b.index);
    if origin == 1 {
        let connectivity = |c: &Pick| candidates.iter().filter(|o| o.index != c.index).map(|o| pair(c, o)).sum::<i64>();
        let best = candidates.iter().min_by_key(|c| connectivity(c)).copied();
        return best.into_iter().collect();
    }
    let mut best: Option<(i64, Vec<usize>)> = None;
    for combo in Combinations::new(candidates.len(), origin) {
        let total: i64 = combo
            .iter()
            .enumerate()
            .flat_map(|(x, &a)| combo[x + 1..].iter().map(move |&b| (a, b)))
            .map(|(a, b)| pair(&candidates[a], &candidates[b]))
            .sum();
        if best.as_ref().is_none_or(|(s, _)| total > *s) {
            best = Some((total, combo));
        }
    }
    best.map(|(_, c)| c.into_iter().map(|i| candidates[i]).collect()).unwrap_or_default()
}

/// k-combinations of 0..n in lexicographic order.
pub(super) struct Combinations {
    n: usize,
    current: Option<Vec<usize>>,
}

impl Combinations {
    fn new(n: usize, k: usize) -> Self {
        Self { n, current: (k <= n).then(|| (0..k).collect()) }
    }
}

impl Iterator for Combinations {
    type Item = Vec<usize>;
    fn next(&mut self) -> Option<Vec<usize>> {
        let out = self.current.clone()?;
        let k = out.len();
        let mut next = out.clone();
        let mut i = k;
        loop {
            if i == 0 {
                self.current = None;
                break;
            }
            i -= 1;
            if next[i] < self.n - k + i {
                next[i] += 1;
                for j in i + 1..k {
                    next[j] = next[j - 1] + 1;
                }
                self.current = Some(next);
                break;
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::Combinations;

    #[test]
    fn combinations_are_lexicographic() {
        let all: Vec<Vec<usize>> = Combinations::new(4, 2).collect();
        assert_eq!(all, vec![vec![0, 1], vec![0, 2], vec![0, 3], vec![1, 2], vec![1, 3], vec![2, 3]]);
        assert_eq!(Combinations::new(2, 3).count(), 0);
    }
}
