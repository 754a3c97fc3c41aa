//! One node-scoring dispatch for every node policy, used by the live engine, the trace replay and
//! the planner alike, and one choice rule over the scores.

use super::node::{self as np, GpuSelection, NodeView, PodShape, Scorer};
use super::NodePolicy;
use crate::frag::{FragMemo, FxHasher, Workload};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// (GPU model id, CPU left, free milli per GPU sorted descending and packed 16 bits each; the
/// exact sorted list when that overflows). Nodes with equal keys get equal FGD scores.
pub type ShapeKey = (usize, i64, u128, Option<Vec<i64>>);

/// One candidate node as the policies read it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub name: &'a str,
    pub view: NodeView<'a>,
    /// The pod as seen on this node (the live scheduler reads a memory request as a share of
    /// this node's GPUs; the replay's pods look the same everywhere).
    pub pod: PodShape<'a>,
    /// HAMi's node score (utilisation before the pod is placed): what binpack and spread compare.
    pub hami_score: f64,
    /// The node's fragment now, when the caller keeps it (FGD then skips computing it).
    pub frag: Option<f64>,
    /// Equal keys score alike under FGD, so each shape is scored once per pod.
    pub shape_key: Option<&'a ShapeKey>,
}

/// Where `random` gets its randomness.
pub enum Randomness<'r> {
    /// The live scheduler: a hash of (pod UID, pod name, node name), uniform and reproducible per pod.
    Hash { uid: &'r str, pod: &'r str },
    /// The replay: one draw `0..n` from the simulator's random source per pod with more than one
    /// candidate (`n` candidates).
    Draw(&'r mut dyn FnMut(usize) -> usize),
}

/// What scoring needs besides the nodes: FGD's target workload and memo, randomness, scratch space.
pub struct Scoring<'a> {
    pub workload: &'a Workload,
    pub memo: &'a mut FragMemo,
    pub random: Randomness<'a>,
    pub shapes: &'a mut HashMap<ShapeKey, i64, BuildHasherDefault<FxHasher>>,
}

/// Scores every candidate under `policy` into `out` (one score per candidate, in order).
/// Higher wins for every policy but spread (see [`choose`]).
pub fn score_nodes<'a>(
    policy: NodePolicy,
    nodes: impl Iterator<Item = Candidate<'a>>,
    ctx: &mut Scoring,
    out: &mut Vec<f64>,
) {
    out.clear();
    let scorer = match policy {
        NodePolicy::Binpack | NodePolicy::Spread => {
            out.extend(nodes.map(|c| c.hami_score));
            return;
        }
        NodePolicy::Scored(s) => s,
    };
    match scorer {
        Scorer::Fgd => {
            ctx.shapes.clear();
            for c in nodes {
                let cached = c.shape_key.and_then(|k| ctx.shapes.get(k).copied());
                let score = cached.unwrap_or_else(|| {
                    let before = c.frag.unwrap_or_else(|| ctx.memo.frag(&c.view.shape, ctx.workload));
                    let s = np::fgd_from(&c.view, &c.pod, ctx.workload, ctx.memo, before).0;
                    if let Some(k) = c.shape_key {
                        ctx.shapes.insert(k.clone(), s);
                    }
                    s
                });
                out.push(score as f64);
            }
        }
        Scorer::Random => match &mut ctx.random {
            Randomness::Hash { uid, pod: name } => out.extend(nodes.map(|c| {
                let mut h = FxHasher::default();
                (*uid, *name, c.name).hash(&mut h);
                (h.finish() % 1_000_003) as f64
            })),
            Randomness::Draw(rng) => {
                out.extend(nodes.map(|_| 0.0));
                if let Some(s) = drawn_winner(out.len(), &mut **rng).and_then(|w| out.get_mut(w)) {
                    *s = 1.0;
                }
            }
        },
        Scorer::BestFit => {
            let mut scores: Vec<i64> = nodes.map(|c| np::best_fit(&c.view, &c.pod)).collect();
            np::normalize(&mut scores);
            out.extend(scores.into_iter().map(|s| s as f64));
        }
        Scorer::DotProd => out.extend(nodes.map(|c| np::dot_product(&c.view, &c.pod) as f64)),
        Scorer::Packing => out.extend(nodes.map(|c| np::packing(&c.view, &c.pod) as f64)),
        Scorer::Clustering => out.extend(nodes.map(|c| np::clustering(&c.view, &c.pod) as f64)),
        // The live scheduler (no CPU view): the replay keeps its own history (`replay::choose_balance`).
        Scorer::FgdBalance => out.extend(nodes.map(|c| {
            let before = c.frag.unwrap_or_else(|| ctx.memo.frag(&c.view.shape, ctx.workload));
            super::balance::cost(&c.view, &c.pod, ctx.workload, ctx.memo, before, Default::default())
                .map_or(f64::MIN, |(cost, _)| cost.live_score())
        })),
    }
}

/// `random` under a draw (the replay): the draw is the winner, one draw `0..len` when there is
/// more than one candidate. It is the node [`score_nodes`] + [`choose`] pick (its single 1.0 among
/// zeros) without a score to fill and scan per candidate, which is what a replay of `random` costs.
pub fn drawn_winner(len: usize, draw: &mut dyn FnMut(usize) -> usize) -> Option<usize> {
    match len {
        0 => None,
        1 => Some(0),
        n => Some(draw(n)),
    }
}

/// The winner: spread takes the lowest score, every other policy the highest; ties go to the
/// smallest node name. Names are compared only among the candidates tied at the best score: when
/// almost every score ties (random's single 1.0 among zeros, binpack on an empty cluster) a
/// comparison per candidate would be a string comparison per candidate.
/// `name` may give any key ordered as the names are (the live engine's candidate ranks).
pub fn choose<K: Ord>(
    len: usize,
    name: impl Fn(usize) -> K,
    score: impl Fn(usize) -> f64,
    policy: NodePolicy,
) -> Option<usize> {
    let ahead = |a: f64, b: f64| match policy {
        NodePolicy::Spread => a.total_cmp(&b),
        NodePolicy::Binpack | NodePolicy::Scored(_) => b.total_cmp(&a),
    };
    let best = (0..len).map(&score).min_by(|&a, &b| ahead(a, b))?;
    let mut tied = (0..len).filter(|&i| ahead(score(i), best) == Ordering::Equal);
    let first = tied.next()?;
    Some(tied.fold(first, |w, i| if name(i) < name(w) { i } else { w }))
}

/// The GPU FGD would use on the chosen node for a sharing pod (`None` otherwise).
pub fn fgd_gpu(c: &Candidate, workload: &Workload, memo: &mut FragMemo) -> Option<usize> {
    if !c.pod.is_share() {
        return None;
    }
    let before = c.frag.unwrap_or_else(|| memo.frag(&c.view.shape, workload));
    np::fgd_from(&c.view, &c.pod, workload, memo, before).1
}

/// The order in which the chosen node's GPUs are tried (the simulator's `gpuSelMethod`), or
/// `None` for HAMi's own order (binpack, spread). `fgd_gpu` is [`fgd_gpu`]'s answer; `draw`
/// gives `0..n` (the simulator's `Intn`); a random selection without it (the live scheduler)
/// falls back to best fit.
pub fn gpu_preference(
    policy: NodePolicy,
    pod: &PodShape,
    free: &[i64],
    fgd_gpu: Option<usize>,
    draw: Option<&mut dyn FnMut(usize) -> usize>,
) -> Option<Vec<usize>> {
    let NodePolicy::Scored(scorer) = policy else { return None };
    let first = match (scorer.gpu_selection(), pod.is_share()) {
        (GpuSelection::Fgd, true) => fgd_gpu,
        (GpuSelection::Random, true) => draw.and_then(|draw| {
            // Reservoir sampling over the fitting GPUs, one draw per fitting GPU, as the simulator.
            let mut chosen = None;
            let mut seen = 0;
            for (i, &f) in free.iter().enumerate() {
                if f >= pod.gpu_milli {
                    seen += 1;
                    if draw(seen) == 0 {
                        chosen = Some(i);
                    }
                }
            }
            chosen
        }),
        _ => None,
    };
    Some(match first {
        Some(g) => np::gpu_preference_first(g, free, pod),
        None => np::gpu_preference_best_fit(free, pod),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule as first written: one comparison of (score, name) per pair of candidates.
    fn choose_pairwise(names: &[String], scores: &[f64], policy: NodePolicy) -> Option<usize> {
        (0..names.len()).min_by(|&a, &b| {
            let by_score = match policy {
                NodePolicy::Spread => scores[a].total_cmp(&scores[b]),
                NodePolicy::Binpack | NodePolicy::Scored(_) => scores[b].total_cmp(&scores[a]),
            };
            by_score.then_with(|| names[a].cmp(&names[b]))
        })
    }

    #[test]
    fn choose_is_the_pairwise_rule() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let values = [0.0, -0.0, 1.0, 2.5, f64::NAN, f64::MIN, f64::INFINITY];
        for policy in [NodePolicy::Binpack, NodePolicy::Spread, NodePolicy::Scored(Scorer::Random)] {
            for _ in 0..2000 {
                let len = next(9) as usize;
                // Few distinct names and scores, so ties (equal names too) are common.
                let names: Vec<String> = (0..len).map(|_| format!("n{}", next(5))).collect();
                let scores: Vec<f64> = (0..len).map(|_| values[next(values.len() as u64) as usize]).collect();
                let fast = choose(len, |i| names[i].as_str(), |i| scores[i], policy);
                assert_eq!(fast, choose_pairwise(&names, &scores, policy), "{policy:?} {names:?} {scores:?}");
            }
        }
        assert_eq!(choose(0, |_| "", |_| 0.0, NodePolicy::Binpack), None);
    }

    #[test]
    fn the_drawn_winner_is_what_scoring_and_choosing_pick() {
        use crate::frag::{FragMemo, Workload};
        let policy = NodePolicy::Scored(Scorer::Random);
        let names: Vec<String> = (0..7).map(|i| format!("n{}", (i * 5) % 7)).collect();
        let (workload, gpus) = (Workload { types: Vec::new() }, [1000i64]);
        let pod = PodShape { cpu_milli: 0, gpu_milli: 1000, num_gpu: 1, gpu_spec: "" };
        let view = NodeView { shape: crate::frag::NodeShape { cpu_left: 0, gpu_free: &gpus, model: "" }, tags: &[] };
        for len in 0..names.len() {
            for pick in 0..len.max(1) {
                let (mut draws, mut memo, mut shapes) = (Vec::new(), FragMemo::default(), HashMap::default());
                let mut draw = |n: usize| {
                    draws.push(n);
                    pick
                };
                let mut ctx = Scoring {
                    workload: &workload,
                    memo: &mut memo,
                    random: Randomness::Draw(&mut draw),
                    shapes: &mut shapes,
                };
                let candidates = names[..len].iter().map(|name| Candidate {
                    name,
                    view,
                    pod,
                    hami_score: 0.0,
                    frag: None,
                    shape_key: None,
                });
                let mut scores = Vec::new();
                score_nodes(policy, candidates, &mut ctx, &mut scores);
                let chosen = choose(len, |i| names[i].as_str(), |i| scores[i], policy);
                let mut direct_draws = Vec::new();
                let winner = drawn_winner(len, &mut |n| {
                    direct_draws.push(n);
                    pick
                });
                assert_eq!(winner, chosen, "{len} candidates, draw {pick}");
                assert_eq!(direct_draws, draws, "the same draws");
            }
        }
    }
}
