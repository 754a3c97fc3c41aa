//! The node locks a pod's Bind takes, as HAMi's `lockAllDevices` takes them: every backend in
//! byte order of its common word (NVIDIA's is `NVIDIA`) whose request a regular container makes
//! takes its own lock ([`NodeLock`]); HAMi's shared lock is taken once (a second backend sharing
//! it finds it held by the same pod).

use crate::annotations::NODE_LOCK_KEY;
use crate::request::PodRequest;
use crate::vendor::{Backends, NodeLock};

const NVIDIA_WORD: &str = "NVIDIA";

/// The annotation keys of the locks, in the order HAMi takes them (none for a pod asking only
/// backends without a lock).
pub fn bind_locks(request: &PodRequest) -> Vec<&'static str> {
    let regular = request.init_count..request.slots.len();
    let asks_nvidia = request.slots[regular.clone()].iter().any(Option::is_some);
    if !request.asks_vendors() {
        return if asks_nvidia { vec![NODE_LOCK_KEY] } else { Vec::new() };
    }
    let mut asked: Vec<(&str, NodeLock)> = Vec::new();
    if asks_nvidia {
        asked.push((NVIDIA_WORD, NodeLock::Shared));
    }
    for slot in regular {
        for r in request.vendor_requests(slot) {
            if !asked.iter().any(|(word, _)| *word == r.backend.common_word) {
                asked.push((&r.backend.common_word, r.backend.lock));
            }
        }
    }
    if asked.len() > 1 {
        asked.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    }
    let mut keys: Vec<&'static str> = Vec::with_capacity(asked.len());
    for (_, lock) in asked {
        let key = match lock {
            NodeLock::None => continue,
            NodeLock::Shared => NODE_LOCK_KEY,
            NodeLock::Stamp { key, .. } => key,
        };
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// The backends' own locks (key, seconds held): HAMi releases every one of them when any Bind
/// fails, whoever holds it.
pub fn stamp_locks(backends: &Backends) -> Vec<(&'static str, i64)> {
    let mut out: Vec<(&'static str, i64)> = Vec::new();
    for b in backends.iter() {
        if let NodeLock::Stamp { key, expiry_secs } = b.lock {
            if !out.iter().any(|(k, _)| *k == key) {
                out.push((key, expiry_secs));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::k8s::Pod;

    fn request(pod: serde_json::Value) -> (PodRequest, Backends) {
        let config = Config::default();
        let backends = Backends::from_config(&config);
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let mut request = PodRequest::from_pod(&pod, &config);
        request.vendor = crate::vendor::request::vendor_requests(&pod, &backends);
        (request, backends)
    }

    fn containers(init: serde_json::Value, app: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"spec": {"initContainers": init, "containers": app}})
    }

    fn limits(pairs: &[(&str, &str)]) -> serde_json::Value {
        let limits: serde_json::Map<String, serde_json::Value> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), serde_json::json!(v))).collect();
        serde_json::json!({"name": "c", "resources": {"limits": limits}})
    }

    #[test]
    fn nvidia_and_mlu_take_cambricon_s_lock_first() {
        let (r, _) = request(containers(
            serde_json::json!([]),
            serde_json::json!([limits(&[("nvidia.com/gpu", "1")]), limits(&[("cambricon.com/vmlu", "1")])]),
        ));
        assert_eq!(bind_locks(&r), ["cambricon.com/dsmlu.lock", NODE_LOCK_KEY]);
    }

    #[test]
    fn the_shared_lock_is_taken_once_and_init_containers_take_none() {
        let (r, _) = request(containers(
            serde_json::json!([limits(&[("cambricon.com/vmlu", "1")])]),
            serde_json::json!([limits(&[("hygon.com/dcunum", "1"), ("nvidia.com/gpu", "1")])]),
        ));
        assert_eq!(bind_locks(&r), [NODE_LOCK_KEY], "DCU and NVIDIA share one lock; the init MLU takes none");
        let (r, _) =
            request(containers(serde_json::json!([]), serde_json::json!([limits(&[("enflame.com/gcu", "1")])])));
        assert!(bind_locks(&r).is_empty(), "Enflame GCU takes no lock");
        let (r, _) =
            request(containers(serde_json::json!([]), serde_json::json!([limits(&[("nvidia.com/gpu", "1")])])));
        assert_eq!(bind_locks(&r), [NODE_LOCK_KEY]);
    }

    #[test]
    fn cambricon_s_lock_is_released_by_any_failed_bind() {
        let backends = Backends::from_config(&Config::default());
        assert_eq!(stamp_locks(&backends), [("cambricon.com/dsmlu.lock", 120)]);
    }
}
