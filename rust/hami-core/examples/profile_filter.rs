//! Quick timing of one filter over a synthetic cluster: `cargo run --release --example profile_filter -- 5000`.
use hami_core::{Config, Engine};
use serde_json::json;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let mut c = Engine::new(Config::default());
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("n{i:05}");
        let devs: Vec<_> = (0..8).map(|g| json!({"id": format!("GPU-{name}-{g}"), "index": g, "count": 10, "devmem": 81920, "devcore": 100, "type": "NVIDIA A100", "health": true})).collect();
        c.state.apply(json!({"kind": "Node", "metadata": {"name": name, "annotations": {"hami.io/node-nvidia-register": serde_json::Value::Array(devs).to_string()}}}).to_string().as_bytes()).unwrap();
        names.push(name);
    }
    let pod = json!({"metadata": {"name": "p", "namespace": "b", "uid": "u"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "12000", "nvidia.com/gpucores": "25"}}}]}});
    let body = json!({"Pod": pod, "NodeNames": names}).to_string();
    for _ in 0..3 {
        let t = Instant::now();
        let rounds = 50;
        for _ in 0..rounds {
            std::hint::black_box(c.filter(body.as_bytes(), 1, false));
        }
        println!("{n} nodes: {:?} per filter", t.elapsed() / rounds);
    }
    let t = Instant::now();
    for _ in 0..50 {
        std::hint::black_box(
            serde_json::from_slice::<hami_core::k8s::extender::ExtenderArgs>(body.as_bytes()).unwrap(),
        );
    }
    println!("parse only: {:?}", t.elapsed() / 50);
}
