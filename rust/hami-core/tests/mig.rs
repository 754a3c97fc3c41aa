//! GPUs in MIG mode through the engine's entry points: HAMi v2.10's dynamic MIG (profiles and
//! placements from the register annotation, reservations in `hami.io/vgpu-mig-allocations`).

mod common;

use hami_core::{Config, Engine};
use serde_json::{json, Value};

const MIG_KEY: &str = "hami.io/vgpu-mig-allocations";

fn profile(name: &str, mem: i32, core: i32, slices: u32, starts: &[u32], size: u32) -> Value {
    let placements: Vec<Value> = starts.iter().map(|s| json!({"start": s, "size": size})).collect();
    json!({"name": name, "memoryMB": mem, "core": core, "sliceCount": slices, "placements": placements})
}

fn a100(id: &str, index: u32) -> Value {
    let profiles = vec![
        profile("1g.5gb", 4864, 15, 1, &[0, 1, 2, 3, 4, 5, 6], 1),
        profile("2g.10gb", 9856, 29, 2, &[0, 2, 4], 2),
        profile("3g.20gb", 19968, 43, 3, &[0, 4], 4),
        profile("7g.40gb", 40192, 100, 7, &[0], 8),
    ];
    json!({"id": id, "index": index, "count": 7, "devmem": 40960, "devcore": 100, "type": "NVIDIA-A100-SXM4-40GB",
           "mode": "mig", "health": true, "migProfiles": profiles})
}

fn t4(id: &str, index: u32) -> Value {
    json!({"id": id, "index": index, "count": 10, "devmem": 15360, "devcore": 100, "type": "NVIDIA-Tesla T4",
           "mode": "hami-core", "health": true})
}

fn node(devices: Vec<Value>) -> Value {
    common::node("node-a", devices)
}

fn container(name: &str, gpus: &str, mem: &str) -> Value {
    json!({"name": name, "resources": {"limits": {"nvidia.com/gpu": gpus, "nvidia.com/gpumem": mem}}})
}

fn pod(name: &str, containers: Vec<Value>) -> Value {
    json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
           "spec": {"containers": containers}})
}

fn resident(name: &str, devices: &str, mig: Option<Value>) -> Value {
    let mut p = pod(name, vec![container("c", "1", "1000")]);
    p["metadata"]["annotations"] = json!({"hami.io/vgpu-node": "node-a", "hami.io/vgpu-devices-allocated": devices});
    if let Some(m) = mig {
        p["metadata"]["annotations"][MIG_KEY] = Value::String(m.to_string());
    }
    p
}

fn engine(items: &[Value]) -> Engine {
    let mut e = Engine::new(Config::default());
    for item in items {
        e.state.apply(item.to_string().as_bytes()).unwrap();
    }
    e
}

/// Filter with the pod's reservation recorded: the decision, with the node's failure reason (if
/// any) as `failed`.
fn filter(e: &mut Engine, p: &Value) -> Value {
    let args = json!({"Pod": p, "Nodes": null, "NodeNames": ["node-a"]});
    let out = e.filter(args.to_string().as_bytes(), 1_705_054_796, true);
    let response: Value = serde_json::from_slice(&out.response).unwrap();
    let mut decision: Value = serde_json::to_value(out.decision.expect("a decision")).unwrap();
    decision["failed"] = response["FailedNodes"]["node-a"].clone();
    decision
}

fn instances(decision: &Value) -> Vec<(i64, i64, String, String, u64)> {
    let text = decision["annotations"][MIG_KEY].as_str().unwrap_or("[]");
    let list: Vec<Value> = serde_json::from_str(text).unwrap();
    list.iter()
        .map(|a| {
            (
                a["containerIndex"].as_i64().unwrap(),
                a["deviceIndex"].as_i64().unwrap(),
                a["gpuUUID"].as_str().unwrap().to_owned(),
                a["profile"].as_str().unwrap().to_owned(),
                a["placement"]["start"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn failed(decision: &Value) -> &str {
    assert!(decision["node"].is_null(), "expected no node: {decision}");
    decision["failed"].as_str().unwrap()
}

#[test]
fn the_engine_holds_its_own_reservations_until_released() {
    let mut e = engine(&[node(vec![a100("GPU-0", 0)])]);
    let first = filter(&mut e, &pod("p1", vec![container("c", "1", "4000")]));
    assert_eq!(instances(&first), vec![(0, 0, "GPU-0".into(), "1g.5gb".into(), 6)]);
    assert_eq!(first["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-0,NVIDIA,4864,15:;");
    let second = filter(&mut e, &pod("p2", vec![container("c", "1", "4000")]));
    assert_eq!(instances(&second)[0].4, 5, "the first pod's slice 6 is taken");
    assert!(e.release("uid-p1"));
    let third = filter(&mut e, &pod("p3", vec![container("c", "1", "4000")]));
    assert_eq!(instances(&third)[0].4, 6, "slice 6 is free again");
}

#[test]
fn several_instances_of_one_gpu_in_one_container_and_across_containers() {
    let mut e = engine(&[node(vec![a100("GPU-0", 0)])]);
    let p = pod("p", vec![container("a", "2", "8000"), json!({"name": "sidecar"}), container("b", "1", "15000")]);
    let d = filter(&mut e, &p);
    assert_eq!(
        instances(&d),
        vec![
            (0, 0, "GPU-0".into(), "2g.10gb".into(), 0),
            (0, 1, "GPU-0".into(), "2g.10gb".into(), 2),
            // The GPU-less sidecar has no slot in the list HAMi writes: container b is entry 1.
            (1, 0, "GPU-0".into(), "3g.20gb".into(), 4),
        ]
    );
    assert_eq!(
        d["annotations"]["hami.io/vgpu-devices-allocated"],
        "GPU-0,NVIDIA,9856,29:GPU-0,NVIDIA,9856,29:;GPU-0,NVIDIA,19968,43:;"
    );
    // Slice 6 is left, but the instances' cores add up to 29 + 29 + 43 = 101 of the card's 100:
    // HAMi's core check comes first.
    let full = filter(&mut e, &pod("q", vec![container("c", "1", "1000")]));
    assert_eq!(failed(&full), "1/1 CardInsufficientCore");
}

#[test]
fn resident_reservations_occupy_and_inconsistent_ones_mark_gpus_unhealthy() {
    let held = json!([{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": "GPU-0", "profile": "3g.20gb",
                       "placement": {"start": 4, "size": 4}}]);
    let mut e = engine(&[node(vec![a100("GPU-0", 0)]), resident("old", "GPU-0,NVIDIA,19968,43:;", Some(held))]);
    let d = filter(&mut e, &pod("p", vec![container("c", "1", "15000")]));
    assert_eq!(instances(&d)[0].4, 0);

    // A pod on a MIG GPU without its reservation (or with a malformed one): HAMi marks the GPU unhealthy.
    for bad in [None, Some(json!("[{")), Some(json!([{"gpuUUID": "GPU-0"}]))] {
        let broken = match bad {
            Some(Value::String(text)) => {
                let mut p = resident("old", "GPU-0,NVIDIA,4864,15:;", None);
                p["metadata"]["annotations"][MIG_KEY] = Value::String(text);
                p
            }
            other => resident("old", "GPU-0,NVIDIA,4864,15:;", other),
        };
        let mut e = engine(&[node(vec![a100("GPU-0", 0)]), broken.clone()]);
        let d = filter(&mut e, &pod("p", vec![container("c", "1", "1000")]));
        assert_eq!(failed(&d), "1/1 CardNotHealth", "{broken}");
        e.state.delete(broken.to_string().as_bytes()).unwrap();
        let d = filter(&mut e, &pod("p2", vec![container("c", "1", "1000")]));
        assert_eq!(d["node"], "node-a", "healthy again once the pod is gone");
    }
}

#[test]
fn reservations_on_other_gpus_mark_what_hami_marks() {
    let on = |gpu: &str| json!([{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": gpu, "profile": "1g.5gb", "placement": {"start": 0, "size": 1}}]);
    let nodes = || node(vec![a100("GPU-0", 0), t4("GPU-t", 1)]);
    // On a hami-core GPU: that GPU is unhealthy, the MIG GPU is not.
    let mut e = engine(&[nodes(), resident("old", "GPU-t,NVIDIA,1000,0:;", Some(on("GPU-t")))]);
    let mut p = pod("p", vec![container("c", "1", "1000")]);
    p["metadata"]["annotations"] = json!({"nvidia.com/nouse-gpuuuid": "GPU-0"});
    let d = filter(&mut e, &p);
    assert_eq!(failed(&d), "1/2 CardNotHealth, 1/2 CardUuidMismatch");
    // On a GPU the node lacks: every MIG GPU of the node is unhealthy, the hami-core one is not.
    let mut e = engine(&[nodes(), resident("old", "GPU-t,NVIDIA,1000,0:;", Some(on("GPU-gone")))]);
    let d = filter(&mut e, &pod("p", vec![container("c", "1", "1000")]));
    assert_eq!(instances(&d), vec![], "placed on the T4");
    assert_eq!(d["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-t,NVIDIA,1000,0:;");
}

#[test]
fn a_request_ruling_mig_out_counts_cards() {
    let mut e = engine(&[node(vec![a100("GPU-0", 0)])]);
    let mut p = pod("p", vec![container("c", "3", "1000")]);
    let d = filter(&mut e, &p);
    assert_eq!(instances(&d).len(), 3, "three instances of one GPU");
    p["metadata"]["name"] = json!("q");
    p["metadata"]["uid"] = json!("uid-q");
    p["metadata"]["annotations"] = json!({"nvidia.com/vgpu-mode": "hami-core"});
    let d = filter(&mut e, &p);
    assert_eq!(failed(&d), "NodeInsufficientDevice");
}

#[test]
fn reregistering_the_same_gpus_keeps_the_occupancy() {
    let held = json!([{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": "GPU-0", "profile": "7g.40gb",
                       "placement": {"start": 0, "size": 8}}]);
    let mut e = engine(&[node(vec![a100("GPU-0", 0)]), resident("old", "GPU-0,NVIDIA,1000,0:;", Some(held))]);
    e.state.apply(node(vec![a100("GPU-0", 0)]).to_string().as_bytes()).unwrap();
    let d = filter(&mut e, &pod("p", vec![container("c", "1", "1000")]));
    assert_eq!(failed(&d), "1/1 CardMigTopologyInfeasible");
    // New inventory (another GPU added): usage is rebuilt from the resident pods, occupancy too.
    e.state.apply(node(vec![a100("GPU-0", 0), a100("GPU-1", 1)]).to_string().as_bytes()).unwrap();
    let d = filter(&mut e, &pod("q", vec![container("c", "1", "1000")]));
    assert_eq!(instances(&d)[0].2, "GPU-1");
}

#[test]
fn an_assigned_pod_without_a_device_list_still_holds_its_instances() {
    let held = json!([{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": "GPU-0", "profile": "7g.40gb",
                       "placement": {"start": 0, "size": 8}}]);
    let mut old = pod("old", vec![json!({"name": "c"})]);
    old["metadata"]["annotations"] = json!({"hami.io/vgpu-node": "node-a", MIG_KEY: held.to_string()});
    let mut e = engine(&[node(vec![a100("GPU-0", 0)]), old.clone()]);
    let d = filter(&mut e, &pod("p", vec![container("c", "1", "1000")]));
    assert_eq!(failed(&d), "1/1 CardMigTopologyInfeasible");
    e.state.delete(old.to_string().as_bytes()).unwrap();
    assert_eq!(filter(&mut e, &pod("q", vec![container("c", "1", "1000")]))["node"], "node-a");
}
