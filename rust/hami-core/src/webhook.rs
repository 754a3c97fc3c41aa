//! `/webhook`: the AdmissionReview envelope in and out (v1 and v1beta1, answered in the version
//! received). The decision itself is [`crate::mutate`]'s.

use crate::k8s::Pod;
use crate::mutate::{mutate, Verdict};
use crate::request_notes::request_notes;
use crate::state::ClusterState;
use crate::wire::admission::{AdmissionResponse, AdmissionReview, AdmissionStatus};
use base64::Engine;
use serde::Deserialize;
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
    let (version, uid, verdict, warnings) = match serde_json::from_slice::<Review>(body) {
        Err(e) => (None, String::new(), Verdict::Fail(400, format!("decode AdmissionReview: {e}")), Vec::new()),
        Ok(Review { api_version, request: None }) => {
            (api_version, String::new(), Verdict::Fail(400, "AdmissionReview has no request".into()), Vec::new())
        }
        Ok(Review { api_version, request: Some(req) }) => {
            let (verdict, warnings) = review_pod(state, &req);
            (api_version, req.uid, verdict, warnings)
        }
    };
    let allowed = matches!(verdict, Verdict::Allow(_) | Verdict::Patch(_));
    let mut response = response_of(verdict, uid);
    // kubectl shows these to whoever applies the pod ("Warning: ..."); HAMi's webhook sends none.
    if allowed {
        response.warnings = warnings;
    }
    let version =
        version.filter(|v| v.starts_with("admission.k8s.io/")).unwrap_or_else(|| "admission.k8s.io/v1".into());
    let review = AdmissionReview { api_version: version, kind: "AdmissionReview", response };
    let response = serde_json::to_vec(&review).unwrap_or_default();
    Admission { response, allowed }
}

fn response_of(verdict: Verdict, uid: String) -> AdmissionResponse {
    let status = |code, message, reason| Some(AdmissionStatus { code, message, reason });
    match verdict {
        Verdict::Allow(message) => AdmissionResponse {
            allowed: true,
            status: status(200, Some(message.unwrap_or_default()), None),
            uid,
            ..Default::default()
        },
        Verdict::Patch(ops) if ops.is_empty() => {
            AdmissionResponse { allowed: true, status: status(200, None, None), uid, ..Default::default() }
        }
        Verdict::Patch(ops) => {
            let patch = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap_or_default());
            AdmissionResponse {
                allowed: true,
                patch: Some(patch),
                patch_type: Some("JSONPatch"),
                uid,
                ..Default::default()
            }
        }
        Verdict::Deny(message) => {
            AdmissionResponse { status: status(403, Some(message), Some("Forbidden")), uid, ..Default::default() }
        }
        Verdict::Fail(code, message) => {
            AdmissionResponse { status: status(code, Some(message), None), uid, ..Default::default() }
        }
    }
}

/// The webhook's verdict, and a warning for each request field HAMi reads otherwise than written.
fn review_pod(state: &ClusterState, req: &ReviewRequest) -> (Verdict, Vec<String>) {
    let Some(raw) = req.object else {
        return (Verdict::Fail(400, "AdmissionReview request.object is missing".into()), Vec::new());
    };
    #[derive(Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: Option<String>,
    }
    if let Ok(Kind { kind: Some(kind) }) = serde_json::from_str::<Kind>(raw.get()) {
        if kind != "Pod" {
            let message = format!("AdmissionReview request.object: kind {kind:?} is not a Pod");
            return (Verdict::Fail(400, message), Vec::new());
        }
    }
    let mut pod: Pod = match serde_json::from_str(raw.get()) {
        Ok(p) => p,
        Err(e) => return (Verdict::Fail(400, format!("AdmissionReview request.object: {e}")), Vec::new()),
    };
    if pod.metadata.namespace.is_empty() {
        pod.metadata.namespace = req.namespace.clone().unwrap_or_default();
    }
    let verdict = mutate(state, &mut pod);
    let warnings = request_notes(&pod, &state.config).iter().map(|n| format!("hami-fast: {n}")).collect();
    (verdict, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review_of(limits: serde_json::Value) -> serde_json::Value {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "namespace": "ns", "object": {"kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}}}});
        serde_json::from_slice(&admit(&ClusterState::default(), &serde_json::to_vec(&body).unwrap())).unwrap()
    }

    #[test]
    fn a_request_hami_reads_otherwise_is_admitted_with_a_warning() {
        let r = review_of(json!({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 300}));
        assert_eq!(r["response"]["allowed"], true);
        assert_eq!(
            r["response"]["warnings"],
            json!(["hami-fast: container main: nvidia.com/gpucores: 300 is more than 100 %; HAMi takes 100"])
        );
        let r = review_of(json!({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}));
        assert!(r["response"].get("warnings").is_none(), "{r}");
    }

    /// The answer as the untyped code built it: `json!` objects, whose keys serde_json sorts.
    fn untyped(verdict: Verdict, uid: &str, warnings: &[&str]) -> Vec<u8> {
        let allowed = matches!(verdict, Verdict::Allow(_) | Verdict::Patch(_));
        let mut response = match verdict {
            Verdict::Allow(m) => {
                json!({"uid": uid, "allowed": true, "status": {"code": 200, "message": m.unwrap_or_default()}})
            }
            Verdict::Patch(ops) if ops.is_empty() => json!({"uid": uid, "allowed": true, "status": {"code": 200}}),
            Verdict::Patch(ops) => {
                let patch = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&ops).unwrap());
                json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
            }
            Verdict::Deny(m) => {
                json!({"uid": uid, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": m}})
            }
            Verdict::Fail(code, m) => json!({"uid": uid, "allowed": false, "status": {"code": code, "message": m}}),
        };
        if allowed && !warnings.is_empty() {
            response["warnings"] = json!(warnings);
        }
        serde_json::to_vec(
            &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
        )
        .unwrap()
    }

    #[test]
    fn the_typed_answer_has_the_untyped_answers_bytes() {
        let op = || crate::mutate::PatchOp {
            op: "add",
            path: "/spec/x".into(),
            value: crate::mutate::PatchValue::Text("y".into()),
        };
        let verdicts = || {
            [
                Verdict::Allow(None),
                Verdict::Allow(Some("fine".into())),
                Verdict::Patch(Vec::new()),
                Verdict::Patch(vec![op()]),
                Verdict::Deny("no".into()),
                Verdict::Fail(400, "bad".into()),
            ]
        };
        for warnings in [&[][..], &["hami-fast: a note"][..]] {
            for (typed, untyped_verdict) in verdicts().into_iter().zip(verdicts()) {
                let allowed = matches!(typed, Verdict::Allow(_) | Verdict::Patch(_));
                let mut response = response_of(typed, "u".into());
                if allowed {
                    response.warnings = warnings.iter().map(|w| (*w).to_owned()).collect();
                }
                let review =
                    AdmissionReview { api_version: "admission.k8s.io/v1".into(), kind: "AdmissionReview", response };
                let bytes = serde_json::to_vec(&review).unwrap();
                let expected = untyped(untyped_verdict, "u", warnings);
                assert_eq!(String::from_utf8(bytes).unwrap(), String::from_utf8(expected).unwrap());
            }
        }
    }

    #[test]
    fn patch_values_serialise_as_the_json_they_replace() {
        use crate::mutate::{EnvVar, PatchValue};
        let env = || EnvVar { name: "N".into(), value: "v".into() };
        let limits = std::collections::BTreeMap::from([("nvidia.com/gpu".to_owned(), "1".to_owned())]);
        let cases = [
            (PatchValue::Text("1".into()), json!("1")),
            (PatchValue::entry("nvidia.com/gpu", "1".into()), json!({"nvidia.com/gpu": "1"})),
            (PatchValue::Resources { limits }, json!({"limits": {"nvidia.com/gpu": "1"}})),
            (PatchValue::Env(env()), json!({"name": "N", "value": "v"})),
            (PatchValue::EnvList(vec![env()]), json!([{"name": "N", "value": "v"}])),
        ];
        for (typed, untyped) in cases {
            assert_eq!(serde_json::to_string(&typed).unwrap(), untyped.to_string());
        }
    }
}
