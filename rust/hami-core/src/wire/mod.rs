//! Every document that crosses to Python, as a type: one file per document family. Plain data
//! (no engine types but HAMi's own formats), so that every layer below can build them.
//!
//! Documents only hami-fast's Python reads use snake_case keys; those the Kubernetes API,
//! kube-scheduler or HAMi read keep their own casing. `_native.pyi` mirrors each as a TypedDict
//! (checked against `samples` by `tests/infra/test_stubs.py`).

pub mod admission;
pub mod explain;
pub mod plan;
pub mod preempt;
pub mod replay;
pub mod snapshot;
pub mod state;

#[cfg(test)]
mod samples;
