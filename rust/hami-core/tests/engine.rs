//! Behaviour of the engine through its public entry points: apply, filter, explain, admit.

mod common;

use base64::Engine as _;
use hami_core::{Config, Engine};
use serde_json::{json, Value};

use common::{node, pod, V100};

fn gpu(id: &str, index: u32, numa: i32) -> Value {
    common::card(id, index, 10, 32768, V100, numa)
}

fn two_gpu_node(name: &str) -> Value {
    let p = &name[name.len() - 1..];
    node(name, vec![gpu(&format!("GPU-{p}0"), 0, 0), gpu(&format!("GPU-{p}1"), 1, 0)])
}

fn placed_pod(name: &str, node: &str, devices: &str) -> Value {
    let mut p = pod(name, json!({}));
    p["metadata"]["annotations"] = json!({"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": devices});
    p
}

fn apply(c: &mut Engine, v: &Value) {
    c.state.apply(v.to_string().as_bytes()).unwrap();
}

fn cluster_9_1a() -> Engine {
    let mut c = Engine::new(Config::default());
    apply(&mut c, &two_gpu_node("node-a"));
    apply(&mut c, &two_gpu_node("node-b"));
    apply(&mut c, &placed_pod("old", "node-a", "GPU-a0,NVIDIA,3000,30:;"));
    c
}

fn filter(c: &mut Engine, p: &Value, names: &[&str]) -> (Value, Option<Value>) {
    let args = json!({"Pod": p, "Nodes": null, "NodeNames": names});
    let out = c.filter(args.to_string().as_bytes(), 1705054796, true);
    (serde_json::from_slice(&out.response).unwrap(), out.decision.map(|d| serde_json::to_value(d).unwrap()))
}

fn explain(c: &mut Engine, p: &Value, node_policy: Option<&str>, gpu_policy: Option<&str>) -> Value {
    serde_json::to_value(c.explain(p.to_string().as_bytes(), 7, node_policy, gpu_policy).unwrap()).unwrap()
}

fn devices_of(d: &Value) -> &str {
    d["annotations"]["hami.io/vgpu-devices-allocated"].as_str().unwrap()
}

#[test]
fn worked_example_9_1a() {
    let mut c = cluster_9_1a();
    let p = pod("new", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "20"}));
    let (resp, decision) = filter(&mut c, &p, &["node-a", "node-b"]);
    assert_eq!(
        resp,
        json!({"Nodes": null, "NodeNames": ["node-a"], "FailedNodes": null, "FailedAndUnresolvableNodes": null, "Error": ""})
    );
    let d = decision.unwrap();
    assert_eq!(devices_of(&d), "GPU-a1,NVIDIA,4000,20:;");
    assert_eq!(d["annotations"]["hami.io/vgpu-devices-to-allocate"], "GPU-a1,NVIDIA,4000,20:;");
    assert_eq!(d["annotations"]["hami.io/vgpu-node"], "node-a");
    assert_eq!(d["annotations"]["hami.io/vgpu-time"], "1705054796");
    assert_eq!(
        d["events"][0]["message"],
        "find fit node(node-a), 0 nodes not fit, 2 nodes fit(node-b:0.00,node-a:2.46)"
    );
    let patch: Value = serde_json::from_str(d["patch"].as_str().unwrap()).unwrap();
    assert_eq!(patch["metadata"]["labels"]["hami.io/vgpu-node"], "node-a");
}

#[test]
fn policies_change_node_and_device() {
    let mut c = cluster_9_1a();
    let p = pod("new", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000", "nvidia.com/gpucores": "20"}));
    let spread = explain(&mut c, &p, Some("spread"), None);
    assert_eq!(spread["node"], "node-b");
    let binpack_gpu = explain(&mut c, &p, None, Some("binpack"));
    assert_eq!(binpack_gpu["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-a0,NVIDIA,4000,20:;");
    let mut annotated = p.clone();
    annotated["metadata"]["annotations"] =
        json!({"hami.io/node-scheduler-policy": "spread", "hami.io/gpu-scheduler-policy": "binpack"});
    let by_pod = explain(&mut c, &annotated, Some("binpack"), Some("spread"));
    assert_eq!(by_pod["node"], "node-b");
    let mut empty_policy = p.clone();
    empty_policy["metadata"]["annotations"] = json!({"hami.io/gpu-scheduler-policy": ""});
    let spread_like = explain(&mut c, &empty_policy, None, Some("binpack"));
    assert_eq!(
        spread_like["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-a1,NVIDIA,4000,20:;",
        "an empty annotation overrides and sorts as spread"
    );
    assert_eq!(by_pod["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-b1,NVIDIA,4000,20:;");
}

#[test]
fn reasons_are_counted_and_sorted() {
    let mut c = Engine::new(Config::default());
    let devices = (0..4).map(|i| gpu(&format!("GPU-{i}"), i, 0)).collect();
    apply(&mut c, &node("n", devices));
    // GPU-0 nearly full of memory, GPUs 1..3 out of slots.
    let mut slots = String::from("GPU-0,NVIDIA,30000,0:;");
    for g in 1..4 {
        for _ in 0..10 {
            slots.push_str(&format!("GPU-{g},NVIDIA,1,0:;"));
        }
    }
    let mut holder = placed_pod("holder", "n", &slots);
    holder["spec"]["containers"] = json!((0..31).map(|i| json!({"name": format!("c{i}")})).collect::<Vec<_>>());
    apply(&mut c, &holder);
    let p = pod("p", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}));
    let (resp, decision) = filter(&mut c, &p, &["n", "ghost"]);
    assert_eq!(resp["NodeNames"], Value::Null);
    assert_eq!(resp["FailedNodes"]["n"], "1/4 CardInsufficientMemory, 3/4 CardTimeSlicingExhausted");
    assert_eq!(resp["FailedNodes"]["ghost"], "node unregistered");
    let events = &decision.unwrap()["events"];
    let messages: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["message"].as_str().unwrap()).collect();
    assert!(messages.contains(&"1 nodes CardInsufficientMemory(n)"), "{messages:?}");
    assert!(messages.contains(&"no available node, 2 nodes do not meet"));
}

#[test]
fn usage_is_incremental_and_released() {
    let mut c = Engine::new(Config::default());
    // Pod arrives before its node: its usage must still count once the node registers.
    apply(&mut c, &placed_pod("early", "n", "GPU-n0,NVIDIA,20000,50:;"));
    apply(&mut c, &two_gpu_node("n"));
    let big = pod("big", json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "20000"}));
    assert_eq!(
        explain(&mut c, &big, None, None)["failed"]["n"],
        "1/2 AllocatedCardsInsufficientRequest, 1/2 CardInsufficientMemory"
    );
    let mut done = placed_pod("early", "n", "GPU-n0,NVIDIA,20000,50:;");
    done["status"] = json!({"phase": "Succeeded"});
    apply(&mut c, &done);
    assert_eq!(explain(&mut c, &big, None, None)["node"], "n");
    apply(&mut c, &placed_pod("again", "n", "GPU-n1,NVIDIA,20000,50:;"));
    assert!(explain(&mut c, &big, None, None)["node"].is_null());
    c.state.delete(placed_pod("again", "n", "").to_string().as_bytes()).unwrap();
    assert_eq!(explain(&mut c, &big, None, None)["node"], "n");
    assert_eq!(c.state.pod_count(), 0);
}

#[test]
fn node_reregistration_rebuilds_only_on_inventory_change() {
    let mut c = Engine::new(Config::default());
    apply(&mut c, &two_gpu_node("n"));
    apply(&mut c, &placed_pod("p1", "n", "GPU-n1,NVIDIA,1000,0:;"));
    // Same inventory, new cordon: usage carries over.
    let mut cordoned = two_gpu_node("n");
    cordoned["metadata"]["annotations"]["hami.io/device-cordon"] = json!("GPU-n0");
    apply(&mut c, &cordoned);
    let usage: Value = serde_json::from_slice(&c.state.usage_json()).unwrap();
    assert_eq!(usage[0]["devices"][1]["usedmem"], 1000);
    assert_eq!(usage[0]["devices"][0]["cordoned"], true);
    let exclusive = pod("w", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100", "nvidia.com/gpucores": "100"}));
    assert_eq!(
        explain(&mut c, &exclusive, None, None)["failed"]["n"],
        "1/2 CardCordoned, 1/2 ExclusiveDeviceAllocateConflict"
    );
    // Devices change order: usage is rebuilt from the pods on the node.
    apply(&mut c, &node("n", vec![gpu("GPU-n1", 0, 0), gpu("GPU-n9", 1, 0)]));
    let usage: Value = serde_json::from_slice(&c.state.usage_json()).unwrap();
    assert_eq!(usage[0]["devices"][0]["usedmem"], 1000);
    assert_eq!(usage[0]["devices"][1]["usedmem"], 0);
}

#[test]
fn init_container_peak_and_release() {
    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![gpu("GPU-n0", 0, 0)]));
    let mut p = placed_pod("init", "n", "GPU-n0,NVIDIA,30000,10:;GPU-n0,NVIDIA,1000,10:;");
    p["spec"]["initContainers"] = json!([{"name": "i"}]);
    apply(&mut c, &p);
    let u: Value = serde_json::from_slice(&c.state.usage_json()).unwrap();
    assert_eq!((u[0]["devices"][0]["usedmem"].as_i64(), u[0]["devices"][0]["used"].as_i64()), (Some(30000), Some(1)));
    p["status"] = json!({"phase": "Running", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]});
    apply(&mut c, &p);
    let u: Value = serde_json::from_slice(&c.state.usage_json()).unwrap();
    assert_eq!(u[0]["devices"][0]["usedmem"], 1000);
}

#[test]
fn init_containers_fit_separately_and_empty_slots_are_written_as_hami_does() {
    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![gpu("GPU-n0", 0, 0)]));
    let mut p = pod("p", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}));
    p["spec"]["initContainers"] = json!([{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"}}}, {"name": "plain"}]);
    p["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "sidecar"}));
    let r = explain(&mut c, &p, None, None);
    // HAMi pads GPU-less containers only under a device type named exactly NVIDIA.
    assert_eq!(r["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-n0,NVIDIA,20000,0:;GPU-n0,NVIDIA,20000,0:;");
    let mut vendor_typed = gpu("GPU-n0", 0, 0);
    vendor_typed["type"] = json!("NVIDIA");
    apply(&mut c, &node("n", vec![vendor_typed]));
    let r = explain(&mut c, &p, None, None);
    assert_eq!(r["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-n0,NVIDIA,20000,0:;;GPU-n0,NVIDIA,20000,0:;;");
}

#[test]
fn unpadded_lists_count_real_usage_after_init_containers_finish() {
    // HAMi's own shrink would read this pod's only slot as the init container's and drop it to 0.
    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![gpu("GPU-n0", 0, 0)]));
    let mut p = placed_pod("p", "n", "GPU-n0,NVIDIA,30000,0:;");
    p["spec"]["initContainers"] = json!([{"name": "setup"}]);
    p["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": "1"}});
    p["status"] = json!({"phase": "Running", "initContainerStatuses": [{"state": {"terminated": {"exitCode": 0}}}]});
    apply(&mut c, &p);
    let u: Value = serde_json::from_slice(&c.state.usage_json()).unwrap();
    assert_eq!((u[0]["devices"][0]["usedmem"].as_i64(), u[0]["devices"][0]["used"].as_i64()), (Some(30000), Some(1)));
    let (resp, _) = filter(&mut c, &pod("q", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"})), &["n"]);
    assert_eq!(resp["FailedNodes"]["n"], "1/1 CardInsufficientMemory");
}

#[test]
fn nodes_register_as_hami_s_handshake_passes_leave_them() {
    let mut c = Engine::new(Config::default());
    let mut n = node("n", vec![gpu("GPU-n0", 0, 0)]);
    n["status"] = json!({"allocatable": {"cpu": "8"}});
    apply(&mut c, &n);
    let p = pod("q", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1000"}));
    let asked = 1_767_225_600;
    let verdict = |c: &mut Engine, now: i64| -> Value {
        let args = json!({"Pod": p, "NodeNames": ["n"]}).to_string();
        serde_json::from_slice(&c.filter(args.as_bytes(), now, false).response).unwrap()
    };
    // No request yet: HAMi asks (writes Requesting_<now>) and takes the node in.
    let writes = c.state.registration_pass(asked);
    assert_eq!(
        (writes[0].key, writes[0].value.as_deref()),
        ("hami.io/node-handshake", Some("Requesting_2026-01-01 00:00:00"))
    );
    assert_eq!(writes.len(), 5, "NVIDIA's key and the four vendor variants");
    n["metadata"]["annotations"]["hami.io/node-handshake"] = json!("Requesting_2026-01-01 00:00:00");
    apply(&mut c, &n);
    assert!(c.state.registration_pass(asked + 15).iter().all(|w| w.key != "hami.io/node-handshake"));
    assert_eq!(verdict(&mut c, asked + 59)["NodeNames"], json!(["n"]), "the plugin has a minute to answer");
    let writes = c.state.registration_pass(asked + 60);
    assert_eq!((writes[0].key, writes[0].value.as_deref()), ("hami.io/node-handshake", None), "cleaned up");
    assert_eq!(verdict(&mut c, asked + 61)["FailedNodes"]["n"], "node unregistered");
    n["status"] = json!({"allocatable": {"nvidia.com/gpu": "10"}});
    apply(&mut c, &n);
    c.state.registration_pass(asked + 75);
    assert_eq!(verdict(&mut c, asked + 600)["NodeNames"], json!(["n"]), "the plugin advertises GPUs again");
}

#[test]
fn exclusive_cards_are_never_shared() {
    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![gpu("GPU-n0", 0, 0)]));
    let whole = pod("w1", json!({"nvidia.com/gpu": "1"}));
    let (resp, _) = filter(&mut c, &explain_defaults(&whole), &["n"]);
    assert_eq!(resp["NodeNames"], json!(["n"]));
    let second = pod("w2", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10"}));
    let (resp, _) = filter(&mut c, &second, &["n"]);
    assert_eq!(resp["FailedNodes"]["n"], "1/1 CardInsufficientMemory");
    let zero_core = pod("w3", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "10", "nvidia.com/gpucores": "0"}));
    c.release("uid-w1");
    apply(&mut c, &placed_pod("cores", "n", "GPU-n0,NVIDIA,10,100:;"));
    let (resp, _) = filter(&mut c, &zero_core, &["n"]);
    assert_eq!(resp["FailedNodes"]["n"], "1/1 CardComputeUnitsExhausted");
    c.release("uid-cores");
    // Refiltering the same pod replaces, never doubles, its reservation.
    let (resp, _) = filter(&mut c, &explain_defaults(&whole), &["n"]);
    assert_eq!(resp["NodeNames"], json!(["n"]));
    assert_eq!(c.state.pod_count(), 1);
    assert!(c.release("uid-w1"));
    assert!(!c.release("uid-w1"));
}

fn explain_defaults(p: &Value) -> Value {
    let mut p = p.clone();
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = json!("100");
    p
}

#[test]
fn pods_without_vgpu_pass_through_unchanged() {
    let mut c = cluster_9_1a();
    let p = pod("cpu", json!({"cpu": "1"}));
    let (resp, decision) = filter(&mut c, &p, &["x", "y"]);
    assert_eq!(resp["NodeNames"], json!(["x", "y"]));
    assert!(decision.is_none());
}

#[test]
fn filter_errors_are_reported_in_the_result() {
    let mut c = cluster_9_1a();
    let err = |c: &mut Engine, body: &[u8]| -> String {
        let out = c.filter(body, 1, true);
        serde_json::from_slice::<Value>(&out.response).unwrap()["Error"].as_str().unwrap().to_owned()
    };
    assert!(err(&mut c, b"{not json").starts_with("decode ExtenderArgs"));
    assert_eq!(err(&mut c, br#"{"NodeNames":["a"]}"#), "extender args missing pod");
    let mut p = pod("w", json!({"nvidia.com/gpu": "1"}));
    p["metadata"]["annotations"] = json!({"hami.io/device-scoring-weights": "slot=1"});
    let msg = err(&mut c, json!({"Pod": p, "NodeNames": ["node-a"]}).to_string().as_bytes());
    assert!(msg.contains("default/w") && msg.contains("hami.io/device-scoring-weights"), "{msg}");
}

#[test]
fn malformed_annotations_name_the_object() {
    let mut c = Engine::new(Config::default());
    let e = c.state.apply(placed_pod("bad", "n", "GPU-0,NVIDIA,x,1:;").to_string().as_bytes()).unwrap_err();
    assert_eq!((e.kind, e.object.as_str()), (hami_core::ErrorKind::Invalid, "Pod default/bad"));
    assert_eq!(e.field, "annotation hami.io/vgpu-devices-allocated");
    let e = e.to_string();
    assert!(e.contains("default/bad") && e.contains("hami.io/vgpu-devices-allocated"), "{e}");
    let mut n = two_gpu_node("n");
    n["metadata"]["annotations"]["hami.io/node-nvidia-register"] = json!("[{broken");
    apply(&mut c, &n);
    let usage: Value = serde_json::from_slice(&c.state.usage_json()).unwrap();
    assert!(usage[0]["error"].as_str().unwrap().contains("hami.io/node-nvidia-register"));
    assert!(c.state.apply(b"[1,2]").is_err());
    let e =
        c.state.apply(br#"{"kind":"Pod","metadata":{"name":"x","namespace":"d"},"status":{"phase":7}}"#).unwrap_err();
    assert!(e.to_string().starts_with("Pod d/x: status"), "{e}");
}

#[test]
fn simulation_path_returns_the_node_object() {
    let c_nodes = json!({"items": [two_gpu_node("sim-a"), node("sim-b", vec![])]});
    let mut c = Engine::new(Config::default());
    let p = pod("p", json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "100"}));
    let out = c.filter(json!({"Pod": p, "Nodes": c_nodes}).to_string().as_bytes(), 1, true);
    let resp: Value = serde_json::from_slice(&out.response).unwrap();
    assert_eq!(resp["Nodes"]["items"][0]["metadata"]["name"], "sim-a");
    assert_eq!(resp["FailedNodes"]["sim-b"], "node unregistered");
    assert!(out.decision.is_none());
    assert_eq!(c.state.pod_count(), 0);
}

#[test]
fn numa_bind_mutex_and_topology() {
    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![gpu("G0", 0, 0), gpu("G1", 1, 1), gpu("G2", 2, 1)]));
    apply(&mut c, &placed_pod("busy", "n", "G2,NVIDIA,100,0:;"));
    let mut two = pod("two", json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "100"}));
    two["metadata"]["annotations"] = json!({"nvidia.com/numa-bind": "true"});
    assert_eq!(
        explain(&mut c, &two, None, None)["annotations"]["hami.io/vgpu-devices-allocated"],
        "G1,NVIDIA,100,0:G2,NVIDIA,100,0:;"
    );
    two["metadata"]["annotations"] = json!({"hami.io/gpu-scheduler-policy": "mutex"});
    assert_eq!(
        explain(&mut c, &two, None, None)["annotations"]["hami.io/vgpu-devices-allocated"],
        "G1,NVIDIA,100,0:G0,NVIDIA,100,0:;"
    );
    let three = pod("three", json!({"nvidia.com/gpu": "3", "nvidia.com/gpumem": "100"}));
    let mut mutex3 = three.clone();
    mutex3["metadata"]["annotations"] = json!({"hami.io/gpu-scheduler-policy": "mutex"});
    assert_eq!(
        explain(&mut c, &mutex3, None, None)["failed"]["n"],
        "1/3 ExclusiveDeviceAllocateConflict, 2/3 AllocatedCardsInsufficientRequest"
    );

    let mut t = Engine::new(Config::default());
    let mut n = node("t", (0..4).map(|i| gpu(&format!("T{i}"), i, 0)).collect());
    let scores = json!([
        {"uuid": "T0", "score": {"T1": 10, "T2": 10, "T3": 300}}, {"uuid": "T1", "score": {"T0": 10, "T2": 200, "T3": 10}},
        {"uuid": "T2", "score": {"T0": 10, "T1": 200, "T3": 10}}, {"uuid": "T3", "score": {"T0": 300, "T1": 10, "T2": 10}}]);
    n["metadata"]["annotations"]["hami.io/node-nvidia-score"] = json!(scores.to_string());
    apply(&mut t, &n);
    let two = pod("two", json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "100"}));
    let alloc = explain(&mut t, &two, None, Some("topology-aware"));
    let devices = alloc["annotations"]["hami.io/vgpu-devices-allocated"].as_str().unwrap();
    assert!(devices.contains("T0,") && devices.contains("T3,"), "{devices}");
    let one = pod("one", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100"}));
    let single = explain(&mut t, &one, None, Some("topology-aware"));
    let d = single["annotations"]["hami.io/vgpu-devices-allocated"].as_str().unwrap();
    assert!(d.starts_with("T1,") || d.starts_with("T2,"), "least connected card expected: {d}");
}

#[test]
fn type_uuid_and_mode_filters() {
    let mut c = Engine::new(Config::default());
    let mut t4 = gpu("T4-0", 0, 0);
    t4["type"] = json!("NVIDIA-Tesla T4");
    let mut mig = gpu("MIG-0", 2, 0);
    mig["mode"] = json!("mig");
    apply(&mut c, &node("n", vec![t4, gpu("V-1", 1, 0), mig]));
    let mut p = pod("p", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "100"}));
    p["metadata"]["annotations"] = json!({"nvidia.com/use-gputype": "t4"});
    assert!(explain(&mut c, &p, None, None)["annotations"]["hami.io/vgpu-devices-allocated"]
        .as_str()
        .unwrap()
        .starts_with("T4-0,"));
    p["metadata"]["annotations"] = json!({"nvidia.com/nouse-gputype": "T4,V100"});
    assert_eq!(explain(&mut c, &p, None, None)["failed"]["n"], "3/3 CardTypeMismatch");
    p["metadata"]["annotations"] = json!({"nvidia.com/use-gpuuuid": "V-1"});
    assert!(explain(&mut c, &p, None, None)["annotations"]["hami.io/vgpu-devices-allocated"]
        .as_str()
        .unwrap()
        .starts_with("V-1,"));
    // A MIG GPU is a candidate like the others (HAMi v2.10's dynamic MIG; tests/mig.rs) ...
    p["metadata"]["annotations"] = json!({"nvidia.com/use-gpuuuid": "nope"});
    assert_eq!(explain(&mut c, &p, None, None)["failed"]["n"], "3/3 CardUuidMismatch");
    // ... unless the pod's vgpu-mode leaves its mode out.
    p["metadata"]["annotations"] = json!({"nvidia.com/use-gpuuuid": "nope", "nvidia.com/vgpu-mode": "hami-core"});
    assert_eq!(explain(&mut c, &p, None, None)["failed"]["n"], "1/3 CardTypeMismatch, 2/3 CardUuidMismatch");
}

#[test]
fn quota_limits_memory() {
    let mut c = cluster_9_1a();
    apply(
        &mut c,
        &json!({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"limits.nvidia.com/gpumem": "10000"}}}),
    );
    let ok = pod("ok", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "7000"}));
    assert!(explain(&mut c, &ok, None, None)["node"].is_string());
    let too_big = pod("big", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "7001"}));
    let denied = c.explain(too_big.to_string().as_bytes(), 7, None, None).unwrap_err();
    assert_eq!(denied.to_string(), "exceeding resource quota", "the webhook denies it");
    let (resp, _) = filter(&mut c, &too_big, &["node-a"]);
    assert_eq!(resp["FailedNodes"]["node-a"], "2/2 ResourceQuotaNotFit", "Filter checks the quota per card");
    let accounting: Value = serde_json::from_slice(&c.state.accounting_json()).unwrap();
    assert_eq!(
        accounting["quotas"],
        json!([{"namespace": "default", "name": "q", "resource": "nvidia.com/gpumem", "limit": 10000, "used": 3000}])
    );
    assert_eq!(accounting["pods"][0]["devices"], json!([{"uuid": "GPU-a0", "usedmem": 3000, "usedcores": 30}]));
    c.state
        .delete(
            json!({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}}).to_string().as_bytes(),
        )
        .unwrap();
    assert!(explain(&mut c, &too_big, None, None)["node"].is_string());
}

/// HAMi's Filter checks an app container's quota against the app containers placed before it,
/// indexed from 0 and collapsed with the pod's init-container count: with one init container the
/// first app container counts as an init container (its peak), and init containers not at all.
#[test]
fn quota_in_the_app_phase_is_counted_as_hami_counts_it() {
    let quota = |mib: &str| json!({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"limits.nvidia.com/gpumem": mib}}});
    let with_init = |init: Value, app: Vec<Value>| {
        let containers: Vec<Value> = app
            .into_iter()
            .enumerate()
            .map(|(i, l)| json!({"name": format!("c{i}"), "resources": {"limits": l}}))
            .collect();
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "new", "namespace": "default", "uid": "uid-new"},
               "spec": {"initContainers": [{"name": "init", "resources": {"limits": init}}], "containers": containers}})
    };
    let a100 = |id: &str, index: u32| json!({"id": id, "index": index, "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA-A100-SXM4-80GB", "mode": "hami-core", "health": true});
    let quarter = json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "25"});

    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![a100("A-0", 0)]));
    apply(&mut c, &quota("30000"));
    let two_quarters = with_init(json!({}), vec![quarter.clone(), quarter.clone()]);
    let r = explain(&mut c, &two_quarters, Some("binpack"), Some("binpack"));
    assert_eq!(devices_of(&r), "A-0,NVIDIA,20480,0:;A-0,NVIDIA,20480,0:;", "20480 MiB counted once, not 40960: {r}");

    let mut c = Engine::new(Config::default());
    apply(&mut c, &node("n", vec![a100("A-0", 0), gpu("V-1", 1, 0)]));
    apply(&mut c, &quota("50000"));
    let init_on_a100 = with_init(
        json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "40000"}),
        vec![json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000"})],
    );
    let r = explain(&mut c, &init_on_a100, Some("binpack"), Some("binpack"));
    assert_eq!(
        devices_of(&r),
        "A-0,NVIDIA,40000,0:;V-1,NVIDIA,20000,0:;",
        "the init card is not in the app quota: {r}"
    );
}

fn admit(c: &Engine, version: &str, pod: &Value) -> Value {
    let review = json!({"apiVersion": version, "kind": "AdmissionReview", "request": {"uid": "r1", "namespace": "default", "object": pod}});
    serde_json::from_slice(&c.admit(review.to_string().as_bytes())).unwrap()
}

fn patch_ops(r: &Value) -> Value {
    let raw = base64::engine::general_purpose::STANDARD.decode(r["response"]["patch"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&raw).unwrap()
}

#[test]
fn webhook_defaults_and_denials() {
    let c = Engine::new(Config::default());
    let mut p = pod("p", json!({"nvidia.com/gpu": "1"}));
    p["spec"]["schedulerName"] = json!("default-scheduler");
    let r = admit(&c, "admission.k8s.io/v1beta1", &p);
    assert_eq!(r["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(r["response"]["uid"], "r1");
    assert_eq!(r["response"]["patchType"], "JSONPatch");
    assert_eq!(
        patch_ops(&r),
        json!([{"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpucores", "value": "100"},
               {"op": "replace", "path": "/spec/schedulerName", "value": "hami-scheduler"}])
    );
    let mem_only = pod("m", json!({"nvidia.com/gpumem": "3000"}));
    let ops = patch_ops(&admit(&c, "admission.k8s.io/v1", &mem_only));
    assert_eq!(
        ops[0],
        json!({"op": "add", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"})
    );
    assert_eq!(ops[1], json!({"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}));
    assert_eq!(ops.as_array().unwrap().len(), 2);

    let mut privileged = pod("priv", json!({"nvidia.com/gpu": "1"}));
    privileged["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    let r = admit(&c, "admission.k8s.io/v1", &privileged);
    assert_eq!(r["response"]["allowed"], false);
    assert_eq!(
        r["response"]["status"],
        json!({"code": 403, "reason": "Forbidden", "message": "container c is privileged"})
    );
    let mut plain_priv = pod("pp", json!({"cpu": "1"}));
    plain_priv["spec"]["containers"][0]["securityContext"] = json!({"privileged": true});
    assert_eq!(admit(&c, "admission.k8s.io/v1", &plain_priv)["response"]["allowed"], true);

    let mut pinned = pod("n", json!({"nvidia.com/gpu": "1"}));
    pinned["spec"]["nodeName"] = json!("node-a");
    assert_eq!(admit(&c, "admission.k8s.io/v1", &pinned)["response"]["status"]["message"], "pod has node assigned");

    let mut other = pod("o", json!({"nvidia.com/gpu": "1"}));
    other["spec"]["schedulerName"] = json!("volcano");
    let r = admit(&c, "admission.k8s.io/v1", &other);
    assert_eq!(r["response"]["allowed"], true);
    assert!(r["response"].get("patch").is_none());

    let bad_pct = pod("b", json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "120"}));
    let r = admit(&c, "admission.k8s.io/v1", &bad_pct);
    assert_eq!(r["response"]["status"]["code"], 500);
    assert!(r["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .contains("invalid nvidia.com/gpumem-percentage value 120 in container c"));

    let mut empty = pod("e", json!({}));
    empty["spec"]["containers"] = json!([]);
    assert_eq!(admit(&c, "admission.k8s.io/v1", &empty)["response"]["status"]["message"], "pod has no containers");
    let garbage: Value = serde_json::from_slice(&c.admit(b"{{")).unwrap();
    assert_eq!(garbage["response"]["status"]["code"], 400);
}

#[test]
fn webhook_quota_denial() {
    let mut c = Engine::new(Config::default());
    apply(
        &mut c,
        &json!({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}, "spec": {"hard": {"limits.nvidia.com/gpucores": "50"}}}),
    );
    let r = admit(&c, "admission.k8s.io/v1", &pod("p", json!({"nvidia.com/gpu": "2", "nvidia.com/gpucores": "30"})));
    assert_eq!(r["response"]["status"]["message"], "exceeding resource quota");
    let r = admit(&c, "admission.k8s.io/v1", &pod("p", json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"})));
    assert_eq!(r["response"]["allowed"], true);
}

#[test]
fn watch_events_drive_the_cluster() {
    let mut c = Engine::new(Config::default());
    let ev = |t: &str, o: &Value| json!({"type": t, "object": o}).to_string();
    let info = c.state.apply_watch_event(ev("ADDED", &two_gpu_node("n")).as_bytes()).unwrap();
    assert_eq!((info.event_type.as_str(), info.key.as_str()), ("ADDED", "n"));
    c.state.apply_watch_event(ev("ADDED", &placed_pod("p", "n", "GPU-n0,NVIDIA,5,5:;")).as_bytes()).unwrap();
    assert_eq!(c.state.pod_count(), 1);
    c.state.apply_watch_event(ev("DELETED", &placed_pod("p", "n", "GPU-n0,NVIDIA,5,5:;")).as_bytes()).unwrap();
    assert_eq!(c.state.pod_count(), 0);
    let bookmark = c
        .state
        .apply_watch_event(ev("BOOKMARK", &json!({"kind": "Pod", "metadata": {"resourceVersion": "9"}})).as_bytes())
        .unwrap();
    assert_eq!(bookmark.resource_version, "9");
    let gone = c
        .state
        .apply_watch_event(ev("ERROR", &json!({"kind": "Status", "code": 410, "reason": "Expired"})).as_bytes())
        .unwrap();
    assert_eq!(gone.code, 410);
    let bad = c.state.apply_watch_event(ev("MODIFIED", &placed_pod("x", "n", "broken,,:;")).as_bytes()).unwrap();
    assert!(bad.error.unwrap().to_string().contains("default/x"));
    c.state.apply_watch_event(ev("DELETED", &two_gpu_node("n")).as_bytes()).unwrap();
    assert_eq!(c.state.node_count(), 0);
    assert!(c.state.apply_watch_event(b"{\"type\":\"ADDED\"}").is_err());
}

#[test]
fn list_pages_and_relist_retain() {
    let mut c = Engine::new(Config::default());
    let page = json!({"kind": "PodList", "metadata": {"resourceVersion": "42", "continue": "tok"},
                      "items": [placed_pod("a", "n", "G,NVIDIA,1,1:;"), placed_pod("b", "n", "G,NVIDIA,1,1:;"), placed_pod("bad", "n", "x,y:;")]});
    let info = c.state.apply_list_page(page.to_string().as_bytes()).unwrap();
    assert_eq!((info.resource_version.as_str(), info.continue_token.as_str()), ("42", "tok"));
    assert_eq!(info.keys, vec!["default/a", "default/b", "default/bad"]);
    assert_eq!(info.errors.len(), 1);
    assert_eq!(c.state.pod_count(), 2);
    let keep: std::collections::HashSet<String> = ["default/a".to_string()].into();
    assert_eq!(c.state.retain("Pod", &keep), 1);
    assert_eq!(c.state.pod_count(), 1);
    let nodes = json!({"kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": [{"metadata": {"name": "n1", "annotations": {}}}]});
    c.state.apply_list_page(nodes.to_string().as_bytes()).unwrap();
    assert_eq!(c.state.node_count(), 1);
    assert_eq!(c.state.retain("Node", &Default::default()), 1);
}
