//! What Filter keeps between calls: the candidate list resolved to node ids, and the verdicts of
//! the last order-free request per node (their fits kept in order by `ranked`).

use super::list::CandidateList;
use super::names::NameIndex;
use super::placement::Placement;
use super::ranked::{RankedFits, Verdict};
use crate::error::Result;
use crate::k8s::extender::{parse_node_names, plain_names, Cut};
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::state::nodes::NodeTable;
use serde_json::value::RawValue;

/// Candidate names resolved to node ids, kept while kube-scheduler keeps sending the same list,
/// with the verdicts of the last order-free request over it.
#[derive(Debug, Default)]
pub struct CandidateCache {
    /// The node table's generation the ids were resolved at.
    generation: u64,
    /// The list as sent (compared whole to recognise it again), its names resolved to node ids.
    pub(crate) list: CandidateList,
    /// Per entry: its rank among the names in byte order (equal names share one).
    pub(super) ranks: Vec<u32>,
    pub(super) verdicts: Verdicts,
    pub(super) ranked_fits: RankedFits,
    pub(super) index: NameIndex,
}

impl CandidateCache {
    /// Brings the cache to a list as parsed from the body (`raw`: its JSON text).
    pub fn refresh(&mut self, raw: Option<&RawValue>, nodes: &NodeTable) -> Result<()> {
        let text = raw.map_or("", |r| r.get());
        if !self.holds(text.as_bytes(), nodes) {
            let names = parse_node_names(raw)?;
            let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
            self.fill(text, &names, nodes);
        }
        Ok(())
    }

    /// Brings the cache to a list given as its JSON text (`split_node_names`'s cut): whether it is
    /// the cached list unchanged, or `None` when its names are not plain (the caller parses the
    /// body then). kube-scheduler sends the same list for pod after pod, or a window that moves on
    /// by a few hundred nodes each cycle: the names of a new list are read off the text, each
    /// resolved in the compact index ([`NameIndex`]) and kept as a span of the list's text, so a
    /// call allocates nothing per name.
    pub fn refresh_plain(&mut self, cut: Cut, nodes: &NodeTable) -> Option<bool> {
        let list = match cut {
            Cut::Known => return Some(true), // `known_list`: the cached list over the same nodes
            Cut::Other(list) => list,
        };
        if self.holds(list, nodes) {
            return Some(true);
        }
        let names = plain_names(list)?;
        self.fill(std::str::from_utf8(list).ok()?, &names, nodes);
        Some(false)
    }

    /// The cached list's JSON text while its ids are those of `nodes` (else empty): a body that
    /// ends with it names the cached entries (`split_node_names`' `Cut::Known`).
    pub fn known_list(&self, nodes: &NodeTable) -> &[u8] {
        match self.current(nodes) {
            true => self.list.sent().as_bytes(),
            false => b"",
        }
    }

    fn current(&self, nodes: &NodeTable) -> bool {
        nodes.generation() == self.generation && !self.list.is_empty()
    }

    fn holds(&self, text: &[u8], nodes: &NodeTable) -> bool {
        text == self.list.sent().as_bytes() && self.current(nodes)
    }

    fn fill(&mut self, text: &str, names: &[&str], nodes: &NodeTable) {
        self.index.sync(nodes);
        self.list.fill(text, names, &self.index);
        self.ranks.clear(); // ranked at the first reuse (see `rank_names`)
        self.ranked_fits.clear();
        self.generation = nodes.generation();
    }

    /// Ranks the names for tie-breaking, once per list, when the list comes again: sorting costs
    /// more than one call's name comparisons, and pays off only over repeated calls.
    pub fn rank_names(&mut self) {
        if self.ranks.len() != self.list.len() {
            self.ranks = name_ranks(&self.list);
        }
    }

    /// The cached candidate names, in the order sent.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.list.names()
    }

    /// How many nodes' verdicts a next call with the same request may reuse (if unchanged).
    pub fn reusable(&self) -> usize {
        self.verdicts.memo.iter().filter(|(kept, _)| *kept).count()
    }

    /// How many fits the next call over this list may read off their kept order (0: none kept).
    pub fn ranked_fits(&self) -> usize {
        if self.ranked_fits.valid {
            self.ranked_fits.fit_count()
        } else {
            0
        }
    }
}

pub(super) fn name_ranks(list: &CandidateList) -> Vec<u32> {
    let name = |k: usize| list.get(k).0;
    let mut by_name: Vec<usize> = (0..list.len()).collect();
    by_name.sort_by(|&a, &b| name(a).cmp(name(b)));
    let mut ranks = vec![0u32; list.len()];
    let mut rank = 0u32;
    for (k, pair) in by_name.windows(2).enumerate() {
        if name(pair[0]) != name(pair[1]) {
            rank += 1;
        }
        ranks[by_name[k + 1]] = rank;
    }
    ranks
}

/// What an order-free request's verdict on a node depends on besides the node itself.
#[derive(Debug, Clone, PartialEq)]
struct VerdictKey {
    request: PodRequest,
    hints: PodHints,
    gpu_policy: GpuPolicy,
}

/// The last order-free request's verdict per node, kept until the node changes. kube-scheduler
/// filters a workload's pods one after another, and between two of them only the nodes a decision
/// or an update touched have changed ([`NodeTable::changed_since`]), so the next pod re-checks
/// those nodes only, whatever order or subset of nodes its candidate list names (kube-scheduler
/// gathers feasible nodes in parallel: the order differs from cycle to cycle).
#[derive(Debug, Default)]
pub(super) struct Verdicts {
    key: Option<VerdictKey>,
    /// By node id: (still valid, the verdict).
    pub(super) memo: Vec<(bool, Verdict)>,
    /// The node change log's position the memo is valid at.
    seen: u64,
}

impl Verdicts {
    /// Brings the memo to the nodes as they are now: forgets everything unless it was made for
    /// this placement's request shape and the change log still reaches back to it, else drops the
    /// verdicts of the nodes changed since. The ids changed since if any verdict may be reused.
    pub(super) fn prepare<'t>(&mut self, placement: &Placement, nodes: &'t NodeTable) -> Option<&'t [u32]> {
        let seen = std::mem::replace(&mut self.seen, nodes.log_position());
        let changed = nodes.changed_since(seen);
        let same = self.key.as_ref().is_some_and(|k| {
            k.request == placement.request && k.hints == placement.hints && k.gpu_policy == placement.gpu_policy
        });
        if let (true, Some(changed)) = (same, changed) {
            for &id in changed {
                if let Some(entry) = self.memo.get_mut(id as usize) {
                    entry.0 = false;
                }
            }
            return Some(changed);
        }
        self.key = Some(VerdictKey {
            request: placement.request.clone(),
            hints: placement.hints.clone(),
            gpu_policy: placement.gpu_policy.clone(),
        });
        self.memo.iter_mut().for_each(|entry| entry.0 = false);
        None
    }

    pub(super) fn slot(&mut self, id: u32) -> &mut (bool, Verdict) {
        let at = id as usize;
        if at >= self.memo.len() {
            self.memo.resize(at + 1, (false, Ok(0.0)));
        }
        &mut self.memo[at]
    }
}
