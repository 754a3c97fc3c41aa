//! Why the planner rejects a move, a placement target or a node, as typed errors. Its
//! `Display` is the one line the JSON `message`/`reasons` and the descheduler's conditions show.

use std::fmt;

use super::{Immovable, Place};
use crate::error::Error;
use crate::fit::FitFailure;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    // `validate_moves`: move number `step` of the sequence.
    /// The move's pod is not in the snapshot.
    PodNotInSnapshot {
        step: usize,
        pod: String,
    },
    /// The pod may not be moved (`why`: the snapshot's block reason).
    PodBlocked {
        step: usize,
        pod: String,
        why: Immovable,
    },
    /// The pod is not where the move starts (`now` vs the move's `from`).
    PodElsewhere {
        step: usize,
        pod: String,
        now: Box<Place>,
        from: Box<Place>,
    },
    /// The move's target node does not exist.
    TargetNodeMissing {
        step: usize,
        node: String,
    },
    /// The engine's Fit rejects the pod on the target at that point of the sequence.
    MoveDoesNotFit {
        step: usize,
        pod: String,
        to: Place,
    },

    // `validate_target` / `resolve_gpus`.
    NodeNotFound {
        node: String,
    },
    NodeNotRegistered {
        node: String,
        error: Error,
    },
    GpuUnhealthy {
        gpu: String,
        node: String,
    },
    GpuCordoned {
        gpu: String,
        node: String,
    },
    /// The GPU is held (reservation annotation) for another pending pod.
    GpuHeld {
        gpu: String,
        node: String,
        pending: String,
    },
    /// The placement names another number of GPUs than the pod uses.
    GpuCountMismatch {
        pod: String,
        uses: usize,
        named: usize,
    },
    /// The node lacks the pod's CPU/memory even with its old copy gone.
    HostDoesNotFit {
        pod: String,
        node: String,
        reason: Box<FitFailure>,
    },
    /// The named GPUs do not take the pod even with its old copy gone (`reason`: the Fit's, may be empty).
    GpusDoNotFit {
        pod: String,
        node: String,
        gpus: Vec<String>,
        reason: String,
    },
    /// `gpuDevices` is empty.
    NoGpus,
    GpuNamedTwice {
        gpu: String,
    },
    GpuNotOnNode {
        gpu: String,
        node: String,
    },

    // The pending-pod planner (`unblock`): why a node cannot be cleared for the pod.
    /// GPU `gpu` holds pod `pod` that may not move (`why`).
    GpuHoldsUnmovable {
        gpu: String,
        pod: String,
        why: Immovable,
    },
    /// GPU `gpu` holds pod `pod`, as large as the pending pod's share.
    GpuHoldsAsLarge {
        gpu: String,
        pod: String,
    },
    GpuStaysFull {
        gpu: String,
    },
    /// The node is not registered with HAMi (the node is the reason's key).
    NotRegistered {
        error: Error,
    },
    /// Fewer usable GPUs than the pod needs; `detail`: the first reasons, sorted.
    TooFewGpus {
        usable: usize,
        total: usize,
        needs: usize,
        detail: Vec<String>,
    },
    /// kube-scheduler's host reason (may be empty), even with every movable pod moved off.
    HostShort {
        reason: String,
    },
    /// A pod to move off finds no other place.
    NowhereToGo {
        pod: String,
    },
    /// The node's CPU/memory does not take the pod after the moves.
    Host(Box<FitFailure>),
    /// The engine's Fit still rejects the pod on the cleared GPUs.
    StillDoesNotFit(Box<FitFailure>),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::PodNotInSnapshot { step, pod } => write!(f, "move {step}: pod {pod} is not in the snapshot"),
            Self::PodBlocked { step, pod, why } => write!(f, "move {step}: pod {pod} may not be moved: {why}"),
            Self::PodElsewhere { step, pod, now, from } => {
                write!(f, "move {step}: pod {pod} is on {now:?}, not on {from:?}")
            }
            Self::TargetNodeMissing { step, node } => write!(f, "move {step}: node {node} does not exist"),
            Self::MoveDoesNotFit { step, pod, to } => {
                write!(f, "move {step}: pod {pod} does not fit on {}/{:?} at that point", to.node, to.gpus)
            }
            Self::NodeNotFound { node } => write!(f, "node {node} not found"),
            Self::NodeNotRegistered { node, error } => write!(f, "node {node} is not registered with HAMi: {error}"),
            Self::GpuUnhealthy { gpu, node } => write!(f, "GPU {gpu} on node {node} is not healthy"),
            Self::GpuCordoned { gpu, node } => {
                write!(f, "GPU {gpu} on node {node} is cordoned (hami.io/device-cordon)")
            }
            Self::GpuHeld { gpu, node, pending } => write!(
                f,
                "GPU {gpu} on node {node} is held for pending pod {pending} ({})",
                crate::annotations::RESERVATION_KEY
            ),
            Self::GpuCountMismatch { pod, uses, named } => {
                write!(f, "pod {pod} uses {uses} GPU(s) but the placement names {named}")
            }
            Self::HostDoesNotFit { pod, node, reason } => {
                write!(f, "pod {pod} does not fit on {node} even with its old copy gone: {reason}")
            }
            Self::GpusDoNotFit { pod, node, gpus, reason } => {
                write!(f, "pod {pod} does not fit on {node} GPUs {gpus:?} even with its old copy gone: {reason}")
            }
            Self::NoGpus => f.write_str("gpuDevices is empty"),
            Self::GpuNamedTwice { gpu } => write!(f, "GPU {gpu} is named twice"),
            Self::GpuNotOnNode { gpu, node } => write!(f, "GPU {gpu} not found on node {node}"),
            Self::GpuHoldsUnmovable { gpu, pod, why } => write!(f, "GPU {gpu} holds {pod} which may not move ({why})"),
            Self::GpuHoldsAsLarge { gpu, pod } => write!(f, "GPU {gpu} holds {pod}, as large as the pod's share"),
            Self::GpuStaysFull { gpu } => write!(f, "GPU {gpu} stays too full even with every pod moved off"),
            Self::NotRegistered { error } => write!(f, "not registered with HAMi: {error}"),
            Self::TooFewGpus { usable, total, needs, detail } => {
                write!(f, "{usable} of {total} GPUs usable, the pod needs {needs}")?;
                if !detail.is_empty() {
                    write!(f, " ({})", detail.join("; "))?;
                }
                Ok(())
            }
            Self::HostShort { reason } => write!(f, "{reason} even with every movable pod moved off"),
            Self::NowhereToGo { pod } => write!(f, "{pod} has nowhere else to go"),
            Self::Host(reason) => write!(f, "{reason}"),
            Self::StillDoesNotFit(reason) => write!(f, "still does not fit after the moves: {reason}"),
        }
    }
}

impl std::error::Error for Rejection {}

impl Rejection {
    /// The HamiPodPlacement field a rejected placement target is wrong in (`spec.nodeName` or
    /// `spec.gpuDevices`); `None` for the rejections of a move sequence or of the pending-pod planner.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Self::NodeNotFound { .. } | Self::NodeNotRegistered { .. } | Self::HostDoesNotFit { .. } => {
                Some("spec.nodeName")
            }
            Self::GpuUnhealthy { .. }
            | Self::GpuCordoned { .. }
            | Self::GpuHeld { .. }
            | Self::GpuCountMismatch { .. }
            | Self::GpusDoNotFit { .. }
            | Self::NoGpus
            | Self::GpuNamedTwice { .. }
            | Self::GpuNotOnNode { .. } => Some("spec.gpuDevices"),
            Self::PodNotInSnapshot { .. }
            | Self::PodBlocked { .. }
            | Self::PodElsewhere { .. }
            | Self::TargetNodeMissing { .. }
            | Self::MoveDoesNotFit { .. }
            | Self::GpuHoldsUnmovable { .. }
            | Self::GpuHoldsAsLarge { .. }
            | Self::GpuStaysFull { .. }
            | Self::NotRegistered { .. }
            | Self::TooFewGpus { .. }
            | Self::HostShort { .. }
            | Self::NowhereToGo { .. }
            | Self::Host(_)
            | Self::StillDoesNotFit(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_verdict_text() {
        let place = |node: &str| Place { node: node.into(), gpus: vec![format!("{node}-g0")], mig: vec![] };
        let cases = [
            (Rejection::PodNotInSnapshot { step: 0, pod: "ns/p".into() }, "move 0: pod ns/p is not in the snapshot"),
            (
                Rejection::PodElsewhere {
                    step: 1,
                    pod: "ns/p".into(),
                    now: Box::new(place("a")),
                    from: Box::new(place("b")),
                },
                r#"move 1: pod ns/p is on Place { node: "a", gpus: ["a-g0"] }, not on Place { node: "b", gpus: ["b-g0"] }"#,
            ),
            (
                Rejection::MoveDoesNotFit { step: 2, pod: "ns/p".into(), to: place("b") },
                r#"move 2: pod ns/p does not fit on b/["b-g0"] at that point"#,
            ),
            (
                Rejection::GpuHeld { gpu: "g".into(), node: "a".into(), pending: "ns/o".into() },
                "GPU g on node a is held for pending pod ns/o (hami-fast.io/reservation)",
            ),
            (Rejection::NoGpus, "gpuDevices is empty"),
            (
                Rejection::TooFewGpus {
                    usable: 0,
                    total: 2,
                    needs: 1,
                    detail: vec!["unhealthy: g0".into(), "x".into()],
                },
                "0 of 2 GPUs usable, the pod needs 1 (unhealthy: g0; x)",
            ),
            (
                Rejection::TooFewGpus { usable: 1, total: 1, needs: 2, detail: vec![] },
                "1 of 1 GPUs usable, the pod needs 2",
            ),
            (Rejection::HostShort { reason: String::new() }, " even with every movable pod moved off"),
        ];
        for (r, text) in cases {
            assert_eq!(r.to_string(), text);
        }
    }

    #[test]
    fn a_target_rejection_names_the_placement_field_it_is_about() {
        let (node, gpu) = (|| "n1".to_owned(), || "g0".to_owned());
        let cases = [
            (Rejection::NodeNotFound { node: node() }, Some("spec.nodeName")),
            (
                Rejection::NodeNotRegistered { node: node(), error: Error::invalid("n1", "no devices") },
                Some("spec.nodeName"),
            ),
            (Rejection::GpuNotOnNode { gpu: gpu(), node: node() }, Some("spec.gpuDevices")),
            (Rejection::GpuCountMismatch { pod: "ns/p".into(), uses: 2, named: 1 }, Some("spec.gpuDevices")),
            (Rejection::NoGpus, Some("spec.gpuDevices")),
            (Rejection::PodNotInSnapshot { step: 0, pod: "ns/p".into() }, None),
            (Rejection::GpuStaysFull { gpu: gpu() }, None),
        ];
        for (rejection, field) in cases {
            assert_eq!(rejection.field(), field, "{rejection}");
        }
    }
}
