//! `hami.io/vgpu-mig-allocations`: the MIG instances HAMi's Filter reserves for a pod (profile and
//! placement per container device), which HAMi's device plugin realizes and enriches with the
//! instance's runtime identity (`migUUID`, `gpuInstanceID`, `computeInstanceID`).
//!
//! Read and written as HAMi v2.10 does (`pkg/device/nvidia/mig_allocations.go`): the same
//! validation on read (any failure discards the whole annotation) and Go's `encoding/json` bytes
//! on write.

use super::register::MigPlacement;
use crate::error::{Error, Result};
use crate::k8s::object::nullable;
use serde::Deserialize;
use std::collections::HashSet;
use std::fmt::Write;

/// One reserved MIG instance: the device `device_index` of container slot `container_index` of
/// the pod's NVIDIA device list is an instance of `profile` at `placement` on GPU `gpu_uuid`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigAllocation {
    #[serde(default, deserialize_with = "nullable")]
    pub container_index: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub device_index: i64,
    #[serde(default, rename = "gpuUUID", deserialize_with = "nullable")]
    pub gpu_uuid: String,
    #[serde(default, deserialize_with = "nullable")]
    pub profile: String,
    #[serde(default, deserialize_with = "nullable")]
    pub placement: MigPlacement,
    #[serde(default, rename = "migUUID", deserialize_with = "nullable")]
    pub mig_uuid: String,
    #[serde(default, rename = "gpuInstanceID")]
    pub gpu_instance_id: Option<u32>,
    #[serde(default, rename = "computeInstanceID")]
    pub compute_instance_id: Option<u32>,
}

/// Decodes the annotation with HAMi's checks (`DecodeMigAllocations`): every entry names its
/// container and device index (non-negative), GPU, profile and a placement of non-zero size; the
/// three runtime fields come all together or not at all; no (container, device) pair twice.
/// An empty value is no allocation.
pub fn decode_mig_allocations(value: &str) -> Result<Vec<MigAllocation>> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let list: Option<Vec<Option<MigAllocation>>> =
        serde_json::from_str(value).map_err(|e| Error::decode("", format!("invalid JSON: {e}")))?;
    let list: Vec<MigAllocation> = list.unwrap_or_default().into_iter().map(Option::unwrap_or_default).collect();
    let mut seen = HashSet::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        if a.container_index < 0
            || a.device_index < 0
            || a.gpu_uuid.is_empty()
            || a.profile.is_empty()
            || a.placement.size == 0
        {
            return Err(Error::invalid("", format!("MIG allocation {i} is incomplete")));
        }
        let runtime = usize::from(!a.mig_uuid.is_empty())
            + usize::from(a.gpu_instance_id.is_some())
            + usize::from(a.compute_instance_id.is_some());
        if runtime != 0 && runtime != 3 {
            return Err(Error::invalid("", format!("MIG allocation {i} has partial runtime identity")));
        }
        if !seen.insert((a.container_index, a.device_index)) {
            return Err(Error::invalid(
                "",
                format!("duplicate MIG allocation for container {} device {}", a.container_index, a.device_index),
            ));
        }
    }
    Ok(list)
}

/// What Filter writes: the scheduler's half of each allocation, as Go's `json.Marshal` prints it
/// (field order, `omitempty` runtime fields, HTML-safe string escapes).
pub fn encode_mig_allocations(list: &[MigAllocation]) -> String {
    let mut out = String::from("[");
    for (i, a) in list.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ =
            write!(out, "{{\"containerIndex\":{},\"deviceIndex\":{},\"gpuUUID\":", a.container_index, a.device_index);
        go_string(&mut out, &a.gpu_uuid);
        out.push_str(",\"profile\":");
        go_string(&mut out, &a.profile);
        let _ = write!(out, ",\"placement\":{{\"start\":{},\"size\":{}}}", a.placement.start, a.placement.size);
        if !a.mig_uuid.is_empty() {
            out.push_str(",\"migUUID\":");
            go_string(&mut out, &a.mig_uuid);
        }
        if let Some(id) = a.gpu_instance_id {
            let _ = write!(out, ",\"gpuInstanceID\":{id}");
        }
        if let Some(id) = a.compute_instance_id {
            let _ = write!(out, ",\"computeInstanceID\":{id}");
        }
        out.push('}');
    }
    out.push(']');
    out
}

/// A JSON string as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped.
fn go_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(ci: i64, di: i64, gpu: &str, profile: &str, start: u32, size: u32) -> MigAllocation {
        MigAllocation {
            container_index: ci,
            device_index: di,
            gpu_uuid: gpu.into(),
            profile: profile.into(),
            placement: MigPlacement { start, size },
            ..MigAllocation::default()
        }
    }

    #[test]
    fn hami_bytes() {
        // Recorded from HAMi v2.10.0's Filter (hami-oracle), a pod of three 1g.5gb instances.
        let hami = r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a1","profile":"1g.5gb","placement":{"start":6,"size":1}},{"containerIndex":0,"deviceIndex":1,"gpuUUID":"GPU-a1","profile":"1g.5gb","placement":{"start":5,"size":1}}]"#;
        let list = vec![alloc(0, 0, "GPU-a1", "1g.5gb", 6, 1), alloc(0, 1, "GPU-a1", "1g.5gb", 5, 1)];
        assert_eq!(encode_mig_allocations(&list), hami);
        assert_eq!(decode_mig_allocations(hami).unwrap(), list);
    }

    #[test]
    fn runtime_identity_roundtrips() {
        let text = r#"[{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-x","profile":"2g.10gb","placement":{"start":2,"size":2},"migUUID":"MIG-1","gpuInstanceID":4,"computeInstanceID":0}]"#;
        let list = decode_mig_allocations(text).unwrap();
        assert_eq!((list[0].gpu_instance_id, list[0].compute_instance_id), (Some(4), Some(0)));
        assert_eq!(encode_mig_allocations(&list), text);
    }

    #[test]
    fn strings_escape_as_go_does() {
        let a = alloc(0, 0, "GPU-<&>\"\\\n\u{1}\u{2028}é", "1g", 0, 1);
        assert_eq!(
            encode_mig_allocations(&[a]),
            r#"[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-\u003c\u0026\u003e\"\\\n\u0001\u2028é","profile":"1g","placement":{"start":0,"size":1}}]"#
        );
    }

    #[test]
    fn hami_rejects_what_hami_rejects() {
        let text = |v: &str| decode_mig_allocations(v).unwrap_err().to_string();
        let entry = |body: &str| format!("[{{{body}}}]");
        let full = r#""gpuUUID":"G","profile":"1g.5gb","placement":{"start":0,"size":1}"#;
        assert_eq!(
            text(&entry(r#""gpuUUID":"G","profile":"1g.5gb","placement":{"start":0,"size":0}"#)),
            "MIG allocation 0 is incomplete"
        );
        assert_eq!(text(&entry(&format!(r#""containerIndex":-1,{full}"#))), "MIG allocation 0 is incomplete");
        assert_eq!(
            text(&entry(r#""profile":"1g.5gb","placement":{"start":0,"size":1}"#)),
            "MIG allocation 0 is incomplete"
        );
        assert_eq!(text("[null]"), "MIG allocation 0 is incomplete");
        assert_eq!(
            text(&entry(&format!(r#"{full},"migUUID":"MIG-1""#))),
            "MIG allocation 0 has partial runtime identity"
        );
        assert_eq!(text(&format!("[{{{full}}},{{{full}}}]")), "duplicate MIG allocation for container 0 device 0");
        assert!(text("{").starts_with("decode invalid JSON"));
        assert!(text(r#"{"a":1}"#).starts_with("decode invalid JSON"));
        assert!(text(&entry(&format!(r#""containerIndex":1.5,{full}"#))).starts_with("decode invalid JSON"));
        assert!(text(&entry(r#""gpuUUID":"G","profile":"p","placement":{"start":-1,"size":1}"#)).starts_with("decode"));
        assert_eq!(decode_mig_allocations("").unwrap(), vec![]);
        assert_eq!(decode_mig_allocations("null").unwrap(), vec![]);
        assert_eq!(decode_mig_allocations(&entry(&format!(r#"{full},"extra":[1]"#))).unwrap().len(), 1);
    }
}
