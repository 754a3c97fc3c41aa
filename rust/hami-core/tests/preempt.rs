//! vGPU-aware preemption: the victims chosen for a rejected pod are the fewest and lowest-priority
//! pods whose removal lets it fit on one node by the engine's Fit, never of equal or higher priority.

mod common;

use hami_core::preempt::Preemption;
use hami_core::{Config, Engine, Outcome};
use serde_json::{json, Value};

const NOW: i64 = 1705054796;
const GPU_MEM: i64 = 32768;

fn node(name: &str, gpus: u32) -> Value {
    common::v100_node(name, gpus)
}

fn pending(name: &str, priority: i32, mem: i64) -> Value {
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
           "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"priority": priority, "containers": [{"name": "c", "resources": {"limits":
               {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem.to_string()}}}]}})
}

/// A running pod of `priority` holding `mem` of GPU `gpu` of `node`.
fn holder(name: &str, priority: i32, node: &str, gpu: u32, mem: i64) -> Value {
    let mut p = pending(name, priority, mem);
    p["metadata"]["annotations"] = json!({"hami.io/vgpu-node": node,
        "hami.io/vgpu-devices-allocated": format!("GPU-{node}-{gpu},NVIDIA,{mem},0:;")});
    p["spec"]["nodeName"] = json!(node);
    p
}

fn apply(e: &mut Engine, v: &Value) {
    e.state.apply(v.to_string().as_bytes()).unwrap();
}

fn filter(e: &mut Engine, p: &Value, names: &[&str]) -> Outcome {
    let args = json!({"Pod": p, "Nodes": null, "NodeNames": names});
    e.filter(args.to_string().as_bytes(), NOW, true).outcome
}

fn engine(nodes: &[(&str, u32)], holders: &[Value]) -> Engine {
    let mut e = Engine::new(Config::default());
    nodes.iter().for_each(|(n, gpus)| apply(&mut e, &node(n, *gpus)));
    holders.iter().for_each(|h| apply(&mut e, h));
    e
}

/// Rejects `pod` on `names` (it must not fit), then one preemption pass.
fn preempt_for(e: &mut Engine, pod: &Value, names: &[&str]) -> Vec<Preemption> {
    assert_eq!(filter(e, pod, names), Outcome::Unschedulable);
    let pass = e.preempt(NOW);
    assert!(!pass.more);
    pass.preemptions
}

fn victims(p: &Preemption) -> Vec<&str> {
    p.choice.victims.iter().map(|v| v.name.as_str()).collect()
}

#[test]
fn the_fewest_victims_free_a_gpu_one_big_pod_rather_than_four_small_ones() {
    let mut holders = vec![holder("big", 0, "n1", 0, GPU_MEM)];
    holders.extend((0..4).map(|i| holder(&format!("small-{i}"), 0, "n1", 1, GPU_MEM / 4)));
    let mut e = engine(&[("n1", 2)], &holders);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"])[..] else { panic!() };
    assert_eq!(victims(p), ["big"]);
    assert_eq!((p.choice.node.as_str(), p.choice.gpus.clone()), ("n1", vec!["GPU-n1-0".to_owned()]));
    assert_eq!((p.name.as_str(), p.uid.as_str(), p.priority), ("urgent", "uid-urgent", 100));
}

#[test]
fn the_lowest_priority_pod_goes_not_a_higher_one_that_would_free_as_much() {
    let holders =
        [holder("mid", 50, "n1", 0, GPU_MEM), holder("low", 10, "n1", 1, GPU_MEM), holder("lowest", 5, "n1", 2, 8192)];
    let mut e = engine(&[("n1", 3)], &holders);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"])[..] else { panic!() };
    assert_eq!(victims(p), ["lowest"]);
    assert_eq!(p.choice.gpus, ["GPU-n1-2"]);
    // Two lower pods on one GPU where one would not do: both go, and no one else.
    let holders =
        [holder("mid", 50, "n1", 0, GPU_MEM), holder("a", 10, "n1", 1, 16384), holder("b", 20, "n1", 1, 16384)];
    let mut e = engine(&[("n1", 2)], &holders);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"])[..] else { panic!() };
    assert_eq!(victims(p), ["b", "a"], "highest priority first, as kube-scheduler lists them");
}

#[test]
fn a_pod_of_equal_or_higher_priority_is_never_a_victim() {
    let holders = [holder("same", 100, "n1", 0, GPU_MEM), holder("higher", 1000, "n1", 1, GPU_MEM)];
    let mut e = engine(&[("n1", 2)], &holders);
    assert!(preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"]).is_empty());
    // Unset priorities read as 0: equal, so no victims either.
    let mut e = engine(&[("n1", 1)], &[holder("unset", 0, "n1", 0, GPU_MEM)]);
    let mut pod = pending("also-unset", 0, GPU_MEM);
    pod["spec"].as_object_mut().unwrap().remove("priority");
    assert!(preempt_for(&mut e, &pod, &["n1"]).is_empty());
}

#[test]
fn preemption_policy_never_evicts_no_one() {
    let mut e = engine(&[("n1", 1)], &[holder("low", 0, "n1", 0, GPU_MEM)]);
    let mut pod = pending("polite", 100, GPU_MEM);
    pod["spec"]["preemptionPolicy"] = json!("Never");
    assert!(preempt_for(&mut e, &pod, &["n1"]).is_empty());
    pod["spec"]["preemptionPolicy"] = json!("PreemptLowerPriority");
    pod["metadata"]["uid"] = json!("uid-pushy");
    assert_eq!(victims(&preempt_for(&mut e, &pod, &["n1"])[0]), ["low"]);
}

#[test]
fn among_nodes_the_lowest_priorities_win_then_fewer_victims_then_the_node_name() {
    let holders = [
        holder("a-20", 20, "a", 0, GPU_MEM),
        holder("b-10", 10, "b", 0, GPU_MEM),
        holder("c-10", 10, "c", 0, GPU_MEM / 2),
        holder("c-10b", 10, "c", 0, GPU_MEM / 2),
    ];
    let mut e = engine(&[("a", 1), ("b", 1), ("c", 1)], &holders);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["a", "b", "c"])[..] else { panic!() };
    assert_eq!((p.choice.node.as_str(), victims(p)), ("b", vec!["b-10"]), "lowest priority, then fewest");
    let ties = [holder("x", 10, "m", 0, GPU_MEM), holder("y", 10, "l", 0, GPU_MEM)];
    let mut e = engine(&[("m", 1), ("l", 1)], &ties);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["m", "l"])[..] else { panic!() };
    assert_eq!(p.choice.node, "l", "a full tie goes to the first node by name");
    // Only the nodes kube-scheduler offered count.
    let mut e = engine(&[("a", 1), ("b", 1), ("c", 1)], &holders);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["a"])[..] else { panic!() };
    assert_eq!(p.choice.node, "a");
}

#[test]
fn no_preemption_when_even_every_lower_pod_gone_leaves_too_little() {
    let mut e = engine(&[("n1", 1)], &[holder("low", 0, "n1", 0, 8192), holder("high", 500, "n1", 0, 8192)]);
    assert!(preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"]).is_empty());
}

#[test]
fn a_terminating_pod_is_not_chosen_again() {
    let mut going = holder("going", 0, "n1", 0, GPU_MEM);
    going["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut e = engine(&[("n1", 2)], &[going, holder("staying", 0, "n1", 1, GPU_MEM)]);
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"])[..] else { panic!() };
    assert_eq!(victims(p), ["staying"]);
}

#[test]
fn the_freed_gpus_are_held_for_the_preemptor_and_nothing_is_chosen_twice() {
    let holders = [holder("low", 0, "n1", 0, GPU_MEM)];
    let mut e = engine(&[("n1", 1)], &holders);
    let urgent = pending("urgent", 100, GPU_MEM);
    let other = pending("other", 50, GPU_MEM);
    assert_eq!(filter(&mut e, &other, &["n1"]), Outcome::Unschedulable);
    let first = preempt_for(&mut e, &urgent, &["n1"]);
    assert_eq!(first.len(), 1, "one node, one preemptor: {first:?}");
    assert_eq!(first[0].name, "urgent", "the higher priority first");
    let owner = first[0].key.clone();
    let hold = e.state.reservations().get(&owner).expect("held at once");
    assert_eq!(hold.gpus.iter().map(|g| &**g).collect::<Vec<_>>(), ["GPU-n1-0"]);
    assert!(e.preempt(NOW).preemptions.is_empty(), "nothing changed: nobody is looked at again");
    // Rejected again by Filter, still nothing: the holder waits for its victims.
    assert_eq!(filter(&mut e, &urgent, &["n1"]), Outcome::Unschedulable);
    assert!(e.preempt(NOW).preemptions.is_empty());
    // The victim goes: the GPU is the preemptor's, not the other pod's.
    e.state.delete(holders[0].to_string().as_bytes()).unwrap();
    assert_eq!(filter(&mut e, &other, &["n1"]), Outcome::Unschedulable);
    assert_eq!(filter(&mut e, &urgent, &["n1"]), Outcome::Scheduled);
}

#[test]
fn a_dropped_preemption_is_not_tried_again_before_a_node_changes() {
    let mut e = engine(&[("n1", 1)], &[holder("low", 0, "n1", 0, GPU_MEM)]);
    let first = preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"]);
    assert!(e.unhold(&first[0].key));
    assert!(e.state.reservations().is_empty());
    assert!(e.preempt(NOW).preemptions.is_empty(), "the dropped hold is no news: no retry loop");
    apply(&mut e, &holder("newcomer", 0, "n1", 0, 1));
    let again = e.preempt(NOW).preemptions;
    assert_eq!(again.len(), 1, "a node changed: looked at again");
    assert_eq!(victims(&again[0]), ["low", "newcomer"], "equal priorities: by key");
}

#[test]
fn a_refused_preemption_is_looked_at_again_when_asked_though_no_node_changed() {
    let mut e = engine(&[("n1", 1)], &[holder("low", 0, "n1", 0, GPU_MEM)]);
    let first = preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &["n1"]);
    assert!(e.unhold(&first[0].key));
    assert!(e.preempt(NOW).preemptions.is_empty());
    assert!(e.look_again(&first[0].key));
    let again = e.preempt(NOW).preemptions;
    assert_eq!(again.len(), 1, "asked: looked at again");
    assert_eq!(victims(&again[0]), ["low"]);
    assert!(!e.look_again("default/nobody"), "only a waiting pod");
}

#[test]
fn explain_names_the_victims_or_why_there_are_none() {
    let mut e = engine(&[("n1", 1)], &[holder("low", 5, "n1", 0, GPU_MEM)]);
    let explain = |e: &mut Engine, pod: &Value| -> Value {
        serde_json::to_value(e.explain(pod.to_string().as_bytes(), NOW, None, None).unwrap()).unwrap()
    };
    let out = explain(&mut e, &pending("urgent", 100, GPU_MEM));
    assert_eq!(out["node"], Value::Null);
    let pre = &out["preemption"];
    assert_eq!((pre["possible"].as_bool(), pre["node"].as_str()), (Some(true), Some("n1")));
    assert_eq!(pre["victims"][0]["name"], "low");
    assert_eq!(pre["victims"][0]["priority"], 5);
    let out = explain(&mut e, &pending("lowly", 5, GPU_MEM));
    assert_eq!(out["preemption"]["possible"], false);
    assert!(out["preemption"]["reason"].as_str().unwrap().contains("lower priority"), "{out}");
    apply(&mut e, &node("n2", 1));
    let fits = explain(&mut e, &pending("urgent", 100, GPU_MEM));
    assert_eq!((fits["node"].as_str(), fits.get("preemption")), (Some("n2"), None), "it fits: no preemption");
}

#[test]
fn a_pass_over_budget_stops_short_and_every_pass_gets_one_pod_further() {
    let holders: Vec<Value> = ["a", "b", "c"].iter().map(|n| holder(&format!("low-{n}"), 0, n, 0, GPU_MEM)).collect();
    let mut e = engine(&[("a", 1), ("b", 1), ("c", 1)], &holders);
    for (i, name) in ["p0", "p1", "p2"].iter().enumerate() {
        let pod = pending(name, 100 - i as i32, GPU_MEM);
        assert_eq!(filter(&mut e, &pod, &["a", "b", "c"]), Outcome::Unschedulable);
    }
    let (mut chosen, mut passes) = (Vec::new(), 0);
    loop {
        let pass = hami_core::preempt::preemptions(&mut e.state, &e.policies, NOW, 3);
        chosen.extend(pass.preemptions.into_iter().map(|p| (p.name, p.choice.node)));
        passes += 1;
        if !pass.more {
            break;
        }
    }
    // One node's looks per pass: p0 takes a; p1 finds a held, then takes b; p2 finds a, then b
    // held, then takes c, each pass going on from the node where the last stopped.
    assert_eq!(passes, 6);
    let expected = [("p0", "a"), ("p1", "b"), ("p2", "c")].map(|(p, n)| (p.to_owned(), n.to_owned()));
    assert_eq!(chosen, expected, "priority order; a held node is not chosen again");
}

#[test]
fn the_choice_is_made_among_the_first_candidate_nodes_found() {
    let n = hami_core::preempt::PREEMPT_CANDIDATES + 1;
    let names: Vec<String> = (0..n).map(|i| format!("n{i:03}")).collect();
    let mut holders: Vec<Value> =
        names[..n - 1].iter().map(|name| holder(&format!("{name}-low"), 50, name, 0, GPU_MEM)).collect();
    holders.push(holder("last-lowest", 1, &names[n - 1], 0, GPU_MEM));
    let nodes: Vec<(&str, u32)> = names.iter().map(|name| (name.as_str(), 1)).collect();
    let mut e = engine(&nodes, &holders);
    let offered: Vec<&str> = names.iter().map(String::as_str).collect();
    let [p] = &preempt_for(&mut e, &pending("urgent", 100, GPU_MEM), &offered)[..] else { panic!() };
    assert_eq!(p.choice.node, "n000", "the node past the sample is not looked at");
}
