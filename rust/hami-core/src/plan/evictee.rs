//! Whether the descheduler may evict the pod a placement names: something must recreate it
//! elsewhere, and its replacement must come through this scheduler for the pin to apply.

use super::{owner_blocks, Immovable};
use crate::error::{Error, Result};
use crate::k8s::Object;

/// `Ok` when the pod (JSON) may be evicted for a placement; else an `invalid` error naming the
/// pod and the field that forbids it, whose message completes "spec.evictPod: pod <ns/name> ...".
pub fn check_evictee(pod: &[u8], scheduler_name: &str) -> Result<()> {
    let object: Object = serde_json::from_slice(pod).map_err(|e| Error::decode("evictee", e))?;
    let owner = object.metadata.controller().map(|(kind, name)| (kind.to_owned(), name.to_owned()));
    let (pod, _) = object.into_pod();
    let refused =
        |field: &str, message: String| Err(Error::invalid(format!("Pod {}", pod.key()), message).field(field));
    match owner_blocks(&owner) {
        Some(why @ Immovable::BarePod) => refused(OWNER_FIELD, format!("is a {why}, so it is not evicted")),
        Some(why) => refused(OWNER_FIELD, format!("is a {why} and is not evicted")),
        None if pod.spec.scheduler_name != scheduler_name => refused(
            "spec.schedulerName",
            format!("does not use schedulerName {scheduler_name}: its replacement would not be pinned"),
        ),
        None => Ok(()),
    }
}

const OWNER_FIELD: &str = "metadata.ownerReferences";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use serde_json::json;

    fn pod(owner: Option<&str>, scheduler: &str) -> Vec<u8> {
        let owners: Vec<_> = owner
            .map(|kind| json!({"apiVersion": "v1", "kind": kind, "name": "o", "uid": "u", "controller": true}))
            .into_iter()
            .collect();
        let pod = json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "ownerReferences": owners},
            "spec": {"schedulerName": scheduler, "containers": []}});
        serde_json::to_vec(&pod).unwrap()
    }

    fn refusal(pod: &[u8]) -> (ErrorKind, String, String, String) {
        let e = check_evictee(pod, "hami-scheduler").unwrap_err();
        (e.kind, e.object, e.field, e.message)
    }

    #[test]
    fn a_replicaset_pod_of_this_scheduler_may_be_evicted() {
        assert_eq!(check_evictee(&pod(Some("ReplicaSet"), "hami-scheduler"), "hami-scheduler"), Ok(()));
    }

    #[test]
    fn a_pod_nothing_would_recreate_elsewhere_is_refused_by_its_owner_field() {
        let bare = "is a bare pod (no controller owner): it would not be recreated, so it is not evicted";
        let expected = |m: &str| (ErrorKind::Invalid, "Pod ns/p".to_owned(), OWNER_FIELD.to_owned(), m.to_owned());
        assert_eq!(refusal(&pod(None, "hami-scheduler")), expected(bare));
        assert_eq!(
            refusal(&pod(Some("DaemonSet"), "hami-scheduler")),
            expected("is a DaemonSet pod and is not evicted")
        );
        assert_eq!(refusal(&pod(Some("Node"), "hami-scheduler")), expected("is a Node pod and is not evicted"));
    }

    #[test]
    fn a_pod_of_another_scheduler_is_refused_by_its_scheduler_name() {
        let (kind, _, field, message) = refusal(&pod(Some("ReplicaSet"), "default-scheduler"));
        assert_eq!((kind, field.as_str()), (ErrorKind::Invalid, "spec.schedulerName"));
        assert_eq!(message, "does not use schedulerName hami-scheduler: its replacement would not be pinned");
    }

    #[test]
    fn a_pod_that_is_not_json_is_a_decode_error() {
        assert_eq!(check_evictee(b"{not json", "hami-scheduler").unwrap_err().kind, ErrorKind::Decode);
    }
}
