//! The fits of the cached candidate list kept in preference order from one call to the next.
//!
//! When kube-scheduler sends the same list again for a pod of the same order-free shape (a
//! workload's pods one after another, a small cluster whose every node is feasible), only the
//! nodes the change log names can have another verdict. [`RankedFits`] keeps every position's
//! verdict ordered by (score, name rank, position), so such a call re-checks those nodes, reads
//! its choice at one end of the order and its event's first fits off the order, and touches a
//! few tree nodes instead of the whole list (see `evaluate::evaluate_ranked`).

use crate::fit::FitFailure;
use crate::policy::NodePolicy;
use std::collections::{BTreeMap, BTreeSet};

/// A fit's place in the order: the score in `f64::total_cmp`'s order, the name's rank, the position.
pub(super) type FitKey = (u64, u32, u32);

/// A verdict as the memo keeps it: HAMi's node score, or why the node does not fit.
pub(super) type Verdict = Result<f64, Box<FitFailure>>;

pub(super) fn score_key(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

pub(super) fn key_score(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 { key & !(1 << 63) } else { !key })
}

#[derive(Debug, Default)]
pub(super) struct RankedFits {
    /// False until built by a full pass over the current list and memo; dropped with either.
    pub valid: bool,
    /// Per position: its key in `order` when it fits.
    keys: Vec<Option<FitKey>>,
    order: BTreeSet<FitKey>,
    /// The failing positions' reasons, counted as `Evaluation::failed_reasons` counts them.
    reasons: BTreeMap<&'static str, usize>,
    /// (node id, position), sorted: the positions of a node the change log names.
    positions: Vec<(u32, u32)>,
    /// Positions whose verdict the memo does not keep (registration on the clock): re-checked every call.
    pub volatile: Vec<u32>,
}

impl RankedFits {
    /// Built from a full pass: every position's verdict (`None` for a name that is no node),
    /// whether the memo keeps it, and its name's rank.
    pub fn rebuild<'v>(&mut self, verdicts: impl Iterator<Item = (Option<u32>, Option<(&'v Verdict, bool)>, u32)>) {
        self.clear();
        for (pos, (id, verdict, rank)) in verdicts.enumerate() {
            let pos = u32::try_from(pos).unwrap_or(u32::MAX);
            self.keys.push(None);
            if let Some(id) = id {
                self.positions.push((id, pos));
            }
            match verdict {
                None => self.count_reasons(&FitFailure::Node(crate::fit::Reason::NodeUnregistered), 1),
                Some((verdict, kept)) => {
                    if !kept {
                        self.volatile.push(pos);
                    }
                    self.enter(pos, rank, verdict);
                }
            }
        }
        self.positions.sort_unstable();
        self.valid = true;
    }

    pub fn clear(&mut self) {
        self.valid = false;
        self.keys.clear();
        self.order.clear();
        self.reasons.clear();
        self.positions.clear();
        self.volatile.clear();
    }

    /// Where the list positions naming node `id` sit among all positions (see [`Self::position`]).
    pub fn positions_of(&self, id: u32) -> std::ops::Range<usize> {
        let from = self.positions.partition_point(|&(i, _)| i < id);
        from..self.positions.partition_point(|&(i, _)| i <= id)
    }

    pub fn position(&self, at: usize) -> u32 {
        self.positions[at].1
    }

    /// Position `pos` goes from verdict `old` to `new`.
    pub fn update(&mut self, pos: u32, rank: u32, old: &Verdict, new: &Verdict) {
        match self.keys[pos as usize].take() {
            Some(key) => {
                self.order.remove(&key);
            }
            None => {
                if let Err(failure) = old {
                    self.count_reasons(failure, -1);
                }
            }
        }
        self.enter(pos, rank, new);
    }

    fn enter(&mut self, pos: u32, rank: u32, verdict: &Verdict) {
        match verdict {
            Ok(score) => {
                let key = (score_key(*score), rank, pos);
                self.order.insert(key);
                self.keys[pos as usize] = Some(key);
            }
            Err(failure) => self.count_reasons(failure, 1),
        }
    }

    fn count_reasons(&mut self, failure: &FitFailure, by: isize) {
        for reason in failure.reasons() {
            let count = self.reasons.entry(reason.as_str()).or_default();
            *count = count.saturating_add_signed(by);
            if *count == 0 {
                self.reasons.remove(reason.as_str());
            }
        }
    }

    pub fn fit_count(&self) -> usize {
        self.order.len()
    }

    pub fn reasons(&self) -> &BTreeMap<&'static str, usize> {
        &self.reasons
    }

    /// The winner as `score::choose` picks it: spread the lowest score, every other policy the
    /// highest; ties to the smallest name, then the first position.
    pub fn choice(&self, policy: NodePolicy) -> Option<FitKey> {
        match policy {
            NodePolicy::Spread => self.order.first().copied(),
            NodePolicy::Binpack | NodePolicy::Scored(_) => {
                let top = self.order.last()?.0;
                self.order.range((top, 0, 0)..).next().copied()
            }
        }
    }

    /// The first `n` fits in the event's order (`fit_list`'s): by score then name, spread highest first.
    pub fn shown(&self, policy: NodePolicy, n: usize) -> Vec<FitKey> {
        match policy {
            NodePolicy::Spread => self.order.iter().rev().take(n).copied().collect(),
            NodePolicy::Binpack | NodePolicy::Scored(_) => self.order.iter().take(n).copied().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::Reason;

    #[test]
    fn score_keys_order_as_total_cmp_and_give_the_score_back() {
        let scores = [f64::NEG_INFINITY, -3.5, -0.0, 0.0, 1e-300, 0.125, 4.81, 7.0, f64::INFINITY];
        for a in scores {
            assert_eq!(key_score(score_key(a)).to_bits(), a.to_bits(), "{a}");
            for b in scores {
                assert_eq!(score_key(a).cmp(&score_key(b)), a.total_cmp(&b), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn updates_keep_the_order_and_the_reason_counts_of_a_rebuild() {
        let failure: Verdict = Err(Box::new(FitFailure::Node(Reason::NodeUnregistered)));
        let verdicts: Vec<Verdict> = vec![Ok(2.0), failure.clone(), Ok(5.0), Ok(2.0)];
        let ranks = [3, 0, 1, 2];
        let mut fits = RankedFits::default();
        fits.rebuild(verdicts.iter().zip(ranks).enumerate().map(|(i, (v, r))| (Some(i as u32), Some((v, true)), r)));
        assert_eq!(fits.choice(NodePolicy::Binpack).map(|k| k.2), Some(2));
        assert_eq!(fits.choice(NodePolicy::Spread).map(|k| k.2), Some(3), "lowest score, smallest name");
        assert_eq!(fits.reasons(), &BTreeMap::from([(Reason::NodeUnregistered.as_str(), 1)]));
        // Position 2 stops fitting, position 1 starts to.
        fits.update(2, 1, &verdicts[2], &failure);
        fits.update(1, 0, &failure, &Ok(2.0));
        let shown: Vec<u32> = fits.shown(NodePolicy::Binpack, 2).iter().map(|k| k.2).collect();
        assert_eq!(shown, vec![1, 3], "score 2.0 by name rank");
        assert_eq!(fits.choice(NodePolicy::Binpack).map(|k| k.2), Some(1));
        let after: Vec<Verdict> = vec![Ok(2.0), Ok(2.0), failure.clone(), Ok(2.0)];
        let mut rebuilt = RankedFits::default();
        rebuilt.rebuild(after.iter().zip(ranks).enumerate().map(|(i, (v, r))| (Some(i as u32), Some((v, true)), r)));
        assert_eq!((&fits.order, &fits.reasons, &fits.keys), (&rebuilt.order, &rebuilt.reasons, &rebuilt.keys));
        assert_eq!(fits.positions_of(2).map(|at| fits.position(at)).collect::<Vec<_>>(), vec![2]);
        assert!(fits.positions_of(9).is_empty());
    }
}
