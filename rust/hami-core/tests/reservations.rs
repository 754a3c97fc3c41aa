//! GPUs held for a pending pod (`hami-fast.io/reservation` on the pod): unavailable to every other
//! pod, free for the owner, gone when the owner is allocated, bound, deleted, or the hold lapses,
//! and read back from the pod after a restart.

mod common;

use hami_core::{Config, Engine};
use serde_json::{json, Value};

/// Filter's clock in these tests; holds expire relative to it.
const NOW: i64 = 1_796_126_400; // 2026-12-01T12:00:00Z
const LATER: &str = "2026-12-01T12:10:00Z";
const EARLIER: &str = "2026-12-01T11:59:00Z";

fn node(name: &str) -> Value {
    let gpu = |i: u32| common::card(&format!("GPU-{name}-{i}"), i, 10, 32768, "NVIDIA-A100", 0);
    common::node(name, vec![gpu(0), gpu(1)])
}

/// A pending pod asking for one whole-memory GPU share.
fn pod(name: &str, mem: u32) -> Value {
    let mut p = common::vgpu_pod(name, &mem.to_string());
    p["metadata"]["annotations"] = json!({});
    p["status"] = json!({"phase": "Pending"});
    p
}

fn reserved(name: &str, mem: u32, hold: &str, expires: &str) -> Value {
    let mut p = pod(name, mem);
    p["metadata"]["annotations"] =
        json!({"hami-fast.io/reservation": hold, "hami-fast.io/reservation-expires": expires});
    p
}

fn apply(e: &mut Engine, v: &Value) -> Result<(), String> {
    e.state.apply(v.to_string().as_bytes()).map(|_| ()).map_err(|e| e.to_string())
}

fn cluster() -> Engine {
    let mut e = Engine::new(Config::default());
    for n in ["n1", "n2"] {
        apply(&mut e, &node(n)).unwrap();
    }
    e
}

/// Filter over both nodes (not recorded): the chosen node and devices, or the failures.
fn filter(e: &mut Engine, p: &Value, now: i64) -> Value {
    let args = json!({"Pod": p, "Nodes": null, "NodeNames": ["n1", "n2"]});
    let out = e.filter(args.to_string().as_bytes(), now, false);
    let resp: Value = serde_json::from_slice(&out.response).unwrap();
    let decision: Value = out.decision.map(|d| serde_json::to_value(d).unwrap()).unwrap_or_default();
    json!({"node": decision["node"], "devices": decision["annotations"]["hami.io/vgpu-devices-allocated"], "failed": resp["FailedNodes"]})
}

/// Holds n1's first GPU and both of n2's for `owner`: others can only use GPU-n1-1.
fn held_cluster() -> Engine {
    let mut e = cluster();
    apply(&mut e, &reserved("owner", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER)).unwrap();
    apply(&mut e, &reserved("other-owner", 1000, "n1/GPU-n1-0", LATER)).unwrap();
    e
}

#[test]
fn held_gpus_are_used_for_others_and_free_for_the_owner() {
    let mut e = held_cluster();
    let stranger = filter(&mut e, &pod("stranger", 1000), NOW);
    assert_eq!(stranger["node"], "n1");
    assert_eq!(stranger["devices"], "GPU-n1-1,NVIDIA,1000,0:;");
    assert_eq!(stranger["failed"], Value::Null);
    // Two more strangers than GPU-n1-1 can hold by memory: the held GPUs still refuse them.
    let big = filter(&mut e, &pod("big", 32768), NOW);
    assert_eq!(big["node"], "n1", "GPU-n1-1 is still empty");
    apply(&mut e, &{
        let mut p = pod("filler", 32768);
        p["metadata"]["annotations"] =
            json!({"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "GPU-n1-1,NVIDIA,32768,0:;"});
        p
    })
    .unwrap();
    let refused = filter(&mut e, &pod("stranger", 1000), NOW);
    assert_eq!(refused["node"], Value::Null);
    assert_eq!(refused["failed"]["n2"], "2/2 CardReserved");
    assert_eq!(refused["failed"]["n1"], "1/2 CardInsufficientMemory, 1/2 CardReserved");
    // The owner sees its own GPUs free, and is pinned there although n1's spread score would not choose it.
    let owner = filter(&mut e, &reserved("owner", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER), NOW);
    assert_eq!(owner["node"], "n2");
    assert_eq!(owner["devices"], "GPU-n2-0,NVIDIA,1000,0:;", "the first held GPU");
}

#[test]
fn the_owner_is_pinned_to_its_held_gpus_before_the_node_policy_ranks() {
    let mut e = cluster();
    // Binpack would pick the node already in use (n1); the owner's hold is on n2.
    apply(&mut e, &{
        let mut p = pod("busy", 1000);
        p["metadata"]["annotations"] =
            json!({"hami.io/vgpu-node": "n1", "hami.io/vgpu-devices-allocated": "GPU-n1-0,NVIDIA,1000,0:;"});
        p
    })
    .unwrap();
    let mut p = reserved("owner", 1000, "n2/GPU-n2-1", LATER);
    p["metadata"]["annotations"]["hami.io/node-scheduler-policy"] = json!("binpack");
    apply(&mut e, &p).unwrap();
    let got = filter(&mut e, &p, NOW);
    assert_eq!((got["node"].clone(), got["devices"].clone()), (json!("n2"), json!("GPU-n2-1,NVIDIA,1000,0:;")));
    let mut stranger = pod("stranger", 1000);
    stranger["metadata"]["annotations"]["hami.io/node-scheduler-policy"] = json!("binpack");
    assert_eq!(filter(&mut e, &stranger, NOW)["node"], "n1");
}

#[test]
fn an_owner_that_no_longer_fits_its_hold_is_placed_like_any_pod() {
    let mut e = cluster();
    apply(&mut e, &{
        let mut p = pod("squatter", 32000);
        p["metadata"]["annotations"] =
            json!({"hami.io/vgpu-node": "n2", "hami.io/vgpu-devices-allocated": "GPU-n2-0,NVIDIA,32000,0:;"});
        p
    })
    .unwrap();
    let owner = reserved("owner", 4000, "n2/GPU-n2-0", LATER);
    apply(&mut e, &owner).unwrap();
    let got = filter(&mut e, &owner, NOW);
    assert_ne!(got["node"], Value::Null);
    assert_eq!(got, filter(&mut e, &pod("stranger", 4000), NOW), "its held GPU is full: it goes where any pod would");
}

#[test]
fn a_hold_lapses_at_its_expiry() {
    let mut e = cluster();
    apply(&mut e, &reserved("owner", 1000, "n1/GPU-n1-0,GPU-n1-1", "2026-12-01T12:05:00Z")).unwrap();
    apply(&mut e, &reserved("owner2", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER)).unwrap();
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["node"], Value::Null);
    assert_eq!(e.state.reservations().len(), 2);
    let at_expiry = NOW + 300;
    assert_eq!(filter(&mut e, &pod("p", 1000), at_expiry)["node"], "n1");
    assert_eq!(e.state.reservations().len(), 1);
    // Already lapsed when it arrives: nothing is held once Filter's clock passes it.
    apply(&mut e, &reserved("late", 1000, "n1/GPU-n1-0", EARLIER)).unwrap();
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["devices"], "GPU-n1-1,NVIDIA,1000,0:;");
}

#[test]
fn the_hold_ends_when_the_owner_is_allocated_bound_deleted_or_unannotated() {
    let hold = "n1/GPU-n1-0,GPU-n1-1";
    let check = |change: &dyn Fn(&mut Engine)| {
        let mut e = cluster();
        apply(&mut e, &reserved("owner", 1000, hold, LATER)).unwrap();
        apply(&mut e, &reserved("owner2", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER)).unwrap();
        assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["node"], Value::Null);
        change(&mut e);
        assert_eq!(e.state.reservations().len(), 1);
        assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["node"], "n1");
    };
    check(&|e| {
        let mut p = reserved("owner", 1000, hold, LATER);
        p["metadata"]["annotations"]["hami.io/vgpu-node"] = json!("n1");
        p["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = json!("GPU-n1-0,NVIDIA,1000,0:;");
        apply(e, &p).unwrap();
    });
    check(&|e| {
        let mut p = reserved("owner", 1000, hold, LATER);
        p["spec"]["nodeName"] = json!("n1");
        apply(e, &p).unwrap();
    });
    check(&|e| e.state.delete(reserved("owner", 1000, hold, LATER).to_string().as_bytes()).unwrap());
    check(&|e| apply(e, &pod("owner", 1000)).unwrap());
    check(&|e| {
        let mut p = reserved("owner", 1000, hold, LATER);
        p["status"]["phase"] = json!("Failed");
        apply(e, &p).unwrap();
    });
    check(&|e| {
        let keys = ["default/owner2".to_owned()].into_iter().collect();
        e.state.retain("Pod", &keys);
    });
}

#[test]
fn a_restart_reads_the_hold_back_from_the_pod() {
    let pods = json!({"kind": "PodList", "apiVersion": "v1", "items": [
        reserved("owner", 1000, "n1/GPU-n1-0,GPU-n1-1", LATER), reserved("owner2", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER)]});
    // Pods listed before nodes (a restart's LISTs can come in any order): the marks still land.
    let mut e = Engine::new(Config::default());
    apply(&mut e, &pods).unwrap();
    apply(&mut e, &node("n1")).unwrap();
    apply(&mut e, &node("n2")).unwrap();
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["failed"]["n1"], "2/2 CardReserved");
    assert_eq!(filter(&mut e, &reserved("owner", 1000, "n1/GPU-n1-0,GPU-n1-1", LATER), NOW)["node"], "n1");
    // A node update (the device plugin re-registers every 30 s) keeps its marks.
    apply(&mut e, &node("n1")).unwrap();
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["node"], Value::Null);
}

#[test]
fn a_gpu_is_held_for_one_pod_only() {
    let mut e = cluster();
    apply(&mut e, &reserved("first", 1000, "n1/GPU-n1-0", LATER)).unwrap();
    let err = apply(&mut e, &reserved("second", 1000, "n1/GPU-n1-0,GPU-n1-1", LATER)).unwrap_err();
    assert!(err.contains("Pod default/second") && err.contains("already held for default/first"), "{err}");
    assert_eq!(e.state.reservations().len(), 1);
    // The refused one holds nothing: GPU-n1-1 stays free for anyone.
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["devices"], "GPU-n1-1,NVIDIA,1000,0:;");
    // Re-applying the holder's own reservation is no conflict.
    apply(&mut e, &reserved("first", 1000, "n1/GPU-n1-0", LATER)).unwrap();
}

#[test]
fn a_malformed_reservation_is_ignored_with_one_line_naming_pod_and_field() {
    let mut e = cluster();
    apply(&mut e, &reserved("owner", 1000, "n1/GPU-n1-0", LATER)).unwrap();
    for (value, expires, field) in [
        ("GPU-n1-0", LATER, "hami-fast.io/reservation"),
        ("n1/", LATER, "hami-fast.io/reservation"),
        ("n1/GPU-n1-0", "in ten minutes", "hami-fast.io/reservation-expires"),
    ] {
        let err = apply(&mut e, &reserved("owner", 1000, value, expires)).unwrap_err();
        assert!(err.contains("Pod default/owner") && err.contains(field) && !err.contains('\n'), "{err}");
        assert!(e.state.reservations().is_empty(), "the bad update drops the hold");
        assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["node"], "n1");
    }
    let mut no_expiry = pod("owner", 1000);
    no_expiry["metadata"]["annotations"] = json!({"hami-fast.io/reservation": "n1/GPU-n1-0"});
    assert!(apply(&mut e, &no_expiry).unwrap_err().contains("missing"));
    // A watch event with the bad pod is reported in the event, and the stream goes on.
    let line = json!({"type": "MODIFIED", "object": reserved("owner", 1000, "nonsense", LATER)}).to_string();
    let info = e.state.apply_watch_event(line.as_bytes()).unwrap();
    assert!(info.error.unwrap().to_string().contains("hami-fast.io/reservation"));
    // Unknown node or GPU: held as written (nothing to mark), harmless.
    apply(&mut e, &reserved("owner", 1000, "gone/GPU-x", LATER)).unwrap();
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["node"], "n1");
}

#[test]
fn explain_says_whom_a_gpu_is_held_for() {
    let mut e = held_cluster();
    let out: Value =
        serde_json::to_value(e.explain(pod("p", 1000).to_string().as_bytes(), NOW, None, None).unwrap()).unwrap();
    assert_eq!(out["node"], "n1");
    assert_eq!(out["reserved"]["n2"]["GPU-n2-0"], "held for default/owner until 2026-12-01T12:10:00Z");
    assert_eq!(out["reserved"]["n1"]["GPU-n1-0"], "held for default/other-owner until 2026-12-01T12:10:00Z");
    assert_eq!(out["failed"]["n2"], "2/2 CardReserved");
    let own = reserved("owner", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER);
    let out: Value = serde_json::to_value(e.explain(own.to_string().as_bytes(), NOW, None, None).unwrap()).unwrap();
    assert_eq!(out["node"], "n2");
    assert_eq!(out["reserved"]["n2"]["GPU-n2-1"], "held for this pod until 2026-12-01T12:10:00Z");
    // Without any reservation explain's answer has no such field (HAMi has none).
    let mut plain = cluster();
    let out: Value =
        serde_json::to_value(plain.explain(pod("p", 1000).to_string().as_bytes(), NOW, None, None).unwrap()).unwrap();
    assert!(out.get("reserved").is_none());
}

#[test]
fn filter_recording_the_owner_keeps_the_hold_until_the_allocation_is_seen() {
    let mut e = held_cluster();
    let owner = reserved("owner", 1000, "n2/GPU-n2-0,GPU-n2-1", LATER);
    let args = json!({"Pod": owner, "Nodes": null, "NodeNames": ["n1", "n2"]});
    let out = e.filter(args.to_string().as_bytes(), NOW, true);
    assert_eq!(out.decision.unwrap().node.as_deref(), Some("n2"));
    // Until the watch shows the allocation, the rest of n2 stays held: a failed patch loses nothing.
    assert_eq!(e.state.reservations().len(), 2);
    assert_eq!(filter(&mut e, &pod("p", 1000), NOW)["devices"], "GPU-n1-1,NVIDIA,1000,0:;");
}

#[test]
fn usage_and_the_hold_list_say_whom_a_gpu_is_held_for_until_its_expiry() {
    let mut e = held_cluster();
    apply(&mut e, &reserved("lapsed", 1000, "n1/GPU-n1-1", EARLIER)).unwrap();
    apply(&mut e, &reserved("elsewhere", 1000, "gone-node/GPU-x", LATER)).unwrap();
    let holds: Value = serde_json::from_slice(&e.state.holds_json(NOW)).unwrap();
    assert_eq!(
        holds,
        json!([
            {"pod": "default/elsewhere", "node": "gone-node", "gpus": ["GPU-x"], "expires": LATER},
            {"pod": "default/other-owner", "node": "n1", "gpus": ["GPU-n1-0"], "expires": LATER},
            {"pod": "default/owner", "node": "n2", "gpus": ["GPU-n2-0", "GPU-n2-1"], "expires": LATER},
        ]),
        "the lapsed hold is dropped, one on an unknown node is still listed"
    );
    let usage: Value = serde_json::from_slice(&e.state.usage_json()).unwrap();
    let held = |node: usize, gpu: usize| usage[node]["devices"][gpu].get("held").cloned();
    assert_eq!(held(0, 0), Some(json!({"pod": "default/other-owner", "expires": LATER})));
    assert_eq!(held(0, 1), None, "free again once the hold lapsed");
    assert_eq!(held(1, 1), Some(json!({"pod": "default/owner", "expires": LATER})));
    let plain: Value = serde_json::from_slice(&cluster().state.usage_json()).unwrap();
    assert!(plain[0]["devices"][0].get("held").is_none(), "no key without a hold");
}
