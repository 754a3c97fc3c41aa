//! Engine configuration: resource names and defaults as in HAMi's device config and flags.

use crate::device_config::{DeviceConfig, VendorSwitches};
use crate::error::Error;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub resource_count_name: String,
    pub resource_memory_name: String,
    pub resource_memory_percentage_name: String,
    pub resource_core_name: String,
    pub resource_priority_name: String,
    pub default_memory: i64,
    pub default_cores: i64,
    pub default_gpu_num: i64,
    pub memory_factor: i64,
    pub node_scheduler_policy: String,
    pub gpu_scheduler_policy: String,
    pub scheduler_name: String,
    pub force_overwrite_default_scheduler: bool,
    pub gpu_core_policy: String,
    pub runtime_class_name: String,
    pub overwrite_env: bool,
    /// HAMi's device config file, when one was given: its `nvidia:` section replaces the NVIDIA
    /// fields above (as HAMi's file overrides its flags).
    pub device_config: Option<DeviceConfig>,
    /// HAMi's `--enable-ascend` and `--enable-iluvatar`.
    pub vendors: VendorSwitches,
    /// FGD's target workload when known up front, as the FGD paper's simulator is given it:
    /// `[cpu_milli, per-GPU milli, GPU count, allowed models ("A|B" or ""), share]` per task type.
    /// Empty: FGD learns it from the recent placements.
    pub fgd_target_workload: Vec<(i64, i64, u32, String, f64)>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            resource_count_name: "nvidia.com/gpu".into(),
            resource_memory_name: "nvidia.com/gpumem".into(),
            resource_memory_percentage_name: "nvidia.com/gpumem-percentage".into(),
            resource_core_name: "nvidia.com/gpucores".into(),
            resource_priority_name: "nvidia.com/priority".into(),
            default_memory: 0,
            default_cores: 0,
            default_gpu_num: 1,
            memory_factor: 1,
            node_scheduler_policy: "binpack".into(),
            gpu_scheduler_policy: "spread".into(),
            scheduler_name: "hami-scheduler".into(),
            force_overwrite_default_scheduler: true,
            gpu_core_policy: "default".into(),
            runtime_class_name: String::new(),
            overwrite_env: false,
            device_config: None,
            vendors: VendorSwitches::default(),
            fgd_target_workload: Vec::new(),
        }
    }
}

impl Config {
    pub fn from_json(bytes: &[u8]) -> Result<Self, Error> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        let mut config: Self = serde_json::from_slice(bytes).map_err(|e| Error::config("engine config", e))?;
        config.apply_device_config();
        if config.memory_factor < 0 {
            return Err(Error::config("engine config", "must be >= 0").field("memory_factor"));
        }
        Ok(config)
    }

    /// The device config's `nvidia:` section over the NVIDIA fields, key for key as HAMi reads it.
    fn apply_device_config(&mut self) {
        let Some(devices) = &self.device_config else { return };
        let nvidia = &devices.nvidia;
        self.resource_count_name.clone_from(&nvidia.resource_count_name);
        self.resource_memory_name.clone_from(&nvidia.resource_memory_name);
        self.resource_memory_percentage_name.clone_from(&nvidia.resource_memory_percentage_name);
        self.resource_core_name.clone_from(&nvidia.resource_core_name);
        self.resource_priority_name.clone_from(&nvidia.resource_priority_name);
        self.default_memory = i64::from(nvidia.default_memory);
        self.default_cores = i64::from(nvidia.default_cores);
        self.default_gpu_num = i64::from(nvidia.default_gpu_num);
        self.memory_factor = i64::from(nvidia.memory_factor.max(1));
        self.gpu_core_policy.clone_from(&nvidia.gpu_core_policy);
        self.runtime_class_name.clone_from(&nvidia.runtime_class_name);
        self.overwrite_env = nvidia.overwrite_env;
    }

    /// The device config in force: the file's, else HAMi's chart default.
    pub fn devices(&self) -> &DeviceConfig {
        self.device_config.as_ref().unwrap_or_else(|| DeviceConfig::chart_default())
    }
}
