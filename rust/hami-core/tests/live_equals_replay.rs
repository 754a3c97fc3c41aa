//! The live extender decides as the trace replay does: a generated trace is replayed pod by
//! pod; before each pod the engine holds the replay's state as Kubernetes objects (fed as the
//! watches would feed it, and at some steps rebuilt from a snapshot), is asked the pod's Filter
//! over the nodes kube-scheduler's NodeResourcesFit lets through, and must choose the replay's
//! node and GPUs.

use hami_core::codec::{decode_pod_devices, ALLOCATED_KEY};
use hami_core::replay::csv::{parse_nodes, parse_pods};
use hami_core::replay::{LiveStep, Options, Replay};
use hami_core::{Config, Engine, Outcome};
use serde::Serialize;
use serde_json::{json, Value};

/// 2026-01-01T00:10:00Z: after the nodes' handshake, so they are registered.
const NOW: i64 = 1_767_226_200;

/// A small openb-like cluster: GPU models with 2 or 8 GPUs, CPU-only nodes.
fn nodes_csv() -> String {
    let kinds = [("P100", 2, 64_000), ("T4", 2, 104_000), ("G2", 8, 96_000), ("V100M32", 8, 96_000), ("", 0, 96_000)];
    let mut out = String::from("sn,cpu_milli,memory_mib,gpu,model\n");
    for i in 0..70 {
        let (model, gpu, cpu) = kinds[i % kinds.len()];
        out.push_str(&format!("node-{i:03},{cpu},393216,{gpu},{model}\n"));
    }
    out
}

/// GPU slices drawn as openb's are: mostly 470 and 810 milli, few small enough for the rooms that
/// 470 + 320 or 650 + 230 leave (so `fgd-balance` has dead rooms to avoid), and the rest of
/// 100..950 in steps of 50.
fn slice_milli(draw: u64, uniform: u64) -> i64 {
    const OPENB: [i64; 40] = [
        110, 220, 230, 230, 320, 320, 320, 320, 320, 460, 460, 470, 470, 470, 470, 470, 470, 470, 470, 470, 550, 550,
        590, 650, 650, 650, 650, 810, 810, 810, 810, 810, 810, 810, 810, 810, 810, 810, 810, 810,
    ];
    match OPENB.get(draw as usize) {
        Some(&milli) => milli,
        None => 100 + 50 * uniform as i64,
    }
}

/// Pods of every kind: sharing, 1/2/4/8 whole GPUs, CPU-only, some without a CPU request, and
/// (when `named`) a tenth naming the models they accept.
fn pods_csv(named: bool) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut out = String::from("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n");
    for i in 0..400 {
        let (num_gpu, milli) = match next(20) {
            0..=9 => (1, slice_milli(next(50), next(18))),
            10..=14 => (1, 1000),
            15..=16 => (2, 1000),
            17 => (4, 1000),
            18 => (8, 1000),
            _ => (0, 0),
        };
        let cpu = if next(12) == 0 { 0 } else { 1000 * (1 + next(24)) };
        let spec = match (named && num_gpu > 0, next(10)) {
            (true, 0) => "T4",
            (true, 1) => "V100M32|G2",
            _ => "",
        };
        out.push_str(&format!("pod-{i:04},{cpu},{},{num_gpu},{milli},{spec}\n", 1024 * (1 + next(32))));
    }
    out
}

fn engine(policy: &str, replay: &Replay) -> Engine {
    let gpu_policy = if policy == "spread" { "spread" } else { "binpack" };
    let mut config =
        Config { node_scheduler_policy: policy.into(), gpu_scheduler_policy: gpu_policy.into(), ..Config::default() };
    if policy == "fgd" {
        config.fgd_target_workload = replay.fgd_target_workload();
    }
    Engine::new(config)
}

fn apply(engine: &mut Engine, object: &impl Serialize) {
    engine.state.apply(&serde_json::to_vec(object).unwrap()).expect("the replay's objects are valid");
}

/// What the extender decides for the step's pod: the node and the GPUs of its allocation.
fn extender_choice(engine: &mut Engine, step: &LiveStep, record: bool) -> Option<(String, Vec<String>)> {
    let body = json!({"Pod": step.pod, "NodeNames": step.host_fits});
    let out = engine.filter(body.to_string().as_bytes(), NOW, record);
    assert!(matches!(out.outcome, Outcome::Scheduled | Outcome::Unschedulable), "{:?}", out.response);
    let decision = out.decision?;
    let node = decision.node?;
    let devices = decode_pod_devices(&decision.annotations[ALLOCATED_KEY]).expect("HAMi's format");
    let mut gpus: Vec<String> = devices.into_iter().flatten().map(|d| d.uuid).collect();
    gpus.sort();
    Some((node, gpus))
}

fn sorted(placed: &Option<(String, Vec<String>)>) -> Option<(String, Vec<String>)> {
    placed.clone().map(|(n, mut g)| {
        g.sort();
        (n, g)
    })
}

/// Replays the generated trace under `policy`, checking the extender at every GPU pod; returns
/// how many pods were checked (every 29th also on an engine rebuilt from a snapshot).
fn check(policy: &str, named: bool) -> usize {
    let nodes = parse_nodes("nodes.csv", &nodes_csv()).unwrap();
    let pods = parse_pods("pods.csv", &pods_csv(named)).unwrap();
    let options = Options { policy: hami_core::policy::NodePolicy::from_name(policy).unwrap(), ..Options::default() };
    check_replay(policy, Replay::new(&nodes, &pods, options).unwrap(), usize::MAX, 29)
}

/// The first `steps` pods of `replay`: before each, the engine fed as the watches would (and
/// every `fresh`-th pod one rebuilt from the objects so far) must choose the replay's node and
/// GPUs. Returns how many GPU pods were checked.
fn check_replay(policy: &str, mut replay: Replay, steps: usize, fresh: usize) -> usize {
    let mut live = engine(policy, &replay);
    let mut objects: Vec<Value> = replay.node_objects().iter().map(|n| serde_json::to_value(n).unwrap()).collect();
    objects.iter().for_each(|o| apply(&mut live, o));
    live.state.registration_pass(NOW);
    let (mut checked, mut k) = (0, 0);
    while let Some(step) = replay.next_live_step().unwrap().filter(|_| k < steps) {
        k += 1;
        let expected = sorted(&step.placed);
        if step.gpu && !step.host_fits.is_empty() {
            if k % fresh == 0 {
                let mut rebuilt = engine(policy, &replay);
                let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
                apply(&mut rebuilt, &list);
                rebuilt.state.registration_pass(NOW);
                let chosen = extender_choice(&mut rebuilt, &step, false);
                assert_eq!(chosen, expected, "{policy}: pod {k} on an engine rebuilt from the snapshot");
            }
            let chosen = extender_choice(&mut live, &step, true);
            assert_eq!(chosen, expected, "{policy}: pod {k}, the extender against the replay");
            checked += 1;
        }
        apply(&mut live, &step.object);
        objects.push(serde_json::to_value(&step.object).unwrap());
    }
    checked
}

#[test]
fn every_node_policy_places_live_as_the_replay() {
    for policy in ["fgd-balance", "fgd", "bestfit", "dotprod", "packing", "clustering", "binpack", "spread"] {
        let checked = check(policy, false);
        assert!(checked > 250, "{policy}: only {checked} GPU pods checked");
    }
}

#[test]
fn pods_that_name_their_models_are_placed_live_as_the_replay() {
    for policy in ["fgd-balance", "fgd"] {
        let checked = check(policy, true);
        assert!(checked > 250, "{policy}: only {checked} GPU pods checked");
    }
}

/// The openb `default` trace (read in place from `../shared/data/openb`), seed 42: the first
/// 300 pods under `fgd-balance` and FGD. Skipped, saying so, when the traces are not there.
#[test]
fn openb_default_places_live_as_the_replay() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/openb");
    let (nodes, pods) = (dir.join("openb_node_list_gpu_node.csv"), dir.join("openb_pod_list_default.csv"));
    let (Ok(nodes), Ok(pods)) = (std::fs::read_to_string(&nodes), std::fs::read_to_string(&pods)) else {
        eprintln!("SKIPPED openb_default_places_live_as_the_replay: no openb traces at {}", dir.display());
        return;
    };
    let nodes = parse_nodes("nodes.csv", &nodes).unwrap();
    let pods = parse_pods("pods.csv", &pods).unwrap();
    for policy in ["fgd-balance", "fgd"] {
        let options =
            Options { policy: hami_core::policy::NodePolicy::from_name(policy).unwrap(), ..Options::default() };
        let checked = check_replay(policy, Replay::new(&nodes, &pods, options).unwrap(), 300, 97);
        assert!(checked > 250, "{policy}: only {checked} GPU pods checked");
    }
}
