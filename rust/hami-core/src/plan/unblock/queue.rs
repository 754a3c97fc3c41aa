//! The pending queue served in order, each pod unblocked with what is left of the budget, and
//! the baseline it is compared with.

use super::{fits_now, occupy, unblock_in, PendingPod, Unblock};
use crate::plan::{plan_on, round3, Measures, Move, Planner, Seat, Snapshot, Strategy};
use crate::wire::plan::{QueueBaseline, QueuePlacement, QueuePlan, QueuedContainer, QueuedPod};

/// The pending queue, in order: each pod is unblocked with what is left of the budget (at most
/// `per_pod` moves each), its moves applied, and the pod placed on its target before the next.
#[derive(Debug, Clone)]
pub struct QueueResult {
    pub pending: usize,
    /// Pods that fit with no move at all.
    pub fit_without_moves: usize,
    /// Pods that fit after moves.
    pub unblocked_by_moves: usize,
    pub moves: Vec<Move>,
    /// Each pod placed, with its GPUs (`reservation` for those that needed moves).
    pub placed: Vec<Unblock>,
    pub before: Measures,
    /// After the moves, before any pending pod is placed.
    pub after_moves: Measures,
    pub elapsed_ms: f64,
}

pub fn unblock_queue(snapshot: &Snapshot, queue: &[PendingPod], budget: usize, per_pod: usize) -> QueueResult {
    let start = std::time::Instant::now();
    let mut work = snapshot.clone();
    let mut planner = Planner::new(&mut work, budget);
    let before = planner.s.measures_with(&planner.frags);
    let mut landed: Vec<(usize, Seat, i64, i64)> = Vec::new();
    let (mut fit_without_moves, mut unblocked_by_moves) = (0, 0);
    let mut placed = Vec::new();
    for pending in queue {
        let left = budget.saturating_sub(planner.moves.len());
        let (r, landing) = unblock_in(&mut planner, pending, left.min(per_pod));
        let Some((t, seat)) = landing else { continue };
        if r.moves.is_empty() {
            fit_without_moves += 1;
        } else {
            unblocked_by_moves += 1;
        }
        occupy(&mut planner, t, &seat, pending.host, 1);
        landed.push((t, seat, pending.host.0, pending.host.1));
        placed.push(r);
    }
    let moves = std::mem::take(&mut planner.moves);
    for (t, seat, cpu, mem) in landed.iter().rev() {
        occupy(&mut planner, *t, seat, (*cpu, *mem), -1);
    }
    let after_moves = work.measures();
    QueueResult {
        pending: queue.len(),
        fit_without_moves,
        unblocked_by_moves,
        moves,
        placed,
        before,
        after_moves,
        elapsed_ms: start.elapsed().as_secs_f64() * 1000.0,
    }
}

impl QueueResult {
    /// The document of the queue's plan on `snapshot` within `budget`.
    pub fn to_plan(&self, snapshot: &Snapshot, budget: usize, baseline: Option<QueueBaseline>) -> QueuePlan {
        let placements = self.placed.iter().filter_map(placement).collect();
        QueuePlan {
            objective: "pending",
            pending: self.pending,
            max_moves: budget,
            unblocked_by_moves: self.unblocked_by_moves,
            fit_without_moves: self.fit_without_moves,
            moves: self.moves.clone(),
            placements,
            queue: queued_pods(&snapshot.pending, &snapshot.nodes),
            before: self.before,
            after: self.after_moves,
            freed_whole_gpus: self.after_moves.free_whole_gpus as i64 - self.before.free_whole_gpus as i64,
            nodes: snapshot.nodes.len(),
            pods: snapshot.pods.len(),
            elapsed_ms: round3(self.elapsed_ms),
            baseline,
        }
    }
}

fn placement(r: &Unblock) -> Option<QueuePlacement> {
    let t = r.target.as_ref()?;
    Some(QueuePlacement {
        pod: r.pod.clone(),
        uid: r.uid.clone(),
        node: t.node.clone(),
        gpus: t.gpus.clone(),
        moves: r.moves.len(),
        mig: t.mig.clone(),
    })
}

/// The pending vGPU pods the queue was planned for, in queue order, with what each container
/// asks for, and why each can never fit in this cluster, if so: the GPU map lists them.
fn queued_pods(queue: &[PendingPod], nodes: &[crate::model::GpuNode]) -> Vec<QueuedPod> {
    queue
        .iter()
        .map(|p| {
            let slots = p.request.slots.iter().enumerate();
            let containers = slots
                .filter_map(|(i, r)| {
                    let r = r.as_ref()?;
                    Some(QueuedContainer {
                        init: p.request.is_init(i),
                        gpus: r.nums,
                        memory_mib: r.memreq,
                        memory_percentage: (r.mem_percentage != crate::request::PERCENT_UNSET)
                            .then_some(r.mem_percentage),
                        cores: r.coresreq,
                    })
                })
                .collect();
            let never = crate::headroom::never_fits(nodes, &p.request);
            QueuedPod { pod: p.key.clone(), uid: p.uid.clone(), containers, never }
        })
        .collect()
}

/// The baseline for the pending queue: a `strategy` plan within the budget (pending pods
/// unknown to it), then each pending pod placed where it fits, in order.
pub fn baseline_queue(snapshot: &Snapshot, queue: &[PendingPod], budget: usize, strategy: Strategy) -> QueueBaseline {
    let start = std::time::Instant::now();
    let mut work = snapshot.clone();
    let plan = plan_on(&mut work, budget, strategy);
    let mut planner = Planner::new(&mut work, 0);
    let mut unblocked = 0;
    for pending in queue {
        if let Some((t, fp)) = fits_now(&planner, pending) {
            occupy(&mut planner, t, &fp, pending.host, 1);
            unblocked += 1;
        }
    }
    QueueBaseline {
        planner: plan.planner,
        moves: plan.moves.len(),
        unblocked,
        after: plan.after,
        freed_whole_gpus: plan.after.free_whole_gpus as i64 - plan.before.free_whole_gpus as i64,
        elapsed_ms: round3(start.elapsed().as_secs_f64() * 1000.0),
    }
}
