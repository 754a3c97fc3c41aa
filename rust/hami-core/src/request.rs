//! Per-container vGPU requests derived from a Pod (HAMi `GenerateResourceRequests`).

use crate::config::Config;
use crate::device_config::VendorBackend;
use crate::k8s::{Container, Pod};
pub use crate::vendor::request::VendorRequest;

/// Sentinel for "no memory percentage given".
pub const PERCENT_UNSET: i64 = 101;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerRequest {
    pub nums: i64,
    pub memreq: i64,
    pub mem_percentage: i64,
    pub coresreq: i64,
}

impl ContainerRequest {
    /// Memory in MiB on a card with `total_mem` MiB.
    pub fn resolved_memory(&self, total_mem: i64) -> i64 {
        if self.memreq > 0 {
            self.memreq
        } else if self.mem_percentage != PERCENT_UNSET {
            total_mem * self.mem_percentage / 100
        } else {
            0
        }
    }

    pub fn clamped_cores(&self) -> i64 {
        self.coresreq.min(100)
    }
}

/// One slot per container, init containers first; `None` for containers that request no vGPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRequest {
    pub slots: Vec<Option<ContainerRequest>>,
    pub init_count: usize,
    /// The other vendors' requests, per container (init first; empty when the pod asks none):
    /// filled in by [`crate::vendor::request::vendor_requests`].
    pub vendor: Vec<Vec<VendorRequest>>,
}

impl PodRequest {
    pub fn from_pod(pod: &Pod, config: &Config) -> Self {
        let slots = pod
            .spec
            .init_containers
            .iter()
            .chain(pod.spec.containers.iter())
            .map(|c| container_request(c, config))
            .collect();
        Self { slots, init_count: pod.spec.init_containers.len(), vendor: Vec::new() }
    }

    /// No request at all, NVIDIA's or another vendor's.
    pub fn is_empty(&self) -> bool {
        self.asks_no_nvidia() && self.vendor.iter().all(Vec::is_empty)
    }

    pub fn asks_no_nvidia(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    pub fn asks_vendors(&self) -> bool {
        self.vendor.iter().any(|c| !c.is_empty())
    }

    /// The other vendors' requests of container `slot`.
    pub fn vendor_requests(&self, slot: usize) -> &[VendorRequest] {
        self.vendor.get(slot).map_or(&[], Vec::as_slice)
    }

    pub fn is_init(&self, slot: usize) -> bool {
        slot < self.init_count
    }
}

pub fn container_request(container: &Container, config: &Config) -> Option<ContainerRequest> {
    let res = container.resources();
    let nums = res.get(&config.resource_count_name)?.as_int()?;
    if nums <= 0 {
        return None;
    }
    let factor = config.memory_factor.max(1);
    let mut memreq = match res.get(&config.resource_memory_name) {
        None => 0,
        Some(q) => {
            let m = q.as_int()?;
            if m < 0 || m > i64::from(i32::MAX) / factor {
                return None;
            }
            m
        }
    };
    if config.memory_factor > 1 {
        memreq *= config.memory_factor;
    }
    let mut mem_percentage = PERCENT_UNSET;
    if let Some(p) = res.get(&config.resource_memory_percentage_name).and_then(|q| q.as_int()) {
        if p > 100 {
            mem_percentage = 100;
        } else if p > 0 {
            mem_percentage = p;
        }
    }
    if mem_percentage == PERCENT_UNSET && memreq == 0 {
        if config.default_memory != 0 {
            memreq = config.default_memory;
        } else {
            mem_percentage = 100;
        }
    }
    let coresreq = res.get(&config.resource_core_name).and_then(|q| q.as_int()).unwrap_or(config.default_cores);
    Some(ContainerRequest { nums, memreq, mem_percentage, coresreq })
}

/// A device request hami-fast cannot place yet: the first container resource that asks for one
/// of the other vendors' backends the device config sets up, other than the `placed` ones.
pub fn unsupported_vendor(pod: &Pod, config: &Config, placed: &crate::vendor::Backends) -> Option<VendorBackend> {
    let mut backends = config.devices().vendor_backends(config.vendors);
    backends.retain(|b| !placed.iter().any(|p| p.common_word == b.common_word));
    pod.spec.init_containers.iter().chain(&pod.spec.containers).find_map(|c| {
        let res = c.resources();
        backends.iter().find(|b| res.get(&b.count_resource).is_some()).cloned()
    })
}

impl VendorBackend {
    /// Why such a pod is not placed, in one line.
    pub fn refusal(&self) -> String {
        format!(
            "asks for {} (HAMi's {} backend), which hami-fast does not schedule yet; \
             schedule this vendor's pods with HAMi's scheduler",
            self.count_resource, self.common_word
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with_limits(limits: &str) -> Pod {
        let json = format!(r#"{{"spec":{{"containers":[{{"name":"c","resources":{{"limits":{limits}}}}}]}}}}"#);
        serde_json::from_str(&json).unwrap()
    }

    fn req(limits: &str) -> Option<ContainerRequest> {
        PodRequest::from_pod(&pod_with_limits(limits), &Config::default()).slots[0]
    }

    #[test]
    fn spec_table() {
        let r = req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpucores":"100"}"#).unwrap();
        assert_eq!((r.nums, r.resolved_memory(32768), r.coresreq), (1, 32768, 100));
        let r = req(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"3k","nvidia.com/gpucores":30}"#).unwrap();
        assert_eq!((r.nums, r.resolved_memory(32768), r.coresreq), (1, 3000, 30));
        let r =
            req(r#"{"nvidia.com/gpu":"2","nvidia.com/gpumem-percentage":"50","nvidia.com/gpucores":"30"}"#).unwrap();
        assert_eq!((r.nums, r.resolved_memory(32768), r.coresreq), (2, 16384, 30));
        let r = req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpumem-percentage":"40"}"#).unwrap();
        assert_eq!((r.resolved_memory(32768), r.coresreq), (13107, 0));
    }

    #[test]
    fn dropped_and_clamped() {
        assert!(req(r#"{"nvidia.com/gpumem":"3000"}"#).is_none());
        assert!(req(r#"{"nvidia.com/gpu":"0"}"#).is_none());
        assert!(req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpumem":"-1"}"#).is_none());
        assert!(req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpumem":"1.5"}"#).is_none());
        let r = req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpumem-percentage":"250"}"#).unwrap();
        assert_eq!(r.mem_percentage, 100);
        let r = req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpumem-percentage":"0"}"#).unwrap();
        assert_eq!(r.mem_percentage, 100);
        let r = req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpucores":"150"}"#).unwrap();
        assert_eq!(r.clamped_cores(), 100);
        let r = req(r#"{"nvidia.com/gpu":"1","nvidia.com/gpucores":"2.5"}"#).unwrap();
        assert_eq!(r.coresreq, 0, "a non-integer core count falls back to the default");
    }

    #[test]
    fn requests_used_when_no_limits() {
        let pod: Pod = serde_json::from_str(
            r#"{"spec":{"initContainers":[{"name":"i"}],"containers":[{"name":"c","resources":{"requests":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"100"}}}]}}"#,
        )
        .unwrap();
        let r = PodRequest::from_pod(&pod, &Config::default());
        assert_eq!(r.init_count, 1);
        assert!(r.slots[0].is_none());
        assert_eq!(r.slots[1].unwrap().memreq, 100);
    }

    #[test]
    fn another_vendor_s_request_is_named() {
        let pod = pod_with_limits(r#"{"hygon.com/dcunum":"1"}"#);
        let config = Config::default();
        assert!(PodRequest::from_pod(&pod, &config).is_empty());
        let none = crate::vendor::Backends::default();
        let backend = unsupported_vendor(&pod, &config, &none).expect("a DCU request");
        assert_eq!(backend.common_word, "DCU");
        assert!(backend.refusal().starts_with("asks for hygon.com/dcunum (HAMi's DCU backend)"));
        let placed = crate::vendor::Backends::from_config(&config);
        assert!(unsupported_vendor(&pod, &config, &placed).is_none(), "DCU is placed");
        let sgpu = pod_with_limits(r#"{"metax-tech.com/sgpu":"1"}"#);
        assert!(unsupported_vendor(&sgpu, &config, &placed).is_none(), "MetaX sGPU is placed");
        let xpu = pod_with_limits(r#"{"kunlunxin.com/xpu":"1"}"#);
        assert!(unsupported_vendor(&xpu, &config, &placed).is_none(), "Kunlunxin XPU is placed");
        assert!(unsupported_vendor(&pod_with_limits(r#"{"nvidia.com/gpu":"1"}"#), &config, &none).is_none());
        let ascend = pod_with_limits(r#"{"huawei.com/Ascend910B3":"1"}"#);
        assert!(unsupported_vendor(&ascend, &config, &none).is_none());
    }
}
