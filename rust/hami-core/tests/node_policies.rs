//! The simulator-derived node policies (fgd, bestfit, dotprod, packing, clustering, random) in the
//! live scheduler: selected by flag or pod annotation, scored on the cluster's own state.

mod common;

use hami_core::{Config, Engine};
use serde_json::{json, Value};

const V100: &str = "NVIDIA-Tesla V100-PCIE-32GB";

fn node(name: &str) -> Value {
    let p = &name[name.len() - 1..];
    let gpu = |i: u32| json!({"id": format!("GPU-{p}{i}"), "index": i, "count": 10, "devmem": 32768, "devcore": 100, "type": V100, "health": true});
    common::node(name, vec![gpu(0), gpu(1)])
}

fn pod(name: &str, mem: &str, annotations: Value) -> Value {
    let mut p = common::vgpu_pod(name, mem);
    p["metadata"]["annotations"] = annotations;
    p
}

fn placed(name: &str, node: &str, devices: &str) -> Value {
    pod(name, "1", json!({"hami.io/vgpu-node": node, "hami.io/vgpu-devices-allocated": devices}))
}

/// node-a: GPU-a0 half used; node-b: empty; node-c: both GPUs taken by whole-GPU pods (the history).
fn cluster() -> Engine {
    let mut c = Engine::new(Config::default());
    for v in [node("node-a"), node("node-b"), node("node-c")] {
        c.state.apply(v.to_string().as_bytes()).unwrap();
    }
    for v in [
        placed("h1", "node-c", "GPU-c0,NVIDIA,32768,0:;"),
        placed("h2", "node-c", "GPU-c1,NVIDIA,32768,0:;"),
        placed("old", "node-a", "GPU-a0,NVIDIA,16384,0:;"),
    ] {
        c.state.apply(v.to_string().as_bytes()).unwrap();
    }
    c
}

fn explain(c: &mut Engine, p: &Value, node_policy: &str) -> Value {
    serde_json::to_value(c.explain(p.to_string().as_bytes(), 7, Some(node_policy), None).unwrap()).unwrap()
}

#[test]
fn fgd_closes_the_half_used_gpu() {
    let mut c = cluster();
    let half = pod("new", "16384", json!({}));
    // History: 2 whole-GPU pods and 1 half-GPU pod → FGD's target types. A half GPU on node-a's
    // half-used GPU leaves whole GPUs whole; on node-b it would break one.
    let out = explain(&mut c, &half, "fgd");
    assert_eq!(out["node"], "node-a", "{out}");
    let (a, b) = (out["scores"]["node-a"].as_f64().unwrap(), out["scores"]["node-b"].as_f64().unwrap());
    assert!(a > b, "{out}");
    assert_eq!(
        out["annotations"]["hami.io/vgpu-devices-allocated"], "GPU-a0,NVIDIA,16384,0:;",
        "FGD also picks the GPU: the half-used one"
    );
    assert_eq!(explain(&mut c, &half, "spread")["node"], "node-b");
}

#[test]
fn each_policy_scores_on_its_own_scale() {
    let mut c = cluster();
    let half = pod("new", "16384", json!({}));
    for (policy, expected) in
        [("bestfit", "node-a"), ("packing", "node-a"), ("clustering", "node-a"), ("dotprod", "node-a")]
    {
        let out = explain(&mut c, &half, policy);
        assert_eq!(out["node"], expected, "{policy}: {out}");
        for s in out["scores"].as_object().unwrap().values() {
            let s = s.as_f64().unwrap();
            assert!((0.0..=100.0).contains(&s) && s.fract() == 0.0, "{policy}: {out}");
        }
    }
    // packing: a partially used GPU beats an empty node; clustering: node-a already hosts a sharing pod.
    assert_eq!(explain(&mut c, &half, "packing")["scores"]["node-a"], 95.0);
    // clustering: base 25·(8000−1500)/8000 = 20, + 75 for a node hosting only sharing pods.
    assert_eq!(explain(&mut c, &half, "clustering")["scores"]["node-a"], 95.0);
    assert_eq!(explain(&mut c, &half, "clustering")["scores"]["node-b"], 43.0, "empty node: 18 + 25");
}

#[test]
fn random_is_reproducible_per_pod_and_annotation_selects_the_policy() {
    let mut c = cluster();
    let chosen: Vec<Value> =
        (0..20).map(|i| explain(&mut c, &pod(&format!("p{i}"), "8000", json!({})), "random")["node"].clone()).collect();
    assert!(chosen.contains(&json!("node-a")) && chosen.contains(&json!("node-b")), "{chosen:?}");
    let again: Vec<Value> =
        (0..20).map(|i| explain(&mut c, &pod(&format!("p{i}"), "8000", json!({})), "random")["node"].clone()).collect();
    assert_eq!(chosen, again);
    // The pod annotation wins over the flag, as for binpack/spread.
    let annotated = pod("new", "16384", json!({"hami.io/node-scheduler-policy": "spread"}));
    assert_eq!(explain(&mut c, &annotated, "fgd")["node"], "node-b");
    let annotated = pod("new", "16384", json!({"hami.io/node-scheduler-policy": "fgd"}));
    assert_eq!(explain(&mut c, &annotated, "spread")["node"], "node-a");
}
