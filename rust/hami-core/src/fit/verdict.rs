//! One verdict per node: the reason that decides a failing node, the other reasons its cards
//! failed for, and for an unregistered node why HAMi does not count it.
//!
//! HAMi's reason string tallies cards, so a node can carry several reasons and counting nodes per
//! reason counts some twice. The verdict counts each node once.

use super::reason::{FitFailure, Reason};
use crate::annotations::NODE_HANDSHAKE_KEY;
use crate::health::{Handshake, HANDSHAKE_TIMEOUT_SECS};
use crate::model::GpuNode;

pub use crate::wire::explain::Verdict;

impl FitFailure {
    /// The reason that decides the node. Some cards with room but too few of them
    /// (`AllocatedCardsInsufficientRequest`) decide it; otherwise the reason most cards failed
    /// for, ties going to the check HAMi runs first. A MIG allocation failure is the MIG topology.
    pub fn verdict_reason(&self) -> Reason {
        match self {
            Self::Cards { counts, .. } if counts.get(Reason::AllocatedCardsInsufficientRequest) > 0 => {
                Reason::AllocatedCardsInsufficientRequest
            }
            Self::Cards { counts, .. } => {
                let mut best = (Reason::CardNotHealth, 0);
                for (reason, n) in counts.iter() {
                    if n > best.1 {
                        best = (reason, n);
                    }
                }
                best.0
            }
            Self::Node(r) => *r,
            Self::Host(rs) => rs.first().copied().unwrap_or(Reason::InsufficientCpu),
            Self::MigAllocation(_) => Reason::CardMigTopologyInfeasible,
            Self::Pairs { .. } => Reason::AllocatedCardsInsufficientRequest,
        }
    }

    /// [`Verdict`] of this failure on `node` (`None`: a node the state does not hold) at `now`.
    pub fn verdict(&self, node: Option<&GpuNode>, now: i64) -> Verdict {
        let reason = self.verdict_reason();
        let others = self.reasons().into_iter().filter(|r| *r != reason).map(Reason::as_str).collect();
        let detail = match reason {
            Reason::NodeUnregistered => unregistered_cause(node, now),
            _ => String::new(),
        };
        Verdict { reason: reason.as_str(), others, detail }
    }
}

/// Why HAMi does not hold `node` as registered at `now`, in the planner's words.
pub fn unregistered_cause(node: Option<&GpuNode>, now: i64) -> String {
    let Some(node) = node else { return "not registered with HAMi: the node is not in the snapshot".into() };
    if let Some(error) = &node.register_error {
        return format!("not registered with HAMi: {error}");
    }
    if node.devices.is_empty() {
        return "not registered with HAMi: the device plugin registered no GPU".into();
    }
    match node.registration.handshake {
        Handshake::Requesting(Some(at)) if now >= at + HANDSHAKE_TIMEOUT_SECS => format!(
            "not registered with HAMi: the device plugin did not answer the handshake ({NODE_HANDSHAKE_KEY}) \
             within {HANDSHAKE_TIMEOUT_SECS} s"
        ),
        _ => format!("not registered with HAMi: its registration has not been confirmed ({NODE_HANDSHAKE_KEY})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::reason::ReasonCounts;

    fn cards(entries: &[(Reason, usize)]) -> FitFailure {
        let mut counts = ReasonCounts::default();
        for &(r, n) in entries {
            counts.bump(r, n);
        }
        FitFailure::Cards { counts, cards: 8 }
    }

    #[test]
    fn too_few_cards_with_room_decides_over_the_card_reasons() {
        let f = cards(&[(Reason::CardInsufficientMemory, 2), (Reason::AllocatedCardsInsufficientRequest, 6)]);
        let v = f.verdict(None, 0);
        assert_eq!((v.reason, v.others), ("AllocatedCardsInsufficientRequest", vec!["CardInsufficientMemory"]));
    }

    #[test]
    fn most_cards_decide_and_ties_go_to_the_earlier_check() {
        let f = cards(&[(Reason::CardInsufficientCore, 5), (Reason::CardInsufficientMemory, 3)]);
        assert_eq!(f.verdict_reason(), Reason::CardInsufficientCore);
        let f = cards(&[(Reason::CardInsufficientCore, 4), (Reason::CardInsufficientMemory, 4)]);
        let v = f.verdict(None, 0);
        assert_eq!((v.reason, v.others), ("CardInsufficientMemory", vec!["CardInsufficientCore"]));
    }

    #[test]
    fn an_unregistered_node_says_why() {
        let ann = crate::k8s::view::HamiAnnotations::default();
        let node = GpuNode::from_annotations("n", &ann, Vec::new());
        let v = FitFailure::Node(Reason::NodeUnregistered).verdict(Some(&node), 0);
        assert_eq!(v.reason, "node unregistered");
        assert_eq!(v.detail, "not registered with HAMi: annotation hami.io/node-nvidia-register not found");
        assert!(FitFailure::Node(Reason::NodeInsufficientDevice).verdict(Some(&node), 0).detail.is_empty());
    }
}
