use super::csv::{NodeRow, PodRow};
use super::metrics::round_to;
use super::*;
use crate::model::{GpuNode, HostResources};

fn nodes(n: usize) -> Vec<NodeRow> {
    let models = ["G2", "T4", "P100"];
    (0..n)
        .map(|i| NodeRow {
            name: format!("node-{i:03}"),
            cpu_milli: [96000, 64000, 32000][i % 3],
            memory_mib: 262144,
            gpu: [8, 2, 1][i % 3],
            model: models[i % 3].into(),
        })
        .collect()
}

/// A deterministic mix of CPU-only, sharing, whole and multi-GPU tasks.
fn pods(n: usize) -> Vec<PodRow> {
    (0..n)
        .map(|i| {
            let (num_gpu, gpu_milli) = match i % 7 {
                0 => (0, 0),
                1 | 2 => (1, [810, 470, 320, 230][i % 4]),
                3 | 4 => (1, 1000),
                5 => (2, 1000),
                _ => (1, 650),
            };
            PodRow {
                name: format!("pod-{i:04}"),
                cpu_milli: [3152, 11300, 8000, 12000][i % 4],
                memory_mib: 16384,
                num_gpu,
                gpu_milli,
                gpu_spec: if i % 11 == 0 && num_gpu > 0 { "T4|P100".into() } else { String::new() },
            }
        })
        .collect()
}

fn run(policy: &str, seed: i64, check_all: bool) -> Outcome {
    let options = Options { policy: NodePolicy::from_name(policy).unwrap(), seed, check_all, ..Options::default() };
    Replay::new(&nodes(30), &pods(150), options).unwrap().run().unwrap()
}

#[test]
fn every_policy_replays_and_agrees_with_the_engine_fit() {
    for name in crate::policy::POLICY_NAMES {
        let out = run(name, 42, true);
        assert_eq!(out.events.len(), out.pods, "{name}");
        let capacity = out.total_gpus * MILLI;
        let last = out.events.last().unwrap();
        assert!(last.used <= capacity && last.used > 0, "{name}: used {}", last.used);
        assert!(last.arrived as f64 >= 1.2 * capacity as f64, "{name}: tuned to 1.3x");
        assert!(out.failed > 0, "{name}: an over-subscribed cluster rejects pods");
        for w in out.events.windows(2) {
            assert!(w[1].arrived >= w[0].arrived && w[1].used >= w[0].used);
        }
    }
}

#[test]
fn same_seed_same_replay_other_seed_other_order() {
    let a = run("fgd", 7, false);
    let b = run("fgd", 7, false);
    assert_eq!(a.events, b.events);
    let c = run("fgd", 8, false);
    assert_ne!(a.events, c.events);
    let r1 = run("random", 3, false);
    let r2 = run("random", 3, false);
    assert_eq!(r1.events, r2.events);
}

#[test]
fn fgd_fragments_less_than_random() {
    let mean_frag =
        |p: &str| (42..46).map(|s| run(p, s, false).events.iter().map(|e| e.frag).sum::<f64>()).sum::<f64>();
    assert!(mean_frag("fgd") < mean_frag("random"));
}

#[test]
fn tuning_up_and_down() {
    let t = |tune: f64| {
        let options = Options { tune, ..Options::default() };
        Replay::new(&nodes(30), &pods(150), options).unwrap().run().unwrap()
    };
    let capacity = 30 / 3 * 11 * MILLI;
    let up = t(2.0);
    assert!(up.tuned > 0);
    assert!(up.events.last().unwrap().arrived as f64 <= 2.0 * capacity as f64);
    let down = t(0.2);
    assert!(down.tuned < 0);
    assert!(down.events.last().unwrap().arrived as f64 <= 0.2 * capacity as f64);
    let none = t(0.0);
    assert_eq!((none.tuned, none.pods), (0, 150));
}

#[test]
fn metrics_are_discretised_like_the_analysis_scripts() {
    let out = Outcome {
        policy: NodePolicy::Binpack,
        seed: 1,
        tune: 1.3,
        pods: 3,
        failed: 0,
        tuned: 0,
        total_gpus: 10,
        typical_types: 1,
        events: vec![
            Event { arrived: 5000, used: 5000, frag: 0.0 },
            Event { arrived: 5040, used: 4000, frag: 1000.0 },
            Event { arrived: 10000, used: 9000, frag: 500.0 },
        ],
    };
    let alloc = out.alloc_by_arrived();
    assert_eq!(alloc[&50], 45.0);
    assert_eq!(alloc[&100], 90.0);
    assert_eq!(alloc[&99], 90.0, "window x±1 when no event rounds to x");
    assert!(!alloc.contains_key(&70));
    assert_eq!(out.unallocated_at(100), Some(10.0));
    assert_eq!(out.frag_by_arrived()[&50], 5.0);
    assert_eq!(out.frag_ratio_by_arrived()[&100], 50.0);
    assert_eq!(round_to(2.5, 0), 2.0);
}

#[test]
fn cpu_only_and_host_limits() {
    let nodes = vec![NodeRow { name: "a".into(), cpu_milli: 10000, memory_mib: 1000, gpu: 1, model: "T4".into() }];
    let row = |name: &str, cpu, mem, n, m| PodRow {
        name: name.into(),
        cpu_milli: cpu,
        memory_mib: mem,
        num_gpu: n,
        gpu_milli: m,
        gpu_spec: String::new(),
    };
    let pods = vec![
        row("p1", 6000, 10, 0, 0),
        row("p2", 6000, 10, 1, 500),
        row("p3", 1000, 2000, 1, 500),
        row("p4", 1000, 10, 1, 500),
    ];
    let options = Options {
        tune: 0.0,
        shuffle: false,
        policy: NodePolicy::from_name("bestfit").unwrap(),
        check_all: true,
        ..Options::default()
    };
    let out = Replay::new(&nodes, &pods, options).unwrap().run().unwrap();
    // p2: CPU short; p3: memory short; p4 fits.
    assert_eq!(out.failed, 2);
    assert_eq!(out.events.last().unwrap().used, 500);
    let typed = vec![row("q1", 1, 1, 1, 1000)];
    let mut typed = typed;
    typed[0].gpu_spec = "V100M16".into();
    let options = Options { tune: 0.0, check_all: true, ..Options::default() };
    let out = Replay::new(&nodes, &typed, options).unwrap().run().unwrap();
    assert_eq!(out.failed, 1, "GPU model outside gpu_spec");
}

#[test]
fn host_fit_reasons_as_kube_scheduler_words_them() {
    use crate::fit::fit_host;
    let host =
        HostResources { cpu_milli: 1000, memory_mib: 100, pods: 1, pods_requested: 1, ..HostResources::default() };
    let node = GpuNode::with_devices("n", Vec::new(), Some(host));
    assert_eq!(
        fit_host(&node, 2000, 200).unwrap_err().to_string(),
        "Too many pods, Insufficient cpu, Insufficient memory"
    );
    let node = GpuNode::with_devices("n", Vec::new(), Some(HostResources { pods: 2, ..host }));
    assert_eq!(fit_host(&node, 1000, 100), Ok(()));
    assert_eq!(fit_host(&GpuNode::default(), i64::MAX, i64::MAX), Ok(()), "unknown host resources are not checked");
}
