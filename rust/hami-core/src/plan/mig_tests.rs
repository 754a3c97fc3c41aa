//! The planner on GPUs in MIG mode: moves free and take MIG placements as the engine books them,
//! and every promise is checked against the engine's own Fit on the state the moves leave.

use super::tests::running;
use super::*;
use crate::codec::MigPlacement;
use crate::config::Config;
use crate::fit::{fit_pod, FitFailure, NodeFit};
use crate::policy::GpuPolicy;
use serde_json::{json, Value};

/// NVML's profiles as HAMi's device plugin registers them: (name, MiB, cores, slices, starts, size).
type Profile = (&'static str, i32, i32, u32, &'static [u32], u32);

const A100_40: (&str, i32, &[Profile]) = (
    "NVIDIA-A100-SXM4-40GB",
    40960,
    &[
        ("1g.5gb", 4864, 15, 1, &[0, 1, 2, 3, 4, 5, 6], 1),
        ("2g.10gb", 9856, 29, 2, &[0, 2, 4], 2),
        ("3g.20gb", 19968, 43, 3, &[0, 4], 4),
        ("7g.40gb", 40192, 100, 7, &[0], 8),
    ],
);

const A100_80: (&str, i32, &[Profile]) = (
    "NVIDIA-A100-SXM4-80GB",
    81920,
    &[
        ("1g.10gb", 9728, 15, 1, &[0, 1, 2, 3, 4, 5, 6], 1),
        ("2g.20gb", 19968, 29, 2, &[0, 2, 4], 2),
        ("3g.40gb", 40192, 43, 3, &[0, 4], 4),
        ("7g.79gb", 80384, 100, 7, &[0], 8),
    ],
);

fn mig_gpu(node: &str, i: usize, (model, memory, profiles): (&str, i32, &[Profile])) -> Value {
    let profiles: Vec<Value> = profiles
        .iter()
        .map(|(name, mem, core, slices, starts, size)| {
            let placements: Vec<Value> = starts.iter().map(|s| json!({"start": s, "size": size})).collect();
            json!({"name": name, "memoryMB": mem, "core": core, "sliceCount": slices, "placements": placements})
        })
        .collect();
    json!({"id": format!("{node}-g{i}"), "index": i, "count": 7, "devmem": memory, "devcore": 100, "type": model,
        "mode": "mig", "migProfiles": profiles, "health": true})
}

fn plain_gpu(node: &str, i: usize, model: &str, memory: i32) -> Value {
    json!({"id": format!("{node}-g{i}"), "index": i, "count": 10, "devmem": memory, "devcore": 100, "type": model,
        "mode": "hami-core", "health": true})
}

fn node(name: &str, devices: Vec<Value>) -> Value {
    crate::testkit::nvidia_node(name, &devices)
}

/// A running pod holding one instance of `profile` (`mem` MiB, `cores`) at slice `start` (size
/// `size`) of `gpu`, requesting `request` MiB; `owned` adds a ReplicaSet owner (movable).
#[allow(clippy::too_many_arguments)]
fn mig_pod(name: &str, gpu: &str, profile: &str, mem: i32, cores: i32, start: u32, size: u32, owned: bool) -> Value {
    let node = gpu.split("-g").next().unwrap();
    let alloc = json!([{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": gpu, "profile": profile,
        "placement": {"start": start, "size": size}}]);
    let mut p = running(name, node, &format!("{gpu},NVIDIA,{mem},{cores}:;"), 1, 4000, owned);
    p["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = alloc.to_string().into();
    p
}

/// A running pod on a GPU that is not in MIG mode.
fn plain_pod(name: &str, gpu: &str, mem: i64, owned: bool) -> Value {
    let node = gpu.split("-g").next().unwrap();
    running(name, node, &format!("{gpu},NVIDIA,{mem},0:;"), 1, mem, owned)
}

fn waiting(name: &str, mem: i64) -> PendingPod {
    let p = json!({"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}")},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": mem.to_string()}}}]}});
    PendingPod::from_value(&p, &Config::default()).unwrap()
}

fn snap(items: Vec<Value>) -> Snapshot {
    let list = json!({"kind": "List", "items": items}).to_string();
    Snapshot::from_objects(&[list.as_bytes()], &Config::default()).unwrap()
}

fn instance(gpu: &str, profile: &str, start: u32, size: u32) -> MigInstance {
    MigInstance { gpu: gpu.into(), profile: profile.into(), placement: MigPlacement { start, size } }
}

/// Runs the moves on a copy of the snapshot as the descheduler does (old copy gone, the
/// replacement pinned to the move's GPUs, placed by the engine's Fit in HAMi's order) and checks
/// each lands exactly as the plan says, MIG instances included. Returns the state after them.
fn apply(s: &Snapshot, moves: &[Move]) -> Snapshot {
    let mut work = s.clone();
    for mv in moves {
        let pi = work.pods.iter().position(|p| p.key() == mv.pod).unwrap();
        let mut planner = Planner::new(&mut work, usize::MAX);
        planner.lift(pi);
        let t = planner.s.index[&mv.to.node];
        let p = &planner.s.pods[pi];
        let hints = p.hints.pinned_to(&mv.to.gpus);
        let fit = fit_pod(&planner.s.nodes[t], &p.context(&hints)).unwrap_or_else(|e| panic!("{}: {e}", mv.pod));
        let seat = Seat::of(&fit, p.request.init_count);
        assert_eq!(planner.place_of(t, &seat), mv.to, "{} lands as planned", mv.pod);
        planner.land(pi, t, seat);
    }
    work
}

/// The engine's Fit of the pending pod on `node` alone, pinned to `gpus` as its hold pins it.
fn fit_after(s: &Snapshot, pending: &PendingPod, place: &Place) -> Result<NodeFit, FitFailure> {
    let hints = pending.hints.pinned_to(&place.gpus);
    fit_pod(&s.nodes[s.index[&place.node]], &pending.context(&hints))
}

fn occupied(s: &Snapshot, gpu: &str) -> Vec<MigPlacement> {
    let node = &s.nodes[s.index[gpu.split("-g").next().unwrap()]];
    let mut out = node.mig.occupied[node.device_index(gpu).unwrap()].clone();
    out.sort_by_key(|p| p.start);
    out
}

/// A whole A100 (7g.40gb, every slice) for a waiting pod while movable 1g instances sit on both
/// cards: the instances of one card move to free placements of the other, and the pod fits on
/// the emptied card. Lifting a pod must free its placement, or the 7g instance never fits.
#[test]
fn whole_card_instance_after_moving_1g_instances_off_it() {
    let s = snap(vec![
        node("m", vec![mig_gpu("m", 0, A100_40), mig_gpu("m", 1, A100_40)]),
        mig_pod("a", "m-g0", "1g.5gb", 4864, 15, 6, 1, true),
        mig_pod("b", "m-g0", "1g.5gb", 4864, 15, 5, 1, true),
        mig_pod("c", "m-g1", "1g.5gb", 4864, 15, 6, 1, true),
        mig_pod("d", "m-g1", "1g.5gb", 4864, 15, 5, 1, true),
    ]);
    let whole = waiting("whole", 40000);
    let r = unblock(&s, &whole, 10);
    assert!(r.unblocked, "{}: {:?}", r.message, r.reasons);
    assert_eq!(r.moves.len(), 2, "{:?}", r.moves);
    let target = r.target.clone().unwrap();
    assert_eq!(target.mig, vec![instance(&target.gpus[0], "7g.40gb", 0, 8)]);
    let other = if target.gpus[0] == "m-g0" { "m-g1" } else { "m-g0" };
    let starts: Vec<u32> = r.moves.iter().map(|m| m.to.mig[0].placement.start).collect();
    assert!(r.moves.iter().all(|m| m.to.gpus == [other] && m.to.mig[0].profile == "1g.5gb"), "{:?}", r.moves);
    assert_eq!(starts, [4, 3], "free placements of the other card, highest first, none twice");
    validate_moves(&s, &r.moves).unwrap();
    let after = apply(&s, &r.moves);
    assert!(occupied(&after, &target.gpus[0]).is_empty(), "the moved pods' placements are free");
    assert_eq!(occupied(&after, other).len(), 4);
    let fit = fit_after(&after, &whole, &target).expect("the waiting pod fits where the plan says");
    assert_eq!((fit.mig[0].profile.as_str(), fit.mig[0].placement), ("7g.40gb", MigPlacement { start: 0, size: 8 }));
}

/// Memory enough, placements not: 2g at slices 0-1, 1g at 3 and 1g at 6 leave 21 GB free, but
/// 3g.20gb needs slices 0-3 or 4-7. Moving the 1g at slice 6 (one pod) frees 4-7; the largest
/// pod (the 2g) would not help. The other card's pods are bare: it cannot be cleared.
#[test]
fn fragmented_placements_move_the_pod_in_the_way() {
    let s = snap(vec![
        node("m", vec![mig_gpu("m", 0, A100_40), mig_gpu("m", 1, A100_40)]),
        mig_pod("big2g", "m-g0", "2g.10gb", 9856, 29, 0, 2, true),
        mig_pod("low1g", "m-g0", "1g.5gb", 4864, 15, 3, 1, true),
        mig_pod("top1g", "m-g0", "1g.5gb", 4864, 15, 6, 1, true),
        mig_pod("fixed3g", "m-g1", "3g.20gb", 19968, 43, 0, 4, false),
        mig_pod("fixed1g", "m-g1", "1g.5gb", 4864, 15, 6, 1, false),
    ]);
    let pending = waiting("w", 15000);
    let now = fit_after(&s, &pending, &Place { node: "m".into(), gpus: vec!["m-g0".into()], mig: vec![] });
    assert!(now.unwrap_err().to_string().contains("CardMigTopologyInfeasible"), "memory is not the problem");
    let r = unblock(&s, &pending, 10);
    assert!(r.unblocked, "{}: {:?}", r.message, r.reasons);
    assert_eq!(r.moves.len(), 1, "{:?}", r.moves);
    assert_eq!(r.moves[0].pod, "ns/top1g");
    assert_eq!(r.moves[0].from.mig, vec![instance("m-g0", "1g.5gb", 6, 1)]);
    assert_eq!(r.moves[0].to.mig, vec![instance("m-g1", "1g.5gb", 5, 1)]);
    let target = r.target.clone().unwrap();
    assert_eq!(target.mig, vec![instance("m-g0", "3g.20gb", 4, 4)]);
    let after = apply(&s, &r.moves);
    let fit = fit_after(&after, &pending, &target).unwrap();
    assert_eq!(fit.mig[0].placement, MigPlacement { start: 4, size: 4 });
    // Pinned to the bare card, nothing can be moved out of the way of a 3g instance.
    let blocked = unblock(
        &snap(vec![
            node("m", vec![mig_gpu("m", 1, A100_40)]),
            mig_pod("fixed1g", "m-g1", "1g.5gb", 4864, 15, 6, 1, false),
            mig_pod("fixed3g", "m-g1", "3g.20gb", 19968, 43, 0, 4, false),
        ]),
        &pending,
        10,
    );
    assert!(!blocked.unblocked);
    assert!(blocked.reasons["m"].contains("ns/fixed"), "{:?}", blocked.reasons);
}

/// Mixed nodes: a whole plain A100 for the waiting pod means moving two 4 GB pods off it. The MIG
/// card has memory, cores and slots for both, but one free placement (slice 4): one pod takes
/// it, the other goes to the T4 with room for one. Without placement bookkeeping both would get
/// slice 4.
#[test]
fn one_free_placement_is_granted_once() {
    let s = snap(vec![
        node("m", vec![mig_gpu("m", 0, A100_80)]),
        mig_pod("f3g", "m-g0", "3g.40gb", 40192, 43, 0, 4, false),
        mig_pod("f1a", "m-g0", "1g.10gb", 9728, 15, 6, 1, false),
        mig_pod("f1b", "m-g0", "1g.10gb", 9728, 15, 5, 1, false),
        node("p", vec![plain_gpu("p", 0, "NVIDIA-A100-SXM4-80GB", 81920)]),
        plain_pod("x", "p-g0", 4000, true),
        plain_pod("y", "p-g0", 4000, true),
        node("q", vec![plain_gpu("q", 0, "NVIDIA-Tesla T4", 15360)]),
        plain_pod("z", "q-g0", 8000, false),
    ]);
    let r = unblock(&s, &waiting("whole", 80000), 10);
    assert!(r.unblocked, "{}: {:?}", r.message, r.reasons);
    assert_eq!(r.target.as_ref().map(|t| t.gpus.clone()), Some(vec!["p-g0".to_owned()]));
    let mut to: Vec<(&str, &[MigInstance])> = r.moves.iter().map(|m| (m.to.node.as_str(), &m.to.mig[..])).collect();
    to.sort_by_key(|(node, _)| *node);
    assert_eq!(to, [("m", &[instance("m-g0", "1g.10gb", 4, 1)][..]), ("q", &[][..])], "{:?}", r.moves);
    validate_moves(&s, &r.moves).unwrap();
    let after = apply(&s, &r.moves);
    assert_eq!(occupied(&after, "m-g0").len(), 4);
    assert!(fit_after(&after, &waiting("whole", 80000), r.target.as_ref().unwrap()).is_ok());
    // The drain planner books the placement too: with x and y movable, at most one goes to the MIG card.
    let plan = plan(&s, 10, Strategy::FreeGpus);
    assert!(plan.moves.iter().filter(|m| m.to.node == "m").count() <= 1, "{:?}", plan.moves);
    let after = apply(&s, &plan.moves);
    let held = occupied(&after, "m-g0");
    assert!(held.windows(2).all(|w| !w[0].overlaps(&w[1])), "{held:?}");
}

/// Draining a MIG card moves its instance to a free placement of another card, and the JSON
/// names the instances on both ends; a pod whose instance is lifted frees it for itself.
#[test]
fn drain_books_instances_and_names_them() {
    let s = snap(vec![
        node("m", vec![mig_gpu("m", 0, A100_40), mig_gpu("m", 1, A100_40)]),
        mig_pod("a", "m-g0", "1g.5gb", 4864, 15, 6, 1, true),
        mig_pod("b", "m-g1", "1g.5gb", 4864, 15, 6, 1, true),
        mig_pod("c", "m-g1", "1g.5gb", 4864, 15, 5, 1, true),
    ]);
    let r = plan(&s, 5, Strategy::FreeGpus);
    assert_eq!(r.moves.len(), 1, "{:?}", r.moves);
    assert_eq!(r.moves[0].pod, "ns/a");
    assert_eq!(r.moves[0].to.mig, vec![instance("m-g1", "1g.5gb", 4, 1)]);
    let json = serde_json::to_value(&r.moves[0]).unwrap();
    assert_eq!(
        json["from"]["mig"][0],
        json!({"gpu": "m-g0", "profile": "1g.5gb", "placement": {"start": 6, "size": 1}})
    );
    assert_eq!(r.after.free_whole_gpus, 1);
    let after = apply(&s, &r.moves);
    assert_eq!(occupied(&after, "m-g1").iter().map(|p| p.start).collect::<Vec<_>>(), [4, 5, 6]);
    // Pre-eviction check: b may go where it is (its own slice is freed for it first).
    assert!(validate_target(&s, "ns/b", "m", &["m-g1".into()]).is_ok());
}

/// Six 1g instances use 90 of the card's 100 cores and the seventh still fits (HAMi charges the
/// profile's 15 cores but checks the request's 0): the planner ranks MIG targets by the request,
/// as the Fit checks it, not by the instance's footprint.
#[test]
fn seventh_1g_instance_is_a_target() {
    let mut items = vec![node("m", vec![mig_gpu("m", 0, A100_40), mig_gpu("m", 1, A100_40)])];
    items.push(mig_pod("a", "m-g0", "1g.5gb", 4864, 15, 6, 1, true));
    for slice in 1..7 {
        items.push(mig_pod(&format!("f{slice}"), "m-g1", "1g.5gb", 4864, 15, slice, 1, false));
    }
    let s = snap(items);
    let r = plan(&s, 5, Strategy::FreeGpus);
    assert_eq!(r.moves.len(), 1, "{:?}", r.moves);
    assert_eq!(r.moves[0].to.mig, vec![instance("m-g1", "1g.5gb", 0, 1)]);
    let after = apply(&s, &r.moves);
    let card = &after.nodes[0].usage[1];
    assert_eq!((card.used, card.usedcores), (7, 105), "HAMi's own booking of the seventh instance");
}

/// A pod of two instances drained off its card: the tightest card has one free placement, so
/// the planner's own order would split the pod over two cards; pinned to both, HAMi's Filter
/// walks one card first and takes both instances there (a MIG GPU that grants is examined again).
/// The plan names what the pinned Filter grants, and the replacement lands exactly so.
#[test]
fn two_instances_land_as_the_pinned_filter_grants_them() {
    let mut items = vec![node("m", vec![mig_gpu("m", 0, A100_40), mig_gpu("m", 1, A100_40), mig_gpu("m", 2, A100_40)])];
    for slice in 1..7 {
        items.push(mig_pod(&format!("f{slice}"), "m-g0", "1g.5gb", 4864, 15, slice, 1, false));
    }
    items.push(mig_pod("g", "m-g1", "1g.5gb", 4864, 15, 6, 1, false));
    let mut pair = mig_pod("pair", "m-g2", "1g.5gb", 4864, 15, 6, 1, true);
    let alloc = json!([
        {"containerIndex": 0, "deviceIndex": 0, "gpuUUID": "m-g2", "profile": "1g.5gb", "placement": {"start": 6, "size": 1}},
        {"containerIndex": 0, "deviceIndex": 1, "gpuUUID": "m-g2", "profile": "1g.5gb", "placement": {"start": 5, "size": 1}},
    ]);
    pair["metadata"]["annotations"]["hami.io/vgpu-mig-allocations"] = alloc.to_string().into();
    pair["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] =
        "m-g2,NVIDIA,4864,15:m-g2,NVIDIA,4864,15:;".into();
    pair["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2".into();
    items.push(pair);
    let s = snap(items);
    for policy in ["spread", "binpack"] {
        let mut s = s.clone();
        s.pods.iter_mut().for_each(|p| p.gpu_policy = GpuPolicy::parse(policy));
        let r = plan(&s, 5, Strategy::FreeGpus);
        assert_eq!(r.moves.len(), 1, "{policy}: {:?}", r.moves);
        assert_eq!(r.moves[0].to.mig.len(), 2, "{policy}: {:?}", r.moves);
        let after = apply(&s, &r.moves);
        let held: usize = (0..3).map(|d| after.nodes[0].mig.occupied[d].len()).sum();
        assert_eq!(held, 9, "{policy}: every instance booked once");
    }
}

/// Three 1g instances for one container on a node with one MIG card (HAMi's isMIGRequest: more
/// instances than cards): five movable instances leave two slices free, one move makes three.
#[test]
fn several_instances_of_one_card() {
    let mut items = vec![node("m", vec![mig_gpu("m", 0, A100_40)]), node("o", vec![mig_gpu("o", 0, A100_40)])];
    for slice in 2..7 {
        items.push(mig_pod(&format!("p{slice}"), "m-g0", "1g.5gb", 4864, 15, slice, 1, true));
    }
    for slice in 2..7 {
        items.push(mig_pod(&format!("o{slice}"), "o-g0", "1g.5gb", 4864, 15, slice, 1, false));
    }
    let s = snap(items);
    let p = json!({"kind": "Pod", "metadata": {"name": "three", "namespace": "ns", "uid": "u-three"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3", "nvidia.com/gpumem": "4000"}}}]}});
    let three = PendingPod::from_value(&p, &Config::default()).unwrap();
    let r = unblock(&s, &three, 5);
    assert!(r.unblocked, "{}: {:?}", r.message, r.reasons);
    assert_eq!(r.moves.len(), 1, "{:?}", r.moves);
    assert_eq!(r.moves[0].to.node, "o");
    let target = r.target.clone().unwrap();
    assert_eq!(target.gpus, ["m-g0"]);
    assert_eq!(target.mig.len(), 3, "{target:?}");
    let after = apply(&s, &r.moves);
    let fit = fit_after(&after, &three, &target).unwrap();
    assert_eq!(fit.mig.len(), 3);
    // Four instances: two moves (o's last two slices); five: three pods would need to go.
    let pending = |nums: u32| {
        let p = json!({"kind": "Pod", "metadata": {"name": format!("n{nums}"), "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": nums.to_string(), "nvidia.com/gpumem": "4000"}}}]}});
        PendingPod::from_value(&p, &Config::default()).unwrap()
    };
    let r = unblock(&s, &pending(4), 5);
    assert!(r.unblocked && r.moves.len() == 2, "{}: {:?}", r.message, r.moves);
    let after = apply(&s, &r.moves);
    assert_eq!(fit_after(&after, &pending(4), r.target.as_ref().unwrap()).unwrap().mig.len(), 4);
    let r = unblock(&s, &pending(5), 5);
    assert!(!r.unblocked, "{:?}", r.moves);
    assert!(r.reasons["m"].contains("nowhere else to go"), "{:?}", r.reasons);
    assert!(r.reasons["o"].contains("ns/o"), "{:?}", r.reasons);
}
