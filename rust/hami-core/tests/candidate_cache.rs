//! The candidate cache: its verdict memo and its recognition of a repeated list answer, over any
//! sequence of changes and any spelling of the body, exactly what a fresh evaluation answers.

mod common;

use hami_core::filter::CandidateCache;
use hami_core::{Config, Engine};
use serde_json::{json, Value};

const A100: &str = "NVIDIA A100-SXM4-80GB";
/// 2026-01-01 00:00:00 UTC, as `Requesting_` handshakes spell it below.
const ASKED: i64 = 1_767_225_600;

/// xorshift64*: a fixed sequence, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
    }
}

fn node(name: &str, gpus: u32, memory: u32, healthy: bool, handshake: Option<&str>) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| {
            json!({"id": format!("GPU-{name}-{i}"), "index": i, "count": 4, "devmem": memory, "devcore": 100,
                         "type": A100, "numa": i / 4, "mode": "hami-core", "health": healthy || i > 0})
        })
        .collect();
    let mut node = common::node(name, devices);
    if let Some(h) = handshake {
        node["metadata"]["annotations"]["hami.io/node-handshake"] = json!(h);
    }
    node
}

fn resident(name: &str, node: &str, gpu: u32, mem: u32, cores: u32) -> Value {
    json!({"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                        "annotations": {"hami.io/vgpu-node": node,
                                        "hami.io/vgpu-devices-allocated": format!("GPU-{node}-{gpu},NVIDIA,{mem},{cores}:;")}},
           "spec": {"nodeName": node, "containers": [{"name": "c"}]}, "status": {"phase": "Running"}})
}

fn pending(name: &str, shape: u64) -> Value {
    let (limits, annotations) = match shape {
        0 => (json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}), json!({})),
        1 => (json!({"nvidia.com/gpu": "2", "nvidia.com/gpumem": "10000"}), json!({})),
        2 => (json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "50"}), json!({})),
        3 => (json!({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}), json!({})),
        4 => (json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5000"}), json!({"nvidia.com/use-gputype": "A100"})),
        _ => (json!({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5000"}), json!({"nvidia.com/nouse-gputype": "A100"})),
    };
    json!({"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "annotations": annotations},
           "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})
}

fn apply(e: &mut Engine, v: &Value) {
    e.state.apply(v.to_string().as_bytes()).unwrap();
}

/// Filter with the engine's memo, then the same call on a fresh cache: both answers and decisions.
fn both(e: &mut Engine, args: &[u8], now: i64) -> (String, String) {
    let memo = e.filter(args, now, false);
    let kept = std::mem::take(&mut e.candidates);
    let fresh = e.filter(args, now, false);
    e.candidates = kept;
    let text = |o: &hami_core::FilterOutcome| {
        format!("{} {:?}", String::from_utf8_lossy(&o.response), o.decision.as_ref().map(|d| (&d.node, &d.events)))
    };
    (text(&memo), text(&fresh))
}

#[test]
fn memo_answers_as_a_fresh_evaluation_through_every_kind_of_change() {
    let mut e = Engine::new(Config::default());
    let names: Vec<String> = (0..12).map(|i| format!("n{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        apply(&mut e, &node(n, 2 + (i % 3) as u32, 40960 + 20480 * (i % 2) as u32, true, None));
    }
    let mut candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    candidates.push("not-a-node");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut now, mut residents, mut checked) = (ASKED + 1, 0u32, 0);
    for step in 0..600 {
        change(&mut e, &mut rng, &names, &mut now, &mut residents, true);
        let pod = pending(&format!("p{step}"), rng.below(6));
        // kube-scheduler gathers feasible nodes in parallel: the list comes in other orders and subsets.
        let mut list = candidates.clone();
        match rng.below(4) {
            0 => {
                let by = 1 + rng.below(list.len() as u64 - 1) as usize;
                list.rotate_left(by);
            }
            1 => list.retain(|_| rng.below(3) > 0),
            _ => {}
        }
        let args = json!({"Pod": pod, "Nodes": null, "NodeNames": list}).to_string();
        let (memo, fresh) = both(&mut e, args.as_bytes(), now);
        assert_eq!(memo, fresh, "step {step} at {now}");
        checked += 1;
        if rng.below(3) == 0 {
            e.filter(args.as_bytes(), now, true); // a reservation: one node changes
        }
    }
    assert_eq!(checked, 600);
}

/// HAMi's handshake request at `at` (Unix seconds on 2026-01-01, as [`ASKED`]).
fn requesting(at: i64) -> String {
    let s = (at - ASKED).clamp(0, 86_399);
    format!("Requesting_2026-01-01 {:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A change to the cluster, as kube-scheduler's pods and the device plugins make them (a
/// registration pass among them when `passes`).
fn change(e: &mut Engine, rng: &mut Rng, names: &[String], now: &mut i64, residents: &mut u32, passes: bool) {
    let target = &names[rng.below(names.len() as u64) as usize];
    match rng.below(10) {
        0 | 1 => {
            *residents += 1;
            apply(e, &resident(&format!("r{residents}"), target, rng.below(2) as u32, 4096, 10));
        }
        2 if *residents > 0 => {
            let gone = resident(&format!("r{}", 1 + rng.below(u64::from(*residents))), target, 0, 0, 0);
            let _ = e.state.delete(gone.to_string().as_bytes());
        }
        3 => {
            // An unanswered handshake asked up to 40 s ago: registered or not by the clock for a while.
            let handshake = (rng.below(2) == 0).then(|| requesting(*now - 20 * rng.below(3) as i64));
            apply(e, &node(target, 2 + rng.below(3) as u32, 40960, rng.below(3) > 0, handshake.as_deref()));
        }
        4 => *now += 20 * rng.below(3) as i64,
        5 if passes => {
            let _ = e.state.registration_pass(*now);
        }
        _ => {}
    }
}

/// kube-scheduler sends the same list for pod after pod in Go's field order, so the list is
/// recognised and the fits are read off their kept order: every answer and event (the first 20
/// fits of 25, the counts, spread and binpack, a name listed twice) is a fresh evaluation's.
#[test]
fn ranked_fits_answer_as_a_fresh_evaluation_over_a_repeated_list() {
    let mut e = Engine::new(Config::default());
    let names: Vec<String> = (0..25).map(|i| format!("n{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        apply(&mut e, &node(n, 2 + (i % 3) as u32, 40960 + 20480 * (i % 2) as u32, true, None));
    }
    let mut base: Vec<&str> = names.iter().map(String::as_str).collect();
    base.extend(["not-a-node", "n05"]);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (mut now, mut residents, mut read_off_order) = (ASKED + 1, 0u32, 0);
    let (mut shape, mut policy, mut list) = (0, "", base.clone());
    for step in 0..600 {
        // No registration pass at first: a node re-registered with an unanswered handshake is then
        // judged by the clock, and re-checked on every call.
        change(&mut e, &mut rng, &names, &mut now, &mut residents, step >= 300);
        if rng.below(5) < 2 {
            shape = rng.below(6);
            policy = ["", "spread", "binpack"][rng.below(3) as usize];
        }
        if rng.below(10) < 3 {
            list = base.clone();
            match rng.below(2) {
                0 => list.rotate_left(1 + rng.below(base.len() as u64 - 1) as usize),
                _ => list.retain(|_| rng.below(4) > 0),
            }
        }
        let mut pod = pending(&format!("p{step}"), shape);
        if !policy.is_empty() {
            pod["metadata"]["annotations"]["hami.io/node-scheduler-policy"] = json!(policy);
        }
        let body = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":{}}}"#, json!(list));
        read_off_order += usize::from(e.candidates.ranked_fits() > 0);
        let (memo, fresh) = both(&mut e, body.as_bytes(), now);
        assert_eq!(memo, fresh, "step {step} at {now}");
        if rng.below(2) == 0 {
            e.filter(body.as_bytes(), now, true); // a reservation: one node changes
        }
    }
    assert!(read_off_order > 150, "only {read_off_order} of 600 calls could read the kept order");
}

#[test]
fn an_unanswered_handshake_answers_as_a_fresh_evaluation_across_its_timeout() {
    let mut e = Engine::new(Config::default());
    apply(&mut e, &node("n", 2, 40960, true, None));
    apply(&mut e, &node("m", 2, 40960, true, Some("Requesting_2026-01-01 00:00:00")));
    let args = json!({"Pod": pending("p", 0), "Nodes": null, "NodeNames": ["n", "m"]}).to_string();
    for (now, pass) in
        [(ASKED, false), (ASKED + 59, false), (ASKED + 61, false), (ASKED + 62, true), (ASKED + 200, false)]
    {
        if pass {
            let _ = e.state.registration_pass(now);
        }
        let (memo, fresh) = both(&mut e, args.as_bytes(), now);
        assert_eq!(memo, fresh, "at {now}");
    }
}

#[test]
fn the_same_request_again_reuses_the_verdicts_of_unchanged_nodes_only() {
    let mut e = Engine::new(Config::default());
    apply(&mut e, &node("a", 2, 40960, true, None));
    apply(&mut e, &node("b", 2, 40960, true, None));
    let args = |name: &str| json!({"Pod": pending(name, 0), "Nodes": null, "NodeNames": ["a", "b"]}).to_string();
    let first = e.filter(args("p1").as_bytes(), ASKED, true);
    assert_eq!(first.decision.unwrap().node.as_deref(), Some("a"));
    // Fill node a up behind the memo's back as far as the API goes: a resident pod takes its memory.
    apply(&mut e, &resident("big0", "a", 0, 40960 - 20000 + 1, 10));
    apply(&mut e, &resident("big1", "a", 1, 40960 - 20000 + 1, 10));
    let second = e.filter(args("p2").as_bytes(), ASKED, true);
    let failed: Value = serde_json::from_slice(&second.response).unwrap();
    assert_eq!(second.decision.unwrap().node.as_deref(), Some("b"), "{failed}");
    assert_eq!(e.candidates.reusable(), 2, "both verdicts kept for the next pod of this shape");
    apply(&mut e, &resident("small", "b", 0, 100, 1));
    let third = e.filter(args("p3").as_bytes(), ASKED, false);
    assert_eq!(third.decision.unwrap().node.as_deref(), Some("b"));
    assert_eq!(CandidateCache::default().reusable(), 0);
}

fn answer(e: &mut Engine, body: &str) -> Value {
    serde_json::from_slice(&e.filter(body.as_bytes(), ASKED, false).response).unwrap()
}

fn fresh_answer(e: &mut Engine, body: &str) -> Value {
    let kept = std::mem::take(&mut e.candidates);
    let out = answer(e, body);
    e.candidates = kept;
    out
}

#[test]
fn a_repeated_list_is_recognised_only_where_the_whole_body_means_the_same() {
    let mut e = Engine::new(Config::default());
    for n in ["a", "b", "c"] {
        apply(&mut e, &node(n, 2, 40960, true, None));
    }
    apply(&mut e, &resident("busy", "a", 0, 40000, 10));
    apply(&mut e, &resident("busy2", "a", 1, 40000, 10));
    let pod = pending("p", 0).to_string();
    let list = r#"["a","b"]"#;
    let go = format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":{list}}}"#);
    let first = answer(&mut e, &go);
    assert_eq!(first["NodeNames"], json!(["b"]));
    let spellings = [
        go.clone(),
        format!("{go} \n"),
        format!(r#"{{"Pod":{pod},"NodeNames":{list}}}"#),
        format!(r#"{{"NodeNames":{list},"Pod":{pod}}}"#),
        format!(r#"{{"Pod":{pod},"nodenames":["c"],"NodeNames":{list}}}"#),
        format!(r#"{{"Pod":{pod},"NodeNames":["c"]}}"#),
        format!(r#"{{"Pod":{pod},"NodeNames":["a","b","c"]}}"#),
        format!(r#"{{"Pod":{pod},"NodeNames": {list}}}"#),
    ];
    for body in &spellings {
        answer(&mut e, &go); // the cache holds ["a","b"] again
        assert_eq!(answer(&mut e, body), fresh_answer(&mut e, body), "{body}");
    }
    answer(&mut e, &go);
    for broken in [
        format!(r#"{{,"NodeNames":{list}}}"#),
        format!(r#"{{"Pod":{pod},,"NodeNames":{list}}}"#),
        format!(r#"{{"Pod":{pod}"NodeNames":{list}}}"#),
    ] {
        let out = answer(&mut e, &broken);
        assert!(out["Error"].as_str().unwrap().starts_with("decode ExtenderArgs"), "{broken}: {out}");
    }
    // A pod without vGPU requests is passed through with the cached names.
    answer(&mut e, &go);
    let plain =
        json!({"kind": "Pod", "metadata": {"name": "x", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}]}});
    let passthrough = answer(&mut e, &format!(r#"{{"Pod":{plain},"Nodes":null,"NodeNames":{list}}}"#));
    assert_eq!(passthrough["NodeNames"], json!(["a", "b"]));
    // A node added since: the list means other nodes now, and is read again.
    answer(&mut e, &format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":["a","b","d"]}}"#));
    apply(&mut e, &node("d", 2, 40960, true, None));
    let body = format!(r#"{{"Pod":{},"Nodes":null,"NodeNames":["a","d"]}}"#, pending("q", 3));
    assert_eq!(answer(&mut e, &body), fresh_answer(&mut e, &body));
}

fn dcu_node(name: &str, cards: u32, memory: u32, healthy: bool) -> Value {
    let register: String = (0..cards)
        .map(|i| format!("DCU-{name}-{i},4,{memory},100,DCU-Z100L,0,{},{i},hami-core:", healthy || i > 0))
        .collect();
    json!({"kind": "Node", "apiVersion": "v1",
           "metadata": {"name": name, "annotations": {"hami.io/node-dcu-register": register}},
           "status": {"allocatable": {"hygon.com/dcunum": (cards * 4).to_string()}}})
}

fn dcu_resident(name: &str, node: &str, card: u32, mem: u32, cores: u32) -> Value {
    json!({"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                        "annotations": {"hami.io/vgpu-node": node,
                                        "hami.io/dcu-devices-allocated": format!("DCU-{node}-{card},DCU,{mem},{cores}:;")}},
           "spec": {"nodeName": node, "containers": [{"name": "c"}]}, "status": {"phase": "Running"}})
}

fn dcu_pending(name: &str, shape: u64, node: &str) -> Value {
    let (limits, annotations) = match shape {
        0 => (json!({"hygon.com/dcunum": "1", "hygon.com/dcumem": "20000", "hygon.com/dcucores": "30"}), json!({})),
        1 => (json!({"hygon.com/dcunum": "2", "hygon.com/dcumem": "10000"}), json!({})),
        2 => (json!({"hygon.com/dcunum": "1", "hygon.com/dcucores": "100"}), json!({})),
        3 => (json!({"hygon.com/dcunum": "1", "hygon.com/dcumem": "5000"}), json!({"hygon.com/use-dcutype": "Z100"})),
        4 => (
            json!({"hygon.com/dcunum": "1", "hygon.com/dcumem": "5000"}),
            json!({"hygon.com/nouse-gpuuuid": format!("DCU-{node}-1")}),
        ),
        _ => (json!({"hygon.com/dcunum": "3", "hygon.com/dcumem": "30000", "hygon.com/dcucores": "40"}), json!({})),
    };
    json!({"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "annotations": annotations},
           "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})
}

/// A vendor's pods keep their verdicts per node as NVIDIA's do: through residents coming and
/// going, cards turning unhealthy, nodes re-registered with other cards and the engine's own
/// reservations, every answer is a fresh evaluation's (the same request shape repeats often).
#[test]
fn vendor_memo_answers_as_a_fresh_evaluation_through_every_kind_of_change() {
    let mut e = Engine::new(Config::default());
    let names: Vec<String> = (0..12).map(|i| format!("d{i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        apply(&mut e, &dcu_node(n, 2 + (i % 3) as u32, 32768 + 32768 * (i % 2) as u32, true));
    }
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let (mut residents, mut checked) = (0u32, 0);
    for step in 0..600 {
        let target = &names[rng.below(names.len() as u64) as usize];
        match rng.below(8) {
            0 | 1 => {
                residents += 1;
                let (card, mem) = (rng.below(2) as u32, 4096 * (1 + rng.below(4) as u32));
                apply(&mut e, &dcu_resident(&format!("r{residents}"), target, card, mem, 10));
            }
            2 if residents > 0 => {
                let gone = dcu_resident(&format!("r{}", 1 + rng.below(u64::from(residents))), target, 0, 0, 0);
                let _ = e.state.delete(gone.to_string().as_bytes());
            }
            3 => apply(&mut e, &dcu_node(target, 2 + rng.below(3) as u32, 32768, rng.below(3) > 0)),
            _ => {}
        }
        let shape = if rng.below(3) == 0 { rng.below(6) } else { step as u64 / 50 % 6 };
        let pod = dcu_pending(&format!("p{step}"), shape, target);
        let mut list: Vec<&str> = names.iter().map(String::as_str).collect();
        match rng.below(3) {
            0 => list.rotate_left(1 + rng.below(names.len() as u64 - 1) as usize),
            1 => list.retain(|_| rng.below(3) > 0),
            _ => {}
        }
        let args = json!({"Pod": pod, "Nodes": null, "NodeNames": list}).to_string();
        let (memo, fresh) = both(&mut e, args.as_bytes(), ASKED);
        assert_eq!(memo, fresh, "step {step}");
        checked += 1;
        if rng.below(2) == 0 {
            e.filter(args.as_bytes(), ASKED, true);
        }
    }
    assert_eq!(checked, 600);
}

/// kube-scheduler's body: `NodeNames` last, no spaces (the list is then read off the text).
fn go_body(pod: &Value, names: &[&str]) -> String {
    format!(r#"{{"Pod":{pod},"Nodes":null,"NodeNames":{}}}"#, json!(names))
}

#[test]
fn a_node_changed_between_two_lists_is_judged_again() {
    let mut e = Engine::new(Config::default());
    for n in ["a", "b", "c"] {
        apply(&mut e, &node(n, 2, 40960, true, None));
    }
    apply(&mut e, &resident("warm", "a", 0, 4096, 10)); // binpack prefers the busier node
    let first = e.filter(go_body(&pending("p1", 0), &["a", "b"]).as_bytes(), ASKED, false);
    assert_eq!(first.decision.unwrap().node.as_deref(), Some("a"));
    // Node a fills up between the two calls; the next list is another one that still names it.
    apply(&mut e, &resident("big0", "a", 0, 40960 - 4096 - 20000 + 1, 10));
    apply(&mut e, &resident("big1", "a", 1, 40960 - 20000 + 1, 10));
    apply(&mut e, &resident("warm-c", "c", 0, 2048, 10));
    let second = e.filter(go_body(&pending("p2", 0), &["c", "a", "b"]).as_bytes(), ASKED, false);
    let failed: Value = serde_json::from_slice(&second.response).unwrap();
    assert_eq!(second.decision.unwrap().node.as_deref(), Some("c"), "{failed}");
    // A node replaced by another of a new name: the old name is no node any more, the new one is.
    let gone = node("b", 2, 40960, true, None);
    e.state.delete(gone.to_string().as_bytes()).unwrap();
    apply(&mut e, &node("d", 2, 40960, true, None));
    apply(&mut e, &resident("full-c0", "c", 0, 40960 - 2048, 10));
    apply(&mut e, &resident("full-c1", "c", 1, 40960, 10));
    let third = e.filter(go_body(&pending("p3", 0), &["b", "c", "d"]).as_bytes(), ASKED, false);
    assert_eq!(third.decision.unwrap().node.as_deref(), Some("d"));
    let body = go_body(&pending("p4", 0), &["d", "b"]);
    assert_eq!(answer(&mut e, &body), fresh_answer(&mut e, &body));
}

/// kube-scheduler's lists as its rotating start index makes them (a window that moves on every
/// call, names read off the text and resolved in the compact index), through every kind of change,
/// nodes added and removed among them: every answer and event is a fresh evaluation's.
#[test]
fn rotating_windows_answer_as_a_fresh_evaluation() {
    let mut e = Engine::new(Config::default());
    let mut names: Vec<String> = (0..40).map(|i| format!("n{:02}", (i * 17) % 40)).collect();
    for (i, n) in names.iter().enumerate() {
        apply(&mut e, &node(n, 2 + (i % 3) as u32, 40960 + 20480 * (i % 2) as u32, true, None));
    }
    let mut rng = Rng(0x51_7CC1_B727_220A);
    let (mut now, mut residents, mut start) = (ASKED + 1, 0u32, 0usize);
    for step in 0..500 {
        change(&mut e, &mut rng, &names, &mut now, &mut residents, step >= 250);
        if rng.below(25) == 0 {
            // A node goes and another comes: the set of nodes (and the index) changes.
            let k = rng.below(names.len() as u64) as usize;
            let gone = node(&names[k], 2, 40960, true, None);
            let _ = e.state.delete(gone.to_string().as_bytes());
            names[k] = format!("m{step:03}");
            apply(&mut e, &node(&names[k], 2 + rng.below(3) as u32, 40960, true, None));
        }
        start = (start + 1 + rng.below(12) as usize) % names.len();
        let mut window: Vec<&str> = (0..25).map(|i| names[(start + i) % names.len()].as_str()).collect();
        if rng.below(4) == 0 {
            window.push("not-a-node");
            window.push(window[3]);
        }
        let mut pod = pending(&format!("p{step}"), rng.below(6));
        if rng.below(3) == 0 {
            pod["metadata"]["annotations"]["hami.io/node-scheduler-policy"] = json!("spread");
        }
        let body = go_body(&pod, &window);
        let memo = e.filter(body.as_bytes(), now, false);
        // The same request parsed whole (keys sorted: the list first) on a fresh cache.
        let kept = std::mem::take(&mut e.candidates);
        let parsed = json!({"Pod": pod, "Nodes": null, "NodeNames": window}).to_string();
        let fresh = e.filter(parsed.as_bytes(), now, false);
        e.candidates = kept;
        let text = |o: &hami_core::FilterOutcome| {
            let decision = o.decision.as_ref().map(|d| (&d.node, &d.events));
            format!("{} {decision:?}", String::from_utf8_lossy(&o.response))
        };
        assert_eq!(text(&memo), text(&fresh), "step {step} at {now}");
        if rng.below(2) == 0 {
            e.filter(body.as_bytes(), now, true);
        }
    }
}
