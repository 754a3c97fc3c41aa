//! Retry at release: the pods Filter rejected are answered back, in queue order, once a release
//! makes room for them, and only then.

mod common;

use hami_core::requeue::{Requeue, REQUEUE_HOLD_SECONDS};
use hami_core::{Config, Engine, Outcome};
use serde_json::{json, Value};

const NOW: i64 = 1705054796;
const FULL: &str = "32768";

fn node(name: &str, gpus: u32) -> Value {
    common::v100_node(name, gpus)
}

fn pod(name: &str, ns: &str, priority: i32, created: &str, limits: Value) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"),
           "creationTimestamp": created},
           "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"limits": limits}}]}})
}

fn wants(mem: &str) -> Value {
    json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem})
}

/// A pod holding a whole GPU (all its memory) on `node`.
fn holder(name: &str, ns: &str, node: &str, gpu: u32) -> Value {
    let mut p = pod(name, ns, 0, "2026-01-01T00:00:00Z", json!({}));
    p["metadata"]["annotations"] = json!({"hami.io/vgpu-node": node,
        "hami.io/vgpu-devices-allocated": format!("GPU-{node}-{gpu},NVIDIA,{FULL},0:;")});
    p
}

fn apply(e: &mut Engine, v: &Value) {
    e.state.apply(v.to_string().as_bytes()).unwrap();
}

fn delete(e: &mut Engine, v: &Value) {
    e.state.delete(v.to_string().as_bytes()).unwrap();
}

fn filter(e: &mut Engine, p: &Value, names: &[&str]) -> Outcome {
    let args = json!({"Pod": p, "Nodes": null, "NodeNames": names});
    e.filter(args.to_string().as_bytes(), NOW, true).outcome
}

trait RequeuePods {
    fn requeue_pods(&mut self, now: i64) -> Vec<Requeue>;
}

impl RequeuePods for Engine {
    /// One pass, which these small clusters always finish.
    fn requeue_pods(&mut self, now: i64) -> Vec<Requeue> {
        let pass = self.requeue(now);
        assert!(!pass.more);
        pass.pods
    }
}

fn names(requeued: &[Requeue]) -> Vec<&str> {
    requeued.iter().map(|r| r.name.as_str()).collect()
}

/// One node of `gpus` GPUs, each held whole by `hold-<i>`.
fn full_cluster(gpus: u32) -> (Engine, Vec<Value>) {
    let mut e = Engine::new(Config::default());
    apply(&mut e, &node("n1", gpus));
    let holders: Vec<Value> = (0..gpus).map(|i| holder(&format!("hold-{i}"), "default", "n1", i)).collect();
    holders.iter().for_each(|h| apply(&mut e, h));
    (e, holders)
}

#[test]
fn a_rejected_pod_is_requeued_once_its_gpu_is_released_and_only_then() {
    let (mut e, holders) = full_cluster(1);
    let waiting = pod("waiting", "default", 0, "2026-01-02T00:00:00Z", wants("4000"));
    assert_eq!(filter(&mut e, &waiting, &["n1"]), Outcome::Unschedulable);
    assert_eq!(e.state.waiting().len(), 1);
    assert!(e.requeue_pods(NOW).is_empty(), "nothing was released");
    delete(&mut e, &holders[0]);
    let requeued = e.requeue_pods(NOW);
    assert_eq!(names(&requeued), ["waiting"]);
    assert_eq!((requeued[0].node.as_str(), requeued[0].uid.as_str()), ("n1", "uid-waiting"));
    assert!(e.requeue_pods(NOW).is_empty(), "requeued once per release");
    assert_eq!(filter(&mut e, &waiting, &["n1"]), Outcome::Scheduled);
    assert!(e.state.waiting().is_empty(), "a placed pod waits no more");
}

#[test]
fn a_pod_that_still_does_not_fit_is_not_requeued() {
    let (mut e, holders) = full_cluster(2);
    let two = pod("two-gpus", "default", 0, "2026-01-02T00:00:00Z", json!({"nvidia.com/gpu": "2"}));
    let one = pod("one-gpu", "default", 0, "2026-01-03T00:00:00Z", wants("4000"));
    assert_eq!(filter(&mut e, &two, &["n1"]), Outcome::Unschedulable);
    assert_eq!(filter(&mut e, &one, &["n1"]), Outcome::Unschedulable);
    delete(&mut e, &holders[0]);
    assert_eq!(names(&e.requeue_pods(NOW)), ["one-gpu"]);
}

#[test]
fn one_room_requeues_the_highest_priority_then_the_oldest_and_holds_it_for_them() {
    let (mut e, holders) = full_cluster(3);
    let pods = [
        pod("old-low", "default", 0, "2026-01-01T00:00:00Z", wants(FULL)),
        pod("young-high", "default", 100, "2026-01-05T00:00:00Z", wants(FULL)),
        pod("young-low", "default", 0, "2026-01-03T00:00:00Z", wants(FULL)),
    ];
    for p in &pods {
        assert_eq!(filter(&mut e, p, &["n1"]), Outcome::Unschedulable);
    }
    delete(&mut e, &holders[0]);
    assert_eq!(names(&e.requeue_pods(NOW)), ["young-high"], "one free GPU, one pod");
    assert!(e.requeue_pods(NOW + 1).is_empty(), "the requeued pod's room stays counted for it");
    delete(&mut e, &holders[1]);
    assert_eq!(names(&e.requeue_pods(NOW + 2)), ["old-low"]);
    delete(&mut e, &holders[2]);
    assert_eq!(names(&e.requeue_pods(NOW + 3)), ["young-low"]);
}

#[test]
fn a_requeued_pod_kube_scheduler_never_brings_back_holds_its_room_for_a_while_only() {
    let (mut e, holders) = full_cluster(1);
    let first = pod("first", "default", 10, "2026-01-01T00:00:00Z", wants(FULL));
    let second = pod("second", "default", 0, "2026-01-01T00:00:00Z", wants(FULL));
    filter(&mut e, &first, &["n1"]);
    filter(&mut e, &second, &["n1"]);
    delete(&mut e, &holders[0]);
    assert_eq!(names(&e.requeue_pods(NOW)), ["first"]);
    assert!(e.requeue_pods(NOW + REQUEUE_HOLD_SECONDS - 1).is_empty());
    assert_eq!(names(&e.requeue_pods(NOW + REQUEUE_HOLD_SECONDS)), ["second"]);
    assert!(e.requeue_pods(NOW + 10 * REQUEUE_HOLD_SECONDS).is_empty(), "first is not requeued twice");
}

#[test]
fn a_requeued_pod_rejected_again_waits_for_the_next_release() {
    let (mut e, holders) = full_cluster(1);
    let waiting = pod("waiting", "default", 0, "2026-01-02T00:00:00Z", wants(FULL));
    filter(&mut e, &waiting, &["n1"]);
    delete(&mut e, &holders[0]);
    assert_eq!(names(&e.requeue_pods(NOW)), ["waiting"]);
    let thief = holder("thief", "default", "n1", 0);
    apply(&mut e, &thief);
    assert_eq!(filter(&mut e, &waiting, &["n1"]), Outcome::Unschedulable);
    for later in 1..5 {
        assert!(e.requeue_pods(NOW + later).is_empty(), "no retry loop without a release");
    }
    delete(&mut e, &thief);
    assert_eq!(names(&e.requeue_pods(NOW + 5)), ["waiting"]);
}

#[test]
fn a_pod_that_binds_ends_or_is_deleted_is_forgotten() {
    let (mut e, _) = full_cluster(1);
    let mut p = pod("p", "default", 0, "2026-01-02T00:00:00Z", wants("4000"));
    for change in ["bound", "failed", "deleted"] {
        filter(&mut e, &p, &["n1"]);
        assert_eq!(e.state.waiting().len(), 1);
        let mut changed = p.clone();
        match change {
            "bound" => changed["spec"]["nodeName"] = json!("n1"),
            "failed" => changed["status"] = json!({"phase": "Failed"}),
            _ => {}
        }
        match change {
            "deleted" => delete(&mut e, &changed),
            _ => apply(&mut e, &changed),
        }
        assert!(e.state.waiting().is_empty(), "{change}");
        p["metadata"]["uid"] = json!(format!("uid-{change}"));
    }
}

#[test]
fn a_quota_released_in_the_namespace_requeues_a_pod_on_any_of_its_nodes() {
    let mut e = Engine::new(Config::default());
    apply(&mut e, &node("n1", 1));
    apply(&mut e, &node("n2", 1));
    let quota = json!({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "team"},
                       "spec": {"hard": {"limits.nvidia.com/gpumem": "10000"}}});
    apply(&mut e, &quota);
    let mut user = pod("user", "team", 0, "2026-01-01T00:00:00Z", json!({}));
    user["metadata"]["annotations"] =
        json!({"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "GPU-n1-0,NVIDIA,8000,0:;"});
    apply(&mut e, &user);
    let waiting = pod("waiting", "team", 0, "2026-01-02T00:00:00Z", wants("4000"));
    assert_eq!(filter(&mut e, &waiting, &["n2"]), Outcome::Unschedulable, "over the namespace's quota");
    assert!(e.requeue_pods(NOW).is_empty());
    delete(&mut e, &user);
    assert_eq!(names(&e.requeue_pods(NOW)), ["waiting"], "n2 did not change, the quota room did");
}

#[test]
fn a_re_list_forgets_the_waiting_pods_it_no_longer_shows() {
    let (mut e, _) = full_cluster(1);
    filter(&mut e, &pod("gone", "default", 0, "", wants("4000")), &["n1"]);
    filter(&mut e, &pod("kept", "default", 0, "", wants("4000")), &["n1"]);
    let keys = ["default/kept".to_owned(), "default/hold-0".to_owned()].into_iter().collect();
    e.state.retain("Pod", &keys);
    assert_eq!(e.state.waiting().len(), 1);
    assert!(e.state.waiting().get("uid-kept").is_some());
}

#[test]
fn a_device_healthy_again_and_a_node_registered_are_releases() {
    let mut e = Engine::new(Config::default());
    let mut sick = node("n1", 1);
    let register = sick["metadata"]["annotations"]["hami.io/node-nvidia-register"].as_str().unwrap().to_owned();
    sick["metadata"]["annotations"]["hami.io/node-nvidia-register"] =
        json!(register.replace("\"health\":true", "\"health\":false"));
    apply(&mut e, &sick);
    let waiting = pod("waiting", "default", 0, "2026-01-02T00:00:00Z", wants("4000"));
    assert_eq!(filter(&mut e, &waiting, &["n1", "n2"]), Outcome::Unschedulable);
    assert!(e.requeue_pods(NOW).is_empty());
    apply(&mut e, &node("n1", 1));
    assert_eq!(names(&e.requeue_pods(NOW)), ["waiting"], "its GPU healthy again");

    let late = pod("late", "default", 0, "2026-01-03T00:00:00Z", json!({"nvidia.com/gpu": "2"}));
    assert_eq!(filter(&mut e, &late, &["n1", "n2"]), Outcome::Unschedulable);
    apply(&mut e, &node("n2", 2));
    let requeued = e.requeue_pods(NOW);
    assert_eq!((names(&requeued), requeued[0].node.as_str()), (vec!["late"], "n2"), "a node registered");
}

#[test]
fn a_hold_that_expires_is_a_release() {
    let mut e = Engine::new(Config::default());
    apply(&mut e, &node("n1", 1));
    let mut owner = pod("owner", "default", 0, "2026-01-01T00:00:00Z", wants(FULL));
    owner["metadata"]["annotations"] = json!({"hami-fast.io/reservation": "n1/GPU-n1-0",
        "hami-fast.io/reservation-expires": "2024-01-12T10:20:00Z"});
    apply(&mut e, &owner);
    let waiting = pod("waiting", "default", 0, "2026-01-02T00:00:00Z", wants("4000"));
    let expiry = 1705054800; // 2024-01-12T10:20:00Z
    assert!(NOW < expiry);
    assert_eq!(filter(&mut e, &waiting, &["n1"]), Outcome::Unschedulable, "the GPU is held for another pod");
    assert!(e.requeue_pods(expiry - 1).is_empty());
    assert_eq!(names(&e.requeue_pods(expiry)), ["waiting"]);
}
