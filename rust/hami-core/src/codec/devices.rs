//! Per-container device lists: `UUID,NVIDIA,mem,cores:` per device, `;` per container slot.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerDevice {
    pub uuid: String,
    #[serde(rename = "type")]
    pub device_type: String,
    pub usedmem: i32,
    pub usedcores: i32,
}

/// One entry per container slot (init containers first), each the devices of that container.
pub type PodDevices = Vec<Vec<ContainerDevice>>;

pub fn encode_pod_devices(slots: &[Vec<ContainerDevice>]) -> String {
    let mut out = String::new();
    for slot in slots {
        for d in slot {
            let _ = write!(out, "{},{},{},{}:", d.uuid, d.device_type, d.usedmem, d.usedcores);
        }
        out.push(';');
    }
    out
}

/// The device list as HAMi's Filter writes it. HAMi pads a GPU-less container with an empty
/// slot only under the key of a registered device type, and its NVIDIA devices register with
/// their model name as type: the padding lands under a model key, never in the NVIDIA list.
/// Only a node with a device whose type is exactly `NVIDIA` gets the positional (padded) list.
pub fn encode_pod_devices_as_hami(slots: &[Vec<ContainerDevice>], positional: bool) -> String {
    if positional {
        return encode_pod_devices(slots);
    }
    let used: Vec<Vec<ContainerDevice>> = slots.iter().filter(|s| !s.is_empty()).cloned().collect();
    encode_pod_devices(&used)
}

/// Spreads a device list without padding (one slot per GPU container, as HAMi writes it) back
/// onto the pod's containers: `uses_gpu[i]` says whether container `i` (init containers first)
/// requests GPUs. Returns `None` when the counts do not match, and the list is read as it is.
pub fn align_to_containers(slots: &PodDevices, uses_gpu: &[bool]) -> Option<PodDevices> {
    if slots.len() >= uses_gpu.len() || uses_gpu.iter().filter(|u| **u).count() != slots.len() {
        return None;
    }
    let mut given = slots.iter();
    uses_gpu.iter().map(|&u| if u { given.next().cloned() } else { Some(Vec::new()) }).collect()
}

/// Decodes a device list. Empty slots are kept so slot *i* still maps to container *i*;
/// the empty element after the final `;` is dropped. An error's field names the slot and device
/// (`container slot 1, device 0`); the caller names the annotation ([`Error::in_field`]).
pub fn decode_pod_devices(value: &str) -> Result<PodDevices> {
    let mut parts: Vec<&str> = value.split(';').collect();
    if parts.last() == Some(&"") {
        parts.pop();
    }
    parts
        .iter()
        .enumerate()
        .map(|(slot, entry)| decode_slot(entry).map_err(|e| e.in_field(format!("container slot {slot}"))))
        .collect()
}

fn decode_slot(entry: &str) -> Result<Vec<ContainerDevice>> {
    entry
        .split(':')
        .filter(|seg| seg.contains(','))
        .enumerate()
        .map(|(i, seg)| {
            let at = || format!("device {i}");
            let f: Vec<&str> = seg.split(',').collect();
            if f.len() < 4 {
                return Err(Error::invalid("", format!("{seg:?} needs 4 comma fields UUID,TYPE,MEM,CORES")).field(at()));
            }
            let int = |k: usize, name: &str| {
                f[k].trim().parse::<i32>().map_err(|_| {
                    Error::invalid("", format!("{name} {:?} is not an int32 (in {seg:?})", f[k])).field(at())
                })
            };
            Ok(ContainerDevice {
                uuid: f[0].to_owned(),
                device_type: f[1].to_owned(),
                usedmem: int(2, "memory")?,
                usedcores: int(3, "cores")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(uuid: &str, mem: i32, cores: i32) -> ContainerDevice {
        ContainerDevice { uuid: uuid.into(), device_type: "NVIDIA".into(), usedmem: mem, usedcores: cores }
    }

    #[test]
    fn spec_examples_roundtrip() {
        for text in [
            "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,30:;",
            "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,5000,0:;",
            "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec,NVIDIA,16384,30:GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,16384,30:;",
            "GPU-init1,NVIDIA,500,10:;GPU-main1,NVIDIA,2000,50:;",
            ";;GPU-main1,NVIDIA,2000,50:;",
            ";",
        ] {
            let decoded = decode_pod_devices(text).unwrap();
            assert_eq!(encode_pod_devices(&decoded), text, "{text}");
        }
    }

    #[test]
    fn positional_slots_are_kept() {
        let d = decode_pod_devices(";;GPU-main1,NVIDIA,2000,50:;").unwrap();
        assert_eq!(d, vec![vec![], vec![], vec![dev("GPU-main1", 2000, 50)]]);
        let d = decode_pod_devices("GPU-a,NVIDIA,1,2:GPU-b,NVIDIA,3,4:;").unwrap();
        assert_eq!(d, vec![vec![dev("GPU-a", 1, 2), dev("GPU-b", 3, 4)]]);
    }

    #[test]
    fn hami_bytes_for_empty_slots() {
        let a = vec![dev("GPU-a0", 1000, 0)];
        let sidecar = vec![a.clone(), vec![]];
        assert_eq!(encode_pod_devices_as_hami(&sidecar, false), "GPU-a0,NVIDIA,1000,0:;");
        assert_eq!(encode_pod_devices_as_hami(&sidecar, true), "GPU-a0,NVIDIA,1000,0:;;");
        let init_first = vec![vec![], a.clone()];
        assert_eq!(encode_pod_devices_as_hami(&init_first, false), "GPU-a0,NVIDIA,1000,0:;");
        assert_eq!(encode_pod_devices_as_hami(&init_first, true), ";GPU-a0,NVIDIA,1000,0:;");
    }

    #[test]
    fn unpadded_lists_align_to_gpu_containers() {
        let a = vec![dev("GPU-a0", 1000, 0)];
        let b = vec![dev("GPU-b0", 2000, 0)];
        let list = vec![a.clone(), b.clone()];
        assert_eq!(align_to_containers(&list, &[false, true, true]), Some(vec![vec![], a.clone(), b.clone()]));
        assert_eq!(align_to_containers(&list, &[true, false, true]), Some(vec![a.clone(), vec![], b]));
        assert_eq!(align_to_containers(&list, &[true, true]), None, "already positional");
        assert_eq!(align_to_containers(&list, &[false, false, true]), None, "counts disagree");
    }

    #[test]
    fn malformed_lists_are_errors() {
        let err = decode_pod_devices("GPU-a,NVIDIA,1:;").unwrap_err();
        assert_eq!(
            (err.field.as_str(), err.message.as_str()),
            ("container slot 0, device 0", "\"GPU-a,NVIDIA,1\" needs 4 comma fields UUID,TYPE,MEM,CORES")
        );
        let err = decode_pod_devices(";GPU-a,NVIDIA,1,2:GPU-b,NVIDIA,x,1:;").unwrap_err();
        assert_eq!(
            err.to_string(),
            "container slot 1, device 1: memory \"x\" is not an int32 (in \"GPU-b,NVIDIA,x,1\")"
        );
        assert!(decode_pod_devices("GPU-a,NVIDIA,1,99999999999:;").unwrap_err().message.starts_with("cores"));
        assert!(decode_pod_devices("a;GPU-a,NVIDIA,1,2,extra:;").is_ok());
    }
}
