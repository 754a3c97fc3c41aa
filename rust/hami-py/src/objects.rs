//! `ObjectCache`: the planner's nodes and pods, fed by reflectors as `Cluster` is; plans,
//! validations and the GPU map read it without listing the cluster.

use crate::errors::{engine_error, run};
use crate::feed::{list_page_tuple, lock, watch_event_tuple, ListPageTuple, WatchEventTuple};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Mutex, MutexGuard};

#[pyclass(frozen, module = "hami_fast._native")]
pub struct ObjectCache {
    inner: Mutex<hami_core::plan::ObjectCache>,
}

/// The wall clock in Unix seconds, when the caller gives no time.
fn now_or_clock(now: Option<i64>) -> i64 {
    now.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
    })
}

impl ObjectCache {
    fn lock(&self) -> MutexGuard<'_, hami_core::plan::ObjectCache> {
        lock(&self.inner)
    }
}

#[pymethods]
impl ObjectCache {
    #[new]
    #[pyo3(signature = (config=None))]
    fn new(config: Option<&[u8]>) -> PyResult<Self> {
        let config = hami_core::Config::from_json(config.unwrap_or(b"")).map_err(engine_error)?;
        Ok(Self { inner: Mutex::new(hami_core::plan::ObjectCache::new(config)) })
    }

    /// A List (`kubectl get nodes,pods -o json`) or one Node or Pod; `name` is what errors name.
    #[pyo3(signature = (objects, name="snapshot"))]
    fn apply(&self, py: Python<'_>, objects: &[u8], name: &str) -> PyResult<()> {
        run(py, || self.lock().apply_input(objects, name))
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

    /// Changes so far: equal numbers mean nothing changed in between.
    fn generation(&self) -> u64 {
        self.lock().generation()
    }

    /// The planner on these objects: options and output as `_native.plan`'s.
    #[pyo3(signature = (options, now=None))]
    fn plan<'py>(&self, py: Python<'py>, options: &[u8], now: Option<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || self.lock().plan_bytes(options, now_or_clock(now)))?;
        Ok(PyBytes::new(py, &out))
    }

    #[pyo3(signature = (now=None))]
    fn fragmentation<'py>(&self, py: Python<'py>, now: Option<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || self.lock().fragmentation_bytes(now_or_clock(now)))?;
        Ok(PyBytes::new(py, &out))
    }

    /// A placement target checked before any eviction: `{"ok", "uuids", "message", "field"}` JSON.
    #[pyo3(signature = (pod, node, gpus, now=None))]
    fn validate_target<'py>(
        &self,
        py: Python<'py>,
        pod: &str,
        node: &str,
        gpus: Vec<String>,
        now: Option<i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || self.lock().validate_target_bytes(pod, node, &gpus, now_or_clock(now)))?;
        Ok(PyBytes::new(py, &out))
    }

    /// Whether the pod (JSON) a placement names may be evicted: `None`, or `EngineError` (kind
    /// `invalid`, `.field` the pod's field that forbids it, `.message` the reason).
    fn check_evictee(&self, py: Python<'_>, pod: &[u8], scheduler_name: &str) -> PyResult<()> {
        run(py, || self.lock().check_evictee(pod, scheduler_name))
    }

    fn usage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || Ok(self.lock().usage_json()))?;
        Ok(PyBytes::new(py, &out))
    }

    #[pyo3(signature = (now=None))]
    fn holds<'py>(&self, py: Python<'py>, now: Option<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let out = run(py, || Ok(self.lock().holds_json(now_or_clock(now))))?;
        Ok(PyBytes::new(py, &out))
    }

    /// The pods waiting for room that moving other pods can make, in queue order:
    /// `[(namespace/name, uid)]`.
    #[pyo3(signature = (now=None))]
    fn waiting_for_moves(&self, py: Python<'_>, now: Option<i64>) -> PyResult<Vec<(String, String)>> {
        let waiting = run(py, || Ok(self.lock().waiting_for_moves(now_or_clock(now))))?;
        Ok(waiting.into_iter().map(|w| (w.pod, w.uid)).collect())
    }

    fn node_count(&self) -> usize {
        self.lock().node_count()
    }
}
