//! MIG instances on a GPU in MIG mode, chosen as HAMi v2.10 chooses them
//! (`selectMigCandidate`, `selectMigPlacement` in `pkg/device/nvidia`): the smallest profile by
//! memory, then by slice count, with at least the requested memory and a free placement.

use crate::codec::{MigPlacement, MigProfile};

/// The profile and placement of one MIG instance; `profile` indexes the device's `migProfiles`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigPick {
    pub profile: usize,
    pub placement: MigPlacement,
}

/// The instance a request of `memory` MiB gets with `occupied` placements taken, if any.
///
/// Profiles are tried in ascending (memory, slice count), ties in registration order. A profile's
/// placements are those of the first profile registered under its name; they are tried from the
/// highest start for `1g.*` and `3g.*` profiles, else from the lowest.
pub fn select(profiles: &[MigProfile], occupied: &[MigPlacement], memory: i64) -> Option<MigPick> {
    let mut order: Vec<usize> = (0..profiles.len()).collect();
    order.sort_by_key(|&i| (profiles[i].memory_mb, profiles[i].slice_count));
    order.into_iter().filter(|&i| i64::from(profiles[i].memory_mb) >= memory).find_map(|i| {
        free_placement(profiles, occupied, &profiles[i].name).map(|placement| MigPick { profile: i, placement })
    })
}

/// HAMi's `CustomFilterRule` in MIG mode: the container's earlier picks on this GPU (each of
/// `earlier_memory` MiB, in order) and then this request all get an instance.
pub fn fits(profiles: &[MigProfile], occupied: &[MigPlacement], earlier_memory: &[i64], memory: i64) -> bool {
    let mut taken: Vec<MigPlacement> = occupied.to_vec();
    for &m in earlier_memory {
        match select(profiles, &taken, m) {
            Some(pick) => taken.push(pick.placement),
            None => return false,
        }
    }
    select(profiles, &taken, memory).is_some()
}

fn free_placement(profiles: &[MigProfile], occupied: &[MigPlacement], name: &str) -> Option<MigPlacement> {
    let profile = profiles.iter().find(|p| p.name == name)?;
    let mut ordered = profile.placements.clone();
    if name.starts_with("1g.") || name.starts_with("3g.") {
        ordered.sort_by_key(|p| std::cmp::Reverse(p.start));
    } else {
        ordered.sort_by_key(|p| p.start);
    }
    ordered.into_iter().find(|c| !occupied.iter().any(|o| c.overlaps(o)))
}

/// An upper bound on the instances one container can take of a GPU: each placement of non-zero
/// size overlaps itself, so it is taken at most once. HAMi's Fit keeps re-examining a MIG GPU
/// while it grants instances; with a placement that never overlaps itself (size 0, or a start
/// near `u32::MAX` whose end wraps) and the topology-aware policy it would never stop. This bound
/// is never reached with placements NVML reports.
pub fn instance_bound(profiles: &[MigProfile]) -> usize {
    profiles.iter().map(|p| p.placements.len()).sum::<usize>() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placements(starts: &[u32], size: u32) -> Vec<MigPlacement> {
        starts.iter().map(|&start| MigPlacement { start, size }).collect()
    }

    /// NVML's A100-SXM4-40GB profiles, as HAMi's device plugin registers them.
    fn a100() -> Vec<MigProfile> {
        let p = |name: &str, mem, core, slices, starts: &[u32], size| MigProfile {
            name: name.into(),
            memory_mb: mem,
            core,
            slice_count: slices,
            placements: placements(starts, size),
        };
        vec![
            p("7g.40gb", 40192, 100, 7, &[0], 8),
            p("3g.20gb", 19968, 43, 3, &[0, 4], 4),
            p("2g.10gb", 9856, 29, 2, &[0, 2, 4], 2),
            p("1g.5gb", 4864, 15, 1, &[0, 1, 2, 3, 4, 5, 6], 1),
        ]
    }

    #[test]
    fn smallest_profile_with_enough_memory() {
        let pick = select(&a100(), &[], 8000).unwrap();
        assert_eq!(
            (a100()[pick.profile].name.as_str(), pick.placement),
            ("2g.10gb", MigPlacement { start: 0, size: 2 })
        );
        assert_eq!(a100()[select(&a100(), &[], 1).unwrap().profile].name, "1g.5gb");
        assert!(select(&a100(), &[], 40960).is_none(), "no profile holds the whole card's memory");
    }

    #[test]
    fn one_and_three_slice_profiles_pack_from_the_top() {
        let one = select(&a100(), &[], 1000).unwrap();
        assert_eq!(one.placement, MigPlacement { start: 6, size: 1 });
        let three = select(&a100(), &[], 15000).unwrap();
        assert_eq!(three.placement, MigPlacement { start: 4, size: 4 });
        let taken = [MigPlacement { start: 4, size: 4 }];
        assert_eq!(select(&a100(), &taken, 15000).unwrap().placement, MigPlacement { start: 0, size: 4 });
    }

    #[test]
    fn a_taken_placement_moves_the_request_to_a_larger_profile() {
        // Slices 5 and 6 taken: 1g.5gb still has slices 0-4 (its highest first).
        let taken = placements(&[5, 6], 1);
        assert_eq!(select(&a100(), &taken, 1000).unwrap().placement, MigPlacement { start: 4, size: 1 });
        // Slices 0-5 held by 2g instances and 6 by a 1g: neither a 1 GiB nor an 8 GiB request fits.
        let full: Vec<MigPlacement> = placements(&[0, 2, 4], 2).into_iter().chain(placements(&[6], 1)).collect();
        assert!(select(&a100(), &full, 1000).is_none());
        assert!(select(&a100(), &full, 8000).is_none());
        // 1g slices 0-3 free, but a 5 GiB request needs 2g.10gb: only its placement at 0 is free.
        let high = placements(&[4, 5, 6], 1);
        let pick = select(&a100(), &high, 5000).unwrap();
        assert_eq!((a100()[pick.profile].name.as_str(), pick.placement.start), ("2g.10gb", 0));
        assert!(fits(&a100(), &[], &[1000; 6], 1000));
        assert!(!fits(&a100(), &[], &[1000; 7], 1000));
    }

    #[test]
    fn ties_keep_registration_order_and_a_name_uses_its_first_profile() {
        let mut profiles = a100();
        profiles.push(MigProfile { name: "1g.5gb".into(), memory_mb: 4864, slice_count: 1, ..MigProfile::default() });
        let pick = select(&profiles, &[], 1000).unwrap();
        assert_eq!(pick.profile, 3);
        let dup = vec![
            MigProfile { name: "x".into(), memory_mb: 10, slice_count: 1, placements: vec![], core: 0 },
            MigProfile { name: "x".into(), memory_mb: 5, slice_count: 1, placements: placements(&[3], 1), core: 0 },
        ];
        assert!(select(&dup, &[], 1).is_none(), "the second 'x' reads the first's (empty) placements");
    }

    #[test]
    fn overlap_is_hamis_uint32_arithmetic() {
        let a = MigPlacement { start: u32::MAX, size: 2 };
        assert!(!a.overlaps(&a), "its end wraps to 1 in uint32");
        let zero = MigPlacement { start: 3, size: 0 };
        assert!(!zero.overlaps(&zero));
        assert!(MigPlacement { start: 0, size: 4 }.overlaps(&MigPlacement { start: 3, size: 1 }));
        assert!(!MigPlacement { start: 0, size: 4 }.overlaps(&MigPlacement { start: 4, size: 4 }));
        assert_eq!(instance_bound(&a100()), 14);
    }
}
