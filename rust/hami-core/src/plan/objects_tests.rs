//! The planner's objects fed as a reflector feeds them give the snapshot a LIST gives.

use super::tests::{node, pod};
use super::*;
use crate::config::Config;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::Arc;

const NOW: i64 = 1_800_000_000;

fn page(kind: &str, items: &[Value]) -> Vec<u8> {
    json!({"kind": kind, "metadata": {"resourceVersion": "7"}, "items": items}).to_string().into_bytes()
}

fn event(kind: &str, object: &Value) -> Vec<u8> {
    json!({"type": kind, "object": object}).to_string().into_bytes()
}

fn with_host(mut node: Value, cpu: &str, memory: &str) -> Value {
    node["status"] = json!({"allocatable": {"cpu": cpu, "memory": memory}});
    node
}

fn cpu_pod(name: &str, node: &str, cpu: &str) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
        "status": {"phase": "Running"}})
}

fn waiting(name: &str, mem: i64, message: &str) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
            "creationTimestamp": format!("2026-01-01T00:00:0{}Z", name.len() % 10)},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem.to_string()}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}})
}

/// The plan JSON of `objects` without its timing.
fn plan_of(objects: &mut ObjectCache) -> Value {
    let mut out: Value = serde_json::from_slice(&objects.plan_bytes(br#"{"max_moves": 5}"#, NOW).unwrap()).unwrap();
    out.as_object_mut().unwrap().remove("elapsed_ms");
    out["baseline"].as_object_mut().map(|b| b.remove("elapsed_ms"));
    out
}

fn listed(items: &[Value]) -> ObjectCache {
    let nodes: Vec<Value> = items.iter().filter(|i| i["kind"] == "Node").cloned().collect();
    let pods: Vec<Value> = items.iter().filter(|i| i["kind"] == "Pod").cloned().collect();
    let mut objects = ObjectCache::new(Config::default());
    objects.apply_list_page(&page("NodeList", &nodes)).unwrap();
    objects.apply_list_page(&page("PodList", &pods)).unwrap();
    objects
}

fn cluster() -> Vec<Value> {
    vec![
        with_host(node("a", 1, &[]), "8", "32Gi"),
        with_host(node("b", 1, &[]), "8", "32Gi"),
        with_host(node("c", 1, &[]), "8", "32Gi"),
        pod("p1", "a", &[0], 300, true),
        pod("p2", "b", &[0], 400, true),
        pod("w", "c", &[0], 1000, false),
        cpu_pod("cpu", "a", "3"),
    ]
}

#[test]
fn watched_objects_plan_as_a_list_of_the_same_objects() {
    let mut watched = listed(&cluster()[..3]);
    for item in &cluster()[3..] {
        watched.apply_watch_event(&event("ADDED", item)).unwrap();
    }
    let list = json!({"kind": "List", "items": cluster()}).to_string();
    let mut offline = ObjectCache::new(Config::default());
    offline.apply_input(list.as_bytes(), "input").unwrap();
    assert_eq!(plan_of(&mut watched), plan_of(&mut offline));
    assert_eq!(plan_of(&mut watched)["moves"][0]["pod"], "ns/p1");
    let host = watched.shared_snapshot(NOW).nodes[0].host.unwrap();
    assert_eq!((host.cpu_milli, host.cpu_requested, host.pods_requested), (8000, 3000, 2));
}

#[test]
fn a_deleted_pod_frees_its_gpu_and_its_cpu() {
    let mut objects = listed(&cluster());
    objects.apply_watch_event(&event("DELETED", &cluster()[3])).unwrap();
    objects.apply_watch_event(&event("DELETED", &cluster()[6])).unwrap();
    let snapshot = objects.shared_snapshot(NOW);
    assert_eq!(snapshot.pods.iter().map(PlanPod::key).collect::<Vec<_>>(), ["ns/p2", "ns/w"]);
    assert_eq!(snapshot.nodes[0].host.as_ref().unwrap().cpu_requested, 0);
    assert_eq!(snapshot.measures().free_whole_gpus, 1);
}

#[test]
fn a_relist_forgets_what_vanished_meanwhile() {
    let mut objects = listed(&cluster());
    let keep: HashSet<String> = ["ns/p2", "ns/w"].into_iter().map(String::from).collect();
    objects.retain("Pod", &keep);
    let nodes: HashSet<String> = ["b", "c"].into_iter().map(String::from).collect();
    objects.retain("Node", &nodes);
    let snapshot = objects.shared_snapshot(NOW);
    assert_eq!(snapshot.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["b", "c"]);
    assert_eq!(snapshot.pods.len(), 2);
}

#[test]
fn one_snapshot_serves_every_reader_until_something_changes() {
    let mut objects = listed(&cluster());
    let first = objects.shared_snapshot(NOW);
    assert!(Arc::ptr_eq(&first, &objects.shared_snapshot(NOW + 60)));
    objects.apply_watch_event(&event("MODIFIED", &cluster()[6])).unwrap();
    assert!(!Arc::ptr_eq(&first, &objects.shared_snapshot(NOW + 60)));
}

#[test]
fn left_out_nodes_take_their_pods_with_them() {
    let mut objects = listed(&cluster());
    let options = br#"{"exclude_nodes": ["a"]}"#;
    let out: Value = serde_json::from_slice(&objects.plan_bytes(options, NOW).unwrap()).unwrap();
    assert_eq!((out["nodes"].as_u64(), out["pods"].as_u64()), (Some(2), Some(2)));
    assert_eq!(objects.shared_snapshot(NOW).nodes.len(), 3, "the shared snapshot keeps every node");
}

#[test]
fn pods_waiting_for_room_that_moves_can_make_are_named_in_queue_order() {
    let mut items = cluster();
    items.push(waiting("big", 800, "0/3 nodes are available: 3 CardInsufficientMemory."));
    items.push(waiting("typed", 100, "0/3 nodes are available: 3 CardTypeMismatch."));
    items.push(waiting("countless", 100, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."));
    let mut objects = listed(&items);
    let names: Vec<String> = objects.waiting_for_moves(NOW).into_iter().map(|w| w.pod).collect();
    assert_eq!(names, ["ns/big", "ns/countless"], "a type mismatch is not cleared by moving pods");
    let planned: Value =
        serde_json::from_slice(&objects.plan_bytes(br#"{"for_pod_key": "ns/big"}"#, NOW).unwrap()).unwrap();
    assert_eq!(planned["unblocked"], true, "{planned}");
    let err = objects.plan_bytes(br#"{"for_pod_key": "ns/p1"}"#, NOW).unwrap_err();
    assert_eq!(err.to_string(), "plan options: for_pod_key: pod ns/p1 is not waiting for vGPU resources");
}
