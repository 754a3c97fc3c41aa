//! hami-core: a HAMi-compatible vGPU fit-and-score engine. Pure Rust; the Python binding lives in `hami-py`.
//!
//! Layers, each importing only those above it:
//! - [`error`], [`config`], [`annotations`] (every HAMi key), [`k8s`] (one object model),
//!   [`codec`] (HAMi's annotation formats);
//! - [`model`] (GPUs, usage, footprints), [`request`], [`policy`] (one policy vocabulary and
//!   scoring dispatch), [`frag`], [`fit`] (with [`fit::reason`]);
//! - [`state`] (the cluster state and its ingest);
//! - [`filter`], [`mutate`] (decisions), [`webhook`] (the AdmissionReview envelope);
//! - [`engine`] (the entry points), [`replay`] (trace replay), [`plan`] (defragmentation).

pub mod annotations;
pub mod codec;
pub mod config;
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
pub mod replay;
pub mod request;
pub mod request_notes;
pub mod state;
pub mod webhook;

pub use config::Config;
pub use engine::Engine;
pub use error::{Error, ErrorKind};
pub use filter::{Decision, FilterOutcome, Outcome};
pub use state::{Applied, ClusterState};
