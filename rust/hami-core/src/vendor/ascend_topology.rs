//! How HAMi's Ascend backend chooses among the NPUs that pass its checks, and scores a node.
//!
//! HAMi groups candidates in Go maps (by `NetworkID`, by 910C card) and sorts the groups by size
//! with `sort.Slice`: groups of equal size come in map iteration order, which Go randomises. For
//! the small maps these are (at most 8 keys, one bucket), every iteration order is a rotation of
//! insertion order, so insertion order (first appearance in the walk) is always one HAMi can take:
//! that is the order used here.

use crate::codec::NetworkId;

/// Positions in `networks` (each candidate's `NetworkID`, `None` when it has no numeric one: HAMi
/// leaves it out) of the `want` candidates HAMi's `computeBestCombination` takes: the largest
/// network groups first, each in walk order. Fewer when too few have a numeric `NetworkID`.
pub fn best_by_network(networks: &[Option<i64>], want: usize) -> Vec<usize> {
    let mut groups: Vec<(i64, Vec<usize>)> = Vec::new();
    for (pos, id) in networks.iter().enumerate() {
        let Some(id) = *id else { continue };
        match groups.iter_mut().find(|(g, _)| *g == id) {
            Some((_, members)) => members.push(pos),
            None => groups.push((id, vec![pos])),
        }
    }
    groups.sort_by_key(|(_, members)| std::cmp::Reverse(members.len()));
    groups.into_iter().flat_map(|(_, members)| members).take(want).collect()
}

/// Positions in `indexes` (each candidate's device index) of the NPUs HAMi's
/// `computeBestCombination910C` takes for `want`: whole cards (indexes `2k` and `2k+1`, both
/// candidates) until `want` is covered, in card order of first appearance. A card whose index
/// appears on two candidates is taken through the last of them, as HAMi's index map keeps it.
pub fn card_pairs(indexes: &[u32], want: usize) -> Vec<usize> {
    let mut cards: Vec<(u32, Vec<u32>)> = Vec::new();
    for &idx in indexes {
        match cards.iter_mut().find(|(card, _)| *card == idx / 2) {
            Some((_, members)) => members.push(idx),
            None => cards.push((idx / 2, vec![idx])),
        }
    }
    cards.sort_by_key(|(_, members)| std::cmp::Reverse(members.len()));
    let mut left = want as i64;
    let mut chosen = Vec::new();
    for (_, members) in cards {
        if left <= 0 {
            break;
        }
        if members.len() == 2 {
            chosen.extend(members);
            left -= 2;
        }
    }
    let last_with = |idx: u32| indexes.iter().rposition(|&i| i == idx);
    chosen.into_iter().filter_map(last_with).collect()
}

/// HAMi's Ascend `ScoreNode` before its weight, per container the share of its NPUs in its largest
/// network group, summed; 0 as soon as one NPU has no `NetworkID` at all.
pub fn network_score(containers: &[Vec<NetworkId>]) -> f32 {
    let mut score = 0f32;
    for devices in containers.iter().filter(|d| !d.is_empty()) {
        if devices.iter().any(|n| !n.is_present()) {
            return 0.0;
        }
        let ids: Vec<i64> = devices.iter().filter_map(|n| n.number()).collect();
        if ids.is_empty() {
            continue;
        }
        let largest = ids.iter().map(|id| ids.iter().filter(|x| *x == id).count()).max().unwrap_or(0);
        score += largest as f32 / ids.len() as f32;
    }
    score
}

/// The weight HAMi gives the network score of `Ascend910*` chips.
pub const NETWORK_WEIGHT: f32 = 10.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_network_first_then_walk_order() {
        let nets = [Some(1), Some(2), Some(2), Some(1), Some(2), Some(3)];
        assert_eq!(best_by_network(&nets, 2), vec![1, 2]);
        assert_eq!(best_by_network(&nets, 4), vec![1, 2, 4, 0]);
        assert_eq!(best_by_network(&nets, 6), vec![1, 2, 4, 0, 3, 5]);
    }

    #[test]
    fn equal_networks_in_order_of_first_appearance() {
        assert_eq!(best_by_network(&[Some(7), Some(3), Some(3), Some(7)], 2), vec![0, 3]);
    }

    #[test]
    fn npus_without_a_numeric_network_are_left_out() {
        assert_eq!(best_by_network(&[None, Some(1), None], 2), vec![1]);
    }

    #[test]
    fn whole_cards_only() {
        // Indexes 0..5 with 2 missing: cards {0,1}, {3}, {4,5}.
        let idx = [5, 4, 3, 1, 0];
        assert_eq!(card_pairs(&idx, 2), vec![0, 1]);
        assert_eq!(card_pairs(&idx, 4), vec![0, 1, 3, 4]);
        assert_eq!(card_pairs(&idx, 6).len(), 4, "only two whole cards");
        assert_eq!(card_pairs(&[3, 0], 2), Vec::<usize>::new());
    }

    #[test]
    fn odd_request_overshoots_to_a_whole_card() {
        assert_eq!(card_pairs(&[0, 1, 2, 3], 3).len(), 4);
    }

    #[test]
    fn score_is_the_largest_group_share() {
        let n = NetworkId::Number;
        assert_eq!(network_score(&[vec![n(1), n(1), n(2), n(2)]]), 0.5);
        assert_eq!(network_score(&[vec![n(1), n(1)], vec![], vec![n(4)]]), 2.0);
        assert_eq!(network_score(&[vec![n(1)], vec![n(1), NetworkId::Absent]]), 0.0);
        assert_eq!(network_score(&[vec![n(1), NetworkId::Other]]), 1.0, "only numeric ids are counted");
        assert_eq!(network_score(&[vec![NetworkId::Other]]), 0.0);
    }
}
