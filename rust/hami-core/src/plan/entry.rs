//! The binding's entry points: Kubernetes objects and options in, plan and measures JSON out.

use super::{
    baseline_queue, pin_annotations, plan, round3, unblock, unblock_queue, validate_target, workload_from_spec,
    Immovable, ObjectCache, Objective, PendingPod, Snapshot, Strategy,
};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::wire::plan::{Fragmentation, Plan, PlanBaseline, TargetCheck};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};

/// How many pods stay put for each reason (the reason's text), so "0 movable" says why.
fn immovable_counts(pods: &[super::PlanPod]) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for why in pods.iter().filter_map(|p| p.blocked.as_ref()) {
        *out.entry(why.to_string()).or_default() += 1;
    }
    out
}

/// `hami-fast plan`'s document: the chosen planner's moves and measures, the baseline beside.
pub fn plan_json(snapshot: &Snapshot, budget: usize, strategy: Strategy, baseline: bool) -> Plan {
    let main = plan(snapshot, budget, strategy);
    let objective = if strategy == Strategy::FreeGpus { Objective::FreeGpus } else { Objective::Frag };
    let baseline = baseline.then(|| {
        let other = if strategy == Strategy::Greedy { Strategy::Drain } else { Strategy::Greedy };
        let b = plan(snapshot, budget, other);
        PlanBaseline { planner: b.planner, moves: b.moves.len(), after: b.after, elapsed_ms: round3(b.elapsed_ms) }
    });
    Plan {
        objective: objective.name(),
        planner: main.planner,
        max_moves: budget,
        moves: main.moves,
        before: main.before,
        after: main.after,
        elapsed_ms: round3(main.elapsed_ms),
        pods: snapshot.pods.len(),
        movable_pods: snapshot.pods.iter().filter(|p| p.blocked.is_none()).count(),
        immovable: immovable_counts(&snapshot.pods),
        nodes: snapshot.nodes.len(),
        baseline,
    }
}

/// Options of [`plan_bytes`] (JSON): `{"max_moves": N | null, "max_moves_pct": 5.0,
/// "objective": "free-gpus"|"frag", "workload": "typical"|"whole-gpu"|[task types],
/// "planner": "drain"|"greedy", "baseline": true, "for_pod": {a Pod} | null, "max_moves_per_pod": N | null,
/// "for_pod_key": "namespace/name" | null (a pending pod of the snapshot), "movable": [pods] | null,
/// "opt_in": {"selector": "app=x" | null, "namespaces": [names], "except": [pods]} | null, "exclude_nodes": [nodes] | null}`.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct PlanOptions {
    pub max_moves: Option<usize>,
    pub max_moves_pct: f64,
    pub objective: String,
    pub workload: serde_json::Value,
    pub planner: String,
    pub baseline: bool,
    pub for_pod: Option<serde_json::Value>,
    /// As `for_pod`, a pod of the snapshot waiting for vGPU resources (`namespace/name`).
    pub for_pod_key: Option<String>,
    /// Objective `pending`: the most moves spent on one pending pod.
    pub max_moves_per_pod: Option<usize>,
    /// Only these pods (`namespace/name`) may be moved (the automatic mode's opt-in); all when absent.
    pub movable: Option<Vec<String>>,
    /// Only the pods this opt-in selects may be moved (with `movable`, both must allow a pod).
    pub opt_in: Option<OptIn>,
    /// Nodes the plan leaves out with the pods bound to them (the automatic mode's nodes that moves
    /// in flight are changing: no move takes GPUs there nor frees them).
    pub exclude_nodes: Option<Vec<String>>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            max_moves: None,
            max_moves_pct: 5.0,
            objective: "free-gpus".into(),
            workload: serde_json::Value::Null,
            planner: "drain".into(),
            baseline: true,
            for_pod: None,
            for_pod_key: None,
            max_moves_per_pod: None,
            movable: None,
            opt_in: None,
            exclude_nodes: None,
        }
    }
}

/// The automatic mode's opt-in, read from the planner's own objects rather than listed: a pod may
/// be moved when its labels match `selector` or its namespace is one of `namespaces`, and it is not
/// one of `except` (`namespace/name`: the pods moves in flight are moving already).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct OptIn {
    pub selector: Option<String>,
    pub namespaces: Vec<String>,
    pub except: Vec<String>,
}

impl OptIn {
    fn admits(&self) -> Result<impl Fn(&super::PlanPod) -> bool + '_> {
        let selector = match &self.selector {
            Some(text) => Some(
                crate::k8s::LabelSelector::parse(text)
                    .map_err(|e| Error::config("plan options", e).field("opt_in.selector"))?,
            ),
            None => None,
        };
        let except: HashSet<&str> = self.except.iter().map(String::as_str).collect();
        Ok(move |p: &super::PlanPod| {
            (selector.as_ref().is_some_and(|s| s.matches(&p.labels)) || self.namespaces.contains(&p.namespace))
                && !except.contains(p.key().as_str())
        })
    }
}

/// Objective `pending`: moves one pending pod may take by default (cheap pods first is the
/// point: a pod that needs a whole node cleared waits for a bigger budget).
pub const PER_POD_DEFAULT_MOVES: usize = 8;

/// `--for` budgets at least this many moves when none is given (5 % of a small cluster's pods is 0).
pub const FOR_MIN_DEFAULT_MOVES: usize = 10;

impl PlanOptions {
    fn from_bytes(options: &[u8]) -> Result<Self> {
        if options.is_empty() {
            return Ok(Self::default());
        }
        serde_json::from_slice(options).map_err(|e| Error::config("plan options", e))
    }

    fn left_out(&self) -> HashSet<&str> {
        self.exclude_nodes.iter().flatten().map(String::as_str).collect()
    }
}

/// The binding's entry point (`hami-fast plan`, `kubectl hami plan`, `POST /api/v1/plan`):
/// objects in, plan JSON out.
pub fn plan_bytes(inputs: &[&[u8]], options: &[u8], config: &Config) -> Result<Vec<u8>> {
    let options = PlanOptions::from_bytes(options)?;
    let mut objects = ObjectCache::new(config.clone());
    for (n, bytes) in inputs.iter().enumerate() {
        objects.apply_input(bytes, &format!("snapshot input {n}"))?;
    }
    let snapshot = objects.snapshot(&options.left_out(), unix_now());
    plan_snapshot(snapshot, &options, &objects)
}

/// The wall clock in Unix seconds: a snapshot drops the holds that have lapsed.
fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The plan JSON of `options` on `snapshot`.
fn plan_snapshot(mut snapshot: Snapshot, options: &PlanOptions, objects: &ObjectCache) -> Result<Vec<u8>> {
    let objective = Objective::parse(&options.objective)?;
    let strategy = match (objective, Strategy::parse(&options.planner)?) {
        (_, Strategy::Greedy) => Strategy::Greedy,
        (Objective::FreeGpus | Objective::Pending, _) => Strategy::FreeGpus,
        (Objective::Frag, s) => s,
    };
    if let Some(w) = workload_from_spec(&options.workload)? {
        snapshot.workload = w;
    }
    if let Some(allowed) = &options.movable {
        let allowed: HashSet<&str> = allowed.iter().map(String::as_str).collect();
        for p in snapshot.pods.iter_mut().filter(|p| p.blocked.is_none()) {
            if !allowed.contains(p.key().as_str()) {
                p.blocked = Some(Immovable::NotOptedIn);
            }
        }
    }
    if let Some(opt_in) = &options.opt_in {
        let admits = opt_in.admits()?;
        for p in snapshot.pods.iter_mut().filter(|p| p.blocked.is_none()) {
            if !admits(p) {
                p.blocked = Some(Immovable::NotOptedIn);
            }
        }
    }
    let pct_budget = ((snapshot.pods.len() as f64) * options.max_moves_pct / 100.0).floor() as usize;
    match for_pod(&snapshot, options, objects)? {
        Some(pending) => {
            let budget = options.max_moves.unwrap_or(pct_budget.max(FOR_MIN_DEFAULT_MOVES));
            to_bytes(&unblock(&snapshot, &pending, budget).to_plan(&snapshot))
        }
        None if objective == Objective::Pending => {
            let budget = options.max_moves.unwrap_or(pct_budget);
            let per_pod = options.max_moves_per_pod.unwrap_or(PER_POD_DEFAULT_MOVES);
            let q = unblock_queue(&snapshot, &snapshot.pending, budget, per_pod);
            let baseline =
                options.baseline.then(|| baseline_queue(&snapshot, &snapshot.pending, budget, Strategy::Greedy));
            to_bytes(&q.to_plan(&snapshot, budget, baseline))
        }
        None => to_bytes(&plan_json(&snapshot, options.max_moves.unwrap_or(pct_budget), strategy, options.baseline)),
    }
}

fn to_bytes(document: &impl Serialize) -> Result<Vec<u8>> {
    serde_json::to_vec(document).map_err(Error::internal)
}

/// The pending pod the plan is for: given in full, or named among the snapshot's waiting pods.
fn for_pod(snapshot: &Snapshot, options: &PlanOptions, objects: &ObjectCache) -> Result<Option<PendingPod>> {
    if let Some(pod) = &options.for_pod {
        return PendingPod::admitted(pod, &objects.cluster).map(Some);
    }
    let Some(key) = &options.for_pod_key else { return Ok(None) };
    match snapshot.pending.iter().find(|p| p.key == *key) {
        Some(pending) => Ok(Some(pending.clone())),
        None => {
            Err(Error::invalid("plan options", format!("pod {key} is not waiting for vGPU resources"))
                .field("for_pod_key"))
        }
    }
}

/// Cluster and per-node fragmentation as JSON (`/api/v1/fragmentation`).
pub fn fragmentation_bytes(inputs: &[&[u8]], config: &Config) -> Result<Vec<u8>> {
    fragmentation_json(&Snapshot::from_objects(inputs, config)?)
}

fn fragmentation_json(snapshot: &Snapshot) -> Result<Vec<u8>> {
    to_bytes(&Fragmentation {
        cluster: snapshot.measures(),
        workload_types: snapshot.workload.types.len(),
        nodes: snapshot.node_measures(),
    })
}

/// Pre-eviction target check (`validate_target`) as bytes: `{"ok": bool, "uuids": [..], "message": "..",
/// "field": "..", "pin": {annotation: value}}`.
pub fn validate_target_bytes(
    inputs: &[&[u8]],
    pod: &str,
    node: &str,
    gpus: &[String],
    config: &Config,
) -> Result<Vec<u8>> {
    target_check_json(&Snapshot::from_objects(inputs, config)?, pod, node, gpus)
}

fn target_check_json(snapshot: &Snapshot, pod: &str, node: &str, gpus: &[String]) -> Result<Vec<u8>> {
    let out = match validate_target(snapshot, pod, node, gpus) {
        Ok(uuids) => {
            let pin = pin_annotations(snapshot, pod, node, &uuids);
            TargetCheck { ok: true, uuids, message: String::new(), field: "", pin }
        }
        Err(why) => {
            let field = why.field().unwrap_or_default();
            TargetCheck { ok: false, uuids: Vec::new(), message: why.to_string(), field, pin: BTreeMap::new() }
        }
    };
    to_bytes(&out)
}

/// The same entry points on objects kept current from watches: no LIST, one snapshot shared by
/// every reader until something changes.
impl ObjectCache {
    pub fn plan_bytes(&mut self, options: &[u8], now: i64) -> Result<Vec<u8>> {
        let options = PlanOptions::from_bytes(options)?;
        let left_out = options.left_out();
        let snapshot =
            if left_out.is_empty() { (*self.shared_snapshot(now)).clone() } else { self.snapshot(&left_out, now) };
        plan_snapshot(snapshot, &options, self)
    }

    pub fn fragmentation_bytes(&mut self, now: i64) -> Result<Vec<u8>> {
        fragmentation_json(&self.shared_snapshot(now))
    }

    pub fn validate_target_bytes(&mut self, pod: &str, node: &str, gpus: &[String], now: i64) -> Result<Vec<u8>> {
        target_check_json(&self.shared_snapshot(now), pod, node, gpus)
    }

    /// Whether the pod (JSON) a placement names may be evicted, as [`super::check_evictee`].
    pub fn check_evictee(&self, pod: &[u8], scheduler_name: &str) -> Result<()> {
        super::check_evictee(pod, scheduler_name)
    }
}
