//! The policy's choice among the candidate nodes, and `fgd-balance`'s own.

use super::{Replay, Task};
use crate::frag::FragMemo;
use crate::policy::balance::{self as bal};
use crate::policy::node::Scorer;
use crate::policy::score::{self, Randomness, Scoring};
use crate::policy::NodePolicy;
use std::cmp::Ordering;

impl Replay {
    /// Chooses among the candidates with the policy's scores ([`score::score_nodes`]); ties to
    /// the smallest (prefixed) node name. Returns the node and, for FGD, its GPU for a sharing pod.
    pub(super) fn choose(&mut self, task: &Task, cands: &[usize]) -> Option<(usize, Option<usize>)> {
        if cands.is_empty() {
            return None;
        }
        match self.options.policy {
            NodePolicy::Scored(Scorer::FgdBalance) => return self.choose_balance(task, cands),
            NodePolicy::Scored(Scorer::Random) => {
                let rng = &mut self.rng;
                return score::drawn_winner(cands.len(), &mut |n| rng.intn(n)).map(|k| (cands[k], None));
            }
            _ => {}
        }
        let (policy, pod, nodes) = (self.options.policy, task.shape(), &self.nodes);
        let hami = matches!(policy, NodePolicy::Binpack | NodePolicy::Spread);
        let rng = &mut self.rng;
        let mut draw = |n: usize| rng.intn(n);
        let mut ctx = Scoring {
            workload: &self.workload,
            memo: &mut self.memo,
            random: Randomness::Draw(&mut draw),
            shapes: &mut self.shape_scores,
        };
        let candidates = cands.iter().map(|&i| nodes[i].candidate(pod, hami));
        score::score_nodes(policy, candidates, &mut ctx, &mut self.scores);
        let scores = &self.scores;
        let best = cands[score::choose(cands.len(), |k| &nodes[cands[k]].name, |k| scores[k], policy)?];
        let gpu = match policy {
            NodePolicy::Scored(Scorer::Fgd) => {
                score::fgd_gpu(&nodes[best].candidate(pod, false), &self.workload, &mut self.memo)
            }
            _ => None,
        };
        Some((best, gpu))
    }

    /// `fgd-balance`: learn from the arriving pod, then the best cost over the candidates, ties
    /// to the smallest name; nodes of equal shape are costed once.
    fn choose_balance(&mut self, task: &Task, cands: &[usize]) -> Option<(usize, Option<usize>)> {
        let shape = task.shape();
        let st = &mut self.balance;
        st.history.observe(bal::task_type(&shape));
        if st.history.refresh_due() {
            st.workload = st.history.workload();
            st.memo = FragMemo::default();
        }
        let workload = bal::workload_or_pod(&st.workload, &shape);
        let learned = st.history.learned();
        let reserve = model_reserve(&self.nodes, &st.history, &shape);
        st.costs.clear();
        let mut best: Option<(usize, bal::Cost)> = None;
        for &i in cands {
            let n = &self.nodes[i];
            let c = match st.costs.get(&n.key) {
                Some(c) => *c,
                None => {
                    let before = st.memo.frag(&n.shape(), &workload);
                    let c = bal::cost(&n.view(), &shape, &workload, &mut st.memo, before, learned).map(|c| c.0);
                    st.costs.insert(n.key.clone(), c);
                    c
                }
            };
            let Some(mut c) = c else { continue };
            c.keeps_reserve = reserve[n.model_id];
            let better = match &best {
                None => true,
                Some((b, bc)) => match c.compare(bc) {
                    Ordering::Greater => true,
                    Ordering::Equal => n.name < self.nodes[*b].name,
                    Ordering::Less => false,
                },
            };
            if better {
                best = Some((i, c));
            }
        }
        let Some((i, _)) = best else {
            // Only if the policy's CPU view disagrees with the capacity index: still place the pod.
            return cands.iter().min_by(|&&a, &&b| self.nodes[a].name.cmp(&self.nodes[b].name)).map(|&i| (i, None));
        };
        let n = &self.nodes[i];
        let before = st.memo.frag(&n.shape(), &workload);
        let gpu = bal::cost(&n.view(), &shape, &workload, &mut st.memo, before, learned).and_then(|c| c.1);
        Some((i, gpu))
    }
}

/// Per model id: whether `pod` may take GPUs of that model without eating what the pods naming
/// the model are expected to need ([`bal::keeps_reserve`]).
fn model_reserve(nodes: &[super::SimNode], history: &bal::History, pod: &crate::policy::node::PodShape) -> Vec<bool> {
    let models = nodes.iter().map(|n| n.model_id).max().map_or(0, |m| m + 1);
    let mut free = vec![0.0; models];
    let mut names = vec![""; models];
    for n in nodes {
        free[n.model_id] += n.free.iter().sum::<i64>() as f64;
        names[n.model_id] = &n.model;
    }
    let cluster: f64 = free.iter().sum();
    (0..models).map(|m| bal::keeps_reserve(pod, history.named_share(names[m]), free[m], cluster)).collect()
}
