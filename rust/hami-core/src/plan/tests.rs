use super::*;
use crate::config::Config;
use crate::k8s::quantity::{cpu_milli, memory_mib};
use serde_json::json;
use std::collections::{HashMap, HashSet};

/// A node with `gpus` GPUs of 1000 MiB, split count 10; `unhealthy` lists indexes.
pub(super) fn node(name: &str, gpus: u32, unhealthy: &[u32]) -> serde_json::Value {
    let devices: Vec<serde_json::Value> = (0..gpus)
        .map(|i| json!({"id": format!("{name}-g{i}"), "index": i, "count": 10, "devmem": 1000, "devcore": 100, "type": "NVIDIA-T4", "health": !unhealthy.contains(&i)}))
        .collect();
    crate::testkit::nvidia_node(name, &devices)
}

/// A pod of `mem` MiB per GPU on the given GPUs of `node`; `owned` adds a ReplicaSet owner.
pub(super) fn pod(name: &str, node: &str, gpus: &[u32], mem: i64, owned: bool) -> serde_json::Value {
    let alloc: String = gpus.iter().map(|g| format!("{node}-g{g},NVIDIA,{mem},0:")).collect::<String>() + ";";
    running(name, node, &alloc, gpus.len(), mem, owned)
}

/// A running pod bound to `node` with HAMi's allocation annotation `allocated`, asking `gpus` GPUs
/// of `mem` MiB each; `owned` adds a ReplicaSet owner (the planner moves only owned pods).
pub(super) fn running(
    name: &str,
    node: &str,
    allocated: &str,
    gpus: usize,
    mem: i64,
    owned: bool,
) -> serde_json::Value {
    let owners = if owned {
        json!([{"kind": "ReplicaSet", "name": format!("rs-{name}"), "controller": true}])
    } else {
        json!([])
    };
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"), "labels": {"app": name},
        "ownerReferences": owners,
        "annotations": {"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": allocated}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string()}}}]},
        "status": {"phase": "Running"}})
}

fn snap(items: Vec<serde_json::Value>) -> Snapshot {
    let list = json!({"kind": "List", "items": items}).to_string();
    Snapshot::from_objects(&[list.as_bytes()], &Config::default()).unwrap()
}

#[test]
fn drain_frees_a_whole_gpu_and_moves_are_valid() {
    // A whole-GPU pod on c makes whole GPUs part of the workload the fragment is measured against.
    let s = snap(vec![
        node("a", 1, &[]),
        node("b", 1, &[]),
        node("c", 1, &[]),
        pod("p1", "a", &[0], 300, true),
        pod("p2", "b", &[0], 400, true),
        pod("w", "c", &[0], 1000, false),
    ]);
    assert_eq!(s.measures().free_whole_gpus, 0);
    let r = plan(&s, 5, Strategy::Drain);
    assert_eq!(r.moves.len(), 1, "{:?}", r.moves);
    assert_eq!(r.moves[0].pod, "ns/p1", "the GPU with less memory is cheaper to empty");
    assert_eq!(r.moves[0].to, Place { node: "b".into(), gpus: vec!["b-g0".into()], mig: vec![] });
    assert_eq!(r.after.free_whole_gpus, 1);
    assert!(r.after.fragmentation < r.before.fragmentation, "{:?} -> {:?}", r.before, r.after);
    assert_eq!(validate_moves(&s, &r.moves).unwrap(), r.after);
}

#[test]
fn bare_pods_and_opted_out_pods_stay() {
    let mut opted = pod("p2", "b", &[0], 300, true);
    opted["metadata"]["annotations"][SKIP_ANNOTATION] = "true".into();
    let s = snap(vec![node("a", 1, &[]), node("b", 1, &[]), pod("p1", "a", &[0], 300, false), opted]);
    let why: Vec<Option<Immovable>> = s.pods.iter().map(|p| p.blocked.clone()).collect();
    assert_eq!(why, [Some(Immovable::BarePod), Some(Immovable::OptedOut)]);
    assert_eq!(why[1].as_ref().unwrap().to_string(), format!("opted out ({SKIP_ANNOTATION} or {PREFER_NO_EVICTION})"));
    assert!(plan(&s, 10, Strategy::Drain).moves.is_empty());
    assert!(plan(&s, 10, Strategy::Greedy).moves.is_empty());
}

#[test]
fn budget_and_capacity_are_respected() {
    // Three GPUs 600 / 600 / 300 used: 300 fits on neither 600 (1000-600 = 400 ≥ 300: fits once).
    let s = snap(vec![
        node("a", 3, &[]),
        pod("x", "a", &[0], 600, true),
        pod("y", "a", &[1], 600, true),
        pod("z", "a", &[2], 300, true),
        pod("w", "a", &[2], 300, true),
    ]);
    assert!(plan(&s, 0, Strategy::Drain).moves.is_empty());
    let r = plan(&s, 2, Strategy::Drain);
    assert_eq!(r.moves.len(), 2);
    assert_eq!(r.after.free_whole_gpus, 1);
    // z and w go to different GPUs: 400 free each, one 300 pod each.
    let targets: HashSet<&String> = r.moves.iter().map(|m| &m.to.gpus[0]).collect();
    assert_eq!(targets.len(), 2);
    validate_moves(&s, &r.moves).unwrap();
    // With one move only, no GPU can be emptied (it needs two).
    assert_eq!(plan(&s, 1, Strategy::Drain).after.free_whole_gpus, 0);
}

#[test]
fn unhealthy_gpus_are_never_targets() {
    let s = snap(vec![
        node("a", 2, &[1]),
        node("b", 1, &[]),
        pod("p1", "b", &[0], 100, true),
        pod("q", "a", &[1], 100, true),
    ]);
    for strategy in [Strategy::Drain, Strategy::Greedy] {
        let r = plan(&s, 5, strategy);
        assert!(r.moves.iter().all(|m| m.to.gpus != vec!["a-g1".to_string()]), "{:?}", r.moves);
        validate_moves(&s, &r.moves).unwrap();
    }
}

#[test]
fn validate_moves_rejects_a_stale_sequence() {
    let s = snap(vec![
        node("a", 1, &[]),
        node("b", 1, &[]),
        pod("p1", "a", &[0], 700, true),
        pod("p2", "b", &[0], 200, true),
    ]);
    let mv = |p: &str, from: &str, to: &str| Move {
        pod: format!("ns/{p}"),
        from: Place { node: from.into(), gpus: vec![format!("{from}-g0")], mig: vec![] },
        to: Place { node: to.into(), gpus: vec![format!("{to}-g0")], mig: vec![] },
    };
    assert!(validate_moves(&s, &[mv("p2", "b", "a")]).is_ok());
    // p1 (700) cannot join p2 once p2 went... p2 is on a; 700 + 200 on a is fine, but then moving p1 to b is a no-op check:
    let err = validate_moves(&s, &[mv("p2", "b", "a"), mv("p2", "b", "a")]).unwrap_err().to_string();
    assert!(err.contains("move 1"), "{err}");
    let s2 = snap(vec![
        node("a", 1, &[]),
        node("b", 1, &[]),
        pod("p1", "a", &[0], 700, true),
        pod("p2", "b", &[0], 400, true),
    ]);
    let err = validate_moves(&s2, &[mv("p2", "b", "a")]).unwrap_err().to_string();
    assert!(err.contains("does not fit"), "{err}");
}

#[test]
fn target_validation() {
    let s = snap(vec![
        node("a", 2, &[1]),
        node("b", 1, &[]),
        pod("p1", "a", &[0], 900, true),
        pod("p2", "b", &[0], 500, true),
    ]);
    let v = |pod: &str, node: &str, gpus: &[&str]| {
        validate_target(&s, pod, node, &gpus.iter().map(|g| g.to_string()).collect::<Vec<_>>())
    };
    assert!(v("ns/p1", "nope", &["gpu-0"]).unwrap_err().to_string().contains("node nope not found"));
    assert!(v("ns/p1", "a", &["gpu-7"]).unwrap_err().to_string().contains("GPU gpu-7 not found"));
    assert!(v("ns/p1", "a", &["gpu-1"]).unwrap_err().to_string().contains("not healthy"));
    // Its own GPU fits once the old copy is gone.
    assert_eq!(v("ns/p1", "a", &["gpu-0/20"]).unwrap(), vec!["a-g0".to_string()]);
    assert_eq!(v("ns/p1", "a", &["a-g0"]).unwrap(), vec!["a-g0".to_string()]);
    let err = v("ns/p1", "b", &["gpu-0"]).unwrap_err().to_string();
    assert!(err.contains("does not fit") && err.contains("CardInsufficientMemory"), "{err}");
    assert!(v("ns/p2", "a", &["gpu-0", "gpu-0"]).unwrap_err().to_string().contains("twice"));
    // The verdict is typed: the node, GPU and pod are fields, not only text.
    assert_eq!(v("ns/p1", "nope", &["gpu-0"]), Err(Rejection::NodeNotFound { node: "nope".into() }));
    assert_eq!(v("ns/p1", "a", &["gpu-1"]), Err(Rejection::GpuUnhealthy { gpu: "a-g1".into(), node: "a".into() }));
    assert_eq!(v("ns/p1", "a", &[]), Err(Rejection::NoGpus));
}

#[test]
fn targets_name_any_registered_id_whole() {
    // Ids as HAMi's device plugin registers them: the driver's UUID, old-driver MIG ids with `/`,
    // and ids that look like the `gpu-N` index form.
    let ids = ["MIG-GPU-e290caca-2f0c-9582-acab-67a142b61ffa/7/0", "gpu-0", "GPU-node-0-2"];
    let devices: Vec<serde_json::Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"id": id, "index": i + 1, "count": 10, "devmem": 1000, "devcore": 100, "type": "NVIDIA-T4", "health": true}))
        .collect();
    let n = crate::testkit::nvidia_node("m", &devices);
    let s = snap(vec![n]);
    let v = |gpus: &[&str]| validate_target(&s, "ns/new", "m", &gpus.iter().map(|g| g.to_string()).collect::<Vec<_>>());
    assert_eq!(v(&[ids[0]]).unwrap(), vec![ids[0]], "a `/` inside an id is part of it");
    assert_eq!(v(&["gpu-0"]).unwrap(), vec!["gpu-0"], "an id wins over the index form");
    assert_eq!(v(&["gpu-1", "gpu-3/20"]).unwrap(), vec![ids[0], ids[2]], "else gpu-N is the index");
    assert_eq!(v(&["GPU-node-0-2"]).unwrap(), vec![ids[2]]);
    assert!(v(&["MIG-GPU-e290caca-2f0c-9582-acab-67a142b61ffa"]).unwrap_err().to_string().contains("not found"));
    assert!(v(&["gpu-1/x"]).unwrap_err().to_string().contains("not found"));
}

/// Random clusters: every plan replays move by move under the engine's Fit, never loses a
/// free GPU, and the drain planner frees at least as many GPUs as the greedy baseline.
#[test]
fn random_clusters_give_valid_plans() {
    let mut seed: u64 = 7;
    let mut next = |m: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    for round in 0..30 {
        let mut items = Vec::new();
        let nodes = 2 + next(6) as usize;
        for n in 0..nodes {
            items.push(node(&format!("n{n}"), 1 + next(4) as u32, &[]));
        }
        let mut used: HashMap<(usize, u32), i64> = HashMap::new();
        for k in 0..(nodes * 3) {
            let n = next(nodes as u64) as usize;
            let gpus = items[n]["metadata"]["annotations"]["hami.io/node-nvidia-register"]
                .as_str()
                .unwrap()
                .matches("\"id\"")
                .count() as u32;
            let g = next(gpus as u64) as u32;
            let mem = 100 * (1 + next(5) as i64);
            let u = used.entry((n, g)).or_default();
            if *u + mem > 1000 {
                continue;
            }
            *u += mem;
            items.push(pod(&format!("p{k}"), &format!("n{n}"), &[g], mem, next(5) != 0));
        }
        let s = snap(items);
        let drain = plan(&s, 6, Strategy::Drain);
        let greedy = plan(&s, 6, Strategy::Greedy);
        for r in [&drain, &greedy] {
            assert!(r.moves.len() <= 6);
            assert_eq!(validate_moves(&s, &r.moves).unwrap(), r.after, "round {round}");
            assert!(r.after.free_whole_gpus >= r.before.free_whole_gpus, "round {round}");
        }
        assert!(
            drain.after.free_whole_gpus >= greedy.after.free_whole_gpus
                || drain.after.fragmentation <= greedy.after.fragmentation,
            "round {round}"
        );
    }
}

#[test]
fn plan_json_has_the_documented_shape() {
    let list = json!({"kind": "List", "items": [node("a", 1, &[]), node("b", 1, &[]), pod("p1", "a", &[0], 300, true), pod("p2", "b", &[0], 400, true)]}).to_string();
    let out: serde_json::Value =
        serde_json::from_slice(&plan_bytes(&[list.as_bytes()], br#"{"max_moves": 3}"#, &Config::default()).unwrap())
            .unwrap();
    let m = &out["moves"][0];
    assert_eq!(m["pod"], "ns/p1");
    assert_eq!(m["from"], json!({"node": "a", "gpus": ["a-g0"]}));
    assert_eq!(m["to"], json!({"node": "b", "gpus": ["b-g0"]}));
    assert_eq!(out["before"]["free_whole_gpus"], 0);
    assert_eq!(out["after"]["free_whole_gpus"], 1);
    assert!(out["before"]["fragmentation"].is_number() && out["baseline"]["after"]["free_whole_gpus"].is_number());
    // Separate lists (kubectl get nodes / get pods) work as well.
    // As the API server lists them: items without `kind`.
    let bare = |mut n: serde_json::Value| {
        n.as_object_mut().unwrap().remove("kind");
        n
    };
    let nodes = json!({"kind": "NodeList", "items": [bare(node("a", 1, &[])), bare(node("b", 1, &[]))]}).to_string();
    let mut p1 = pod("p1", "a", &[0], 300, true);
    p1.as_object_mut().unwrap().remove("kind");
    let pods = json!({"kind": "PodList", "items": [p1, pod("p2", "b", &[0], 400, true)]}).to_string();
    let out: serde_json::Value = serde_json::from_slice(
        &plan_bytes(&[nodes.as_bytes(), pods.as_bytes()], br#"{"max_moves": 2}"#, &Config::default()).unwrap(),
    )
    .unwrap();
    assert_eq!(out["pods"], 2);
    assert_eq!(out["nodes"], 2);
    assert_eq!(out["moves"].as_array().unwrap().len(), 1);
    // The default budget is 5 % of the GPU pods: none for two pods.
    let out: serde_json::Value =
        serde_json::from_slice(&plan_bytes(&[nodes.as_bytes(), pods.as_bytes()], b"", &Config::default()).unwrap())
            .unwrap();
    assert_eq!(out["max_moves"], 0);
}

#[test]
fn host_cpu_is_checked_where_allocatable_is_known() {
    let with_cpu = |mut n: serde_json::Value, cpu: &str| {
        n["status"] = json!({"allocatable": {"cpu": cpu, "memory": "8Gi"}});
        n
    };
    let with_req = |mut p: serde_json::Value, cpu: &str| {
        p["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": cpu, "memory": "1Gi"});
        p
    };
    let items = |cpu_a: &str| {
        vec![
            with_cpu(node("a", 1, &[]), cpu_a),
            with_cpu(node("b", 1, &[]), "2"),
            with_req(pod("p1", "a", &[0], 300, true), "1000m"),
            with_req(pod("p2", "b", &[0], 400, true), "2"),
            pod("w", "c", &[0], 1000, false),
            node("c", 1, &[]),
        ]
    };
    let tight = snap(items("2"));
    assert_eq!(tight.nodes[tight.index["a"]].host.unwrap().cpu_requested, 1000);
    assert!(plan(&tight, 5, Strategy::Drain).moves.is_empty(), "neither node has the CPU for the other's pod");
    let err = validate_target(&tight, "ns/p1", "b", &["gpu-0".to_string()]).unwrap_err().to_string();
    assert!(err.contains("Insufficient cpu"), "{err}");
    let roomy = snap(items("3500m"));
    let r = plan(&roomy, 5, Strategy::Drain);
    assert_eq!(r.moves.len(), 1);
    assert_eq!(r.moves[0].pod, "ns/p2");
    validate_moves(&roomy, &r.moves).unwrap();
    assert_eq!(cpu_milli("1.5"), Some(1500));
    assert_eq!(memory_mib("1Gi"), Some(1024));
}

/// openb `default` replayed with `spread` to 90 % arrived: every planned move replays under the
/// engine's Fit and the nodes' CPU (skips without the shared data).
#[test]
fn openb_spread_plan_replays_move_by_move() {
    let dir = openb_dir();
    let (Ok(nodes), Ok(pods)) = (
        std::fs::read_to_string(dir.join("openb_node_list_gpu_node.csv")),
        std::fs::read_to_string(dir.join("openb_pod_list_default.csv")),
    ) else {
        eprintln!("openb data not found at {}: skipped", dir.display());
        return;
    };
    let options = crate::replay::Options { policy: crate::policy::NodePolicy::Spread, ..Default::default() };
    let list = crate::replay::snapshot::snapshot_csv("nodes.csv", &nodes, "pods.csv", &pods, options, 90.0).unwrap();
    let list = serde_json::to_value(list).unwrap();
    let s = Snapshot::from_objects(&[list.to_string().as_bytes()], &Config::default()).unwrap();
    assert_eq!(s.nodes.len(), 1213);
    assert!(s.nodes.iter().all(|n| n.host.is_some()));
    let budget = s.pods.len() / 20;
    for strategy in [Strategy::Drain, Strategy::Greedy] {
        let r = plan(&s, budget, strategy);
        assert!(!r.moves.is_empty() && r.moves.len() <= budget);
        assert!(r.after.free_whole_gpus > r.before.free_whole_gpus && r.after.fragmentation < r.before.fragmentation);
        assert_eq!(validate_moves(&s, &r.moves).unwrap(), r.after);
    }
}

/// The "found when tried" case: every GPU carries one small controller-owned pod and no
/// GPU is free. Against the cluster's own small-pod workload FGD's fragment is 0, yet six moves
/// free six whole GPUs: the default objective (free-gpus) must find them.
#[test]
fn every_gpu_with_one_small_pod_frees_six_whole_gpus() {
    let mut items = Vec::new();
    for n in 0..4 {
        items.push(node(&format!("n{n}"), 4, &[]));
        for g in 0..4 {
            items.push(pod(&format!("p{n}{g}"), &format!("n{n}"), &[g], 100, true));
        }
    }
    let s = snap(items);
    assert_eq!(s.measures().free_whole_gpus, 0);
    let r = plan(&s, 6, Strategy::Drain);
    assert_eq!(r.moves.len(), 6, "{:?}", r.moves);
    assert_eq!(r.after.free_whole_gpus, 6);
    assert_eq!(validate_moves(&s, &r.moves).unwrap(), r.after);
}

/// A pending pod asking for `gpus` GPUs of `mem` MiB each (no allocation, no node).
fn pending(name: &str, gpus: u32, mem: i64) -> PendingPod {
    let p = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus.to_string(), "nvidia.com/gpumem": mem.to_string()}}}]}});
    PendingPod::from_value(&p, &Config::default()).unwrap()
}

/// Four nodes of four GPUs, one 100 MiB pod per GPU (no GPU free), `owned` or bare.
fn one_small_pod_per_gpu(owned: bool) -> Snapshot {
    let mut items = Vec::new();
    for n in 0..4 {
        items.push(node(&format!("n{n}"), 4, &[]));
        for g in 0..4 {
            items.push(pod(&format!("p{n}{g}"), &format!("n{n}"), &[g], 100 + 10 * (n * 4 + g) as i64, owned));
        }
    }
    snap(items)
}

#[test]
fn free_gpus_objective_stops_when_no_more_gpus_can_be_freed() {
    // Two GPUs of 600 and 300: one move frees a GPU; no further move frees another, so the
    // free-gpus objective spends no more of the budget (ties: fewer moves), the frag one may.
    let s = snap(vec![node("a", 2, &[]), pod("x", "a", &[0], 600, true), pod("y", "a", &[1], 300, true)]);
    let r = plan(&s, 5, Strategy::FreeGpus);
    assert_eq!((r.moves.len(), r.after.free_whole_gpus), (1, 1), "{:?}", r.moves);
    assert_eq!(r.moves[0].pod, "ns/y");
}

#[test]
fn for_pod_frees_one_gpu_with_the_fewest_moves() {
    let s = one_small_pod_per_gpu(true);
    let r = unblock(&s, &pending("big", 1, 1000), 10);
    assert!(r.unblocked, "{}: {:?}", r.message, r.reasons);
    assert_eq!(r.moves.len(), 1, "one pod holds each GPU: one move clears one");
    let target = r.target.clone().unwrap();
    assert_eq!(target.gpus.len(), 1);
    assert_eq!(r.moves[0].from.gpus, target.gpus, "the moved pod leaves the reserved GPU");
    assert_ne!(r.moves[0].to.gpus, target.gpus);
    // The moves replay under the Fit, and afterwards the pending pod fits exactly there.
    validate_moves(&s, &r.moves).unwrap();
    assert_eq!(r.after.free_whole_gpus, 1);
    // Two GPUs on one node: two moves.
    let r2 = unblock(&s, &pending("pair", 2, 1000), 10);
    assert!(r2.unblocked, "{}", r2.message);
    assert_eq!(r2.moves.len(), 2);
    let t2 = r2.target.unwrap();
    assert_eq!(t2.gpus.len(), 2);
    assert!(r2.moves.iter().all(|m| !t2.gpus.contains(&m.to.gpus[0])), "nothing moves onto the reserved GPUs");
    validate_moves(&s, &r2.moves).unwrap();
}

#[test]
fn for_pod_that_fits_needs_no_moves() {
    let s = one_small_pod_per_gpu(true);
    let r = unblock(&s, &pending("small", 1, 500), 10);
    assert!(r.unblocked && r.moves.is_empty(), "{}", r.message);
    assert!(r.message.contains("fits now"));
    assert!(r.to_plan(&s).reservation.is_none(), "nothing freed, nothing to hold");
}

#[test]
fn for_pod_that_cannot_be_unblocked_says_why_per_node() {
    let bare = one_small_pod_per_gpu(false);
    let r = unblock(&bare, &pending("big", 1, 1000), 10);
    assert!(!r.unblocked && r.moves.is_empty());
    assert_eq!(r.message, "pod ns/big cannot be unblocked within 10 moves");
    assert_eq!(r.reasons.len(), 4, "{:?}", r.reasons);
    assert!(r.reasons["n0"].contains("bare pod"), "{}", r.reasons["n0"]);
    // Budget too small for four GPUs on one node.
    let owned = one_small_pod_per_gpu(true);
    let r = unblock(&owned, &pending("quad", 4, 1000), 3);
    assert!(!r.unblocked);
    assert_eq!(r.reasons["n1"], "needs 4 moves (budget 3)");
    // More GPUs than any node has.
    let r = unblock(&owned, &pending("wide", 5, 100), 10);
    assert!(r.reasons["n0"].contains("the pod needs 5"), "{}", r.reasons["n0"]);
    assert!(
        r.message.starts_with("pod ns/wide can never fit, whatever moves: it asks 5 GPUs on one node and no node"),
        "{}",
        r.message
    );
    // With the budget, four moves clear a whole node for it; the pods go elsewhere.
    let r = unblock(&owned, &pending("quad", 4, 1000), 4);
    assert!(r.unblocked, "{}: {:?}", r.message, r.reasons);
    assert_eq!(r.moves.len(), 4);
    validate_moves(&owned, &r.moves).unwrap();
}

#[test]
fn plan_bytes_objectives_workloads_and_for() {
    let mut items = Vec::new();
    for n in 0..4 {
        items.push(node(&format!("n{n}"), 4, &[]));
        for g in 0..4 {
            items.push(pod(&format!("p{n}{g}"), &format!("n{n}"), &[g], 100, true));
        }
    }
    let list = json!({"kind": "List", "items": items}).to_string();
    let run = |opts: serde_json::Value| -> serde_json::Value {
        serde_json::from_slice(
            &plan_bytes(&[list.as_bytes()], opts.to_string().as_bytes(), &Config::default()).unwrap(),
        )
        .unwrap()
    };
    let free = run(json!({"max_moves": 6}));
    assert_eq!(free["objective"], "free-gpus");
    assert_eq!(free["after"]["free_whole_gpus"], 6);
    // Against its own (small-pod) workload the fragment is 0 before and after; against whole GPUs it is not.
    let typical = run(json!({"max_moves": 6, "objective": "frag"}));
    assert_eq!(typical["before"]["fragmentation"], 0.0);
    let whole = run(json!({"max_moves": 6, "objective": "frag", "workload": "whole-gpu"}));
    assert_eq!(whole["before"]["fragmentation"], 14.4, "16 GPUs with 0.9 idle each, none usable by a whole-GPU task");
    assert!(whole["after"]["fragmentation"].as_f64().unwrap() < whole["before"]["fragmentation"].as_f64().unwrap());
    let listed = run(json!({"max_moves": 6, "objective": "frag", "workload": [{"gpu": 0.95}]}));
    assert_eq!(listed["before"]["fragmentation"], whole["before"]["fragmentation"]);
    let pod = json!({"metadata": {"name": "big", "namespace": "ns", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}}}]}});
    let f = run(json!({"for_pod": pod}));
    assert_eq!(f["objective"], "for");
    assert_eq!(f["unblocked"], true);
    assert_eq!(f["max_moves"], FOR_MIN_DEFAULT_MOVES);
    assert_eq!(f["reservation"]["uid"], "u1");
    assert_eq!(f["reservation"]["gpus"], f["target"]["gpus"]);
    // Bad options name the field.
    let err = |opts: serde_json::Value| {
        plan_bytes(&[list.as_bytes()], opts.to_string().as_bytes(), &Config::default()).unwrap_err().to_string()
    };
    assert!(err(json!({"objective": "speed"})).contains("objective"));
    assert!(err(json!({"workload": "tiny"})).contains("workload"));
    assert!(err(json!({"workload": [{"gpu_milli": 2000}]})).contains("workload[0].gpu_milli"));
    assert!(err(json!({"for_pod": {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}}))
        .contains("request no vGPU"));
}

/// The openb traces: `$HAMI_FAST_SHARED/data/openb`, else `shared/` beside the repository.
fn openb_dir() -> std::path::PathBuf {
    match std::env::var_os("HAMI_FAST_SHARED") {
        Some(shared) => std::path::PathBuf::from(shared).join("data/openb"),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/openb"),
    }
}

/// openb replayed with spread to 100 %: the failed GPU pods are Pending in the snapshot; `--for`
/// unblocks some of them, every move replays under the Fit, and the queue (auto mode's objective)
/// places pods with moves that replay in sequence.
#[test]
fn openb_pending_pods_are_unblocked_with_valid_moves() {
    let dir = openb_dir();
    let (Ok(nodes), Ok(pods)) = (
        std::fs::read_to_string(dir.join("openb_node_list_gpu_node.csv")),
        std::fs::read_to_string(dir.join("openb_pod_list_default.csv")),
    ) else {
        eprintln!("openb data not found at {}: skipped", dir.display());
        return;
    };
    let options = crate::replay::Options { policy: crate::policy::NodePolicy::Spread, ..Default::default() };
    let list = crate::replay::snapshot::snapshot_csv("nodes.csv", &nodes, "pods.csv", &pods, options, 100.0).unwrap();
    let list = serde_json::to_value(list).unwrap();
    let s = Snapshot::from_objects(&[list.to_string().as_bytes()], &Config::default()).unwrap();
    let listed = list["items"].as_array().unwrap().iter().filter(|p| p["status"]["phase"] == "Pending").count();
    assert!(s.pending.len() > 100 && s.pending.len() == listed, "{} pending of {listed}", s.pending.len());
    let mut unblocked = 0;
    for pp in s.pending.iter().step_by(150) {
        let r = unblock(&s, pp, 30);
        if r.unblocked {
            unblocked += 1;
            validate_moves(&s, &r.moves).unwrap();
        } else {
            assert_eq!(r.reasons.len(), s.nodes.len(), "a reason for every node");
        }
    }
    assert!(unblocked > 0);
    let budget = s.pods.len() / 20;
    let q = unblock_queue(&s, &s.pending, budget, 8);
    assert!(q.unblocked_by_moves > 0 && q.moves.len() <= budget, "{} {}", q.unblocked_by_moves, q.moves.len());
    assert!(q.fit_without_moves * 100 <= s.pending.len(), "the replay already tried each of them");
    validate_moves(&s, &q.moves).expect("the queue's moves replay (pods placed in between only take free room)");
}

#[test]
fn queue_places_each_pod_before_planning_the_next() {
    let s = one_small_pod_per_gpu(true);
    let queue = vec![pending("a", 1, 1000), pending("b", 1, 1000), pending("c", 2, 1000), pending("d", 1, 500)];
    let q = unblock_queue(&s, &queue, 3, 10);
    // a and b take one move each; c needs two more than the budget leaves; d fits as it is.
    assert_eq!((q.unblocked_by_moves, q.fit_without_moves, q.moves.len()), (2, 1, 2), "{:?}", q.placed);
    let targets: Vec<&Place> = q.placed.iter().filter_map(|r| r.target.as_ref()).collect();
    assert_ne!(targets[0].gpus, targets[1].gpus, "b does not get the GPU freed for a");
    assert_eq!(q.after_moves.free_whole_gpus, 2);
    validate_moves(&s, &q.moves).unwrap();
}

/// A pending pod of `mem` MiB on one GPU; `hold` (`node/uuid,...`) is its reservation, far in the future.
fn pending_pod(name: &str, mem: i64, hold: Option<&str>) -> serde_json::Value {
    let mut p = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"), "annotations": {}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem.to_string()}}}]},
        "status": {"phase": "Pending"}});
    if let Some(h) = hold {
        p["metadata"]["annotations"] =
            json!({"hami-fast.io/reservation": h, "hami-fast.io/reservation-expires": "2999-01-01T00:00:00Z"});
    }
    p
}

#[test]
fn held_gpus_take_no_moved_pod_and_are_free_for_their_owner() {
    // a-g0 holds p (600), a-g1 is empty but held for `owner`: p cannot move there to free a-g0.
    let items = vec![
        node("a", 2, &[]),
        pod("p", "a", &[0], 600, true),
        pending_pod("owner", 1000, Some("a/a-g1")),
        pending_pod("big", 1000, None),
    ];
    let s = snap(items.clone());
    assert_eq!(s.holds.len(), 1);
    let r = plan(&s, 5, Strategy::Drain);
    assert!(r.moves.is_empty(), "{:?}", r.moves);
    let big = PendingPod::from_value(&items[3], &Config::default()).unwrap();
    let u = unblock(&s, &big, 5);
    assert!(!u.unblocked, "{}", u.message);
    assert_eq!(u.reasons["a"], "ns/p has nowhere else to go", "a-g1 is held: p cannot move there");
    let owner = PendingPod::from_value(&items[2], &Config::default()).unwrap();
    let u = unblock(&s, &owner, 5);
    assert!(u.unblocked && u.moves.is_empty(), "{}", u.message);
    assert_eq!(u.target.unwrap().gpus, vec!["a-g1".to_owned()]);
    let err = validate_target(&s, "ns/p", "a", &["gpu-1".into()]).unwrap_err().to_string();
    assert!(err.contains("held for pending pod ns/owner"), "{err}");
    // A lapsed hold is dropped when the snapshot is read.
    let mut lapsed = items.clone();
    lapsed[2]["metadata"]["annotations"]["hami-fast.io/reservation-expires"] = "2001-01-01T00:00:00Z".into();
    let s = snap(lapsed);
    assert!(s.holds.is_empty());
    assert!(unblock(&s, &big, 5).unblocked);
}

#[test]
fn only_opted_in_pods_move_when_a_list_is_given() {
    let items = vec![
        node("a", 2, &[]),
        pod("p", "a", &[0], 600, true),
        pod("q", "a", &[1], 300, true),
        pending_pod("big", 1000, None),
    ];
    let list = json!({"kind": "List", "items": items}).to_string();
    let run = |movable: serde_json::Value| -> serde_json::Value {
        let big = &items[3];
        let opts = json!({"for_pod": big, "max_moves": 3, "movable": movable});
        serde_json::from_slice(
            &plan_bytes(&[list.as_bytes()], opts.to_string().as_bytes(), &Config::default()).unwrap(),
        )
        .unwrap()
    };
    let any = run(serde_json::Value::Null);
    assert_eq!(any["unblocked"], true);
    for only in ["ns/p", "ns/q"] {
        let r = run(json!([only]));
        assert_eq!(r["unblocked"], true);
        assert_eq!(r["moves"].as_array().unwrap().len(), 1);
        assert_eq!(r["moves"][0]["pod"], only);
    }
    assert_eq!(run(json!([]))["unblocked"], false);
}

#[test]
fn an_opt_in_selects_movable_pods_by_label_or_namespace() {
    let items = vec![
        node("a", 2, &[]),
        pod("p", "a", &[0], 600, true),
        pod("q", "a", &[1], 300, true),
        pending_pod("big", 1000, None),
    ];
    let list = json!({"kind": "List", "items": items}).to_string();
    let run = |opt_in: serde_json::Value| {
        let opts = json!({"for_pod": &items[3], "max_moves": 3, "opt_in": opt_in});
        plan_bytes(&[list.as_bytes()], opts.to_string().as_bytes(), &Config::default())
            .map(|out| serde_json::from_slice::<serde_json::Value>(&out).unwrap())
    };
    for (selector, moved) in [("app=q", "ns/q"), ("app in (p, x)", "ns/p"), ("app,app!=q", "ns/p")] {
        let r = run(json!({"selector": selector})).unwrap();
        assert_eq!(r["unblocked"], true, "{selector}");
        assert_eq!(r["moves"][0]["pod"], moved, "{selector}");
    }
    assert_eq!(run(json!({"selector": "app=none"})).unwrap()["unblocked"], false);
    assert_eq!(run(json!({"namespaces": ["other"]})).unwrap()["unblocked"], false);
    assert_eq!(run(json!({"selector": "app=none", "namespaces": ["ns"]})).unwrap()["unblocked"], true);
    let r = run(json!({"namespaces": ["ns"], "except": ["ns/q"]})).unwrap();
    assert_eq!(r["moves"][0]["pod"], "ns/p", "q is moving already");
    let err = run(json!({"selector": "app in x"})).unwrap_err();
    assert_eq!(err.field, "opt_in.selector", "{err}");
}

#[test]
fn pending_queue_is_oldest_first() {
    let waiting = |name: &str, created: Option<&str>| {
        let mut p = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "500"}}}]},
            "status": {"phase": "Pending"}});
        if let Some(t) = created {
            p["metadata"]["creationTimestamp"] = t.into();
        }
        p
    };
    let s = snap(vec![
        node("a", 1, &[]),
        waiting("a-new", Some("2026-01-02T00:00:00Z")),
        waiting("z-old", Some("2026-01-01T00:00:00Z")),
        waiting("b-undated", None),
        waiting("c-new", Some("2026-01-02T00:00:00Z")),
    ]);
    let order: Vec<&str> = s.pending.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(order, ["ns/z-old", "ns/a-new", "ns/c-new", "ns/b-undated"]);
}
