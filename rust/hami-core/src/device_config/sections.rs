//! One typed section per vendor, with HAMi's YAML key names and value types.

use super::lenient::{boolean, int32, int64, maybe_boolean, number, text, texts};
use serde::{Deserialize, Serialize};

/// `nvidia:`. The fields the device plugin alone reads (`deviceSplitCount`, scaling, log level,
/// NUMA topology, `disableCoreLimit`) are checked for type only, as HAMi's decode checks them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NvidiaSection {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_memory_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_core_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_memory_percentage_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_priority_name: String,
    #[serde(deserialize_with = "boolean")]
    pub overwrite_env: bool,
    #[serde(deserialize_with = "int32")]
    pub default_memory: i32,
    #[serde(deserialize_with = "int32")]
    pub default_cores: i32,
    #[serde(rename = "defaultGPUNum", deserialize_with = "int32")]
    pub default_gpu_num: i32,
    #[serde(deserialize_with = "int32")]
    pub memory_factor: i32,
    #[serde(deserialize_with = "boolean")]
    pub disable_core_limit: bool,
    pub mig_profile_allowlist: Vec<MigProfiles>,
    #[serde(rename = "gpuCorePolicy", deserialize_with = "text")]
    pub gpu_core_policy: String,
    #[serde(deserialize_with = "text")]
    pub runtime_class_name: String,
    #[serde(deserialize_with = "number", skip_serializing_if = "Option::is_none")]
    pub device_split_count: Option<f64>,
    #[serde(deserialize_with = "number", skip_serializing_if = "Option::is_none")]
    pub device_memory_scaling: Option<f64>,
    #[serde(deserialize_with = "number", skip_serializing_if = "Option::is_none")]
    pub device_core_scaling: Option<f64>,
    #[serde(deserialize_with = "number", skip_serializing_if = "Option::is_none")]
    pub pre_configured_device_memory: Option<f64>,
    #[serde(deserialize_with = "maybe_boolean", skip_serializing_if = "Option::is_none")]
    pub enable_numa_topology: Option<bool>,
}

/// One entry of `nvidia.migProfileAllowlist`: the MIG profiles allowed on these models.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MigProfiles {
    #[serde(deserialize_with = "texts")]
    pub models: Vec<String>,
    #[serde(deserialize_with = "texts")]
    pub profiles: Vec<String>,
}

/// A section of three resource names: count, memory, cores (`cambricon`, `mthreads`, `amd`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CountMemoryCore {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_memory_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_core_name: String,
}

/// A section of one count resource (`vastai`, `biren`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CountOnly {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
}

/// `hygon:`: three names and a memory factor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HygonSection {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_memory_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_core_name: String,
    #[serde(deserialize_with = "int32")]
    pub memory_factor: i32,
}

/// `metax:`: whole GPUs, and sGPU slices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MetaxSection {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(rename = "resourceVCountName", deserialize_with = "text")]
    pub resource_vcount_name: String,
    #[serde(rename = "resourceVMemoryName", deserialize_with = "text")]
    pub resource_vmemory_name: String,
    #[serde(rename = "resourceVCoreName", deserialize_with = "text")]
    pub resource_vcore_name: String,
    #[serde(rename = "sgpuTopologyAware", deserialize_with = "boolean")]
    pub sgpu_topology_aware: bool,
}

/// One `iluvatars[]` chip: a backend of its own, keyed by its common word.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IluvatarChip {
    #[serde(deserialize_with = "text")]
    pub common_word: String,
    #[serde(deserialize_with = "text")]
    pub chip_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_memory_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_core_name: String,
}

/// `enflame:`: whole GCUs, and DRS slices (the legacy vGCU name is the DRS fallback).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EnflameSection {
    #[serde(rename = "resourceNameGCU", deserialize_with = "text")]
    pub resource_name_gcu: String,
    #[serde(rename = "resourceNameDRSGCU", deserialize_with = "text")]
    pub resource_name_drs_gcu: String,
    #[serde(rename = "resourceNameGCUMemory", deserialize_with = "text")]
    pub resource_name_memory: String,
    #[serde(rename = "resourceNameGCUCore", deserialize_with = "text")]
    pub resource_name_core: String,
    #[serde(rename = "resourceNameVGCU", deserialize_with = "text")]
    pub resource_name_vgcu: String,
    #[serde(rename = "resourceNameVGCUPercentage", deserialize_with = "text")]
    pub resource_name_vgcu_percentage: String,
}

impl EnflameSection {
    /// The DRS count name HAMi uses: `resourceNameDRSGCU`, else the legacy `resourceNameVGCU`.
    pub fn drs_count_name(&self) -> &str {
        if self.resource_name_drs_gcu.is_empty() {
            &self.resource_name_vgcu
        } else {
            &self.resource_name_drs_gcu
        }
    }
}

/// `kunlun:`: whole XPUs, and vXPU slices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct KunlunSection {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(rename = "resourceVCountName", deserialize_with = "text")]
    pub resource_vcount_name: String,
    #[serde(rename = "resourceVMemoryName", deserialize_with = "text")]
    pub resource_vmemory_name: String,
}

/// `awsneuron:`: devices and cores.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AwsNeuronSection {
    #[serde(deserialize_with = "text")]
    pub resource_count_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_core_name: String,
}

/// `vnpus:`: Ascend, one backend per chip (only with `--enable-ascend`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Vnpus {
    #[serde(deserialize_with = "boolean")]
    pub hami_vnpu_core: bool,
    pub configs: Vec<AscendChip>,
}

/// One `vnpus.configs[]` chip.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AscendChip {
    #[serde(deserialize_with = "text")]
    pub common_word: String,
    #[serde(deserialize_with = "text")]
    pub chip_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_memory_name: String,
    #[serde(deserialize_with = "text")]
    pub resource_core_name: String,
    #[serde(deserialize_with = "int64")]
    pub memory_allocatable: i64,
    #[serde(deserialize_with = "int64")]
    pub memory_capacity: i64,
    #[serde(deserialize_with = "int32")]
    pub memory_factor: i32,
    #[serde(deserialize_with = "int32")]
    pub ai_core: i32,
    #[serde(rename = "aiCPU", deserialize_with = "int32")]
    pub ai_cpu: i32,
    #[serde(deserialize_with = "text")]
    pub runtime_class_name: String,
    #[serde(deserialize_with = "boolean")]
    pub overwrite_env: bool,
    pub templates: Vec<AscendTemplate>,
    #[serde(deserialize_with = "boolean")]
    pub super_pod: bool,
}

/// A vNPU template: the memory slice (MiB) and AI cores it gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct AscendTemplate {
    #[serde(deserialize_with = "text")]
    pub name: String,
    #[serde(deserialize_with = "int64")]
    pub memory: i64,
    #[serde(deserialize_with = "int32")]
    pub ai_core: i32,
    #[serde(rename = "aiCPU", deserialize_with = "int32")]
    pub ai_cpu: i32,
}
