//! `Cluster`: the live engine behind `/filter`, `/bind`, `/webhook` and the watches, and its typed
//! outputs (`FilterDecision`, `RequeuedPod`).

use crate::errors::{engine_error, keep_gil, run, to_json};
use crate::feed::{list_page_tuple, lock, try_lock, watch_event_tuple, ListPageTuple, WatchEventTuple};
use hami_core::codec;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Mutex, MutexGuard};

/// Largest `/filter` body decided without releasing the GIL: about 1,500 candidate names, ~50 µs of
/// engine time (~3 µs per KiB). Releasing the GIL for less costs more than it frees: another thread
/// (Granian's, a poster, a reflector) takes it, and the request then waits for it to hand the GIL
/// back, up to the 5 ms switch interval; measured on /filter over HTTP with 500 names (10 KiB),
/// keeping it made the engine call 28 µs instead of 32 µs at p50 and 83 µs instead of 107 µs at p99
/// inside the request, and the server ~24 µs less CPU per request. Larger calls (a whole cluster of
/// names, an autoscaler's full Nodes) release it so the event loop and the other threads run meanwhile.
pub(crate) const DECIDE_WITH_GIL_MAX: usize = 16 * 1024;

#[pyclass(frozen, module = "hami_fast._native")]
pub(crate) struct Cluster {
    inner: Mutex<hami_core::Engine>,
}

impl Cluster {
    fn lock(&self) -> MutexGuard<'_, hami_core::Engine> {
        lock(&self.inner)
    }

    /// The engine if no other thread holds it (never waits with the GIL held).
    fn try_lock(&self) -> Option<MutexGuard<'_, hami_core::Engine>> {
        try_lock(&self.inner)
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

    fn apply_watch_event(&self, py: Python<'_>, line: &[u8]) -> PyResult<WatchEventTuple> {
        run(py, || self.lock().apply_watch_event(line)).map(watch_event_tuple)
    }

    fn apply_list_page(&self, py: Python<'_>, page: &[u8]) -> PyResult<ListPageTuple> {
        run(py, || self.lock().apply_list_page(page)).map(list_page_tuple)
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

/// One `/filter` decision, typed: no JSON to decode in Python.
#[pyclass(frozen, module = "hami_fast._native")]
pub(crate) struct FilterDecision {
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
pub(crate) struct RequeuedPod {
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
