//! Filter: evaluate the candidate nodes of one pod, choose one, build HAMi's annotations, the
//! merge patch and the events of the decision.
//!
//! - `placement`: the pod-level inputs of one decision and the cluster-wide policies;
//! - `cache`: the candidate list kept between calls (`list`, its names as spans of its text) with
//!   the verdicts of unchanged nodes, `ranked`, their fits kept in order, and `names`, the compact
//!   name index lists are resolved in;
//! - `evaluate`: every candidate's verdict and the choice among the fits (`scored` for the
//!   simulator-derived policies, `prefetch` against memory latency);
//! - `decide`: the annotations, merge patch and response of a decision, and `events`, its events;
//! - `locks`: the node locks the decision's Bind takes.

mod cache;
mod decide;
mod evaluate;
mod events;
mod list;
pub mod locks;
mod names;
mod placement;
mod prefetch;
mod ranked;
mod scored;

pub use cache::CandidateCache;
pub use decide::{allocation_annotations, decide, filter_simulated, Decision, FilterOutcome, Outcome, PodRef};
pub use evaluate::{evaluate_candidates, evaluate_nodes, Evaluation, Summary};
pub use events::Event;
pub use placement::{Placement, Policies};

use crate::policy::score;
use crate::policy::NodePolicy;

/// The winner among the fitting nodes (see [`score::choose`]).
pub fn choose(fits: &[(&str, f64)], policy: NodePolicy) -> Option<usize> {
    score::choose(fits.len(), |i| fits[i].0, |i| fits[i].1, policy)
}

/// The fitting nodes in the policy's order of preference: the first is the one [`choose`] picks.
pub fn ranked(fits: &[(&str, f64)], policy: NodePolicy) -> Vec<String> {
    let mut rest: Vec<(&str, f64)> = fits.to_vec();
    let mut order = Vec::with_capacity(rest.len());
    while let Some(i) = choose(&rest, policy) {
        order.push(rest.swap_remove(i).0.to_owned());
    }
    order
}
