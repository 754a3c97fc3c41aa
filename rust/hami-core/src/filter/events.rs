//! The events of a decision: `FilteringSucceed` with the first fits, or `FilteringFailed` per reason.

use super::evaluate::Evaluation;
use crate::policy::NodePolicy;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub event_type: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Longest node list an event message carries; the counts stay exact.
pub(super) const EVENT_NODE_LIST: usize = 20;

fn capped_list(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut shown: Vec<String> = items.take(EVENT_NODE_LIST).collect();
    if total > EVENT_NODE_LIST {
        shown.push(format!("... {} more", total - EVENT_NODE_LIST));
    }
    shown.join(",")
}

/// The fits by score then name (Spread: highest first), `name:score` for the first
/// [`EVENT_NODE_LIST`]. Only those are kept and ordered: (score, name) is a total order, so the
/// shown prefix is the full sort's. Equal scores are adjacent and formatted once.
fn fit_list(fits: &[(&str, f64)], name_order: &[u32], policy: NodePolicy) -> String {
    let ranked = name_order.len() == fits.len();
    let ascending = |a: usize, b: usize| {
        fits[a].1.total_cmp(&fits[b].1).then_with(|| match ranked {
            true => name_order[a].cmp(&name_order[b]),
            false => fits[a].0.cmp(fits[b].0),
        })
    };
    let order = |a: usize, b: usize| if policy == NodePolicy::Spread { ascending(b, a) } else { ascending(a, b) };
    // The best EVENT_NODE_LIST kept in order while scanning: one comparison per fit that does not
    // enter (the common case, and all of them on an already ordered list).
    let mut kept: Vec<usize> = Vec::with_capacity(EVENT_NODE_LIST + 1);
    for fit in 0..fits.len() {
        if kept.len() == EVENT_NODE_LIST && kept.last().is_some_and(|&worst| order(fit, worst).is_ge()) {
            continue;
        }
        let at = kept.partition_point(|&k| order(k, fit).is_le());
        kept.insert(at, fit);
        kept.truncate(EVENT_NODE_LIST);
    }
    let shown: Vec<(&str, f64)> = kept.iter().map(|&k| fits[k]).collect();
    fit_list_text(&shown, fits.len())
}

/// `name:score` for each shown fit, and how many more fit (`total` in all).
fn fit_list_text(shown: &[(&str, f64)], total: usize) -> String {
    let mut out = String::with_capacity(shown.len() * 16 + 16);
    let (mut bits, mut score) = (None, String::new());
    for (i, (name, s)) in shown.iter().enumerate() {
        if bits != Some(s.to_bits()) {
            (bits, score) = (Some(s.to_bits()), format!("{s:.2}"));
        }
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push(':');
        out.push_str(&score);
    }
    if total > EVENT_NODE_LIST {
        out.push_str(&format!(",... {} more", total - EVENT_NODE_LIST));
    }
    out
}

pub(super) fn succeed_event(eval: &Evaluation, chosen: &str, total: usize, policy: NodePolicy) -> Event {
    Event {
        event_type: "Normal",
        reason: "FilteringSucceed",
        message: format!(
            "find fit node({chosen}), {} nodes not fit, {} nodes fit({})",
            total.saturating_sub(eval.fit_count()),
            eval.fit_count(),
            match &eval.summary {
                Some(summary) => fit_list_text(&summary.shown, summary.fit_count),
                None => fit_list(&eval.fits, &eval.name_order, policy),
            }
        ),
    }
}

/// One `FilteringFailed` event per reason key, then the summary (§16).
pub(super) fn failed_events(eval: &Evaluation, total: usize) -> Vec<Event> {
    let mut by_reason: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (node, failure) in &eval.failed {
        for reason in failure.reasons() {
            by_reason.entry(reason.as_str()).or_default().push(node);
        }
    }
    let mut events: Vec<Event> = by_reason
        .into_iter()
        .map(|(reason, mut nodes)| {
            nodes.sort_unstable();
            Event {
                event_type: "Warning",
                reason: "FilteringFailed",
                message: format!(
                    "{} nodes {reason}({})",
                    nodes.len(),
                    capped_list(nodes.iter().map(|n| (*n).to_owned()))
                ),
            }
        })
        .collect();
    events.push(Event {
        event_type: "Warning",
        reason: "FilteringFailed",
        message: format!("no available node, {total} nodes do not meet"),
    });
    events
}

#[cfg(test)]
mod tests {
    use super::super::cache::name_ranks;
    use super::super::list::CandidateList;
    use super::*;

    /// The event's list as first written: sort every fit, format every shown score.
    fn full_sort_list(fits: &[(&str, f64)], policy: NodePolicy) -> String {
        let mut all: Vec<&(&str, f64)> = fits.iter().collect();
        all.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
        if policy == NodePolicy::Spread {
            all.reverse();
        }
        capped_list(all.iter().map(|(n, s)| format!("{n}:{s:.2}")))
    }

    #[test]
    fn fit_list_shows_the_full_sorts_prefix() {
        let shuffled: Vec<String> = (0..60).map(|i| format!("node-{:02}", (i * 37) % 60)).collect();
        let ordered: Vec<String> = (0..60).map(|i| format!("node-{i:02}")).collect();
        for (names, len) in [&shuffled, &ordered].into_iter().flat_map(|n| [0, 1, 19, 20, 21, 60].map(|l| (n, l))) {
            // Ties (every third score repeats), a negative zero and a half-way value among them.
            let fits: Vec<(&str, f64)> = names[..len]
                .iter()
                .enumerate()
                .map(|(i, n)| (n.as_str(), [4.81, -0.0, 0.125, 0.0, (i % 7) as f64 * 1.5][i % 5]))
                .collect();
            for policy in [NodePolicy::Binpack, NodePolicy::Spread] {
                let expected = full_sort_list(&fits, policy);
                assert_eq!(fit_list(&fits, &[], policy), expected, "{len} fits, {policy:?}");
                let ranks = name_ranks(&CandidateList::of(&fits.iter().map(|(n, _)| *n).collect::<Vec<_>>()));
                assert_eq!(fit_list(&fits, &ranks, policy), expected, "{len} fits by rank, {policy:?}");
            }
        }
    }
}
