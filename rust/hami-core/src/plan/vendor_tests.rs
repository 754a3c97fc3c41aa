//! The planner on another backend's devices (Hygon DCU): costs per kind, pins, refused replacements.

use super::*;
use crate::config::Config;
use serde_json::json;

/// A Hygon node of two DCUs (65536 MiB, 4 slots each), registered in HAMi's colon form.
fn dcu_node(name: &str) -> serde_json::Value {
    let register: String =
        (0..2).map(|i| format!("DCU-{name}-{i},4,65536,100,DCU-Z100L,0,true,{i},hami-core:")).collect();
    json!({"kind": "Node", "metadata": {"name": name, "annotations": {"hami.io/node-dcu-register": register}}})
}

/// A DCU pod of the ReplicaSet `rs` in `namespace`, holding 4000 MiB and 30 cores of card `card`.
fn dcu_pod(name: &str, namespace: &str, node: &str, card: u32) -> serde_json::Value {
    let limits = json!({"hygon.com/dcunum": "1", "hygon.com/dcumem": "4000", "hygon.com/dcucores": "30"});
    json!({"kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": format!("u-{name}"),
        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": true}],
        "annotations": {"hami.io/vgpu-node": node, "hami.io/dcu-devices-allocated": format!("DCU-{node}-{card},DCU,4000,30:;")}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Running"}})
}

/// Two DCU nodes, every card a third full: a pod asking two whole cards fits nowhere.
fn crowded(namespace: &str) -> Vec<serde_json::Value> {
    let mut items = vec![dcu_node("d0"), dcu_node("d1")];
    for node in ["d0", "d1"] {
        items.extend((0..2).map(|c| dcu_pod(&format!("r-{node}-{c}"), namespace, node, c)));
    }
    items
}

fn snapshot(items: Vec<serde_json::Value>) -> Snapshot {
    let list = json!({"kind": "List", "items": items}).to_string();
    Snapshot::from_objects(&[list.as_bytes()], &Config::default()).unwrap()
}

fn two_cards() -> PendingPod {
    let limits = json!({"hygon.com/dcunum": "2", "hygon.com/dcucores": "100"});
    let pod = json!({"kind": "Pod", "metadata": {"name": "big", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}});
    PendingPod::from_value(&pod, &Config::default()).unwrap()
}

#[test]
fn a_pod_asking_two_dcus_gets_a_node_s_two_dcus_cleared() {
    let s = snapshot(crowded("ns"));
    let u = unblock(&s, &two_cards(), 4);
    assert!(u.unblocked, "{}", u.message);
    let target = u.target.expect("a target");
    let other = if target.node == "d0" { "d1" } else { "d0" };
    let mut gpus = target.gpus.clone();
    gpus.sort();
    assert_eq!(gpus, [format!("DCU-{}-0", target.node), format!("DCU-{}-1", target.node)]);
    assert_eq!(u.moves.len(), 2);
    for m in &u.moves {
        assert_eq!((m.from.node.as_str(), m.to.node.as_str()), (target.node.as_str(), other));
        assert!(m.to.gpus.iter().all(|g| g.starts_with(&format!("DCU-{other}-"))), "{m:?}");
    }
}

#[test]
fn a_dcu_move_is_pinned_by_hygon_s_key_and_an_nvidia_one_by_nvidia_s() {
    let mut items = crowded("ns");
    items.push(super::tests::node("n", 2, &[]));
    items.push(super::tests::pod("gpu", "n", &[0], 300, true));
    let s = snapshot(items);
    let dcu = pin_annotations(&s, "ns/r-d0-0", "d1", &["DCU-d1-1".into()]);
    assert_eq!(dcu.into_iter().collect::<Vec<_>>(), [("hygon.com/use-gpuuuid".to_owned(), "DCU-d1-1".to_owned())]);
    let nvidia = pin_annotations(&s, "ns/gpu", "n", &["n-g1".into()]);
    assert_eq!(nvidia.into_iter().collect::<Vec<_>>(), [("nvidia.com/use-gpuuuid".to_owned(), "n-g1".to_owned())]);
}

/// A quota on DCU cores in namespace `team` of `limit` (the four residents use 120).
fn quota(limit: i64) -> serde_json::Value {
    json!({"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "team"},
        "spec": {"hard": {"limits.hygon.com/dcucores": limit.to_string()}}})
}

#[test]
fn a_pod_whose_replacement_the_quota_refuses_stays_and_one_within_it_moves() {
    for (limit, refused) in [(119, true), (120, false)] {
        let mut items = crowded("team");
        items.push(quota(limit));
        let s = snapshot(items);
        for p in &s.pods {
            let denied = matches!(&p.blocked, Some(Immovable::ReplacementDenied(why)) if why.contains("quota"));
            assert_eq!(denied, refused, "limit {limit}: {} {:?}", p.key(), p.blocked);
        }
    }
}
