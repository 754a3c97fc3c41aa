//! `hami_fast._native`: a thin PyO3 layer over hami-core. Bytes in, bytes out, GIL released (but for small `/filter` calls).

use hami_core::codec;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

mod objects;

create_exception!(
    hami_fast._native,
    EngineError,
    PyValueError,
    "Bad input: the message names the object and the field."
);

/// An `EngineError` carrying the typed error's parts: `.kind`, `.object`, `.field` (str each).
fn engine_error(error: hami_core::Error) -> PyErr {
    Python::attach(|py| {
        let err = EngineError::new_err(error.to_string());
        let value = err.value(py);
        let parts = [("kind", error.kind.as_str()), ("object", &error.object), ("field", &error.field)];
        for (name, text) in parts {
            if let Err(e) = value.setattr(name, text) {
                return e;
            }
        }
        err
    })
}

/// Runs engine code without the GIL; a panic becomes an EngineError instead of crossing the FFI boundary.
fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, hami_core::Error> + Send) -> PyResult<T> {
    py.detach(|| {
        catch_unwind(AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(hami_core::Error::internal("internal error in hami-core (panic); input rejected")))
    })
    .map_err(engine_error)
}

/// Largest `/filter` body decided without releasing the GIL: about 1,500 candidate names, ~50 µs of
/// engine time (~3 µs per KiB). Releasing the GIL for less costs more than it frees: another thread
/// (Granian's, a poster, a reflector) takes it, and the request then waits for it to hand the GIL
/// back, up to the 5 ms switch interval; measured on /filter over HTTP with 500 names (10 KiB),
/// keeping it made the engine call 28 µs instead of 32 µs at p50 and 83 µs instead of 107 µs at p99
/// inside the request, and the server ~24 µs less CPU per request. Larger calls (a whole cluster of
/// names, an autoscaler's full Nodes) release it so the event loop and the other threads run meanwhile.
const DECIDE_WITH_GIL_MAX: usize = 16 * 1024;

/// Runs short engine code with the GIL held (see [`DECIDE_WITH_GIL_MAX`]); a panic becomes an EngineError.
/// Only with the engine already locked: waiting for the lock with the GIL held would stall every thread.
fn keep_gil<T>(f: impl FnOnce() -> Result<T, hami_core::Error>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(hami_core::Error::internal("internal error in hami-core (panic); input rejected")))
        .map_err(engine_error)
}

/// A wire document as JSON bytes (see `hami_core::wire`).
fn to_json(value: &impl serde::Serialize, what: &str) -> Result<Vec<u8>, hami_core::Error> {
    serde_json::to_vec(value).map_err(|e| hami_core::Error::internal(format!("encode {what}: {e}")))
}

/// A malformed HAMi annotation value: the codec's error, its field prefixed with the annotation's key.
fn annotation_error(key: &str, error: hami_core::Error) -> PyErr {
    engine_error(error.in_field(format_args!("annotation {key}")))
}

#[pyclass(frozen, module = "hami_fast._native")]
struct Cluster {
    inner: Mutex<hami_core::Engine>,
}

impl Cluster {
    fn lock(&self) -> MutexGuard<'_, hami_core::Engine> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The engine if no other thread holds it (never waits with the GIL held).
    fn try_lock(&self) -> Option<MutexGuard<'_, hami_core::Engine>> {
        match self.inner.try_lock() {
            Ok(engine) => Some(engine),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

#[pymethods]
impl Cluster {
    #[new]
    #[pyo3(signature = (config=None))]
    fn new(config: Option<&[u8]>) -> PyResult<Self> {
        let config = hami_core::Config::from_json(config.unwrap_or(b"")).map_err(engine_error)?;
        Ok(Self { inner: Mutex::new(hami_core::Engine::new(config)) })
    }

    fn apply(&self, py: Python<'_>, obj: &[u8]) -> PyResult<()> {
        run(py, || self.lock().apply(obj).map(|_| ()))
    }

    fn delete(&self, py: Python<'_>, obj: &[u8]) -> PyResult<()> {
        run(py, || self.lock().delete(obj))
    }

    /// -> (event type, resourceVersion, key, Status code, error of the object or None)
    fn apply_watch_event(
        &self,
        py: Python<'_>,
        line: &[u8],
    ) -> PyResult<(String, String, String, i32, Option<String>)> {
        let e = run(py, || self.lock().apply_watch_event(line))?;
        Ok((e.event_type, e.resource_version, e.key, e.code, e.error.map(|e| e.to_string())))
    }

    /// -> (resourceVersion, continue token, item keys, per-item errors)
    fn apply_list_page(&self, py: Python<'_>, page: &[u8]) -> PyResult<(String, String, Vec<String>, Vec<String>)> {
        let l = run(py, || self.lock().apply_list_page(page))?;
        Ok((l.resource_version, l.continue_token, l.keys, l.errors.iter().map(ToString::to_string).collect()))
    }

    fn retain(&self, py: Python<'_>, kind: &str, keys: Vec<String>) -> PyResult<usize> {
        let keys: std::collections::HashSet<String> = keys.into_iter().collect();
        run(py, || Ok(self.lock().retain(kind, &keys)))
    }

    /// ExtenderArgs -> FilterDecision: the response bytes and the decision as typed fields.
    #[pyo3(signature = (args, now, record=true))]
    fn decide(&self, py: Python<'_>, args: &[u8], now: i64, record: bool) -> PyResult<FilterDecision> {
        let free = if args.len() <= DECIDE_WITH_GIL_MAX { self.try_lock() } else { None };
        let outcome = match free {
            Some(mut engine) => keep_gil(|| Ok(engine.filter(args, now, record)))?,
            // Busy (a reflector applying a list page) or large: wait and work without the GIL.
            None => run(py, || Ok(self.lock().filter(args, now, record)))?,
        };
        Ok(FilterDecision::from(outcome))
    }

    fn release(&self, py: Python<'_>, pod_uid: &str) -> PyResult<bool> {
        run(py, || Ok(self.lock().release(pod_uid)))
    }

    /// After a release of vGPU capacity: the pods Filter rejected that fit now, in kube-scheduler's
    /// queue order (priority, then age), each marked requeued until Filter sees it again. A pass
    /// does a bounded amount of work (the engine is locked meanwhile).
    /// -> (the pods, in order; whether waiting pods were left for another pass at once).
    fn requeue(&self, py: Python<'_>, now: i64) -> PyResult<(Vec<RequeuedPod>, bool)> {
        let pass = run(py, || Ok(self.lock().requeue(now)))?;
        Ok((pass.pods.into_iter().map(RequeuedPod::from).collect(), pass.more))
    }

    /// The waiting pods that evicting lower-priority pods unblocks now: JSON
    /// `{"preemptions": [{"key", "namespace", "name", "uid", "priority", "node", "gpus",
    /// "victims": [{"key", "namespace", "name", "priority"}]}], "more"}`. The GPUs chosen for each
    /// are held at once; [`Cluster::unhold`] drops a hold that is not carried out.
    fn preempt<'py>(&self, py: Python<'py>, now: i64) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || to_json(&self.lock().preempt(now), "preemptions"))?;
        Ok(PyBytes::new(py, &out))
    }

    /// Drops the GPUs held for a pod (a preemption not carried out); true if it had a hold.
    fn unhold(&self, py: Python<'_>, pod_key: &str) -> PyResult<bool> {
        run(py, || Ok(self.lock().unhold(pod_key)))
    }

    /// Has preemption look at a waiting pod again at its next pass although no node changed; false
    /// if the pod is not waiting.
    fn look_again(&self, py: Python<'_>, pod_key: &str) -> PyResult<bool> {
        run(py, || Ok(self.lock().look_again(pod_key)))
    }

    /// How many pods Filter rejected wait for a release.
    fn waiting_count(&self) -> usize {
        self.lock().waiting_count()
    }

    /// One of HAMi's registration passes at `now`: JSON list of handshake writes
    /// (`{"node", "key", "value"}`, `value` null to delete the key).
    fn registration_pass<'py>(&self, py: Python<'py>, now: i64) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || to_json(&self.lock().registration_pass(now), "handshake writes"))?;
        Ok(PyBytes::new(py, &out))
    }

    #[pyo3(signature = (pod, now, node_policy=None, gpu_policy=None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        pod: &[u8],
        now: i64,
        node_policy: Option<&str>,
        gpu_policy: Option<&str>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || to_json(&self.lock().explain(pod, now, node_policy, gpu_policy)?, "explain"))?;
        Ok(PyBytes::new(py, &out))
    }

    /// Per container: the request against the largest free GPU resources (`kubectl hami why`).
    fn headroom<'py>(&self, py: Python<'py>, pod: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || to_json(&self.lock().headroom(pod)?, "headroom"))?;
        Ok(PyBytes::new(py, &out))
    }

    fn admit<'py>(&self, py: Python<'py>, review: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || Ok(self.lock().admit(review)))?;
        Ok(PyBytes::new(py, &out))
    }

    /// `admit` with the verdict: `(AdmissionReview bytes, allowed)`.
    fn review<'py>(&self, py: Python<'py>, review: &[u8]) -> PyResult<(Bound<'py, PyBytes>, bool)> {
        let out = run(py, || Ok(self.lock().review(review)))?;
        Ok((PyBytes::new(py, &out.response), out.allowed))
    }

    /// The node locks (annotation keys, in HAMi's order) a Bind of this pod takes.
    fn bind_locks(&self, pod: &[u8]) -> PyResult<Vec<&'static str>> {
        self.lock().bind_locks(pod).map_err(engine_error)
    }

    /// The backends' own node locks: `[(annotation key, seconds held)]`.
    fn stamp_locks(&self) -> Vec<(&'static str, i64)> {
        self.lock().stamp_locks()
    }

    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || Ok(self.lock().usage_json()))?;
        Ok(PyBytes::new(py, &out))
    }

    /// The live holds at `now` (lapsed ones dropped): JSON `[{pod, node, gpus, expires}]`.
    fn holds<'py>(&self, py: Python<'py>, now: i64) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || Ok(self.lock().holds_json(now)))?;
        Ok(PyBytes::new(py, &out))
    }

    fn accounting<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || Ok(self.lock().accounting_json()))?;
        Ok(PyBytes::new(py, &out))
    }

    fn node_count(&self) -> usize {
        self.lock().node_count()
    }

    fn pod_count(&self) -> usize {
        self.lock().pod_count()
    }
}

/// YAML documents (as `kubectl get -o yaml` writes them) -> JSON array of the non-empty documents;
/// `name` (the file) is the object errors name.
#[pyfunction]
#[pyo3(signature = (text, name="manifest"))]
fn yaml_to_json<'py>(py: Python<'py>, text: &[u8], name: &str) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || hami_core::manifest::yaml_documents_to_json(name, text))?;
    Ok(PyBytes::new(py, &out))
}

/// HAMi's device config file (YAML) -> the checked config as JSON, for the engine config's
/// `device_config`. `file` (its path) is the object errors name.
#[pyfunction]
fn load_device_config<'py>(py: Python<'py>, text: &[u8], file: &str) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let config = hami_core::device_config::DeviceConfig::from_yaml(text, file)?;
        serde_json::to_vec(&config).map_err(hami_core::Error::internal)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Every valid node scheduler policy name, from the engine's own list.
#[pyfunction]
fn node_policy_names() -> Vec<&'static str> {
    hami_core::policy::NodePolicy::names()
}

/// A node scheduler policy given as a flag: its canonical name, or EngineError listing the valid ones.
#[pyfunction]
fn check_node_policy(value: &str) -> PyResult<&'static str> {
    hami_core::policy::NodePolicy::parse_strict(value).map(hami_core::policy::NodePolicy::as_str).map_err(engine_error)
}

/// A GPU scheduler policy given as a flag: the trimmed value, or EngineError listing the valid ones.
/// A label selector (`app=web,env in (a,b)`) checked as the planner's opt-in parses it.
#[pyfunction]
fn check_label_selector(text: &str) -> PyResult<String> {
    hami_core::k8s::LabelSelector::parse(text)
        .map(|_| text.to_owned())
        .map_err(|e| engine_error(hami_core::Error::config("label selector", e)))
}

#[pyfunction]
fn check_gpu_policy(value: &str) -> PyResult<String> {
    hami_core::policy::GpuPolicy::parse_strict(value).map(|p| p.text).map_err(engine_error)
}

/// One `/filter` decision, typed: no JSON to decode in Python.
#[pyclass(frozen, module = "hami_fast._native")]
struct FilterDecision {
    response: Vec<u8>,
    #[pyo3(get)]
    outcome: &'static str,
    #[pyo3(get)]
    pod_key: String,
    #[pyo3(get)]
    namespace: String,
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    uid: String,
    #[pyo3(get)]
    resource_version: String,
    /// A PodGroup member (HAMi's `IsPodGroupMember`): its Bind retries the node lock.
    #[pyo3(get)]
    pod_group: bool,
    #[pyo3(get)]
    node: Option<String>,
    patch: Option<Vec<u8>>,
    #[pyo3(get)]
    devices: Option<String>,
    #[pyo3(get)]
    events: Vec<(String, String, String)>,
    #[pyo3(get)]
    reason_counts: std::collections::BTreeMap<String, usize>,
    /// The node locks its Bind takes (annotation keys, in HAMi's order).
    #[pyo3(get)]
    locks: Vec<&'static str>,
    error: Option<hami_core::Error>,
}

impl From<hami_core::FilterOutcome> for FilterDecision {
    fn from(o: hami_core::FilterOutcome) -> Self {
        let mut out = Self {
            response: o.response,
            outcome: o.outcome.as_str(),
            pod_key: String::new(),
            namespace: String::new(),
            name: String::new(),
            uid: String::new(),
            resource_version: String::new(),
            pod_group: false,
            node: None,
            patch: None,
            devices: None,
            events: Vec::new(),
            reason_counts: Default::default(),
            locks: Vec::new(),
            error: o.error,
        };
        if let Some(d) = o.decision {
            out.devices = d.annotations.get(codec::ALLOCATED_KEY).cloned();
            out.patch = d.node.is_some().then(|| d.patch.into_bytes());
            (out.pod_key, out.namespace, out.name, out.uid) = (d.pod.key, d.pod.namespace, d.pod.name, d.pod.uid);
            out.resource_version = d.pod.resource_version;
            out.pod_group = d.pod.pod_group;
            out.node = d.node;
            out.events =
                d.events.into_iter().map(|e| (e.event_type.to_owned(), e.reason.to_owned(), e.message)).collect();
            out.reason_counts = d.failed_reasons.into_iter().map(|(k, n)| (k.to_owned(), n)).collect();
            out.locks = d.locks;
        }
        out
    }
}

#[pymethods]
impl FilterDecision {
    /// The ExtenderFilterResult bytes to answer kube-scheduler with.
    #[getter]
    fn response<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.response)
    }

    /// The merge patch of the pod's annotations and label, when a node was chosen.
    #[getter]
    fn patch<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.patch.as_ref().map(|p| PyBytes::new(py, p))
    }

    /// With outcome `error`: the EngineError the response's `Error` reads (not raised: kube-scheduler gets its answer).
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.error.clone().map(|e| engine_error(e).into_value(py).into_any())
    }

    fn __repr__(&self) -> String {
        format!("FilterDecision(outcome={:?}, pod_key={:?}, node={:?})", self.outcome, self.pod_key, self.node)
    }
}

/// A rejected pod that fits after a release (from `Cluster.requeue`).
#[pyclass(frozen, module = "hami_fast._native")]
struct RequeuedPod {
    #[pyo3(get)]
    key: String,
    #[pyo3(get)]
    namespace: String,
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    uid: String,
    #[pyo3(get)]
    priority: i32,
    #[pyo3(get)]
    node: String,
}

impl From<hami_core::requeue::Requeue> for RequeuedPod {
    fn from(r: hami_core::requeue::Requeue) -> Self {
        Self { key: r.key, namespace: r.namespace, name: r.name, uid: r.uid, priority: r.priority, node: r.node }
    }
}

#[pymethods]
impl RequeuedPod {
    fn __repr__(&self) -> String {
        format!("RequeuedPod({}/{}, priority={}, node={:?})", self.namespace, self.name, self.priority, self.node)
    }
}

#[pyfunction]
fn decode_node_register<'py>(py: Python<'py>, value: &str) -> PyResult<Bound<'py, PyBytes>> {
    let devices = codec::decode_node_register(value).map_err(|e| annotation_error(codec::REGISTER_KEY, e))?;
    Ok(PyBytes::new(py, &serde_json::to_vec(&devices).unwrap_or_default()))
}

#[pyfunction]
fn encode_node_register(devices: &[u8]) -> PyResult<String> {
    let devices: Vec<codec::Device> =
        serde_json::from_slice(devices).map_err(|e| engine_error(hami_core::Error::decode("devices", e)))?;
    Ok(codec::encode_node_register(&devices))
}

#[pyfunction]
fn decode_pod_devices<'py>(py: Python<'py>, value: &str) -> PyResult<Bound<'py, PyBytes>> {
    let slots = codec::decode_pod_devices(value).map_err(|e| annotation_error(codec::ALLOCATED_KEY, e))?;
    Ok(PyBytes::new(py, &serde_json::to_vec(&slots).unwrap_or_default()))
}

#[pyfunction]
fn encode_pod_devices(containers: &[u8]) -> PyResult<String> {
    let slots: codec::PodDevices =
        serde_json::from_slice(containers).map_err(|e| engine_error(hami_core::Error::decode("containers", e)))?;
    Ok(codec::encode_pod_devices(&slots))
}

#[pyfunction]
fn parse_node_lock(value: &str) -> PyResult<(String, String, String)> {
    let lock = codec::parse_node_lock(value).map_err(|e| annotation_error(codec::NODE_LOCK_KEY, e))?;
    Ok((lock.timestamp, lock.namespace, lock.name))
}

/// ExtenderBindingArgs bytes -> (PodName, PodNamespace, PodUID, Node); keys matched case-insensitively.
#[pyfunction]
fn parse_binding_args(body: &[u8]) -> PyResult<(String, String, String, String)> {
    let a = hami_core::k8s::extender::parse_binding_args(body).map_err(engine_error)?;
    Ok((a.pod_name, a.pod_namespace, a.pod_uid, a.node))
}

/// Pod JSON bytes -> whether HAMi counts it a PodGroup member (its Bind retries the node lock).
#[pyfunction]
fn is_pod_group_member(pod: &[u8]) -> PyResult<bool> {
    let pod: hami_core::k8s::Pod =
        serde_json::from_slice(pod).map_err(|e| engine_error(hami_core::Error::decode("Pod", e)))?;
    Ok(pod.is_pod_group_member())
}

#[pyfunction]
fn format_node_lock(timestamp: &str, namespace: &str, name: &str) -> String {
    codec::format_node_lock(timestamp, namespace, name)
}

/// Trace replay (`hami-fast simulate`): node and pod CSV bytes in, the summary JSON out.
#[pyfunction]
#[pyo3(signature = (nodes_csv, pods_csv, policy, seed=42, tune=1.3, nodes_name="nodes.csv", pods_name="pods.csv", shuffle=true, check_all=false))]
#[allow(clippy::too_many_arguments)]
fn replay<'py>(
    py: Python<'py>,
    nodes_csv: &[u8],
    pods_csv: &[u8],
    policy: &str,
    seed: i64,
    tune: f64,
    nodes_name: &str,
    pods_name: &str,
    shuffle: bool,
    check_all: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    use hami_core::replay;
    let out = run(py, || {
        let (nodes, pods) = (replay::csv::utf8(nodes_name, nodes_csv)?, replay::csv::utf8(pods_name, pods_csv)?);
        let options = replay::Options {
            policy: hami_core::policy::NodePolicy::from_name(policy)?,
            seed,
            tune,
            shuffle,
            check_all,
            ..replay::Options::default()
        };
        let value = replay::replay_csv(nodes_name, nodes, pods_name, pods, options)?;
        serde_json::to_vec(&value).map_err(hami_core::Error::internal)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// The node policy names the replay (and `--node-scheduler-policy`) accepts, in table order.
#[pyfunction]
fn policy_names() -> Vec<&'static str> {
    hami_core::policy::POLICY_NAMES.to_vec()
}

/// The replay's cluster and arrival stream for `seed` (no replay run): JSON
/// `{"seed", "total_gpus", "nodes": [[name, cpu_milli, memory_mib, gpus, model]], "pods": [[cpu_milli, memory_mib, gpu_milli, num_gpu, gpu_spec]]}`.
#[pyfunction]
#[pyo3(signature = (nodes_csv, pods_csv, seed=42, tune=1.3, nodes_name="nodes.csv", pods_name="pods.csv"))]
fn replay_arrivals<'py>(
    py: Python<'py>,
    nodes_csv: &[u8],
    pods_csv: &[u8],
    seed: i64,
    tune: f64,
    nodes_name: &str,
    pods_name: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    use hami_core::replay;
    let out = run(py, || {
        let (nodes, pods) = (replay::csv::utf8(nodes_name, nodes_csv)?, replay::csv::utf8(pods_name, pods_csv)?);
        let options = replay::Options { seed, tune, ..replay::Options::default() };
        let value = replay::arrivals_csv(nodes_name, nodes, pods_name, pods, options)?;
        serde_json::to_vec(&value).map_err(hami_core::Error::internal)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// FGD's fragment of one node (milli-GPU) against a target workload of
/// `(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)` task types.
#[pyfunction]
fn node_frag(cpu_left: i64, gpu_free: Vec<i64>, model: &str, types: Vec<(i64, i64, u32, String, f64)>) -> f64 {
    use hami_core::frag::{node_frag, NodeShape, TaskType, Workload};
    let workload = Workload {
        types: types
            .into_iter()
            .map(|(cpu_milli, gpu_milli, num_gpu, gpu_spec, share)| {
                (TaskType { cpu_milli, gpu_milli, num_gpu, gpu_spec }, share)
            })
            .collect(),
    };
    node_frag(&NodeShape { cpu_left, gpu_free: &gpu_free, model }, &workload)
}

fn config_of(config: Option<&[u8]>) -> Result<hami_core::Config, hami_core::Error> {
    hami_core::Config::from_json(config.unwrap_or(b""))
}

/// Defragmentation planner: Kubernetes objects (Lists or single Nodes/Pods, JSON bytes) in,
/// the plan JSON out (`hami-fast plan`, `POST /api/v1/plan`).
#[pyfunction]
#[pyo3(signature = (inputs, options=None, config=None))]
fn plan<'py>(
    py: Python<'py>,
    inputs: Vec<Vec<u8>>,
    options: Option<&[u8]>,
    config: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        hami_core::plan::plan_bytes(&refs, options.unwrap_or(b""), &config_of(config)?)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Cluster and per-node fragmentation of Kubernetes objects, JSON out.
#[pyfunction]
#[pyo3(signature = (inputs, config=None))]
fn fragmentation<'py>(py: Python<'py>, inputs: Vec<Vec<u8>>, config: Option<&[u8]>) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        hami_core::plan::fragmentation_bytes(&refs, &config_of(config)?)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// A placement target checked before any eviction: `{"ok", "uuids", "message"}` JSON.
#[pyfunction]
#[pyo3(signature = (inputs, pod, node, gpus, config=None))]
fn validate_target<'py>(
    py: Python<'py>,
    inputs: Vec<Vec<u8>>,
    pod: &str,
    node: &str,
    gpus: Vec<String>,
    config: Option<&[u8]>,
) -> PyResult<Bound<'py, PyBytes>> {
    let out = run(py, || {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        hami_core::plan::validate_target_bytes(&refs, pod, node, &gpus, &config_of(config)?)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// A trace replay stopped at `arrived_pct` % of GPU capacity, as a Kubernetes `List` (JSON).
#[pyfunction]
#[pyo3(signature = (nodes_csv, pods_csv, policy, arrived_pct=90.0, seed=42, tune=1.3, nodes_name="nodes.csv", pods_name="pods.csv"))]
#[allow(clippy::too_many_arguments)]
fn replay_snapshot<'py>(
    py: Python<'py>,
    nodes_csv: &[u8],
    pods_csv: &[u8],
    policy: &str,
    arrived_pct: f64,
    seed: i64,
    tune: f64,
    nodes_name: &str,
    pods_name: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    use hami_core::replay;
    let out = run(py, || {
        let (nodes, pods) = (replay::csv::utf8(nodes_name, nodes_csv)?, replay::csv::utf8(pods_name, pods_csv)?);
        let policy = hami_core::policy::NodePolicy::from_name(policy)?;
        let options = replay::Options { policy, seed, tune, ..replay::Options::default() };
        let value = replay::snapshot::snapshot_csv(nodes_name, nodes, pods_name, pods, options, arrived_pct)?;
        serde_json::to_vec(&value).map_err(hami_core::Error::internal)
    })?;
    Ok(PyBytes::new(py, &out))
}

#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    let keys = pyo3::types::PyDict::new(m.py());
    for (name, key) in hami_core::annotations::ALL {
        keys.set_item(name, key)?;
    }
    m.add("ANNOTATIONS", keys)?;
    let clearable: Vec<&str> =
        hami_core::fit::Reason::ALL.iter().filter(|r| r.moves_can_clear()).map(|r| r.as_str()).collect();
    m.add("REASONS_MOVES_CAN_CLEAR", pyo3::types::PyTuple::new(m.py(), clearable)?)?;
    m.add_class::<Cluster>()?;
    m.add_class::<objects::ObjectCache>()?;
    m.add_function(wrap_pyfunction!(yaml_to_json, m)?)?;
    m.add_function(wrap_pyfunction!(load_device_config, m)?)?;
    m.add_function(wrap_pyfunction!(node_policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(check_node_policy, m)?)?;
    m.add_function(wrap_pyfunction!(check_gpu_policy, m)?)?;
    m.add_function(wrap_pyfunction!(check_label_selector, m)?)?;
    m.add_class::<FilterDecision>()?;
    m.add_class::<RequeuedPod>()?;
    m.add_function(wrap_pyfunction!(decode_node_register, m)?)?;
    m.add_function(wrap_pyfunction!(encode_node_register, m)?)?;
    m.add_function(wrap_pyfunction!(decode_pod_devices, m)?)?;
    m.add_function(wrap_pyfunction!(encode_pod_devices, m)?)?;
    m.add_function(wrap_pyfunction!(parse_node_lock, m)?)?;
    m.add_function(wrap_pyfunction!(format_node_lock, m)?)?;
    m.add_function(wrap_pyfunction!(parse_binding_args, m)?)?;
    m.add_function(wrap_pyfunction!(is_pod_group_member, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(replay_arrivals, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    m.add_function(wrap_pyfunction!(node_frag, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(fragmentation, m)?)?;
    m.add_function(wrap_pyfunction!(validate_target, m)?)?;
    m.add_function(wrap_pyfunction!(replay_snapshot, m)?)?;
    Ok(())
}
