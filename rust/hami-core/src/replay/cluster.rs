//! The simulated cluster: the pod stream's tasks and the nodes, each a HAMi `GpuNode` with the
//! policies' view of it kept up to date.

use super::csv::{NodeRow, PodRow};
use super::{DEVICE_SPLIT, DEVICE_UNITS, PODS_PER_NODE};
use crate::codec::Device;
use crate::frag::{NodeShape, MILLI};
use crate::model::{GpuNode, HostResources};
use crate::policy::device::node_score;
use crate::policy::node::{GpuTag, NodeView, PodShape};
use crate::policy::score::{Candidate, ShapeKey};
use crate::policy::PodHints;
use crate::request::{ContainerRequest, PodRequest, PERCENT_UNSET};

#[derive(Debug, Clone)]
pub(super) struct Task {
    pub(super) cpu: i64,
    pub(super) memory: i64,
    pub(super) shape_cpu: i64,
    pub(super) milli: i64,
    pub(super) num_gpu: u32,
    pub(super) spec: String,
    pub(super) request: Option<PodRequest>,
    pub(super) hints: PodHints,
}

impl Task {
    pub(super) fn new(row: &PodRow) -> Self {
        // As the trace converter and the simulator read a row: GPU annotations only when
        // num_gpu > 0, per-GPU milli clamped to 1000, a CPU request of 0 counted as 100m.
        let (num_gpu, milli) = if row.num_gpu > 0 { (row.num_gpu, row.gpu_milli.min(MILLI)) } else { (0, 0) };
        let spec = if num_gpu > 0 {
            row.gpu_spec.split('|').filter(|t| !t.is_empty()).collect::<Vec<_>>().join("|")
        } else {
            String::new()
        };
        let request = (num_gpu > 0 && milli > 0).then(|| PodRequest {
            slots: vec![Some(ContainerRequest {
                nums: i64::from(num_gpu),
                memreq: milli,
                mem_percentage: PERCENT_UNSET,
                coresreq: 0,
            })],
            init_count: 0,
            vendor: Vec::new(),
        });
        let hints = PodHints {
            use_types: spec.split('|').filter(|t| !t.is_empty()).map(str::to_uppercase).collect(),
            ..PodHints::default()
        };
        Self {
            cpu: row.cpu_milli,
            memory: row.memory_mib,
            shape_cpu: if row.cpu_milli == 0 { 100 } else { row.cpu_milli },
            milli,
            num_gpu,
            spec,
            request,
            hints,
        }
    }

    pub(super) fn shape(&self) -> PodShape<'_> {
        PodShape { cpu_milli: self.shape_cpu, gpu_milli: self.milli, num_gpu: self.num_gpu, gpu_spec: &self.spec }
    }

    pub(super) fn total_milli(&self) -> i64 {
        self.milli * i64::from(self.num_gpu)
    }
}

pub(super) struct SimNode {
    /// `%04d-<name>` with the seed's random prefix: the tie-break order, as in the simulator.
    pub(super) name: String,
    /// The GPUs' device type, upper case (empty without GPUs), for HAMi's type filters.
    pub(super) type_upper: String,
    pub(super) model_id: usize,
    packed: u128,
    pub(super) gpu: GpuNode,
    pub(super) model: String,
    pub(super) free: Vec<i64>,
    pub(super) tags: Vec<(GpuTag, u32)>,
    pub(super) frag: f64,
    /// [`Self::shape_key`], kept up to date by every placement.
    pub(super) key: ShapeKey,
}

impl SimNode {
    pub(super) fn view(&self) -> NodeView<'_> {
        NodeView { shape: self.shape(), tags: &self.tags }
    }

    pub(super) fn shape(&self) -> NodeShape<'_> {
        let cpu_left = self.gpu.host.map_or(0, |h| h.cpu_left());
        NodeShape { cpu_left, gpu_free: &self.free, model: &self.model }
    }

    pub(super) fn refresh_free(&mut self) {
        for (f, (d, u)) in self.free.iter_mut().zip(self.gpu.devices.iter().zip(&self.gpu.usage)) {
            *f = i64::from(d.devmem) - u.usedmem;
        }
        self.packed = pack(&self.free);
    }

    pub(super) fn candidate<'a>(&'a self, pod: PodShape<'a>, hami: bool) -> Candidate<'a> {
        Candidate {
            name: &self.name,
            view: self.view(),
            pod,
            hami_score: if hami { node_score(&self.gpu.totals) } else { 0.0 },
            frag: Some(self.frag),
            shape_key: Some(&self.key),
        }
    }

    pub(super) fn shape_key(&self) -> ShapeKey {
        let cpu_left = self.gpu.host.map_or(0, |h| h.cpu_left());
        let exact = (self.free.len() > 8 || self.free.iter().any(|&f| !(0..=0xffff).contains(&f))).then(|| {
            let mut v = self.free.clone();
            v.sort_unstable();
            v
        });
        (self.model_id, cpu_left, self.packed, exact)
    }
}

/// Free milli per GPU, sorted descending, 16 bits each (exact for up to 8 GPUs of ≤ 65535).
fn pack(free: &[i64]) -> u128 {
    let mut sorted: Vec<u16> = free.iter().map(|&f| f.clamp(0, 0xffff) as u16).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.iter().take(8).fold(0u128, |acc, &f| (acc << 16) | u128::from(f))
}

pub(super) fn build_node(row: &NodeRow, name: String, model_id: usize) -> SimNode {
    let devices = (0..row.gpu)
        .map(|i| Device {
            id: format!("{}-gpu{i}", row.name),
            index: i,
            count: DEVICE_SPLIT,
            devmem: DEVICE_UNITS,
            devcore: 100,
            device_type: format!("NVIDIA-{}", row.model),
            health: true,
            ..Device::default()
        })
        .collect();
    let host = HostResources {
        cpu_milli: row.cpu_milli,
        memory_mib: row.memory_mib,
        pods: PODS_PER_NODE,
        ..HostResources::default()
    };
    let gpu = GpuNode::with_devices(&name, devices, Some(host));
    let free = vec![i64::from(DEVICE_UNITS); row.gpu as usize];
    let packed = pack(&free);
    let type_upper = if row.gpu > 0 { format!("NVIDIA-{}", row.model).to_uppercase() } else { String::new() };
    let mut node = SimNode {
        name,
        type_upper,
        model_id,
        packed,
        gpu,
        model: row.model.clone(),
        free,
        tags: Vec::new(),
        frag: 0.0,
        key: (model_id, 0, 0, None),
    };
    node.key = node.shape_key();
    node
}
