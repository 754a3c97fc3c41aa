//! HAMi's Kunlunxin Fit (whole cards and vXPU slices): which candidates pass is a per-card rule,
//! which of them are taken is decided on the interconnect graph of eight cards in two wings of
//! four. The wings are positions in the candidate list as HAMi sorted it (the first four, the
//! rest); the links are between card indexes. HAMi's choice is a list of indexes, each turned into
//! the first candidate with that index.

use super::{FitFailure, PodContext, Reason, ReasonCounts};
use crate::codec::ContainerDevice;
use crate::model::{DeviceUsage, GpuNode, HEALTHY, RESERVED};
use crate::request::VendorRequest;
use crate::vendor::{kunlun, FitChecks};

/// Index pairs linked across the wings.
const CROSS_LINKS: [(u32, u32); 4] = [(0, 4), (1, 5), (2, 6), (3, 7)];
/// Index pairs linked inside a wing.
const WING_LINKS: [(u32, u32); 12] =
    [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3), (4, 5), (4, 6), (4, 7), (5, 6), (5, 7), (6, 7)];
/// The sets of four cards that make a ring, in HAMi's order of preference.
const RINGS: [[u32; 4]; 6] = [[0, 1, 4, 5], [2, 3, 6, 7], [0, 2, 4, 6], [1, 3, 5, 7], [0, 3, 4, 7], [1, 2, 5, 6]];
/// For an odd count, the wing sizes preferred, by slot.
const ODD_ORDER: [usize; 4] = [1, 3, 2, 4];

pub fn fit(
    node: &GpuNode,
    usage: &[DeviceUsage],
    typed: &[usize],
    r: &VendorRequest,
    ctx: &PodContext,
) -> Result<Vec<ContainerDevice>, FitFailure> {
    let backend = &*r.backend;
    let slices = backend.checks == FitChecks::XpuSlices;
    let mut pinned_out: Vec<&str> = Vec::new();
    let fits: Vec<bool> = typed
        .iter()
        .map(|&i| {
            let d = &node.devices[i];
            if !pinned(ctx, &backend.uuid_keys, &d.id) {
                if !pinned_out.contains(&d.id.as_str()) {
                    pinned_out.push(&d.id);
                }
                return false;
            }
            let u = &usage[i];
            match slices {
                true => (!ctx.gpu_policy.mutex || u.used == 0) && slice_fits(node, i, u, r.memreq),
                false => u.used == 0 && usable(node, i),
            }
        })
        .collect();
    let indexes: Vec<u32> = typed.iter().map(|&i| node.devices[i].index).collect();
    let chosen = select(&indexes, &fits, r.nums);
    if chosen.is_empty() {
        let shared = match slices && ctx.gpu_policy.mutex {
            true => typed.iter().filter(|&&i| usage[i].used > 0 && slice_fits(node, i, &usage[i], r.memreq)).count(),
            false => 0,
        };
        return Err(failure(shared, pinned_out.len(), typed.len()));
    }
    let entry = |i: usize| {
        let d = &node.devices[i];
        let (usedmem, usedcores) = match slices {
            true => (r.memreq, r.coresreq),
            false => (i64::from(d.devmem), i64::from(d.devcore)),
        };
        ContainerDevice {
            uuid: d.id.clone(),
            device_type: backend.request_type().to_owned(),
            usedmem: usedmem as i32,
            usedcores: usedcores as i32,
        }
    };
    let first_with = |index: u32| typed.iter().copied().find(|&i| node.devices[i].index == index);
    Ok(chosen.into_iter().filter_map(first_with).map(entry).collect())
}

/// HAMi's reason when the graph offers nothing: the used cards a mutex pod could have shared, else
/// the cards pinned out, else `NumaNotFit` once.
fn failure(shared: usize, pinned_out: usize, cards: usize) -> FitFailure {
    let mut counts = ReasonCounts::default();
    match (shared, pinned_out) {
        (0, 0) => counts.bump(Reason::NumaNotFit, 1),
        (0, n) => counts.bump(Reason::CardUuidMismatch, n),
        (n, _) => counts.bump(Reason::ExclusiveDeviceAllocateConflict, n),
    }
    FitFailure::Cards { counts, cards }
}

/// Healthy and not held back by hami-fast.
fn usable(node: &GpuNode, i: usize) -> bool {
    node.hot[i].has(HEALTHY) && !node.hot[i].has(RESERVED)
}

/// HAMi's `FitVXPU`: the slice's memory is free, and a card in use holds slices of this size only
/// (its memory used over its slices taken, rounded down).
fn slice_fits(node: &GpuNode, i: usize, u: &DeviceUsage, memreq: i64) -> bool {
    if !usable(node, i) || memreq + u.usedmem > i64::from(node.devices[i].devmem) {
        return false;
    }
    u.used == 0 || u.usedmem / u.used == memreq
}

/// HAMi's `CheckUUID` with the backend's keys and with Baidu's: a use list must hold the card, a
/// nouse list must not (an empty value is no list).
fn pinned(ctx: &PodContext, own: &(String, String), id: &str) -> bool {
    let holds = |key: &str| {
        let value = ctx.hints.vendor_filter(key).filter(|v| !v.trim().is_empty())?;
        Some(value.split(',').any(|u| u.trim() == id))
    };
    let (baidu_use, baidu_nouse) = kunlun::BAIDU_UUID_KEYS;
    [(own.0.as_str(), own.1.as_str()), (baidu_use, baidu_nouse)]
        .into_iter()
        .all(|(use_key, nouse_key)| holds(use_key) != Some(false) && holds(nouse_key) != Some(true))
}

/// HAMi's `graghSelect`: the card indexes taken for `nums` cards, given the candidates' indexes and
/// whether each passes, in HAMi's order; empty when the graph offers none.
pub fn select(indexes: &[u32], fits: &[bool], nums: i64) -> Vec<u32> {
    let left = fits.iter().take(4).filter(|&&f| f).count();
    let right = fits.iter().skip(4).filter(|&&f| f).count();
    match nums {
        8 => match left + right == 8 {
            true => (0..8).collect(),
            false => Vec::new(),
        },
        1 | 2 | 4 => {
            let count = nums as usize;
            if left >= count || right >= count {
                for slots in count..=4 {
                    let num = if count % 2 == 1 { ODD_ORDER[slots - 1] } else { slots };
                    if left == num {
                        return pick(indexes, fits, 0, count);
                    }
                    if right == num {
                        return pick(indexes, fits, 4, count);
                    }
                }
            }
            linked(indexes, fits, count)
        }
        _ => Vec::new(),
    }
}

/// HAMi's `devicepick`: the first `count` passing candidates from position `start`, up to the
/// eighth position.
fn pick(indexes: &[u32], fits: &[bool], start: usize, count: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for t in start..8.min(indexes.len()) {
        if fits[t] {
            out.push(indexes[t]);
            if out.len() == count {
                break;
            }
        }
    }
    out
}

/// HAMi's `interconnect`: two cards linked across the wings, or four making a ring.
fn linked(indexes: &[u32], fits: &[bool], count: usize) -> Vec<u32> {
    let passing: Vec<u32> = indexes.iter().zip(fits).filter(|(_, &f)| f).map(|(&i, _)| i).collect();
    match count {
        2 => cross_pair(&passing),
        4 => ring(&passing),
        _ => Vec::new(),
    }
}

fn cross_pair(passing: &[u32]) -> Vec<u32> {
    for &a in passing {
        for &b in passing {
            if a != b && CROSS_LINKS.iter().any(|&(l, r)| (l, r) == (a, b) || (l, r) == (b, a)) {
                return vec![a, b];
            }
        }
    }
    Vec::new()
}

fn ring(passing: &[u32]) -> Vec<u32> {
    let holds = |have: &[u32], want: &[u32]| want.iter().all(|w| have.contains(w));
    match passing.len() {
        4 | 5 => RINGS.iter().find(|c| holds(passing, &c[..])).map_or_else(Vec::new, |c| c.to_vec()),
        6 => {
            let mut chosen = Vec::new();
            for c in &RINGS {
                if !holds(passing, c) {
                    continue;
                }
                chosen = c.to_vec();
                let rest: Vec<u32> = passing.iter().copied().filter(|p| !c.contains(p)).collect();
                if CROSS_LINKS.iter().chain(&WING_LINKS).any(|&(l, r)| holds(&rest, &[l, r])) {
                    return chosen;
                }
            }
            chosen
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EIGHT: [u32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

    fn free(busy: &[u32]) -> Vec<bool> {
        EIGHT.iter().map(|i| !busy.contains(i)).collect()
    }

    #[test]
    fn one_card_goes_to_the_wing_with_the_fewest_odd_free() {
        assert_eq!(select(&EIGHT, &free(&[]), 1), [0], "4 and 4 free: no wing of 1, 3 or 2; the left one of 4");
        assert_eq!(select(&EIGHT, &free(&[0, 1, 2]), 1), [3]);
        assert_eq!(select(&EIGHT, &free(&[4]), 1), [5], "3 free on the right before 4 on the left");
        assert_eq!(select(&EIGHT, &free(&[0, 1, 4]), 1), [5], "a wing of 3 free before one of 2");
    }

    #[test]
    fn pairs_and_rings() {
        assert_eq!(select(&EIGHT, &free(&[0, 1, 4, 5]), 2), [2, 3], "a wing with exactly 2 free");
        assert_eq!(select(&EIGHT, &free(&[0, 1, 2, 5, 6, 7]), 2), Vec::<u32>::new(), "3 and 4 are not linked");
        assert_eq!(select(&EIGHT, &free(&[1, 2, 3, 5, 6, 7]), 2), [0, 4], "across the wings");
        assert_eq!(select(&EIGHT, &free(&[1, 2, 6, 7]), 4), Vec::<u32>::new(), "2 and 2 free, no ring of 0 3 4 5");
        assert_eq!(select(&EIGHT, &free(&[2, 3, 6, 7]), 4), [0, 1, 4, 5]);
        assert_eq!(select(&EIGHT, &free(&[]), 8), EIGHT);
        assert_eq!(select(&EIGHT, &free(&[7]), 8), Vec::<u32>::new());
        assert_eq!(select(&EIGHT, &free(&[]), 3), Vec::<u32>::new(), "3 is no count HAMi takes");
    }

    #[test]
    fn six_free_prefers_a_ring_leaving_a_linked_pair() {
        // 0 1 2 4 5 6 free: ring 0-1-4-5 leaves 2 and 6, linked across.
        assert_eq!(select(&EIGHT, &free(&[3, 7]), 4), [0, 1, 4, 5]);
    }

    #[test]
    fn a_short_candidate_list_never_runs_past_its_end() {
        assert_eq!(select(&[0, 1, 2, 3, 4], &[false, false, false, false, true], 1), [4]);
        assert_eq!(select(&[0, 1], &[true, true], 2), [0, 1]);
    }
}
