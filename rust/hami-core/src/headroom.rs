//! What would have to change for a pod to fit: per container, the request against the largest free
//! resources of any single GPU and the most GPUs with room on one node (`kubectl hami why`).
//!
//! These are hints next to the verdicts of `explain`, which stay the authority: type, NUMA, quota
//! and topology filters are not applied here.

use crate::k8s::Pod;
use crate::model::{GpuNode, CORDONED, HEALTHY};
use crate::mutate::apply_defaults;
use crate::request::{ContainerRequest, PodRequest, PERCENT_UNSET};
use crate::state::{ClusterState, OwnFootprint};

pub use crate::wire::explain::{ContainerHeadroom, FreeOn, GpusOn, Headroom};

/// Free memory, cores and slots of each usable (registered, healthy, uncordoned) GPU of a node.
fn usable_gpus(node: &GpuNode) -> impl Iterator<Item = (&str, i64, i64, i64, i64)> + '_ {
    let registered = node.is_registered();
    node.devices.iter().zip(&node.hot).zip(&node.usage).filter_map(move |((d, hot), u)| {
        let usable = registered && hot.has(HEALTHY) && !hot.has(CORDONED);
        usable.then(|| {
            let devmem = i64::from(hot.devmem);
            (
                d.id.as_str(),
                devmem,
                devmem - u.usedmem,
                i64::from(hot.devcore) - u.usedcores,
                i64::from(hot.count) - u.used,
            )
        })
    })
}

/// The registered GPU with the most memory, healthy or not (`free`: its whole memory): what no
/// freeing of memory can exceed. Ties keep the first in `nodes`' order.
pub fn largest_gpu<'a>(nodes: impl IntoIterator<Item = &'a GpuNode>) -> Option<FreeOn> {
    let mut best = None;
    for node in nodes.into_iter().filter(|n| n.is_registered()) {
        for (d, hot) in node.devices.iter().zip(&node.hot) {
            larger(&mut best, &node.name, &d.id, i64::from(hot.devmem));
        }
    }
    best
}

/// The registered node with the most GPUs, healthy or not. Ties keep the first.
fn most_gpus<'a>(nodes: impl IntoIterator<Item = &'a GpuNode>) -> Option<GpusOn> {
    let mut best: Option<GpusOn> = None;
    for node in nodes.into_iter().filter(|n| n.is_registered()) {
        let count = node.devices.len() as i64;
        if count > 0 && best.as_ref().is_none_or(|b| count > b.count) {
            best = Some(GpusOn { node: node.name.clone(), count });
        }
    }
    best
}

/// Why `request` can never fit on `nodes`, however much is moved or freed: a container asks more
/// memory on one GPU than any GPU has, or (no MIG GPU splitting a card) more GPUs on one node
/// than any node has.
pub fn never_fits<'a>(nodes: impl IntoIterator<Item = &'a GpuNode> + Clone, request: &PodRequest) -> Option<String> {
    let largest = largest_gpu(nodes.clone());
    let most = most_gpus(nodes.clone());
    let mig = nodes.into_iter().any(|n| n.has_mig);
    request.slots.iter().flatten().find_map(|r| {
        if r.memreq > largest.as_ref().map_or(0, |g| g.free) {
            return Some(match &largest {
                Some(g) => format!(
                    "it asks {} MiB on one GPU and no GPU in the cluster is that large: the largest has {} MiB ({}/{})",
                    r.memreq, g.free, g.node, g.gpu
                ),
                None => "no node in the cluster has a registered GPU".to_owned(),
            });
        }
        let count = most.as_ref().map_or(0, |m| m.count);
        (!mig && r.nums > count).then(|| match &most {
            Some(m) => format!(
                "it asks {} GPUs on one node and no node in the cluster has that many: the most is {} on {}",
                r.nums, m.count, m.node
            ),
            None => "no node in the cluster has a registered GPU".to_owned(),
        })
    })
}

fn larger(best: &mut Option<FreeOn>, node: &str, gpu: &str, free: i64) {
    if best.as_ref().is_none_or(|b| free > b.free) {
        *best = Some(FreeOn { node: node.to_owned(), gpu: gpu.to_owned(), free });
    }
}

fn container_headroom(
    cluster: &ClusterState,
    names: &[&String],
    name: &str,
    init: bool,
    r: &ContainerRequest,
) -> ContainerHeadroom {
    let (mut memory, mut cores, mut most, mut biggest_node) = (None, None, None::<GpusOn>, None::<GpusOn>);
    let (mut any_memory, mut any_cores, mut any_slot) = (false, false, false);
    for node_name in names {
        let Some(node) = cluster.nodes.get(node_name) else { continue };
        let (mut with_room, mut usable) = (0, 0);
        for (gpu, devmem, free_mem, free_cores, free_slots) in usable_gpus(node) {
            larger(&mut memory, node_name, gpu, free_mem);
            larger(&mut cores, node_name, gpu, free_cores);
            let (mem_ok, cores_ok, slot_ok) =
                (free_mem >= r.resolved_memory(devmem), free_cores >= r.clamped_cores(), free_slots > 0);
            any_memory |= mem_ok;
            any_cores |= cores_ok;
            any_slot |= slot_ok;
            with_room += i64::from(mem_ok && cores_ok && slot_ok);
            usable += 1;
        }
        if usable > 0 && biggest_node.as_ref().is_none_or(|m| usable > m.count) {
            biggest_node = Some(GpusOn { node: (*node_name).clone(), count: usable });
        }
        if with_room > 0 && most.as_ref().is_none_or(|m| with_room > m.count) {
            most = Some(GpusOn { node: (*node_name).clone(), count: with_room });
        }
    }
    let enough_gpus = most.as_ref().is_some_and(|m| m.count >= r.nums);
    let largest = largest_gpu(names.iter().filter_map(|n| cluster.nodes.get(n)));
    let too_large = r.memreq > 0 && largest.as_ref().is_none_or(|g| g.free < r.memreq);
    // A MIG GPU can give one container several instances: no node is too small then.
    let mig = names.iter().any(|n| cluster.nodes.get(n).is_some_and(|n| n.has_mig));
    let too_many = !mig && biggest_node.as_ref().is_none_or(|m| m.count < r.nums);
    let blocking = [
        (if too_large { "capacity" } else { "memory" }, any_memory),
        ("cores", any_cores),
        ("slots", any_slot),
        (if too_many { "node_size" } else { "gpus" }, enough_gpus),
    ]
    .into_iter()
    .filter_map(|(what, ok)| (!ok).then_some(what))
    .collect();
    ContainerHeadroom {
        container: name.to_owned(),
        init,
        nums: r.nums,
        memory_mib: (r.memreq > 0).then_some(r.memreq),
        memory_percentage: (r.memreq <= 0 && r.mem_percentage != PERCENT_UNSET).then_some(r.mem_percentage),
        cores: r.clamped_cores(),
        largest_free_memory: memory,
        largest_free_cores: cores,
        most_gpus_with_room: most,
        largest_gpu: largest,
        most_gpus_on_a_node: biggest_node,
        blocking,
    }
}

impl ClusterState {
    /// [`Headroom`] of a pod as a user submits it (webhook defaults applied first). A pod
    /// already placed is measured with its own allocation set aside, as `explain` does.
    pub fn headroom(&mut self, pod_bytes: &[u8]) -> crate::error::Result<Headroom> {
        let mut pod: Pod = serde_json::from_slice(pod_bytes).map_err(|e| crate::error::Error::decode("Pod", e))?;
        let neuron_cores = crate::vendor::neuron::cluster_cores(&pod, &self.backends, self.nodes.values());
        apply_defaults(&mut pod, &self.config, &self.backends, crate::vendor::neuron::split_size(neuron_cores))?;
        if pod.metadata.namespace.is_empty() {
            pod.metadata.namespace = "default".into();
        }
        let request = PodRequest::from_pod(&pod, &self.config);
        let key = pod.reservation_key();
        Ok(self.without_pod(&key, OwnFootprint::Restore, |cluster| {
            let mut names: Vec<&String> = cluster.nodes.names().collect();
            names.sort();
            let containers = pod.spec.init_containers.iter().chain(&pod.spec.containers);
            let rows = containers
                .zip(&request.slots)
                .enumerate()
                .filter_map(|(i, (c, slot))| {
                    slot.as_ref().map(|r| container_headroom(cluster, &names, &c.name, request.is_init(i), r))
                })
                .collect();
            let gpus = cluster.nodes.values().map(|n| usable_gpus(n).count()).sum();
            Headroom { pod: pod.key().to_string(), nodes: names.len(), gpus, containers: rows }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn node(name: &str, free: &[(i64, i64)]) -> Value {
        let devices: Vec<Value> = free
            .iter()
            .enumerate()
            .map(|(i, _)| {
                json!({"id": format!("{name}-gpu{i}"), "index": i, "count": 10, "devmem": 16000, "devcore": 100,
                       "type": "NVIDIA-T4", "mode": "hami-core", "health": true})
            })
            .collect();
        crate::testkit::nvidia_node(name, &devices)
    }

    fn resident(name: &str, node: &str, gpu: &str, mem: i64, cores: i64) -> Value {
        json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name, "annotations": {
            "hami.io/vgpu-node": node,
            "hami.io/vgpu-devices-allocated": format!("{gpu},NVIDIA,{mem},{cores}:;")}},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]}, "status": {"phase": "Running"}})
    }

    fn pod(limits: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}}))
        .unwrap()
    }

    fn cluster() -> ClusterState {
        let mut c = ClusterState::default();
        for obj in [
            node("node-1", &[(0, 0), (0, 0)]),
            node("node-2", &[(0, 0)]),
            resident("a", "node-1", "node-1-gpu0", 12000, 50),
            resident("b", "node-1", "node-1-gpu1", 14000, 10),
            resident("c", "node-2", "node-2-gpu0", 8000, 90),
        ] {
            c.apply(&serde_json::to_vec(&obj).unwrap()).unwrap();
        }
        c
    }

    #[test]
    fn memory_shortfall_names_the_largest_free_gpu() {
        let out: Value = serde_json::to_value(
            cluster()
                .headroom(&pod(json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 12000, "nvidia.com/gpucores": 5})))
                .unwrap(),
        )
        .unwrap();
        let c = &out["containers"][0];
        assert_eq!(c["memory_mib"], 12000);
        assert_eq!(c["largest_free_memory"], json!({"node": "node-2", "gpu": "node-2-gpu0", "free": 8000}));
        assert_eq!(c["largest_free_cores"], json!({"node": "node-1", "gpu": "node-1-gpu1", "free": 90}));
        assert_eq!(c["blocking"], json!(["memory", "gpus"]));
        assert_eq!(out["gpus"], 3);
    }

    #[test]
    fn gpu_count_shortfall_reports_the_most_on_one_node() {
        let out: Value = serde_json::to_value(
            cluster()
                .headroom(&pod(json!({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1000, "nvidia.com/gpucores": 20})))
                .unwrap(),
        )
        .unwrap();
        let c = &out["containers"][0];
        assert_eq!(c["most_gpus_with_room"], json!({"node": "node-1", "count": 2}));
        assert_eq!(c["blocking"], json!([]));
        let out: Value = serde_json::to_value(
            cluster()
                .headroom(&pod(json!({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 20})))
                .unwrap(),
        )
        .unwrap();
        let c = &out["containers"][0];
        assert_eq!(
            c["most_gpus_with_room"],
            json!({"node": "node-1", "count": 1}),
            "gpu1 has 2000 free, node-2 10 cores"
        );
        assert_eq!(c["blocking"], json!(["gpus"]));
    }

    #[test]
    fn a_pod_larger_than_any_gpu_or_node_says_so() {
        let out: Value = serde_json::to_value(
            cluster().headroom(&pod(json!({"nvidia.com/gpu": 3, "nvidia.com/gpumem": 20000}))).unwrap(),
        )
        .unwrap();
        let c = &out["containers"][0];
        assert_eq!(c["largest_gpu"], json!({"node": "node-1", "gpu": "node-1-gpu0", "free": 16000}));
        assert_eq!(c["most_gpus_on_a_node"], json!({"node": "node-1", "count": 2}));
        assert_eq!(c["blocking"], json!(["capacity", "node_size"]));
        let out: Value = serde_json::to_value(
            cluster().headroom(&pod(json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 16000}))).unwrap(),
        )
        .unwrap();
        assert_eq!(out["containers"][0]["blocking"], json!(["memory", "gpus"]), "as large as a GPU: freeing helps");
    }

    #[test]
    fn never_fits_names_the_largest_gpu_and_node() {
        let c = cluster();
        let request = |limits| PodRequest::from_pod(&serde_json::from_slice(&pod(limits)).unwrap(), &c.config);
        let mut nodes: Vec<&GpuNode> = c.nodes.values().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let big = request(json!({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 200000}));
        assert_eq!(
            never_fits(nodes.iter().copied(), &big).unwrap(),
            "it asks 200000 MiB on one GPU and no GPU in the cluster is that large: the largest has 16000 MiB (node-1/node-1-gpu0)"
        );
        let many = request(json!({"nvidia.com/gpu": 3, "nvidia.com/gpumem": 1000}));
        assert!(never_fits(nodes.iter().copied(), &many).unwrap().ends_with("the most is 2 on node-1"));
        let fits_later = request(json!({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 16000}));
        assert_eq!(never_fits(nodes.iter().copied(), &fits_later), None);
    }

    #[test]
    fn bad_pod_is_an_error_not_a_panic() {
        let err = cluster().headroom(b"{not json").unwrap_err();
        assert_eq!((err.kind, err.object.as_str()), (crate::ErrorKind::Decode, "Pod"));
    }
}
