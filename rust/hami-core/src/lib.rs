//! hami-core: a HAMi-compatible vGPU fit-and-score engine. Pure Rust; the Python binding lives in `hami-py`.
//!
//! Layers, each importing only those above it (and, within a layer, only the modules written
//! before it; `tests/layering.rs` checks this order):
//! - [`error`], [`device_config`] (HAMi's device config file), [`config`], [`annotations`]
//!   (every HAMi key), [`k8s`] (one object model),
//!   [`codec`] (HAMi's annotation formats), [`manifest`] (YAML manifests to JSON), [`wire`] (every
//!   document that crosses to Python, typed);
//! - [`health`] (HAMi's node registration), [`model`] (GPUs, usage, footprints), [`vendor`] (the
//!   backends beside NVIDIA), [`request`], [`request_notes`] (how HAMi reads a request otherwise
//!   than written), [`frag`], [`policy`] (one policy vocabulary and
//!   scoring dispatch), [`fit`] (with [`fit::reason`] and [`fit::standard`], the vendors' Fit);
//! - [`state`] (the cluster state and its ingest);
//! - [`filter`], [`mutate`] (decisions), [`webhook`] (the AdmissionReview envelope);
//! - [`replay`] (trace replay), [`headroom`] (what a pod lacks to fit), [`plan`]
//!   (defragmentation), [`requeue`] (which rejected pods fit after a release), [`preempt`] (which
//!   lower-priority pods to evict for one), [`engine`] (the entry points).

pub mod annotations;
pub mod codec;
pub mod config;
pub mod device_config;
pub mod engine;
pub mod error;
pub mod filter;
pub mod fit;
pub mod frag;
pub mod headroom;
pub mod health;
pub mod k8s;
pub mod manifest;
pub mod model;
pub mod mutate;
pub mod plan;
pub mod policy;
pub mod preempt;
pub mod replay;
pub mod request;
pub mod request_notes;
pub mod requeue;
pub mod state;
#[cfg(test)]
pub(crate) mod testkit;
pub mod vendor;
pub mod webhook;
pub mod wire;

pub use config::Config;
pub use engine::Engine;
pub use error::{Error, ErrorKind};
pub use filter::{Decision, FilterOutcome, Outcome};
pub use state::{Applied, ClusterState};
