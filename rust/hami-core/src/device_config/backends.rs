//! The backends a device config sets up beside NVIDIA, by the resource that asks for each.

use super::{DeviceConfig, VendorSwitches};

/// A non-NVIDIA backend HAMi registers from this config, and a resource that requests its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorBackend {
    /// The resource name a container sets to ask for this backend's devices.
    pub count_resource: String,
    /// HAMi's name for the backend (its `CommonWord`).
    pub common_word: String,
}

impl DeviceConfig {
    /// Every non-NVIDIA backend HAMi would start with this config and these switches, with the
    /// count resources that request it (a backend whose section leaves a name empty cannot be
    /// asked for under that name).
    pub fn vendor_backends(&self, switches: VendorSwitches) -> Vec<VendorBackend> {
        let mut fixed: Vec<(&str, &str)> = vec![
            ("MLU", &self.cambricon.resource_count_name),
            ("DCU", &self.hygon.resource_count_name),
            ("Metax-GPU", &self.metax.resource_count_name),
            ("Metax-SGPU", &self.metax.resource_vcount_name),
            ("Mthreads", &self.mthreads.resource_count_name),
            ("GCU", &self.enflame.resource_name_gcu),
            ("Enflame", self.enflame.drs_count_name()),
            ("kunlun", &self.kunlun.resource_count_name),
            ("XPU", &self.kunlun.resource_vcount_name),
            ("AWSNeuron", &self.awsneuron.resource_count_name),
            ("AWSNeuron", &self.awsneuron.resource_core_name),
            ("AMD", &self.amd.resource_count_name),
            ("Vastai", &self.vastai.resource_count_name),
            ("Biren", &self.biren.resource_count_name),
        ];
        if switches.enable_iluvatar {
            fixed.extend(self.iluvatars.iter().map(|c| (c.common_word.as_str(), c.resource_count_name.as_str())));
        }
        if switches.enable_ascend {
            fixed.extend(self.vnpus.configs.iter().map(|c| (c.common_word.as_str(), c.resource_name.as_str())));
        }
        fixed
            .into_iter()
            .filter(|(_, resource)| !resource.is_empty())
            .map(|(word, resource)| VendorBackend { count_resource: resource.to_owned(), common_word: word.to_owned() })
            .collect()
    }
}
