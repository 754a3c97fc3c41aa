//! `/webhook`'s AdmissionReview answer, as the API server reads it. Fields in alphabetical order:
//! the bytes stay those the untyped answer had.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Serialize)]
pub struct AdmissionReview {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: &'static str,
    pub response: AdmissionResponse,
}

#[derive(Debug, Default, Serialize)]
pub struct AdmissionResponse {
    pub allowed: bool,
    /// The JSON patch, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AdmissionStatus>,
    pub uid: String,
    /// kubectl shows these to whoever applies the pod ("Warning: ...").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct AdmissionStatus {
    pub code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

/// One operation of the webhook's JSON Patch (RFC 6902), of semantic ops only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatchOp {
    pub op: &'static str,
    pub path: String,
    pub value: PatchValue,
}

/// What a patch op sets.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PatchValue {
    /// A quantity, an annotation value, a scheduler or runtime class name.
    Text(String),
    /// A map created with its first entry (`limits`, `requests`, `annotations`).
    Map(BTreeMap<String, String>),
    /// A container's `resources` created with its first limit.
    Resources { limits: BTreeMap<String, String> },
    /// An env entry appended.
    Env(EnvVar),
    /// A container's `env` created with its first entry.
    EnvList(Vec<EnvVar>),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvVar {
    pub name: String,
    pub value: String,
}

impl PatchValue {
    /// A map of one entry.
    pub fn entry(key: &str, value: String) -> Self {
        Self::Map(BTreeMap::from([(key.to_owned(), value)]))
    }
}
