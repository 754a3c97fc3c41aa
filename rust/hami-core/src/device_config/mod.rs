//! HAMi's device config file (the `hami-scheduler-device` ConfigMap), read as HAMi's scheduler
//! binary reads it: YAML 1.1 as `yaml.v2` decodes it, unknown keys ignored, a `null` value the
//! same as an absent one, every vendor section typed.
//!
//! HAMi refuses to start when the file cannot be read or decoded, or when every section is empty.
//! Beyond HAMi, a common word claimed by two backends and a value no backend can use are refused
//! here too, each with one line naming the file and the field.

mod backends;
mod lenient;
mod sections;
mod validate;

pub use backends::VendorBackend;

pub use sections::*;

use crate::error::Error;
use serde::{Deserialize, Serialize};

/// Every section of the file. Sections a file leaves out are empty (HAMi then registers the
/// backend with empty resource names: nothing can request it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeviceConfig {
    pub nvidia: NvidiaSection,
    pub metax: MetaxSection,
    pub hygon: HygonSection,
    pub cambricon: CountMemoryCore,
    pub mthreads: CountMemoryCore,
    pub iluvatars: Vec<IluvatarChip>,
    pub enflame: EnflameSection,
    pub kunlun: KunlunSection,
    pub awsneuron: AwsNeuronSection,
    pub amd: CountMemoryCore,
    pub vastai: CountOnly,
    pub biren: CountOnly,
    pub vnpus: Vnpus,
}

/// HAMi's vendor switches (`--enable-ascend`, `--enable-iluvatar`; both off by default in HAMi).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VendorSwitches {
    pub enable_ascend: bool,
    pub enable_iluvatar: bool,
}

impl DeviceConfig {
    /// The file's text as HAMi decodes it; `file` names it in errors.
    pub fn from_yaml(text: &[u8], file: &str) -> Result<Self, Error> {
        let value: serde_yaml::Value = serde_yaml::from_slice(text).map_err(|e| yaml_error(file, &e))?;
        let value = lenient::without_nulls(value);
        if !matches!(value, serde_yaml::Value::Mapping(_) | serde_yaml::Value::Null) {
            return Err(Error::config(file, "expected a mapping of vendor sections (nvidia:, hygon:, vnpus:, ...)"));
        }
        let mut config: Self = match value {
            serde_yaml::Value::Null => Self::default(),
            value => serde_path_to_error::deserialize(value).map_err(|e| {
                let path = e.path().to_string();
                Error::config(file, lenient::describe(e.inner())).field(path)
            })?,
        };
        config.sort_templates();
        validate::check(&config, file)?;
        Ok(config)
    }

    /// HAMi sorts each chip's templates by memory when it starts (the webhook rounds up to the first
    /// that holds the request).
    fn sort_templates(&mut self) {
        for chip in &mut self.vnpus.configs {
            chip.templates.sort_by_key(|t| t.memory);
        }
    }

    /// HAMi's chart default (its `device-config.yaml`), the configuration hami-fast assumes when no
    /// file is given.
    pub fn chart_default() -> &'static Self {
        static DEFAULT: std::sync::OnceLock<DeviceConfig> = std::sync::OnceLock::new();
        DEFAULT.get_or_init(|| {
            Self::from_yaml(CHART_DEFAULT.as_bytes(), "built-in device config")
                .expect("the built-in device config parses")
        })
    }
}

/// The device config of HAMi v2.10's chart, key for key.
pub const CHART_DEFAULT: &str = include_str!("chart_default.yaml");

fn yaml_error(file: &str, e: &serde_yaml::Error) -> Error {
    let message = e.to_string();
    let message = message.split(" at line ").next().unwrap_or(&message).to_owned();
    match e.location() {
        Some(at) => Error::config(file, message).field(format!("line {} column {}", at.line(), at.column())),
        None => Error::config(file, message),
    }
}

#[cfg(test)]
mod tests;
