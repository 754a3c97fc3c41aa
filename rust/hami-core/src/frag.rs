//! GPU fragmentation as defined by FGD (Weng et al., USENIX ATC '23), in milli-GPU.
//!
//! A node's fragment with respect to a task type m, F_n(m), is the idle GPU capacity that m cannot
//! use there; a node's fragment is the popularity-weighted sum over the target workload's types;
//! the cluster's is the sum over nodes. Used by the FGD node policy, the trace replay's metrics and
//! (later) the descheduler. Pure functions plus a memo keyed by the node's resource shape.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub const MILLI: i64 = 1000;

/// One task type of the target workload: (CPU, per-GPU milli, GPU count, allowed GPU models).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskType {
    pub cpu_milli: i64,
    pub gpu_milli: i64,
    pub num_gpu: u32,
    /// Allowed models as written (`"A|B"`), empty = any.
    pub gpu_spec: String,
}

impl TaskType {
    /// Whether a node whose GPUs are of `model` may host this type (exact model match, `|` list).
    pub fn allows_model(&self, model: &str) -> bool {
        model_allowed(&self.gpu_spec, model)
    }
}

/// The simulator's `IsNodeAccessibleToPodByType`: empty spec = any model; a node without a
/// model (CPU-only) matches no non-empty spec.
pub fn model_allowed(spec: &str, model: &str) -> bool {
    if spec.is_empty() {
        return true;
    }
    if model.is_empty() {
        return false;
    }
    let mut named = 0;
    for t in spec.split('|').filter(|t| !t.is_empty()) {
        named += 1;
        if t == model {
            return true;
        }
    }
    named == 0
}

/// A node's resources as the fragmentation measure sees them.
#[derive(Debug, Clone, Copy)]
pub struct NodeShape<'a> {
    pub cpu_left: i64,
    /// Free milli-GPU per device, in device index order.
    pub gpu_free: &'a [i64],
    pub model: &'a str,
}

/// The target workload: task types with popularity shares (normally summing to 1).
#[derive(Debug, Clone, Default)]
pub struct Workload {
    pub types: Vec<(TaskType, f64)>,
}

/// F_n(m) for one type, in milli-GPU.
pub fn type_frag(node: &NodeShape, m: &TaskType) -> i64 {
    let total: i64 = node.gpu_free.iter().sum();
    if m.gpu_milli == 0 || !m.allows_model(node.model) {
        return total;
    }
    let need = m.num_gpu.max(1) as usize;
    let fitting = node.gpu_free.iter().filter(|&&f| f >= m.gpu_milli).count();
    if fitting >= need && node.cpu_left >= m.cpu_milli {
        node.gpu_free.iter().filter(|&&f| f < m.gpu_milli).sum()
    } else {
        total
    }
}

/// F_n = Σ_m p_m · F_n(m): the node's expected fragment (everything except "q3 satisfied").
pub fn node_frag(node: &NodeShape, workload: &Workload) -> f64 {
    let mut out = 0.0;
    for (m, p) in &workload.types {
        out += p * type_frag(node, m) as f64;
    }
    out
}

impl Workload {
    /// The simulator's `GetTypicalPods`: count each task type in `tasks`, keep the most popular
    /// types until they cover `threshold_pct` % of the tasks, renormalise their shares to 1.
    /// Ties in count are broken by the type tuple, descending.
    pub fn typical(tasks: impl IntoIterator<Item = TaskType>, threshold_pct: f64) -> Self {
        let mut counts: HashMap<TaskType, f64> = HashMap::new();
        let mut total = 0.0;
        for t in tasks {
            *counts.entry(t).or_default() += 1.0;
            total += 1.0;
        }
        if total == 0.0 {
            return Self::default();
        }
        let mut list: Vec<(TaskType, f64)> = counts.into_iter().collect();
        list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        let expected = threshold_pct * total / 100.0;
        let mut cum = 0.0;
        let mut kept = 0;
        while cum < expected && kept < list.len() {
            cum += list[kept].1;
            list[kept].1 /= total;
            kept += 1;
        }
        if kept >= list.len() {
            return Self { types: list };
        }
        list.truncate(kept);
        for entry in &mut list {
            entry.1 /= cum / total;
        }
        Self { types: list }
    }
}

/// Memo of node fragments keyed by the node's shape (model, CPU left, sorted free GPUs), as the
/// simulator memoises them; the fragment does not depend on device order.
#[derive(Debug, Default)]
pub struct FragMemo {
    map: HashMap<(u32, i64, [u16; 8]), f64, BuildHasherDefault<FxHasher>>,
    models: Vec<String>,
}

impl FragMemo {
    fn model_id(&mut self, model: &str) -> u32 {
        match self.models.iter().position(|m| m == model) {
            Some(i) => i as u32,
            None => {
                self.models.push(model.to_owned());
                (self.models.len() - 1) as u32
            }
        }
    }

    pub fn frag(&mut self, node: &NodeShape, workload: &Workload) -> f64 {
        if node.gpu_free.len() > 8 || node.gpu_free.iter().any(|&f| !(0..=i64::from(u16::MAX)).contains(&f)) {
            return node_frag(node, workload);
        }
        let model = self.model_id(node.model);
        let mut key = [0u16; 8];
        for (k, &f) in key.iter_mut().zip(node.gpu_free) {
            *k = f as u16;
        }
        key[..node.gpu_free.len()].sort_unstable_by(|a, b| b.cmp(a));
        *self.map.entry((model, node.cpu_left, key)).or_insert_with(|| node_frag(node, workload))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The multiply-rotate hash of rustc (FxHash): the memo is hit millions of times per replay.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(buf));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.hash = (self.hash.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }

    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(cpu: i64, milli: i64, n: u32, spec: &str, pct: f64) -> (TaskType, f64) {
        (TaskType { cpu_milli: cpu, gpu_milli: milli, num_gpu: n, gpu_spec: spec.into() }, pct / 100.0)
    }

    /// The typical-pod list of the simulator's `frag_test.go` (shares as printed there, not renormalised).
    fn gpu_types() -> Workload {
        let rows = [
            (6000, 465, 1, "", 9.33),
            (8000, 440, 1, "2080", 9.15),
            (8000, 475, 1, "T4", 8.76),
            (8000, 440, 1, "P100", 8.72),
            (2000, 465, 1, "", 8.68),
            (12000, 900, 1, "", 8.65),
            (4000, 900, 1, "", 8.43),
            (16000, 678, 1, "T4", 8.36),
            (8000, 500, 1, "", 8.29),
            (6000, 511, 1, "", 8.11),
            (14000, 1000, 2, "2080", 0.54),
            (4000, 1000, 1, "2080", 0.43),
            (32000, 1000, 2, "T4", 0.43),
            (16000, 1000, 1, "V100M16", 0.40),
            (64000, 1000, 2, "", 0.40),
            (10000, 1000, 2, "", 0.40),
            (11400, 1000, 1, "T4", 0.36),
            (16000, 1000, 1, "T4", 0.36),
            (4000, 1000, 2, "", 0.36),
            (14000, 1000, 2, "V100M16", 0.36),
            (8000, 1000, 4, "", 0.36),
            (16000, 1000, 2, "", 0.32),
            (2000, 1000, 1, "T4", 0.32),
            (6000, 1000, 1, "", 0.32),
            (4000, 1000, 1, "", 0.32),
            (5000, 1000, 1, "", 0.32),
            (32000, 1000, 4, "V100M16", 0.32),
            (32000, 1000, 2, "", 0.32),
            (24000, 1000, 8, "2080", 0.32),
            (40000, 1000, 4, "", 0.29),
            (32000, 1000, 8, "", 0.29),
            (32000, 1000, 1, "T4", 0.29),
            (16000, 1000, 1, "", 0.25),
            (7000, 1000, 1, "V100M16", 0.25),
            (24000, 1000, 1, "T4", 0.25),
        ];
        Workload { types: rows.iter().map(|&(c, m, n, s, p)| t(c, m, n, s, p)).collect() }
    }

    fn with_cpu_types() -> Workload {
        let rows = [
            (15700, 1000, 1, 28.69),
            (11900, 1000, 1, 18.93),
            (11400, 1000, 1, 12.27),
            (1000, 0, 0, 7.36),
            (18710, 1000, 1, 4.85),
            (8200, 1000, 1, 3.79),
            (16400, 1000, 1, 3.31),
            (9810, 1000, 1, 1.97),
            (15200, 1000, 1, 1.87),
            (11200, 1000, 1, 1.81),
            (14200, 1000, 1, 1.76),
            (12000, 0, 0, 1.65),
            (14900, 1000, 1, 1.39),
            (60200, 1000, 4, 1.23),
            (64200, 1000, 8, 1.07),
            (32200, 1000, 4, 1.01),
            (17400, 1000, 2, 0.91),
            (30200, 1000, 2, 0.69),
            (16000, 1000, 1, 0.64),
            (15000, 1000, 1, 0.59),
            (64000, 1000, 8, 0.53),
            (15000, 0, 0, 0.53),
            (11910, 1000, 1, 0.53),
            (120200, 1000, 8, 0.48),
            (11300, 1000, 1, 0.37),
            (30000, 1000, 2, 0.32),
            (9800, 1000, 1, 0.32),
            (8000, 1000, 1, 0.32),
            (2000, 1000, 1, 0.27),
            (2000, 80, 1, 0.27),
            (1000, 1000, 1, 0.27),
        ];
        Workload { types: rows.iter().map(|&(c, m, n, p)| t(c, m, n, "", p)).collect() }
    }

    fn frag(cpu_left: i64, free: &[i64], model: &str, w: &Workload) -> f64 {
        node_frag(&NodeShape { cpu_left, gpu_free: free, model }, w)
    }

    #[test]
    fn spec_vectors() {
        let w = gpu_types();
        assert!((frag(1000, &[200, 1000, 1000, 500], "1080", &w) - 2566.62).abs() < 0.01);
        assert!((frag(1000, &[1000; 4], "1080", &w) - 3802.40).abs() < 0.01);
        assert!((frag(1000, &[1000; 8], "1080", &w) - 7604.80).abs() < 0.01);
        let first = Workload { types: vec![w.types[0].clone()] };
        assert!((frag(1000, &[200, 1000, 1000, 500], "1080", &first) - 251.91).abs() < 0.01);
        let w = with_cpu_types();
        assert!((frag(64000, &[1000; 8], "P100", &w) - 887.20).abs() < 0.01);
        assert!((frag(32000, &[1000, 1000, 1000, 1000, 0, 0, 0, 0], "P100", &w) - 554.4).abs() < 0.01);
        assert!((frag(0, &[1000, 1000, 1000, 1000, 0, 0, 0, 0], "P100", &w) - 4000.0).abs() < 0.01);
    }

    #[test]
    fn model_lists() {
        assert!(model_allowed("", "T4") && model_allowed("", ""));
        assert!(model_allowed("V100M16|V100M32", "V100M32"));
        assert!(!model_allowed("V100M16|V100M32", "V100"));
        assert!(!model_allowed("T4", ""));
        assert!(model_allowed("|", "T4"));
    }

    #[test]
    fn typical_keeps_popular_types_and_renormalises() {
        let ty = |cpu| TaskType { cpu_milli: cpu, gpu_milli: 1000, num_gpu: 1, gpu_spec: String::new() };
        let tasks = std::iter::repeat_n(ty(1), 6).chain(std::iter::repeat_n(ty(2), 3)).chain([ty(3)]);
        let w = Workload::typical(tasks, 80.0);
        assert_eq!(w.types.len(), 2);
        assert!((w.types[0].1 - 6.0 / 9.0).abs() < 1e-12 && (w.types[1].1 - 3.0 / 9.0).abs() < 1e-12);
        // Equal counts: the larger tuple first.
        let w = Workload::typical([ty(5), ty(7)], 50.0);
        assert_eq!(w.types[0].0.cpu_milli, 7);
        assert_eq!(w.types.len(), 1);
    }

    #[test]
    fn memo_ignores_device_order() {
        let w = gpu_types();
        let mut memo = FragMemo::default();
        let a = memo.frag(&NodeShape { cpu_left: 1000, gpu_free: &[200, 1000, 1000, 500], model: "1080" }, &w);
        let b = memo.frag(&NodeShape { cpu_left: 1000, gpu_free: &[1000, 500, 200, 1000], model: "1080" }, &w);
        assert_eq!(a, b);
        assert_eq!(memo.len(), 1);
    }
}
