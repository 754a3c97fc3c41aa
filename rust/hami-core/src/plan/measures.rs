//! What a plan is judged by: whole free GPUs and FGD's fragmentation, cluster-wide and per node.

use super::Snapshot;
use crate::frag::{FragMemo, NodeShape, Workload, MILLI};
use crate::model::{DeviceUsage, GpuNode, CORDONED, HEALTHY};
use crate::policy::node as np;

impl Snapshot {
    /// Cluster-level measures.
    pub fn measures(&self) -> Measures {
        let mut memo = FragMemo::default();
        let frags: Vec<f64> = self.nodes.iter().map(|n| node_frag(n, &self.workload, &mut memo)).collect();
        self.measures_with(&frags)
    }

    pub(super) fn measures_with(&self, frags: &[f64]) -> Measures {
        let (mut gpus, mut healthy, mut free) = (0usize, 0usize, 0usize);
        let mut idle_milli = 0i64;
        for n in &self.nodes {
            let free_milli = np::live_free_milli(n);
            for (i, d) in n.hot.iter().enumerate() {
                gpus += 1;
                if d.has(HEALTHY) {
                    healthy += 1;
                    idle_milli += free_milli[i];
                    if is_whole_free(&n.usage[i]) && !d.has(CORDONED) {
                        free += 1;
                    }
                }
            }
        }
        let frag: f64 = frags.iter().sum();
        Measures {
            free_whole_gpus: free,
            fragmentation: round3(frag / MILLI as f64),
            fragmentation_pct_of_idle: if idle_milli > 0 { round3(100.0 * frag / idle_milli as f64) } else { 0.0 },
            gpus,
            healthy_gpus: healthy,
        }
    }

    /// Per-node measures (for `/api/v1/fragmentation`).
    pub fn node_measures(&self) -> Vec<NodeMeasure> {
        let mut memo = FragMemo::default();
        self.nodes
            .iter()
            .map(|n| NodeMeasure {
                node: n.name.clone(),
                registered: n.is_registered(),
                gpus: n.devices.len(),
                free_whole_gpus: n
                    .usage
                    .iter()
                    .zip(&n.hot)
                    .filter(|(u, h)| is_whole_free(u) && h.has(HEALTHY) && !h.has(CORDONED))
                    .count(),
                partly_used_gpus: n.usage.iter().filter(|u| !is_whole_free(u)).count(),
                fragmentation: round3(node_frag(n, &self.workload, &mut memo) / MILLI as f64),
                free_milli: np::live_free_milli(n),
            })
            .collect()
    }
}

pub(super) fn is_whole_free(u: &DeviceUsage) -> bool {
    u.used == 0 && u.usedmem == 0 && u.usedcores == 0
}

pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

pub(super) fn node_model(n: &GpuNode) -> &str {
    n.devices.first().map_or("", |d| d.device_type.as_str())
}

pub(super) fn node_frag(n: &GpuNode, workload: &Workload, memo: &mut FragMemo) -> f64 {
    let free = np::live_free_milli(n);
    memo.frag(&NodeShape { cpu_left: 0, gpu_free: &free, model: node_model(n) }, workload)
}

pub use crate::wire::plan::{Measures, NodeMeasure};
