//! `/webhook`: the AdmissionReview envelope in and out (v1 and v1beta1, answered in the version
//! received). The decision itself is [`crate::mutate`]'s.

use crate::k8s::Pod;
use crate::mutate::{mutate, Verdict};
use crate::state::ClusterState;
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Review<'a> {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(borrow)]
    request: Option<ReviewRequest<'a>>,
}

#[derive(Deserialize)]
struct ReviewRequest<'a> {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(borrow)]
    object: Option<&'a RawValue>,
}

/// A webhook answer: the AdmissionReview bytes and whether they admit the pod (for metrics, without
/// looking into the bytes).
pub struct Admission {
    pub response: Vec<u8>,
    pub allowed: bool,
}

/// `/webhook`: AdmissionReview (v1 or v1beta1) in, AdmissionReview out in the same version.
pub fn admit(state: &ClusterState, body: &[u8]) -> Vec<u8> {
    review(state, body).response
}

/// [`admit`] with the verdict alongside the bytes.
pub fn review(state: &ClusterState, body: &[u8]) -> Admission {
    let (version, uid, verdict) = match serde_json::from_slice::<Review>(body) {
        Err(e) => (None, String::new(), Verdict::Fail(400, format!("decode AdmissionReview: {e}"))),
        Ok(Review { api_version, request: None }) => {
            (api_version, String::new(), Verdict::Fail(400, "AdmissionReview has no request".into()))
        }
        Ok(Review { api_version, request: Some(req) }) => {
            let verdict = review_pod(state, &req);
            (api_version, req.uid, verdict)
        }
    };
    let allowed = matches!(verdict, Verdict::Allow(_) | Verdict::Patch(_));
    let response = match verdict {
        Verdict::Allow(message) => {
            json!({"uid": uid, "allowed": true, "status": {"code": 200, "message": message.unwrap_or_default()}})
        }
        Verdict::Patch(ops) if ops.is_empty() => json!({"uid": uid, "allowed": true, "status": {"code": 200}}),
        Verdict::Patch(ops) => {
            let patch = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap_or_default());
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
        }
        Verdict::Deny(message) => {
            json!({"uid": uid, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": message}})
        }
        Verdict::Fail(code, message) => {
            json!({"uid": uid, "allowed": false, "status": {"code": code, "message": message}})
        }
    };
    let version =
        version.filter(|v| v.starts_with("admission.k8s.io/")).unwrap_or_else(|| "admission.k8s.io/v1".into());
    let response = serde_json::to_vec(&json!({"apiVersion": version, "kind": "AdmissionReview", "response": response}))
        .unwrap_or_default();
    Admission { response, allowed }
}

fn review_pod(state: &ClusterState, req: &ReviewRequest) -> Verdict {
    let Some(raw) = req.object else {
        return Verdict::Fail(400, "AdmissionReview request.object is missing".into());
    };
    #[derive(Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: Option<String>,
    }
    if let Ok(Kind { kind: Some(kind) }) = serde_json::from_str::<Kind>(raw.get()) {
        if kind != "Pod" {
            return Verdict::Fail(400, format!("AdmissionReview request.object: kind {kind:?} is not a Pod"));
        }
    }
    let mut pod: Pod = match serde_json::from_str(raw.get()) {
        Ok(p) => p,
        Err(e) => return Verdict::Fail(400, format!("AdmissionReview request.object: {e}")),
    };
    if pod.metadata.namespace.is_empty() {
        pod.metadata.namespace = req.namespace.clone().unwrap_or_default();
    }
    mutate(state, &mut pod)
}
