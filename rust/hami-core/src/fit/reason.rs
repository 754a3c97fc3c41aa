//! Why a pod does not fit a node, as data: HAMi's reason words and the exact strings it builds from them.

use std::fmt;

/// A reason a node (or one of its cards) was rejected; `as_str` is HAMi's (or kube-scheduler's) word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    CardNotHealth,
    CardCordoned,
    /// hami-fast only: the card is held for another pending pod (never produced without a reservation).
    CardReserved,
    CardTypeMismatch,
    NumaNotFit,
    CardUuidMismatch,
    CardTimeSlicingExhausted,
    ExclusiveDeviceAllocateConflict,
    ResourceQuotaNotFit,
    CardInsufficientMemory,
    CardInsufficientCore,
    CardComputeUnitsExhausted,
    /// A backend's own rule refused the card (Moore Threads, MetaX GPU: another card than the
    /// pod's earlier ones).
    CardNotFoundCustomFilterRule,
    /// No MIG profile with the requested memory has a free placement on the GPU.
    CardMigTopologyInfeasible,
    /// MetaX sGPU's own words: the card is unhealthy, its pods' app classes or its QoS policy
    /// refuse the pod.
    CardUnhealthy,
    CardAppClassMismatch,
    CardQosPolicyMismatch,
    ModeNotFit,
    AllocatedCardsInsufficientRequest,
    NodeInsufficientDevice,
    NodeUnregistered,
    TooManyPods,
    InsufficientCpu,
    InsufficientMemory,
}

impl Reason {
    pub const COUNT: usize = 24;
    pub const ALL: [Reason; Self::COUNT] = [
        Self::CardNotHealth,
        Self::CardCordoned,
        Self::CardReserved,
        Self::CardTypeMismatch,
        Self::NumaNotFit,
        Self::CardUuidMismatch,
        Self::CardTimeSlicingExhausted,
        Self::ExclusiveDeviceAllocateConflict,
        Self::ResourceQuotaNotFit,
        Self::CardInsufficientMemory,
        Self::CardInsufficientCore,
        Self::CardComputeUnitsExhausted,
        Self::CardNotFoundCustomFilterRule,
        Self::CardMigTopologyInfeasible,
        Self::CardUnhealthy,
        Self::CardAppClassMismatch,
        Self::CardQosPolicyMismatch,
        Self::ModeNotFit,
        Self::AllocatedCardsInsufficientRequest,
        Self::NodeInsufficientDevice,
        Self::NodeUnregistered,
        Self::TooManyPods,
        Self::InsufficientCpu,
        Self::InsufficientMemory,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CardNotHealth => "CardNotHealth",
            Self::CardCordoned => "CardCordoned",
            Self::CardReserved => "CardReserved",
            Self::CardTypeMismatch => "CardTypeMismatch",
            Self::NumaNotFit => "NumaNotFit",
            Self::CardUuidMismatch => "CardUuidMismatch",
            Self::CardTimeSlicingExhausted => "CardTimeSlicingExhausted",
            Self::ExclusiveDeviceAllocateConflict => "ExclusiveDeviceAllocateConflict",
            Self::ResourceQuotaNotFit => "ResourceQuotaNotFit",
            Self::CardInsufficientMemory => "CardInsufficientMemory",
            Self::CardInsufficientCore => "CardInsufficientCore",
            Self::CardComputeUnitsExhausted => "CardComputeUnitsExhausted",
            Self::CardNotFoundCustomFilterRule => "CardNotFoundCustomFilterRule",
            Self::CardMigTopologyInfeasible => "CardMigTopologyInfeasible",
            Self::CardUnhealthy => "CardUnhealthy",
            Self::CardAppClassMismatch => "CardAppClassMismatch",
            Self::CardQosPolicyMismatch => "CardQosPolicyMismatch",
            Self::ModeNotFit => "ModeNotFit",
            Self::AllocatedCardsInsufficientRequest => "AllocatedCardsInsufficientRequest",
            Self::NodeInsufficientDevice => "NodeInsufficientDevice",
            Self::NodeUnregistered => "node unregistered",
            Self::TooManyPods => "Too many pods",
            Self::InsufficientCpu => "Insufficient cpu",
            Self::InsufficientMemory => "Insufficient memory",
        }
    }
}

impl Reason {
    /// Whether moving other pods off the node can lift this reason: the card or node is short of
    /// what its pods take (memory, cores, slots, exclusivity, devices), not of what it is (type,
    /// health, NUMA, UUID) nor of CPU and memory, which kube-scheduler weighs itself.
    pub fn moves_can_clear(self) -> bool {
        matches!(
            self,
            Self::CardInsufficientMemory
                | Self::CardInsufficientCore
                | Self::CardTimeSlicingExhausted
                | Self::ExclusiveDeviceAllocateConflict
                | Self::CardComputeUnitsExhausted
                | Self::AllocatedCardsInsufficientRequest
                | Self::NodeInsufficientDevice
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many cards failed for each reason (HAMi's `reasons` map of one node).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReasonCounts([u32; Reason::COUNT]);

impl ReasonCounts {
    pub fn bump(&mut self, reason: Reason, by: usize) {
        let slot = &mut self.0[reason as usize];
        *slot = slot.saturating_add(u32::try_from(by).unwrap_or(u32::MAX));
    }

    pub fn get(&self, reason: Reason) -> usize {
        self.0[reason as usize] as usize
    }

    /// The reasons present, with their counts, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (Reason, usize)> + '_ {
        Reason::ALL.iter().filter(|&&r| self.0[r as usize] > 0).map(|&r| (r, self.0[r as usize] as usize))
    }
}

/// Why a pod does not fit one node. `Display` is HAMi's exact string for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FitFailure {
    /// HAMi's per-card tally: `"<count>/<cards> <Reason>"` entries sorted as strings, joined with `", "`.
    Cards { counts: ReasonCounts, cards: usize },
    /// One reason for the whole node (`NodeInsufficientDevice`, `node unregistered`).
    Node(Reason),
    /// kube-scheduler's host checks, in its order, joined with `", "`.
    Host(Vec<Reason>),
    /// HAMi's `AddResourceUsage` found no MIG instance for a card Fit chose (the topology-aware
    /// choice can keep picks in another order than Fit checked them); the card's UUID.
    MigAllocation(String),
    /// Too few whole 910C cards: HAMi writes how many NPUs the pairs gave, even 0, over the request.
    Pairs { counts: ReasonCounts, picked: usize, request: usize },
}

impl FitFailure {
    /// Each reason once (the keys of HAMi's reason map), for metrics and events.
    pub fn reasons(&self) -> Vec<Reason> {
        match self {
            Self::Cards { counts, .. } => counts.iter().map(|(r, _)| r).collect(),
            Self::Node(r) => vec![*r],
            Self::Host(rs) => rs.clone(),
            // HAMi's ParseReason finds no "<n>/<m> <Reason>" entry in that message.
            Self::MigAllocation(_) => Vec::new(),
            Self::Pairs { counts, .. } => {
                let mut out: Vec<Reason> = counts.iter().map(|(r, _)| r).collect();
                out.push(Reason::AllocatedCardsInsufficientRequest);
                out
            }
        }
    }
}

impl fmt::Display for FitFailure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::Cards { counts, cards } => {
                let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n}/{cards} {r}")).collect();
                parts.sort();
                f.write_str(&parts.join(", "))
            }
            Self::Node(r) => f.write_str(r.as_str()),
            Self::Host(rs) => {
                let words: Vec<&str> = rs.iter().map(|r| r.as_str()).collect();
                f.write_str(&words.join(", "))
            }
            Self::Pairs { counts, picked, request } => {
                let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n}/{request} {r}")).collect();
                parts.push(format!("{picked}/{request} {}", Reason::AllocatedCardsInsufficientRequest));
                parts.sort();
                f.write_str(&parts.join(", "))
            }
            Self::MigAllocation(uuid) => {
                write!(f, "AddResourceUsage failed for device {uuid}: MIG profile and placement allocation failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hami_reason_string() {
        let mut counts = ReasonCounts::default();
        counts.bump(Reason::CardTimeSlicingExhausted, 3);
        counts.bump(Reason::CardInsufficientMemory, 1);
        let f = FitFailure::Cards { counts, cards: 4 };
        assert_eq!(f.to_string(), "1/4 CardInsufficientMemory, 3/4 CardTimeSlicingExhausted");
        assert_eq!(f.reasons(), vec![Reason::CardTimeSlicingExhausted, Reason::CardInsufficientMemory]);
    }

    #[test]
    fn moves_clear_what_pods_take_not_what_a_card_is() {
        let clearable: Vec<Reason> = Reason::ALL.into_iter().filter(|r| r.moves_can_clear()).collect();
        assert!(
            clearable.contains(&Reason::CardInsufficientMemory) && clearable.contains(&Reason::NodeInsufficientDevice)
        );
        for fixed in [Reason::CardTypeMismatch, Reason::CardNotHealth, Reason::NumaNotFit, Reason::InsufficientCpu] {
            assert!(!fixed.moves_can_clear(), "{fixed}");
        }
    }

    #[test]
    fn entries_sort_as_strings_like_hamis() {
        let mut counts = ReasonCounts::default();
        counts.bump(Reason::CardInsufficientMemory, 10);
        counts.bump(Reason::CardCordoned, 2);
        assert_eq!(
            FitFailure::Cards { counts, cards: 12 }.to_string(),
            "10/12 CardInsufficientMemory, 2/12 CardCordoned"
        );
    }

    #[test]
    fn words() {
        assert_eq!(FitFailure::Node(Reason::NodeUnregistered).to_string(), "node unregistered");
        assert_eq!(
            FitFailure::Host(vec![Reason::TooManyPods, Reason::InsufficientCpu]).to_string(),
            "Too many pods, Insufficient cpu"
        );
        assert!(Reason::ALL.iter().enumerate().all(|(i, r)| *r as usize == i));
    }
}
