//! AMD (`AMD`): registered as a JSON device list under `hami.io/node-amd-register`, kept while the
//! node's capacity of the count resource is above 0 (no handshake). A container asks in its limits
//! only: memory in MiB (none: the whole card) and cores as a percentage 1..=100 of the card's
//! compute units (100 by default); the webhook fails a pod whose core limit is outside that range.
//! Device types are chosen by `amd.com/use-gputype`/`nouse-gputype`, UUIDs by
//! `amd.com/use-gpu-uuid`/`nouse-gpu-uuid`; the allocation names the card's own model.

use super::request::VendorRequest;
use super::{Admission, Backend, FitChecks, Health, RegisterFormat, RequestFormat};
use crate::device_config::DeviceConfig;
use crate::k8s::Container;
use std::sync::Arc;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.amd;
    (!section.resource_count_name.is_empty()).then(|| Backend {
        common_word: "AMD".into(),
        register_key: "hami.io/node-amd-register".into(),
        to_allocate_key: "hami.io/amd-devices-to-allocate".into(),
        allocated_key: "hami.io/amd-devices-allocated".into(),
        count_name: section.resource_count_name.clone(),
        memory_name: section.resource_memory_name.clone(),
        core_name: section.resource_core_name.clone(),
        default_cores: 100,
        count_checked: true,
        type_keys: Some(("amd.com/use-gputype".into(), "amd.com/nouse-gputype".into())),
        uuid_keys: ("amd.com/use-gpu-uuid".into(), "amd.com/nouse-gpu-uuid".into()),
        admission: Admission::CorePercent,
        register_format: RegisterFormat::Json,
        checks: FitChecks::ComputeUnits,
        request_format: RequestFormat::CorePercent,
        health: Health::Capacity,
        ..Backend::default()
    })
}

/// The request of one container, from its limits only; `None` when it asks nothing or a value is
/// out of range (HAMi drops the request whole).
pub fn container_request(c: &Container, b: &Arc<Backend>) -> Option<VendorRequest> {
    let res = c.resources();
    let nums = res.limit(&b.count_name)?.as_int()?;
    let max = i64::from(i32::MAX);
    if !(1..=max).contains(&nums) {
        return None;
    }
    let memreq = match res.limit(&b.memory_name) {
        None => 0,
        Some(q) => q.as_int().filter(|m| (0..=max).contains(m))?,
    };
    let coresreq = match res.limit(&b.core_name) {
        None => 100,
        Some(q) => q.as_int().filter(|c| (1..=100).contains(c))?,
    };
    Some(VendorRequest { backend: b.clone(), backend_id: 0, nums, memreq, mem_percentage: 0, coresreq })
}

/// The webhook's check of a container asking for the backend: the message HAMi fails the pod
/// with when its core limit is not an integer percentage 1..=100.
pub fn admission_error(c: &Container, b: &Backend) -> Option<String> {
    let res = c.resources();
    res.limit(&b.count_name)?;
    let core = res.limit(&b.core_name)?;
    match core.as_int() {
        Some(pct) if (1..=100).contains(&pct) => None,
        _ => Some(format!("{} must be an integer percentage between 1 and 100", b.core_name)),
    }
}

/// Whether the webhook routes a container to HAMi: it names the count, memory or core resource.
pub fn routes(c: &Container, b: &Backend) -> bool {
    let res = c.resources();
    [&b.count_name, &b.memory_name, &b.core_name].into_iter().any(|n| !n.is_empty() && res.limit(n).is_some())
}

/// The memory a request takes of a card: its MiB, or the whole card when it names none.
pub fn card_memory(memreq: i64, total_mem: i64) -> i64 {
    if memreq <= 0 && total_mem > 0 {
        total_mem
    } else {
        memreq
    }
}

/// The compute units a core percentage takes of a card with `total_core` units: at least one,
/// at most all; `None` when the card has none to give.
pub fn card_cores(percent: i64, memory: i64, total_mem: i64, total_core: i64) -> Option<i64> {
    if percent > 0 {
        (total_core > 0).then(|| (total_core * percent / 100).clamp(1, total_core))
    } else if total_mem > 0 && memory >= total_mem {
        Some(total_core)
    } else {
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_config::DeviceConfig;

    fn chart() -> Arc<Backend> {
        let mut config = DeviceConfig::default();
        config.amd.resource_count_name = "amd.com/gpu".into();
        config.amd.resource_memory_name = "amd.com/gpumem".into();
        config.amd.resource_core_name = "amd.com/gpucores".into();
        Arc::new(backend(&config).expect("the chart names the count resource"))
    }

    fn container(limits: &str, requests: &str) -> Container {
        let text = format!(r#"{{"name":"c","resources":{{"limits":{{{limits}}},"requests":{{{requests}}}}}}}"#);
        serde_json::from_str(&text).expect("a container")
    }

    #[test]
    fn no_backend_without_a_count_name() {
        assert!(backend(&DeviceConfig::default()).is_none());
    }

    #[test]
    fn requests_are_read_from_limits_only() {
        let b = chart();
        assert!(container_request(&container("", r#""amd.com/gpu":"1""#), &b).is_none());
        let r = container_request(&container(r#""amd.com/gpu":"2""#, ""), &b).expect("asks two cards");
        assert_eq!((r.nums, r.memreq, r.mem_percentage, r.coresreq), (2, 0, 0, 100));
        let c = container(r#""amd.com/gpu":"1","amd.com/gpumem":"8000","amd.com/gpucores":"25""#, "");
        let r = container_request(&c, &b).expect("asks one card");
        assert_eq!((r.memreq, r.coresreq), (8000, 25));
    }

    #[test]
    fn out_of_range_values_drop_the_request() {
        let b = chart();
        for limits in [
            r#""amd.com/gpu":"0""#,
            r#""amd.com/gpu":"1","amd.com/gpucores":"0""#,
            r#""amd.com/gpu":"1","amd.com/gpucores":"101""#,
            r#""amd.com/gpu":"1","amd.com/gpumem":"-1""#,
            r#""amd.com/gpu":"1","amd.com/gpumem":"1.5""#,
        ] {
            assert!(container_request(&container(limits, ""), &b).is_none(), "{limits}");
        }
    }

    #[test]
    fn the_webhook_fails_a_core_limit_outside_1_to_100() {
        let b = chart();
        let bad = container(r#""amd.com/gpu":"1","amd.com/gpucores":"150""#, "");
        assert_eq!(
            admission_error(&bad, &b).as_deref(),
            Some("amd.com/gpucores must be an integer percentage between 1 and 100")
        );
        assert!(admission_error(&container(r#""amd.com/gpu":"1","amd.com/gpucores":"100""#, ""), &b).is_none());
        assert!(admission_error(&container(r#""amd.com/gpucores":"150""#, ""), &b).is_none(), "no count: no check");
        assert!(routes(&container(r#""amd.com/gpumem":"10""#, ""), &b), "memory alone routes the pod");
        assert!(!routes(&container("", r#""amd.com/gpu":"1""#), &b), "requests alone do not");
    }

    #[test]
    fn cores_are_a_share_of_the_card_s_compute_units() {
        assert_eq!(card_cores(25, 0, 65536, 104), Some(26));
        assert_eq!(card_cores(1, 0, 65536, 50), Some(1), "at least one unit");
        assert_eq!(card_cores(100, 0, 65536, 304), Some(304));
        assert_eq!(card_cores(50, 0, 65536, 0), None, "a card without units cannot give any");
        assert_eq!(card_memory(0, 65536), 65536, "no memory named: the whole card");
        assert_eq!(card_memory(8000, 65536), 8000);
    }
}
