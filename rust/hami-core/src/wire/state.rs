//! Reports of the cluster state (metrics, the REST API, the GPU map): per-device usage, the live
//! holds, per-pod footprints and quotas, and the registration pass's handshake writes.

use serde::Serialize;

/// One node's GPUs and their usage (`Cluster.usage`).
#[derive(Debug, Serialize)]
pub struct NodeUsage<'a> {
    pub name: &'a str,
    pub registered: bool,
    pub error: Option<String>,
    pub devices: Vec<DeviceUsage<'a>>,
}

#[derive(Debug, Serialize)]
pub struct DeviceUsage<'a> {
    pub uuid: &'a str,
    pub index: u32,
    #[serde(rename = "type")]
    pub device_type: &'a str,
    pub numa: i32,
    pub health: bool,
    pub cordoned: bool,
    pub count: i32,
    pub devmem: i32,
    pub devcore: i32,
    pub used: i64,
    pub usedmem: i64,
    pub usedcores: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<Held<'a>>,
}

/// Whom a GPU is held for and until when (RFC 3339).
#[derive(Debug, Serialize)]
pub struct Held<'a> {
    pub pod: &'a str,
    pub expires: String,
}

/// A live reservation (`Cluster.holds`): `gpus` as the reservation names them.
#[derive(Debug, Serialize)]
pub struct Hold<'a> {
    pub pod: &'a str,
    pub node: &'a str,
    pub gpus: &'a [Box<str>],
    pub expires: String,
}

/// Every counted pod's footprint and every vGPU quota's usage (`Cluster.accounting`, for metrics).
#[derive(Debug, Serialize)]
pub struct Accounting<'a> {
    pub pods: Vec<PodFootprint<'a>>,
    pub quotas: Vec<QuotaUsage<'a>>,
}

#[derive(Debug, Serialize)]
pub struct PodFootprint<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub node: &'a str,
    pub devices: Vec<PodDevice<'a>>,
}

#[derive(Debug, Serialize)]
pub struct PodDevice<'a> {
    pub uuid: &'a str,
    pub usedmem: i64,
    pub usedcores: i64,
}

#[derive(Debug, Serialize)]
pub struct QuotaUsage<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub resource: &'a str,
    pub limit: i64,
    pub used: i64,
}

/// One annotation write a registration pass asks for: `value: None` deletes the key (HAMi's clean-up).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandshakeWrite {
    pub node: String,
    pub key: &'static str,
    pub value: Option<String>,
}
