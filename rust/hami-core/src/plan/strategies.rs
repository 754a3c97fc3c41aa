//! The two ways of searching a plan: `drain` (empty the cheapest partly used GPUs, then polish
//! with single moves) and `greedy` (single fragment-lowering moves only).

use super::{demand, is_whole_free, node_frag, Planner, Seat};
use crate::model::{GpuNode, CORDONED, HEALTHY};

impl Planner<'_> {
    /// [`Self::drain`] again while a pass frees more: emptying one GPU can make another
    /// drainable (its pods now have somewhere to go).
    pub(super) fn drain_until_stable(&mut self) {
        loop {
            let before = self.moves.len();
            self.drain();
            if self.moves.len() == before || self.moves.len() >= self.budget {
                return;
            }
        }
    }

    /// Empties partly used GPUs, cheapest (fewest pods, least memory) first.
    pub(super) fn drain(&mut self) {
        let mut cands: Vec<(usize, i64, usize, usize)> = Vec::new();
        for (&(n, d), pods) in &self.on_gpu {
            let h = &self.s.nodes[n].hot[d];
            if pods.is_empty() || !h.has(HEALTHY) || h.has(CORDONED) {
                continue;
            }
            if pods.iter().any(|&pi| self.s.pods[pi].blocked.is_some()) {
                continue;
            }
            // A GPU is worth draining when its pods leave the rest of their GPUs no fuller.
            cands.push((pods.len(), self.s.nodes[n].usage[d].usedmem, n, d));
        }
        cands.sort_unstable();
        for (_, _, n, d) in cands {
            if self.moves.len() >= self.budget {
                break;
            }
            let pods: Vec<usize> = self.on_gpu.get(&(n, d)).cloned().unwrap_or_default();
            if pods.is_empty()
                || self.moves.len() + pods.len() > self.budget
                || pods.iter().any(|pi| self.moved.contains(pi))
            {
                continue;
            }
            if pods.iter().any(|&pi| self.s.pods[pi].blocked.is_some()) {
                continue;
            }
            let mut order = pods.clone();
            order.sort_by_key(|&pi| std::cmp::Reverse(demand(&self.s.pods[pi]).1));
            // Targets: partly used GPUs other than the ones being drained; whole free GPUs stay free.
            let allowed =
                move |t: usize, dev: usize, node: &GpuNode| (t, dev) != (n, d) && !is_whole_free(&node.usage[dev]);
            let mut done: Vec<(usize, usize, Seat)> = Vec::new();
            let mut ok = true;
            for &pi in &order {
                self.lift(pi);
                match self.relocate(pi, &allowed, f64::INFINITY) {
                    Some((t, seat)) => {
                        let (from, old) = (self.s.pods[pi].node, self.s.pods[pi].seat());
                        self.land(pi, t, seat);
                        done.push((pi, from, old));
                    }
                    None => {
                        let (from, old) = (self.s.pods[pi].node, self.s.pods[pi].seat());
                        self.land(pi, from, old);
                        ok = false;
                        break;
                    }
                }
            }
            if !ok || !is_whole_free(&self.s.nodes[n].usage[d]) {
                for (pi, from, old) in done.into_iter().rev() {
                    self.lift(pi);
                    self.land(pi, from, old);
                }
                continue;
            }
            let mut touched: Vec<usize> = vec![n];
            for (pi, from, old) in done {
                touched.push(self.s.pods[pi].node);
                self.record_move(pi, from, &old);
            }
            touched.sort_unstable();
            touched.dedup();
            for t in touched {
                self.refresh_frag(t);
            }
        }
    }

    /// Single moves onto partly used GPUs, each taken when it lowers the cluster fragment;
    /// pods on the most fragmented nodes first.
    pub(super) fn greedy(&mut self) {
        let mut order: Vec<usize> = (0..self.s.pods.len()).filter(|pi| self.s.pods[*pi].blocked.is_none()).collect();
        order.sort_by(|&a, &b| {
            let (na, nb) = (self.s.pods[a].node, self.s.pods[b].node);
            self.frags[nb].total_cmp(&self.frags[na]).then(a.cmp(&b))
        });
        // Whole free GPUs stay free: filling one to lower the fragment would undo the point.
        let any = |_: usize, dev: usize, node: &GpuNode| !is_whole_free(&node.usage[dev]);
        for pi in order {
            if self.moves.len() >= self.budget {
                break;
            }
            if self.moved.contains(&pi) {
                continue;
            }
            let src = self.s.pods[pi].node;
            let before_src = self.frags[src];
            self.lift(pi);
            let lifted_src = node_frag(&self.s.nodes[src], &self.s.workload, &mut self.memo);
            let saved = self.frags[src];
            self.frags[src] = lifted_src;
            let gain = lifted_src - before_src;
            let threshold = -gain - 1.0;
            let target = self.relocate(pi, &any, threshold);
            self.frags[src] = saved;
            let old = self.s.pods[pi].seat();
            match target {
                Some((t, seat)) => {
                    self.land(pi, t, seat);
                    let total_before = self.frags[src] + if t != src { self.frags[t] } else { 0.0 };
                    let after_src = node_frag(&self.s.nodes[src], &self.s.workload, &mut self.memo);
                    let after_t =
                        if t != src { node_frag(&self.s.nodes[t], &self.s.workload, &mut self.memo) } else { 0.0 };
                    if after_src + after_t < total_before - 1.0 {
                        self.refresh_frag(src);
                        self.refresh_frag(t);
                        self.record_move(pi, src, &old);
                    } else {
                        self.lift(pi);
                        self.land(pi, src, old);
                    }
                }
                None => self.land(pi, src, old),
            }
        }
    }
}
