//! A replay stopped part-way, exported as Kubernetes objects: the clusters the descheduler's
//! planner is measured on (`openb` replayed with a policy up to a share of arrived GPU demand).

use super::{Placed, Replay, MILLI};
use crate::codec::{self, encode_node_register, encode_pod_devices, ContainerDevice};
use crate::error::Result;
use crate::wire::snapshot::{
    HostResources, OwnerReference, SnapshotContainer, SnapshotItem, SnapshotList, SnapshotListMeta, SnapshotNode,
    SnapshotNodeMeta, SnapshotNodeStatus, SnapshotPod, SnapshotPodMeta, SnapshotPodSpec, SnapshotPodStatus,
    SnapshotResources,
};
use std::collections::BTreeMap;

impl Replay {
    /// Runs the pod stream while the cumulative requested GPU stays within `arrived_pct` % of the
    /// cluster's GPU capacity, then returns a `List` of the Nodes (HAMi registration annotation,
    /// allocatable CPU and memory) and the GPU pods placed so far (HAMi allocation annotations,
    /// owned by a ReplicaSet, `Running`), CPU-only pods included for the nodes' CPU accounting.
    /// GPU pods that failed to schedule are in the list as `Pending` pods without a node (the
    /// pending queue the descheduler's `--for` is measured on).
    pub fn snapshot_at(mut self, arrived_pct: f64) -> Result<SnapshotList> {
        let limit = arrived_pct / 100.0 * (self.total_gpus * MILLI) as f64;
        let order = std::mem::take(&mut self.order);
        let tasks = std::mem::take(&mut self.tasks);
        let mut cands = Vec::with_capacity(self.nodes.len());
        let mut arrived = 0i64;
        let mut items: Vec<SnapshotItem> = Vec::new();
        for (k, &t) in order.iter().enumerate() {
            let task = &tasks[t];
            if (arrived + task.total_milli()) as f64 > limit {
                break;
            }
            arrived += task.total_milli();
            let Some(Placed { node, usage_before: before, .. }) = self.step(task, &mut cands)? else {
                if task.request.is_some() {
                    items.push(SnapshotItem::Pod(task_pod(k, task, BTreeMap::new(), None)));
                }
                continue;
            };
            items.push(SnapshotItem::Pod(self.placed_object(k, task, node, &before)));
        }
        let mut list: Vec<SnapshotItem> = self.node_objects().into_iter().map(SnapshotItem::Node).collect();
        list.extend(items);
        let metadata = SnapshotListMeta { arrived_pct: arrived as f64 * 100.0 / (self.total_gpus * MILLI) as f64 };
        Ok(SnapshotList { api_version: "v1", items: list, kind: "List", metadata })
    }
}

impl Replay {
    /// The Nodes: HAMi's registration annotation and handshake, allocatable CPU and memory.
    pub fn node_objects(&self) -> Vec<SnapshotNode> {
        self.nodes.iter().map(node_object).collect()
    }

    /// The `k`-th arrival as the Pod placed on `node` (HAMi's allocation annotations for a GPU
    /// pod), given its node's device usage `before` the placement.
    fn placed_object(
        &self,
        k: usize,
        task: &super::Task,
        node: usize,
        before: &[crate::model::DeviceUsage],
    ) -> SnapshotPod {
        let n = &self.nodes[node];
        let mut annotations = BTreeMap::new();
        if task.request.is_some() {
            annotations.insert(codec::VGPU_NODE_KEY.into(), n.name.clone());
            annotations.insert(codec::ALLOCATED_KEY.into(), encode_pod_devices(&[placed_devices(n, before)]));
            annotations.insert(codec::BIND_PHASE_KEY.into(), "success".into());
        }
        task_pod(k, task, annotations, Some(&n.name))
    }

    /// Runs the next pod event and returns it as a live cluster sees it (see [`LiveStep`]);
    /// `None` at the end of the stream.
    pub fn next_live_step(&mut self) -> Result<Option<LiveStep>> {
        let Some(&t) = self.order.get(self.cursor) else { return Ok(None) };
        let k = self.cursor;
        self.cursor += 1;
        let task = self.tasks[t].clone();
        let host_fits = self
            .nodes
            .iter()
            .filter(|n| crate::fit::host_shortfall(&n.gpu, task.cpu, task.memory) == [false; 3])
            .map(|n| n.name.clone())
            .collect();
        let pod = task_pod(k, &task, BTreeMap::new(), None);
        let mut cands = Vec::with_capacity(self.nodes.len());
        let (placed, object) = match self.step(&task, &mut cands)? {
            Some(Placed { node, usage_before, .. }) => {
                let n = &self.nodes[node];
                let gpus = placed_devices(n, &usage_before).into_iter().map(|d| d.uuid).collect();
                (Some((n.name.clone(), gpus)), self.placed_object(k, &task, node, &usage_before))
            }
            None => (None, pod.clone()),
        };
        Ok(Some(LiveStep { pod, host_fits, placed, object, gpu: task.request.is_some() }))
    }

    /// The target workload the replay gives FGD (the trace's typical task types), as
    /// [`crate::Config::fgd_target_workload`] takes it.
    pub fn fgd_target_workload(&self) -> Vec<(i64, i64, u32, String, f64)> {
        self.workload.types.iter().map(|(t, p)| (t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec.clone(), *p)).collect()
    }
}

/// One pod event of a replay as a live cluster sees it: what the extender is asked and what the
/// replay decided.
#[derive(Debug, Clone)]
pub struct LiveStep {
    /// The pod as submitted: no node, no allocation (`Pending`).
    pub pod: SnapshotPod,
    /// The nodes kube-scheduler's `NodeResourcesFit` lets through (CPU, memory, pod count), by
    /// name: what it passes to the extender.
    pub host_fits: Vec<String>,
    /// Where the replay placed it: the node and the GPUs (device ids); `None` when nowhere.
    pub placed: Option<(String, Vec<String>)>,
    /// The pod as the watch shows it afterwards: bound with its allocation, or still pending.
    pub object: SnapshotPod,
    /// Whether it asks for GPUs: only those reach the extender.
    pub gpu: bool,
}

/// The devices whose usage a placement changed, with what it took of each.
fn placed_devices(n: &super::SimNode, before: &[crate::model::DeviceUsage]) -> Vec<ContainerDevice> {
    n.gpu
        .usage
        .iter()
        .zip(before)
        .enumerate()
        .filter(|(_, (a, b))| a.used != b.used)
        .map(|(i, (a, b))| ContainerDevice {
            uuid: n.gpu.devices[i].id.clone(),
            device_type: codec::VENDOR_NVIDIA.to_owned(),
            usedmem: (a.usedmem - b.usedmem) as i32,
            usedcores: (a.usedcores - b.usedcores) as i32,
        })
        .collect()
}

/// A node as the Node object HAMi's device plugin leaves: its registration and handshake
/// annotations, allocatable CPU and memory.
fn node_object(n: &super::SimNode) -> SnapshotNode {
    let host = n.gpu.host.unwrap_or_default();
    let annotations = BTreeMap::from([
        (codec::REGISTER_KEY.to_owned(), encode_node_register(&n.gpu.devices)),
        (codec::NODE_HANDSHAKE_KEY.to_owned(), "Reported 2026-01-01 00:00:00 +0000 UTC".to_owned()),
    ]);
    SnapshotNode {
        api_version: "v1",
        kind: "Node",
        metadata: SnapshotNodeMeta { annotations, name: n.name.clone() },
        status: SnapshotNodeStatus { allocatable: host_resources(host.cpu_milli, host.memory_mib) },
    }
}

fn host_resources(cpu_milli: i64, memory_mib: i64) -> HostResources {
    HostResources { cpu: format!("{cpu_milli}m"), memory: format!("{memory_mib}Mi") }
}

/// A task as the Pod a cluster would hold: `Running` on `node` when placed (with its allocation
/// `annotations`), else `Pending` without a node. Owned by a ReplicaSet, so the planner may move it.
fn task_pod(
    k: usize,
    task: &super::Task,
    mut annotations: BTreeMap<String, String>,
    node: Option<&str>,
) -> SnapshotPod {
    let mut limits = BTreeMap::new();
    if task.request.is_some() {
        limits.insert("nvidia.com/gpu".to_owned(), task.num_gpu.to_string());
        limits.insert("nvidia.com/gpumem".to_owned(), task.milli.to_string());
        if !task.spec.is_empty() {
            annotations.insert(codec::USE_TYPE_KEY.into(), task.spec.replace('|', ","));
        }
    }
    let resources = SnapshotResources { limits, requests: host_resources(task.cpu, task.memory) };
    SnapshotPod {
        api_version: "v1",
        kind: "Pod",
        metadata: task_pod_meta(k, annotations),
        spec: SnapshotPodSpec {
            containers: vec![SnapshotContainer { name: "main", resources }],
            node_name: node.map(str::to_owned),
            scheduler_name: "hami-scheduler",
        },
        status: SnapshotPodStatus { phase: if node.is_some() { "Running" } else { "Pending" } },
    }
}

/// The `k`-th arrival's name, labels and ReplicaSet owner, all numbered by `k`.
fn task_pod_meta(k: usize, annotations: BTreeMap<String, String>) -> SnapshotPodMeta {
    let owner = OwnerReference {
        api_version: "apps/v1",
        controller: true,
        kind: "ReplicaSet",
        name: format!("task-{k:05}"),
        uid: format!("rs-{k:05}"),
    };
    SnapshotPodMeta {
        annotations,
        creation_timestamp: arrival_time(k),
        labels: BTreeMap::from([("app".to_owned(), format!("task-{k:05}"))]),
        name: format!("pod-{k:05}"),
        namespace: "openb",
        owner_references: vec![owner],
        uid: format!("uid-{k:05}"),
    }
}

/// The `k`-th arrival's creation time: one second apart from 2026-01-01T00:00:00Z, so the
/// pending queue (oldest first) is the replay's arrival order.
fn arrival_time(k: usize) -> String {
    const START: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z
    crate::state::reservations::format_rfc3339(START + k as i64)
}

/// Parses both CSVs, replays up to `arrived_pct` % and returns the snapshot `List`.
pub fn snapshot_csv(
    nodes_file: &str,
    nodes_csv: &str,
    pods_file: &str,
    pods_csv: &str,
    options: super::Options,
    arrived_pct: f64,
) -> Result<SnapshotList> {
    let nodes = super::csv::parse_nodes(nodes_file, nodes_csv)?;
    let pods = super::csv::parse_pods(pods_file, pods_csv)?;
    super::Replay::new(&nodes, &pods, options)?.snapshot_at(arrived_pct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_times_are_one_second_apart_and_sort_as_text() {
        assert_eq!(arrival_time(0), "2026-01-01T00:00:00Z");
        assert_eq!(arrival_time(3_661), "2026-01-01T01:01:01Z");
        assert_eq!(arrival_time(86_400 * 59), "2026-03-01T00:00:00Z");
        assert_eq!(arrival_time(86_400 * 365), "2027-01-01T00:00:00Z");
        let times: Vec<String> = (0..200_000).step_by(997).map(arrival_time).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]));
    }
}
