//! `/webhook`'s AdmissionReview answer, as the API server reads it. Fields in alphabetical order:
//! the bytes stay those the untyped answer had.

use serde::Serialize;

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
