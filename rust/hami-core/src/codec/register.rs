//! `hami.io/node-nvidia-register` (JSON, legacy colon form as fallback) and `hami.io/node-nvidia-score`.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}
fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
fn is_false(v: &bool) -> bool {
    !*v
}

/// A legal position of a MIG instance on its GPU: memory slices `[start, start + size)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MigPlacement {
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    pub start: u32,
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    pub size: u32,
}

impl MigPlacement {
    /// HAMi's `migPlacementsOverlap`, in its uint32 arithmetic (wrapping, as Go's does).
    pub fn overlaps(&self, other: &Self) -> bool {
        self.start < other.start.wrapping_add(other.size) && other.start < self.start.wrapping_add(self.size)
    }
}

/// A MIG profile the device plugin found on the GPU (NVML), as its register annotation carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigProfile {
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    pub name: String,
    #[serde(default, rename = "memoryMB", deserialize_with = "crate::k8s::nullable")]
    pub memory_mb: i32,
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    pub core: i32,
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    pub slice_count: u32,
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    pub placements: Vec<MigPlacement>,
}

/// One physical GPU as the device plugin registers it. Field order and omitempty follow the plugin.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "is_zero_u32")]
    pub index: u32,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "is_zero_i32")]
    pub count: i32,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "is_zero_i32")]
    pub devmem: i32,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "is_zero_i32")]
    pub devcore: i32,
    #[serde(
        default,
        rename = "type",
        deserialize_with = "crate::k8s::nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub device_type: String,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "is_zero_i32")]
    pub numa: i32,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "String::is_empty")]
    pub mode: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::k8s::nullable")]
    pub mig_profiles: Vec<MigProfile>,
    #[serde(default, deserialize_with = "crate::k8s::nullable", skip_serializing_if = "is_false")]
    pub health: bool,
    /// A vendor plugin's own facts about the device (Vastai's die mode: `DeviceStrategy`, `AIC`;
    /// Ascend's `NetworkID`). An object or null, as Go's `map[string]any`.
    #[serde(default, rename = "custominfo", skip_serializing_if = "Option::is_none")]
    pub custom_info: Option<Box<serde_json::Map<String, serde_json::Value>>>,
    /// Which backend registered it: 0 NVIDIA, else the id of a [`crate::vendor::Backends`] entry.
    #[serde(skip)]
    pub vendor: u8,
}

/// Decodes the register annotation: JSON first, then the legacy `UUID,count,mem,core,type,numa,health[,index,mode]:` form.
/// An error's field names the device (`device 1, devmem`); the caller names the annotation.
pub fn decode_node_register(value: &str) -> Result<Vec<Device>> {
    let trimmed = value.trim();
    let devices = if trimmed.starts_with('[') {
        serde_json::from_str::<Vec<Device>>(trimmed).map_err(|e| Error::decode("", format!("invalid JSON: {e}")))?
    } else {
        decode_legacy_register(trimmed)?
    };
    if devices.is_empty() {
        return Err(Error::invalid("", "no gpu found on node"));
    }
    Ok(devices)
}

/// Decodes another vendor's register annotation in the one format its backend reads: HAMi's
/// colon form (`DecodeNodeDevices`) or a JSON array (`UnMarshalNodeDevices`), never the other.
pub fn decode_vendor_register(value: &str, json: bool) -> Result<Vec<Device>> {
    let devices = if json {
        serde_json::from_str::<Vec<Device>>(value).map_err(|e| Error::decode("", format!("invalid JSON: {e}")))?
    } else {
        decode_legacy_register(value)?
    };
    if devices.is_empty() {
        return Err(Error::invalid("", "no gpu found on node"));
    }
    Ok(devices)
}

fn decode_legacy_register(value: &str) -> Result<Vec<Device>> {
    if !value.contains(':') {
        return Err(Error::decode("", "neither a JSON array nor the legacy colon form (no ':' separated device)"));
    }
    value
        .split(':')
        .filter(|s| !s.is_empty())
        .enumerate()
        .map(|(i, s)| decode_legacy_device(s).map_err(|e| e.in_field(format!("device {i}"))))
        .collect()
}

fn decode_legacy_device(segment: &str) -> Result<Device> {
    let f: Vec<&str> = segment.split(',').collect();
    if f.len() != 7 && f.len() != 9 {
        return Err(Error::invalid(
            "",
            format!("expected 7 or 9 comma fields in the legacy form, found {} in {segment:?}", f.len()),
        ));
    }
    let bad = |name: &str, what: &str, raw: &str| Error::invalid("", format!("{raw:?} is not {what}")).field(name);
    let int = |i: usize, name: &str| f[i].trim().parse::<i32>().map_err(|_| bad(name, "an integer", f[i]));
    let health = go_bool(f[6].trim()).ok_or_else(|| bad("health", "a bool", f[6]))?;
    let (index, mode) = if f.len() == 9 {
        let index = f[7].trim().parse::<u32>().map_err(|_| bad("index", "a non-negative integer", f[7]))?;
        (index, f[8].to_owned())
    } else {
        (0, "hami-core".to_owned())
    };
    Ok(Device {
        id: f[0].to_owned(),
        index,
        count: int(1, "count")?,
        devmem: int(2, "devmem")?,
        devcore: int(3, "devcore")?,
        device_type: f[4].to_owned(),
        numa: int(5, "numa")?,
        mode,
        mig_profiles: Vec::new(),
        health,
        custom_info: None,
        vendor: 0,
    })
}

/// A device's `custominfo.NetworkID` as HAMi's Ascend backend reads it: present or not, and a
/// JSON number (truncated to an integer, Go's `int(float64)`) or something else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkId {
    /// No `custominfo`, or no `NetworkID` in it.
    #[default]
    Absent,
    Number(i64),
    /// Present but not a number: it counts as present, but in no group.
    Other,
}

impl NetworkId {
    pub fn is_present(self) -> bool {
        self != Self::Absent
    }

    pub fn number(self) -> Option<i64> {
        match self {
            Self::Number(n) => Some(n),
            _ => None,
        }
    }
}

impl Device {
    /// `custominfo.NetworkID` (Ascend's plugin writes it: the NPU's network group).
    pub fn network(&self) -> NetworkId {
        match self.custom_info.as_ref().and_then(|m| m.get("NetworkID")) {
            None => NetworkId::Absent,
            Some(serde_json::Value::Number(n)) => NetworkId::Number(n.as_f64().map_or(0, |f| f as i64)),
            Some(_) => NetworkId::Other,
        }
    }
}

/// Go's `strconv.ParseBool`.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Encodes devices as the NVIDIA device plugin writes them (JSON, plugin key order, omitempty).
pub fn encode_node_register(devices: &[Device]) -> String {
    serde_json::to_string(devices).unwrap_or_else(|_| "[]".into())
}

#[derive(Debug, Deserialize)]
struct PairScoreEntry {
    #[serde(default)]
    uuid: String,
    #[serde(default, deserialize_with = "crate::k8s::nullable")]
    score: BTreeMap<String, i64>,
}

/// `hami.io/node-nvidia-score`: `[{"uuid": .., "score": {peer: int}}]` -> uuid -> peer -> score.
pub fn decode_pair_scores(value: &str) -> Result<BTreeMap<String, BTreeMap<String, i64>>> {
    let entries: Vec<PairScoreEntry> =
        serde_json::from_str(value).map_err(|e| Error::decode("", format!("invalid JSON: {e}")))?;
    Ok(entries.into_iter().map(|e| (e.uuid, e.score)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE_A: &str = r#"[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","mode":"hami-core","health":true}]"#;

    #[test]
    fn json_roundtrip_is_byte_exact() {
        let devices = decode_node_register(EXAMPLE_A).unwrap();
        assert_eq!(devices.len(), 2);
        assert_eq!(devices[0].index, 0);
        assert_eq!(devices[1].index, 1);
        assert!(devices[1].health);
        assert_eq!(encode_node_register(&devices), EXAMPLE_A);
    }

    #[test]
    fn absent_health_means_unhealthy_and_unknown_keys_are_ignored() {
        let d = decode_node_register(r#"[{"id":"GPU-7a1c","index":3,"count":10,"devmem":40960,"devcore":100,"type":"NVIDIA A100-SXM4-40GB","numa":1,"mode":"hami-core","instanceCount":4}]"#).unwrap();
        assert!(!d[0].health);
        assert_eq!(d[0].numa, 1);
    }

    #[test]
    fn mig_example_decodes() {
        let d = decode_node_register(r#"[{"id":"GPU-0","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","numa":0,"health":true,"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":5120,"core":14,"sliceCount":1,"placements":[{"start":6,"size":1}]}]}]"#).unwrap();
        assert_eq!(d[0].mig_profiles[0].memory_mb, 5120);
        assert_eq!(d[0].mig_profiles[0].placements[0].start, 6);
        let again = decode_node_register(&encode_node_register(&d)).unwrap();
        assert_eq!(again, d);
    }

    #[test]
    fn null_fields_read_as_zero_values() {
        let d = decode_node_register(
            r#"[{"id":"GPU-1","count":10,"devmem":100,"devcore":100,"type":null,"health":null,"numa":null}]"#,
        )
        .unwrap();
        assert!(!d[0].health && d[0].device_type.is_empty() && d[0].numa == 0);
    }

    #[test]
    fn legacy_forms() {
        let d = decode_node_register("GPU-a,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:GPU-b,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:").unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[1].mode, "hami-core");
        let d = decode_node_register("GPU-c,10,7680,100,NVIDIA-Tesla P4,0,true,1,hami-core:").unwrap();
        assert_eq!(d[0].index, 1);
        assert_eq!(d[0].devmem, 7680);
    }

    #[test]
    fn malformed_inputs_name_the_problem() {
        let text = |v: &str| decode_node_register(v).unwrap_err().to_string();
        assert_eq!(text("[]"), "no gpu found on node");
        assert!(text("[{").starts_with("decode invalid JSON: "), "{}", text("[{"));
        assert_eq!(text("GPU-a,10,abc,100,T,0,true:"), "device 0, devmem: \"abc\" is not an integer");
        assert!(text("GPU-a,10,1,100:").starts_with("device 0: expected 7 or 9 comma fields"));
        assert!(text("garbage").contains("neither a JSON array nor the legacy colon form"));
        assert_eq!(text("GPU-z,10,1,100,T,0,true:GPU-a,10,1,100,T,0,yes:"), "device 1, health: \"yes\" is not a bool");
        let err = decode_node_register("GPU-a,10,1,100,T,0,true,-1,hami-core:").unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (crate::error::ErrorKind::Invalid, "device 0, index"));
    }

    #[test]
    fn pair_scores() {
        let s =
            decode_pair_scores(r#"[{"uuid":"GPU-0","score":{"GPU-1":100}},{"uuid":"GPU-1","score":{"GPU-0":100}}]"#)
                .unwrap();
        assert_eq!(s["GPU-0"]["GPU-1"], 100);
        assert!(decode_pair_scores("{").is_err());
    }
}
