//! The standard Fit's backend rules: Cambricon's quota card by card, Moore Threads' one card per
//! pod, and HAMi's scores computed once per container.

use super::super::{fit_pod, FitFailure, PodContext, QuotaState};
use crate::config::Config;
use crate::k8s::Pod;
use crate::model::GpuNode;
use crate::policy::{GpuPolicy, PodHints};
use crate::request::PodRequest;
use crate::vendor::{core_share_devices, Backends, RegisterFormat};

/// A node of `word`'s capacity-cut devices (`cores` and `memory` of its resources).
fn node_of(word: &str, cores: i64, memory: i64) -> GpuNode {
    let backends = Backends::from_config(&Config::default());
    let (id, b) = backends.with_ids().find(|(_, b)| b.common_word == word).expect("configured");
    let RegisterFormat::CoreShares(shares) = b.register_format else { panic!("capacity backend") };
    GpuNode::with_devices("n", core_share_devices("n", b, shares, cores, memory, id), None)
}

fn request(containers: serde_json::Value) -> PodRequest {
    let config = Config::default();
    let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {"containers": containers}})).unwrap();
    let mut r = PodRequest::from_pod(&pod, &config);
    r.vendor = crate::vendor::request::vendor_requests(&pod, &Backends::from_config(&config));
    r
}

fn container(limits: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"name": "c", "resources": {"limits": limits}})
}

fn fit(node: &GpuNode, r: &PodRequest, card_quota: Option<QuotaState>) -> Result<super::super::NodeFit, FitFailure> {
    let (hints, policy) = (PodHints::default(), GpuPolicy::parse("spread"));
    let ctx =
        PodContext { request: r, hints: &hints, gpu_policy: &policy, quota: None, card_quota, device_preference: None };
    fit_pod(node, &ctx)
}

#[test]
fn cambricon_s_quota_is_checked_card_by_card() {
    // 2 cards of 64 x 256 MiB; a whole-card request (no memory asked) takes 16384 MiB.
    let node = node_of("MLU", 200, 128);
    let r = request(serde_json::json!([container(serde_json::json!({"cambricon.com/vmlu": "1"}))]));
    let exact = QuotaState { limit_mem: Some(64 * 256), ..QuotaState::default() };
    assert!(fit(&node, &r, Some(exact)).is_ok(), "16384 MiB within a limit of 64 x 256 MiB");
    let used = QuotaState { limit_mem: Some(64 * 256), used_mem: 1, ..QuotaState::default() };
    let err = fit(&node, &r, Some(used)).unwrap_err();
    assert_eq!(err.to_string(), "2/2 ResourceQuotaNotFit");
    let two = request(serde_json::json!([container(serde_json::json!({"cambricon.com/vmlu": "2"}))]));
    let one_card = QuotaState { limit_cores: Some(150), ..QuotaState::default() };
    let err = fit(&node, &two, Some(one_card)).unwrap_err();
    assert_eq!(err.to_string(), "1/2 AllocatedCardsInsufficientRequest, 1/2 ResourceQuotaNotFit");
}

#[test]
fn moore_threads_keeps_a_pod_on_one_card() {
    let node = node_of("Mthreads", 48, 288);
    let one = || container(serde_json::json!({"mthreads.com/vgpu": "1", "mthreads.com/sgpu-memory": "8"}));
    let r = request(serde_json::json!([one(), one()]));
    let placed = fit(&node, &r, None).expect("two slices of one card");
    let (_, slots) = &placed.vendor[0];
    assert_eq!(slots[0][0].uuid, slots[1][0].uuid, "the second container on the first's card");
    let two = container(serde_json::json!({"mthreads.com/vgpu": "2", "mthreads.com/sgpu-memory": "16"}));
    let err = fit(&node, &request(serde_json::json!([two, one()])), None).unwrap_err();
    assert_eq!(err.to_string(), "3/3 CardNotFoundCustomFilterRule", "no card is both of the first's");
}

#[test]
fn a_container_asking_nothing_of_a_device_s_type_counts_no_slot_on_it() {
    // The device's type is exactly NVIDIA's word: a container asking MLU only scores it on its
    // usage alone (HAMi's ComputeScore counts requests of the device's own type).
    let backends = Backends::from_config(&Config::default());
    let (_, mlu) = backends.with_ids().find(|(_, b)| b.common_word == "MLU").unwrap();
    let d = crate::codec::Device {
        device_type: "NVIDIA".into(),
        count: 4,
        devmem: 1000,
        devcore: 100,
        ..Default::default()
    };
    let usage = crate::model::DeviceUsage::default();
    let r = crate::vendor::request::VendorRequest {
        backend: std::sync::Arc::new(mlu.clone()),
        backend_id: 0,
        nums: 1,
        memreq: 0,
        mem_percentage: 100,
        coresreq: 0,
    };
    let with_gpu = GpuNode::with_devices("n", vec![d], None);
    let scores = crate::policy::device::container_scores(&with_gpu, &[usage], None, &[r], &Default::default());
    assert_eq!(scores, [0.0]);
}
