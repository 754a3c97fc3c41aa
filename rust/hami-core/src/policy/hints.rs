//! User hints carried by pod annotations: type and UUID filters, NUMA binding, policies, weights.

use super::{GpuPolicy, NodePolicy};
use crate::codec::{
    split_list, GPU_POLICY_KEY, NODE_POLICY_KEY, NOUSE_TYPE_KEY, NOUSE_UUID_KEY, NUMA_BIND_KEY, USE_TYPE_KEY,
    USE_UUID_KEY, VGPU_MODE_KEY, WEIGHTS_KEY,
};
use crate::error::Error;
use crate::k8s::StringMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoringWeights {
    pub slot: i64,
    pub core: i64,
    pub memory: i64,
}

impl Default for ScoringWeights {
    fn default() -> Self {
        Self { slot: 1, core: 1, memory: 1 }
    }
}

impl ScoringWeights {
    /// `slot=<int>,core=<int>,memory=<int>`: exactly these three keys, non-negative, at least one > 0.
    pub fn parse(value: &str) -> Result<Self, Error> {
        let bad = |message: String| Error::invalid("", format!("{value:?}: {message}"));
        let (mut slot, mut core, mut memory) = (None, None, None);
        for part in value.split(',') {
            let (key, raw) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("{part:?} is not key=value (want slot=<int>,core=<int>,memory=<int>)")))?;
            let number: i64 = raw
                .trim()
                .parse()
                .ok()
                .filter(|n: &i64| *n >= 0)
                .ok_or_else(|| bad(format!("{}: {raw:?} is not a non-negative integer", key.trim())))?;
            let slot_ref = match key.trim() {
                "slot" => &mut slot,
                "core" => &mut core,
                "memory" => &mut memory,
                other => return Err(bad(format!("unknown key {other:?} (want slot, core, memory)"))),
            };
            if slot_ref.replace(number).is_some() {
                return Err(bad(format!("key {:?} given twice", key.trim())));
            }
        }
        let w = match (slot, core, memory) {
            (Some(slot), Some(core), Some(memory)) => Self { slot, core, memory },
            _ => return Err(bad("all of slot, core and memory must be given".into())),
        };
        if w.slot + w.core + w.memory == 0 {
            return Err(bad("at least one weight must be greater than 0".into()));
        }
        Ok(w)
    }
}

/// Everything a pod's annotations say about where its GPUs may go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodHints {
    pub use_types: Vec<String>,
    pub nouse_types: Vec<String>,
    pub use_uuids: Vec<String>,
    pub nouse_uuids: Vec<String>,
    pub numa_bind: bool,
    pub vgpu_mode: Option<String>,
    pub node_policy: Option<NodePolicy>,
    pub gpu_policy: Option<GpuPolicy>,
    pub weights: ScoringWeights,
    /// The other vendors' type and UUID filters (`hygon.com/use-dcutype`, `hami.io/use-<chip>-uuid`,
    /// ...), as (key, value): each backend reads its own keys.
    pub vendor_filters: Vec<(String, String)>,
}

/// A use/nouse type or UUID annotation of a vendor other than NVIDIA, Ascend's vNPU mode, or MetaX
/// sGPU's app class, QoS policy and topology switch.
fn is_vendor_filter(key: &str) -> bool {
    key == crate::vendor::ascend::MODE_KEY
        || crate::vendor::sgpu::POD_KEYS.contains(&key)
        || !key.starts_with("nvidia.com/") && (key.ends_with("type") || key.ends_with("uuid")) && key.contains("use-")
}

fn parse_go_bool(value: &str) -> bool {
    matches!(value.trim(), "1" | "t" | "T" | "TRUE" | "true" | "True")
}

impl PodHints {
    /// Reads the hints; a malformed `hami.io/device-scoring-weights` is an error naming the annotation.
    pub fn from_annotations(annotations: &StringMap) -> Result<Self, Error> {
        let get = |k: &str| annotations.get(k).map(String::as_str);
        let upper = |k: &str| get(k).map(|v| split_list(&v.to_uppercase())).unwrap_or_default();
        let list = |k: &str| get(k).map(split_list).unwrap_or_default();
        let weights = match get(WEIGHTS_KEY) {
            Some(v) => ScoringWeights::parse(v).map_err(|e| e.field(format!("annotation {WEIGHTS_KEY}")))?,
            None => ScoringWeights::default(),
        };
        Ok(Self {
            use_types: upper(USE_TYPE_KEY),
            nouse_types: upper(NOUSE_TYPE_KEY),
            use_uuids: list(USE_UUID_KEY),
            nouse_uuids: list(NOUSE_UUID_KEY),
            numa_bind: get(NUMA_BIND_KEY).is_some_and(parse_go_bool),
            vgpu_mode: get(VGPU_MODE_KEY).map(str::to_owned),
            node_policy: get(NODE_POLICY_KEY).map(NodePolicy::parse),
            gpu_policy: get(GPU_POLICY_KEY).map(GpuPolicy::parse),
            weights,
            vendor_filters: annotations
                .iter()
                .filter(|(k, _)| is_vendor_filter(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// Another vendor's filter annotation, when set.
    pub fn vendor_filter(&self, key: &str) -> Option<&str> {
        self.vendor_filters.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// These hints pinned to `gpus` (`nvidia.com/use-gpuuuid`), as a placement's replacement pod
    /// carries them: every other hint kept.
    pub fn pinned_to(&self, gpus: &[String]) -> Self {
        Self { use_uuids: gpus.to_vec(), ..self.clone() }
    }

    /// Any type or mode filter set (otherwise every device passes check 3 without looking at strings).
    pub fn filters_devices(&self) -> bool {
        !self.use_types.is_empty() || !self.nouse_types.is_empty() || self.vgpu_mode.is_some()
    }

    /// Any type filter set (otherwise every device type passes without a look at its name).
    pub fn filters_types(&self) -> bool {
        !self.use_types.is_empty() || !self.nouse_types.is_empty()
    }

    pub fn filters_uuids(&self) -> bool {
        !self.use_uuids.is_empty() || !self.nouse_uuids.is_empty()
    }

    pub fn device_allowed(&self, device_type: &str, mode: &str) -> bool {
        self.type_allowed(&device_type.to_uppercase()) && self.mode_allowed(mode)
    }

    /// Type filters, compared case-insensitively as substrings of the device model.
    pub fn type_allowed(&self, device_type_upper: &str) -> bool {
        let allowed =
            self.use_types.is_empty() || self.use_types.iter().any(|t| device_type_upper.contains(t.as_str()));
        allowed && !self.nouse_types.iter().any(|t| device_type_upper.contains(t.as_str()))
    }

    pub fn mode_allowed(&self, device_mode: &str) -> bool {
        self.vgpu_mode.as_deref().is_none_or(|m| m.contains(device_mode))
    }

    pub fn uuid_allowed(&self, uuid: &str) -> bool {
        (self.use_uuids.is_empty() || self.use_uuids.iter().any(|u| u == uuid))
            && !self.nouse_uuids.iter().any(|u| u == uuid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> StringMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn weights() {
        assert_eq!(
            ScoringWeights::parse("slot=1,core=2,memory=0").unwrap(),
            ScoringWeights { slot: 1, core: 2, memory: 0 }
        );
        assert!(ScoringWeights::parse("slot=0,core=0,memory=0").unwrap_err().message.contains("greater than 0"));
        assert!(ScoringWeights::parse("slot=1,core=2").unwrap_err().message.contains("all of"));
        assert!(ScoringWeights::parse("slot=-1,core=2,memory=1").unwrap_err().message.contains("slot"));
        assert!(ScoringWeights::parse("slot=1,core=2,gpu=1").unwrap_err().message.contains("gpu"));
        assert!(ScoringWeights::parse("slot=1,slot=2,memory=1").unwrap_err().message.contains("twice"));
        let err = PodHints::from_annotations(&ann(&[(WEIGHTS_KEY, "bad")])).unwrap_err();
        assert_eq!(err.field, format!("annotation {WEIGHTS_KEY}"));
        assert!(err.to_string().starts_with(&format!("annotation {WEIGHTS_KEY}: \"bad\": ")), "{err}");
    }

    #[test]
    fn pinned_to_replaces_only_the_gpus_it_names() {
        let own = PodHints::from_annotations(&ann(&[
            (USE_UUID_KEY, "GPU-9"),
            (NOUSE_UUID_KEY, "GPU-1"),
            (USE_TYPE_KEY, "A100"),
            (NUMA_BIND_KEY, "true"),
        ]))
        .unwrap();
        let pinned = own.pinned_to(&["GPU-2".into(), "GPU-3".into()]);
        assert_eq!(pinned.use_uuids, ["GPU-2", "GPU-3"]);
        assert!(pinned.uuid_allowed("GPU-3") && !pinned.uuid_allowed("GPU-9") && !pinned.uuid_allowed("GPU-1"));
        assert_eq!(PodHints { use_uuids: own.use_uuids.clone(), ..pinned }, own);
    }

    #[test]
    fn filters() {
        let h = PodHints::from_annotations(&ann(&[
            (USE_TYPE_KEY, "a100, V100"),
            (NOUSE_TYPE_KEY, "PCIE"),
            (NOUSE_UUID_KEY, " GPU-1 ,"),
            (NUMA_BIND_KEY, "true"),
            (VGPU_MODE_KEY, "hami-core"),
        ]))
        .unwrap();
        assert!(h.type_allowed("NVIDIA A100-SXM4-40GB"));
        assert!(!h.type_allowed("NVIDIA-TESLA V100-PCIE-32GB"));
        assert!(!h.type_allowed("NVIDIA-TESLA T4"));
        assert!(!h.uuid_allowed("GPU-1") && h.uuid_allowed("GPU-2"));
        assert!(h.numa_bind);
        assert!(h.mode_allowed("hami-core") && !h.mode_allowed("mig") && h.mode_allowed(""));
    }
}
