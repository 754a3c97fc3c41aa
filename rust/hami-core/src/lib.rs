//! hami-core: a HAMi-compatible vGPU fit-and-score engine. Pure Rust; the Python binding lives in `hami-py`.

pub mod cluster;
pub mod codec;
pub mod config;
pub mod fit;
pub mod frag;
pub mod health;
pub mod k8s;
pub mod model;
pub mod nodes;
pub mod plan;
pub mod policy;
pub mod quantity;
pub mod replay;
pub mod request;
pub mod schedule;
pub mod view;
pub mod webhook;
pub mod wire;

pub use cluster::{Applied, Cluster};
pub use config::Config;
pub use schedule::FilterOutcome;
