//! The webhook's decisions (spec §6): HAMi's per-container defaults, denials and the JSON Patch
//! of semantic ops only. The AdmissionReview envelope around them is the `webhook` module's.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::k8s::{Container, Pod, Quantity, Resources};
use crate::request::PodRequest;
use crate::state::ClusterState;
use crate::vendor::{ascend, Admission, Backend, Backends};
pub use crate::wire::admission::{EnvVar, PatchOp, PatchValue};

/// What the per-container defaults did to a pod.
#[derive(Debug, Default)]
pub struct Mutation {
    pub has_resource: bool,
    pub ops: Vec<PatchOp>,
    /// The runtime class of the first Ascend chip asked whose config names one.
    pub vendor_runtime_class: Option<String>,
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn add_limit(c: &mut Container, base: &str, name: &str, value: i64, ops: &mut Vec<PatchOp>) {
    add_limit_text(c, base, name, value.to_string(), ops);
}

fn add_limit_text(c: &mut Container, base: &str, name: &str, q: String, ops: &mut Vec<PatchOp>) {
    let resources = c.resources.get_or_insert_with(Resources::default);
    let op = if c_had_resources(resources) {
        match resources.limits {
            None => PatchOp {
                op: "add",
                path: format!("{base}/resources/limits"),
                value: PatchValue::entry(name, q.clone()),
            },
            Some(_) => PatchOp {
                op: "add",
                path: format!("{base}/resources/limits/{}", escape(name)),
                value: PatchValue::Text(q.clone()),
            },
        }
    } else {
        let limits = std::collections::BTreeMap::from([(name.to_owned(), q.clone())]);
        PatchOp { op: "add", path: format!("{base}/resources"), value: PatchValue::Resources { limits } }
    };
    resources.limits.get_or_insert_with(Default::default).insert(name.to_owned(), Quantity(q));
    ops.push(op);
}

/// Sets a request, as [`add_limit`] a limit (the container has resources: it asks a device).
fn set_request(c: &mut Container, base: &str, name: &str, value: i64, ops: &mut Vec<PatchOp>) {
    set_request_text(c, base, name, value.to_string(), ops);
}

fn set_request_text(c: &mut Container, base: &str, name: &str, q: String, ops: &mut Vec<PatchOp>) {
    let resources = c.resources.get_or_insert_with(Resources::default);
    let op = match resources.requests {
        None => {
            PatchOp { op: "add", path: format!("{base}/resources/requests"), value: PatchValue::entry(name, q.clone()) }
        }
        Some(_) => {
            let path = format!("{base}/resources/requests/{}", escape(name));
            PatchOp { op: "add", path, value: PatchValue::Text(q.clone()) }
        }
    };
    resources.requests.get_or_insert_with(Default::default).insert(name.to_owned(), Quantity(q));
    ops.push(op);
}

/// A `Resources` created just now (by `get_or_insert_with`) has neither map; treat it as absent.
fn c_had_resources(r: &Resources) -> bool {
    r.limits.is_some() || r.requests.is_some()
}

fn add_env(c: &mut Container, base: &str, name: &str, value: &str, ops: &mut Vec<PatchOp>) {
    let entry = EnvVar { name: name.to_owned(), value: value.to_owned() };
    let kept = serde_json::to_value(&entry).unwrap_or_default();
    match &mut c.env {
        None => {
            ops.push(PatchOp { op: "add", path: format!("{base}/env"), value: PatchValue::EnvList(vec![entry]) });
            c.env = Some(vec![kept]);
        }
        Some(env) => {
            ops.push(PatchOp { op: "add", path: format!("{base}/env/-"), value: PatchValue::Env(entry) });
            env.push(kept);
        }
    }
}

/// HAMi's NVIDIA per-container mutation. Returns whether the container uses vGPU resources.
fn mutate_container(c: &mut Container, base: &str, cfg: &Config, ops: &mut Vec<PatchOp>) -> Result<bool> {
    let res = c.resources().clone();
    let pct = res.get(&cfg.resource_memory_percentage_name);
    if let Some(q) = pct {
        if !matches!(q.as_int(), Some(0..=100)) {
            return Err(Error::invalid(
                "",
                format!(
                    "invalid {} value {} in container {}: must be an integer between 0 and 100",
                    cfg.resource_memory_percentage_name, q.0, c.name
                ),
            ));
        }
    }
    if let Some(p) = res.limit(&cfg.resource_priority_name) {
        add_env(c, base, "CUDA_TASK_PRIORITY", &p.0, ops);
    }
    if !cfg.gpu_core_policy.is_empty() && cfg.gpu_core_policy != "default" {
        add_env(c, base, "GPU_CORE_UTILIZATION_POLICY", &cfg.gpu_core_policy, ops);
    }
    let mut has = res.limit(&cfg.resource_count_name).is_some();
    let names = [&cfg.resource_core_name, &cfg.resource_memory_name, &cfg.resource_memory_percentage_name];
    if !has && cfg.default_gpu_num > 0 && names.iter().any(|n| res.limit(n).is_some()) {
        add_limit(c, base, &cfg.resource_count_name, cfg.default_gpu_num, ops);
        has = true;
    }
    let res = c.resources().clone();
    let count_present = res.get(&cfg.resource_count_name).is_some();
    let cores_absent = res.get(&cfg.resource_core_name).is_none();
    let whole_card = match pct {
        Some(q) => q.as_int() == Some(100),
        None => cfg.resource_memory_name.is_empty() || res.get(&cfg.resource_memory_name).is_none(),
    };
    let names_set = !cfg.resource_count_name.is_empty() && !cfg.resource_core_name.is_empty();
    if names_set && count_present && cores_absent && whole_card {
        add_limit(c, base, &cfg.resource_core_name, 100, ops);
        has = true;
    }
    if !has && cfg.overwrite_env {
        add_env(c, base, "NVIDIA_VISIBLE_DEVICES", "none", ops);
    }
    Ok(has)
}

/// Applies the per-container defaults to every container (init first), NVIDIA's and the other
/// backends'; used by the webhook and `explain`. `neuron_split`: the cores per device AWS Neuron
/// core requests are split by ([`crate::vendor::neuron::split_size`]).
pub fn apply_defaults(pod: &mut Pod, cfg: &Config, backends: &Backends, neuron_split: i64) -> Result<Mutation> {
    let mut m = Mutation::default();
    let soft_split = pod.metadata.annotations.get(ascend::MODE_KEY).is_some_and(|v| v == ascend::HAMI_CORE);
    let vendors = VendorDefaults { backends, soft_split, neuron_split };
    let mut annotations = Vec::new();
    let mut sgpu = SgpuAdmission::of(pod);
    for (i, c) in pod.spec.init_containers.iter_mut().enumerate() {
        let base = format!("/spec/initContainers/{i}");
        m.has_resource |= mutate_container(c, &base, cfg, &mut m.ops)?;
        m.has_resource |= mutate_for_vendors(c, &base, &vendors, &mut m, &mut annotations)?;
        sgpu.container(c, backends, &mut annotations)?;
    }
    for (i, c) in pod.spec.containers.iter_mut().enumerate() {
        let base = format!("/spec/containers/{i}");
        m.has_resource |= mutate_container(c, &base, cfg, &mut m.ops)?;
        m.has_resource |= mutate_for_vendors(c, &base, &vendors, &mut m, &mut annotations)?;
        sgpu.container(c, backends, &mut annotations)?;
    }
    for (key, value) in annotations {
        let op = if pod.metadata.annotations.is_empty() {
            PatchOp { op: "add", path: "/metadata/annotations".into(), value: PatchValue::entry(&key, value.clone()) }
        } else {
            PatchOp {
                op: "add",
                path: format!("/metadata/annotations/{}", escape(&key)),
                value: PatchValue::Text(value.clone()),
            }
        };
        pod.metadata.annotations.insert(key, value);
        m.ops.push(op);
    }
    Ok(m)
}

/// A backend whose webhook sets card sizes ([`Admission::CardSizes`]): it reads the count from
/// the limits, else the requests, and the memory from the limits.
fn mutate_card_sizes(
    c: &mut Container,
    base: &str,
    b: &crate::vendor::Backend,
    ops: &mut Vec<PatchOp>,
    annotations: &mut Vec<(String, String)>,
) -> Result<bool> {
    let Some(count) = c.resources().get(&b.count_name).cloned() else { return Ok(false) };
    let Some(count) = count.as_int() else { return Ok(true) };
    let memory = c.resources().limit(&b.memory_name).map(|q| q.as_int().unwrap_or(0));
    let edit = b.admission_edit(count, memory).map_err(|message| Error::invalid("", message))?;
    for (name, value) in edit.limits {
        add_limit(c, base, &name, value, ops);
    }
    annotations.extend(edit.pod_annotations);
    Ok(true)
}

/// What the other backends' webhook reads besides the container.
#[derive(Clone, Copy)]
struct VendorDefaults<'a> {
    backends: &'a Backends,
    soft_split: bool,
    neuron_split: i64,
}

/// The other backends' `MutateAdmission`: whether the container asks for one (its count resource
/// in the limits), and the defaults a backend sets ([`Admission`]); an error is HAMi's (HTTP 500).
fn mutate_for_vendors(
    c: &mut Container,
    base: &str,
    vendors: &VendorDefaults,
    m: &mut Mutation,
    annotations: &mut Vec<(String, String)>,
) -> Result<bool> {
    let mut has = false;
    let ops = &mut m.ops;
    let soft_split = vendors.soft_split;
    for b in vendors.backends.iter() {
        if b.admission == Admission::NeuronAsk {
            has |= crate::vendor::neuron::admission(c, b, vendors.neuron_split).map_err(|e| Error::invalid("", e))?;
            continue;
        }
        if b.admission == Admission::CorePercent {
            if let Some(message) = crate::vendor::amd::admission_error(c, b) {
                return Err(Error::invalid("", message));
            }
            has |= crate::vendor::amd::routes(c, b);
            continue;
        }
        if b.admission == Admission::CardSizes {
            has |= mutate_card_sizes(c, base, b, ops, annotations)?;
            continue;
        }
        if b.admission == Admission::DrsProfile {
            has |= admit_drs(c, base, b, ops)?;
            continue;
        }
        let Some(count) = c.resources().limit(&b.count_name).cloned() else {
            if b.vnpu.as_deref().is_some_and(|v| v.overwrite_env) {
                add_env(c, base, "ASCEND_VISIBLE_DEVICES", "", ops);
            }
            continue;
        };
        has = true;
        if let Some(vnpu) = b.vnpu.as_deref() {
            admit_vnpu(c, base, b, vnpu, soft_split, ops)?;
            if !vnpu.runtime_class_name.is_empty() && m.vendor_runtime_class.is_none() {
                m.vendor_runtime_class = Some(vnpu.runtime_class_name.clone());
            }
        }
        if b.admission == Admission::XpuMemory {
            round_xpu_memory(c, base, b, ops);
        }
        if b.admission == Admission::CoresPerCardAndContainerName {
            if let Some(n) = count.as_int().filter(|n| *n > 1) {
                add_limit(c, base, &b.core_name, n * 100, ops);
            }
            let named = c.env.as_ref().is_some_and(|env| env.iter().any(|e| e["name"] == "SOL_CONTINER_NAME"));
            if !named && !c.name.is_empty() {
                let name = c.name.clone();
                add_env(c, base, "SOL_CONTINER_NAME", &name, ops);
            }
        }
    }
    Ok(has)
}

/// Enflame DRS's webhook: HAMi's checks, then what it reads (the count, else memory and cores)
/// copied into whichever of limits and requests lacks it.
fn admit_drs(c: &mut Container, base: &str, b: &Backend, ops: &mut Vec<PatchOp>) -> Result<bool> {
    let asked = crate::vendor::enflame_drs::admission(c, b).map_err(|m| Error::invalid("", m))?;
    let Some(direct) = asked else { return Ok(false) };
    let names = if direct { vec![b.count_name.clone()] } else { vec![b.memory_name.clone(), b.core_name.clone()] };
    for name in names {
        let res = c.resources();
        let request = res.requests.as_ref().and_then(|r| r.get(&name)).cloned();
        match (res.limit(&name).cloned(), request) {
            (Some(q), None) => set_request_text(c, base, &name, q.0, ops),
            (None, Some(q)) => add_limit_text(c, base, &name, q.0, ops),
            _ => {}
        }
    }
    Ok(true)
}

/// MetaX sGPU's webhook on one container (HAMi's `MutateAdmission`): the pod's app class and QoS
/// policy checked, the QoS policy set to `best-effort` when absent (not for online pods).
struct SgpuAdmission {
    class: Option<String>,
    qos: Option<String>,
}

impl SgpuAdmission {
    fn of(pod: &Pod) -> Self {
        let ann = &pod.metadata.annotations;
        Self {
            class: ann.get(crate::vendor::sgpu::APP_CLASS_KEY).cloned(),
            qos: ann.get(crate::vendor::sgpu::QOS_KEY).cloned(),
        }
    }

    fn container(&mut self, c: &Container, backends: &Backends, annotations: &mut Vec<(String, String)>) -> Result<()> {
        let Some(b) = backends.iter().find(|b| b.admission == Admission::Sgpu) else { return Ok(()) };
        let Some(count) = c.resources().limit(&b.count_name) else { return Ok(()) };
        let count = ceil_value(count).unwrap_or(0);
        let set = crate::vendor::sgpu::admit(self.class.as_deref(), self.qos.as_deref(), count)
            .map_err(|m| Error::invalid("", m))?;
        if let Some((key, value)) = set {
            self.qos = Some(value.clone());
            annotations.push((key, value));
        }
        Ok(())
    }
}

/// Kunlunxin vXPU's webhook: a memory limit is rounded to a slice size, set as limit and request.
fn round_xpu_memory(c: &mut Container, base: &str, b: &Backend, ops: &mut Vec<PatchOp>) {
    let Some(asked) = c.resources().limit(&b.memory_name) else { return };
    let rounded = crate::vendor::kunlun::trim_memory(ceil_value(asked).unwrap_or(i64::MAX));
    add_limit(c, base, &b.memory_name, rounded, ops);
    set_request(c, base, &b.memory_name, rounded, ops);
}

/// Ascend's webhook on a container asking a chip: its count and memory as HAMi rewrites them.
fn admit_vnpu(
    c: &mut Container,
    base: &str,
    b: &Backend,
    vnpu: &ascend::Vnpu,
    soft_split: bool,
    ops: &mut Vec<PatchOp>,
) -> Result<()> {
    let res = c.resources();
    let asked = ascend::AskedLimits {
        count: res.limit(&b.count_name).and_then(ceil_value).unwrap_or(0),
        memory: res.limit(&b.memory_name).and_then(ceil_value),
        cores: (!b.core_name.is_empty()).then(|| res.get(&b.core_name).and_then(ceil_value)).flatten(),
    };
    let counted_in_requests = res.requests.as_ref().is_some_and(|r| r.contains_key(&b.count_name));
    let admitted = ascend::admit(b, vnpu, asked, soft_split).map_err(|m| Error::invalid("", m))?;
    if let Some(n) = admitted.count {
        add_limit(c, base, &b.count_name, n, ops);
        if counted_in_requests {
            set_request(c, base, &b.count_name, n, ops);
        }
    }
    if !b.memory_name.is_empty() {
        add_limit(c, base, &b.memory_name, admitted.memory, ops);
        set_request(c, base, &b.memory_name, admitted.memory, ops);
    }
    Ok(())
}

/// A quantity's value rounded up to an integer (Go's `Quantity.Value()`).
fn ceil_value(q: &Quantity) -> Option<i64> {
    q.as_int().or_else(|| {
        let milli = crate::k8s::quantity::cpu_milli(&q.0)?;
        Some(milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0))
    })
}

/// What the webhook answers.
#[derive(Debug)]
pub enum Verdict {
    Allow(Option<String>),
    Patch(Vec<PatchOp>),
    Deny(String),
    Fail(u16, String),
}

/// HAMi's webhook decision for a pod: defaults, denials, scheduler and runtime class, admission quota.
pub fn mutate(state: &ClusterState, pod: &mut Pod) -> Verdict {
    mutate_as(state, pod, Admitted::New)
}

/// Why the webhook would refuse a replacement of `pod` (a resident, counted in its namespace's
/// usage, recreated from the same spec): one of its checks fails, or (`quota`) its namespace is
/// over a quota the pod is counted in. `None`: the replacement is admitted.
pub fn replacement_denied(state: &ClusterState, pod: &Pod, quota: bool) -> Option<String> {
    let mut replacement = pod.clone();
    replacement.spec.node_name.clear();
    let asks = if quota { Admitted::Replacement(state.pod(&pod.reservation_key())) } else { Admitted::Unchecked };
    match mutate_as(state, &mut replacement, asks) {
        Verdict::Allow(_) | Verdict::Patch(_) => None,
        Verdict::Deny(message) | Verdict::Fail(_, message) => Some(message),
    }
}

fn mutate_as(state: &ClusterState, pod: &mut Pod, asks: Admitted<'_>) -> Verdict {
    let cfg = &state.config;
    if pod.spec.containers.is_empty() {
        return Verdict::Deny("pod has no containers".into());
    }
    let sn = pod.spec.scheduler_name.as_str();
    if !sn.is_empty()
        && (sn != "default-scheduler" || !cfg.force_overwrite_default_scheduler)
        && (cfg.scheduler_name.is_empty() || sn != cfg.scheduler_name)
    {
        return Verdict::Allow(Some("pod already has different scheduler assigned".into()));
    }
    let neuron_cores = crate::vendor::neuron::cluster_cores(pod, &state.backends, state.nodes.values());
    let neuron_split = crate::vendor::neuron::split_size(neuron_cores);
    let mut m = match apply_defaults(pod, cfg, &state.backends, neuron_split) {
        Ok(m) => m,
        Err(e) => return Verdict::Fail(500, e.message),
    };
    // HAMi's webhook routes another vendor's pods to its scheduler too: there Filter says why
    // hami-fast does not place them, instead of the default scheduler binding them without devices.
    m.has_resource |= crate::request::unsupported_vendor(pod, cfg, &state.backends).is_some();
    if m.has_resource {
        if let Some(c) = pod.spec.init_containers.iter().chain(&pod.spec.containers).find(|c| c.privileged()) {
            return Verdict::Deny(format!("container {} is privileged", c.name));
        }
        if !cfg.scheduler_name.is_empty() {
            let op = if pod.spec.scheduler_name.is_empty() { "add" } else { "replace" };
            m.ops.push(PatchOp {
                op,
                path: "/spec/schedulerName".into(),
                value: PatchValue::Text(cfg.scheduler_name.clone()),
            });
            if !pod.spec.node_name.is_empty() {
                return Verdict::Deny("pod has node assigned".into());
            }
        }
        let class = m.vendor_runtime_class.clone().or_else(|| Some(cfg.runtime_class_name.clone()));
        if let Some(class) = class.filter(|c| pod.spec.runtime_class_name.is_none() && !c.is_empty()) {
            m.ops.push(PatchOp { op: "add", path: "/spec/runtimeClassName".into(), value: PatchValue::Text(class) });
        }
    }
    // HAMi checks the quota of every pod, with or without a resource limit the webhook saw
    // (a pod asking for vGPUs only in `requests` is counted too).
    if exceeds_admission_quota(state, pod, asks) || exceeds_vendor_quota(state, pod, neuron_cores, asks) {
        return Verdict::Deny("exceeding resource quota".into());
    }
    Verdict::Patch(m.ops)
}

/// The webhook's decision on a pod, applied to it in place: `Err` with its denial or failure message.
pub fn admit_pod(state: &ClusterState, pod: &mut Pod) -> Result<()> {
    match mutate(state, pod) {
        Verdict::Allow(_) | Verdict::Patch(_) => Ok(()),
        Verdict::Deny(message) | Verdict::Fail(_, message) => Err(Error::invalid("", message)),
    }
}

/// §13.2: app containers sum, init containers peak, percentage-only memory counts 0.
fn exceeds_admission_quota(state: &ClusterState, pod: &Pod, asks: Admitted<'_>) -> bool {
    if matches!(asks, Admitted::Unchecked) {
        return false;
    }
    let Some(q) = state.quota_state(&pod.metadata.namespace) else { return false };
    let request = PodRequest::from_pod(pod, &state.config);
    let (mut app, mut init) = ((0i64, 0i64), (0i64, 0i64));
    for (slot, r) in request.slots.iter().enumerate() {
        let Some(r) = r else { continue };
        let (mem, cores) = (r.memreq * r.nums, r.coresreq * r.nums);
        if request.is_init(slot) {
            init = (init.0.max(mem), init.1.max(cores));
        } else {
            app = (app.0 + mem, app.1 + cores);
        }
    }
    let (mem, cores) = (app.0.max(init.0), app.1.max(init.1));
    if mem == 0 && cores == 0 {
        // HAMi checks no quota for a pod that asks for neither, even in a namespace over its quota.
        return false;
    }
    let (freed_mem, freed_cores) = asks.freed_nvidia();
    let (mem, cores) = (mem - freed_mem, cores - freed_cores);
    q.limit_mem.is_some_and(|l| q.used_mem + mem > l) || q.limit_cores.is_some_and(|l| q.used_cores + cores > l)
}

/// Whose request the quota check adds to the namespace's usage.
#[derive(Clone, Copy)]
enum Admitted<'a> {
    /// A new pod: its request is added.
    New,
    /// The replacement of a resident (its record, when the engine holds one): what the resident
    /// is counted for is freed first, the request added.
    Replacement(Option<&'a crate::state::PodRecord>),
    /// Every check but the quota's.
    Unchecked,
}

impl Admitted<'_> {
    /// The NVIDIA memory and cores the resident is counted for.
    fn freed_nvidia(self) -> (i64, i64) {
        let Self::Replacement(Some(record)) = self else { return (0, 0) };
        let nvidia = &record.footprint[..(record.nvidia_len as usize).min(record.footprint.len())];
        (nvidia.iter().map(|c| c.mem).sum(), nvidia.iter().map(|c| c.cores).sum())
    }

    /// What the resident is counted for of another backend's quota resource.
    fn freed(self, resource: &str) -> i64 {
        let Self::Replacement(Some(record)) = self else { return 0 };
        record.vendor_usage.iter().filter(|(r, _)| &**r == resource).map(|(_, amount)| amount).sum()
    }
}

/// HAMi's admission quota for every other backend with a memory or core name: the pod's request
/// as the backend reads it (app containers summed, init containers at their peak, per card times
/// the count) against the namespace's limits on that backend's resources.
fn exceeds_vendor_quota(state: &ClusterState, pod: &Pod, neuron_cores: i64, asks: Admitted<'_>) -> bool {
    if matches!(asks, Admitted::Unchecked) {
        return false;
    }
    let ns = &pod.metadata.namespace;
    state.backends.iter().any(|b| {
        if b.memory_name.is_empty() && b.core_name.is_empty() {
            return false;
        }
        let (mut app, mut init) = ((0i64, 0i64), (0i64, 0i64));
        for c in &pod.spec.containers {
            if let Some((mem, cores)) = crate::vendor::neuron::quota_request(c, b, neuron_cores) {
                app = (app.0 + mem, app.1 + cores);
            }
        }
        for c in &pod.spec.init_containers {
            if let Some((mem, cores)) = crate::vendor::neuron::quota_request(c, b, neuron_cores) {
                init = (init.0.max(mem), init.1.max(cores));
            }
        }
        let (mem, cores) = (app.0.max(init.0), app.1.max(init.1));
        if mem == 0 && cores == 0 {
            return false;
        }
        let (mem, cores) = (mem - asks.freed(&b.memory_name), cores - asks.freed(&b.core_name));
        state.exceeds_vendor_quota(ns, &b.memory_name, mem, b.quota_factor())
            || state.exceeds_vendor_quota(ns, &b.core_name, cores, 1)
    })
}
