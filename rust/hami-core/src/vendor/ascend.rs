//! Huawei Ascend (one backend per `vnpus.configs[]` chip, only with `--enable-ascend`): registered
//! by its device plugin as JSON under `hami.io/node-register-<commonWord>` (with
//! `custominfo.NetworkID`), memory in MiB times `memoryFactor`, no cores by default, UUIDs chosen by
//! `hami.io/use-<commonWord>-uuid`. The webhook rounds memory up to a vNPU template; a pod annotated
//! `huawei.com/vnpu-mode: hami-core` asks the soft split instead. Device selection by network group
//! and 910C card pairs is [`super::ascend_topology`].

use super::{Admission, Backend, FitChecks, MemoryUnit, RegisterFormat};
use crate::device_config::{AscendChip, DeviceConfig};

/// The pod annotation choosing the soft split.
pub const MODE_KEY: &str = "huawei.com/vnpu-mode";
pub const HAMI_CORE: &str = "hami-core";
/// The pod annotation HAMi stamps beside the `huawei.com/<chip>` runtime list.
pub const PREDICATE_TIME_KEY: &str = "predicate-time";

/// A chip's vNPU rules beyond the data every backend has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vnpu {
    /// (name, memory MiB), by memory ascending as HAMi sorts them at start-up.
    pub templates: Vec<(String, i64)>,
    pub memory_allocatable: i64,
    pub memory_capacity: i64,
    /// `superPod` on the 910C: a count of 1 becomes 2, other odd counts are refused.
    pub super_pod: bool,
    /// `vnpus.hamiVnpuCore`: whether a node without the node annotation runs the soft split.
    pub soft_split_default: bool,
    /// Devices are grouped by `custominfo.NetworkID` (`Ascend910*` chips).
    pub network_groups: bool,
    /// Several NPUs are taken by whole cards of two (the 910C).
    pub card_pairs: bool,
    /// `overwriteEnv`: a container not asking the chip gets `ASCEND_VISIBLE_DEVICES=""`.
    pub overwrite_env: bool,
    /// `runtimeClassName`: set on a pod asking the chip that names none.
    pub runtime_class_name: String,
}

pub fn backends(config: &DeviceConfig) -> Vec<Backend> {
    config.vnpus.configs.iter().map(|chip| backend(chip, config.vnpus.hami_vnpu_core)).collect()
}

fn backend(chip: &AscendChip, soft_split_default: bool) -> Backend {
    let word = &chip.common_word;
    Backend {
        common_word: word.clone(),
        register_key: format!("hami.io/node-register-{word}"),
        handshake_key: format!("hami.io/node-handshake-{word}"),
        to_allocate_key: format!("hami.io/{word}-devices-to-allocate"),
        allocated_key: format!("hami.io/{word}-devices-allocated"),
        count_name: chip.resource_name.clone(),
        memory_name: chip.resource_memory_name.clone(),
        core_name: chip.resource_core_name.clone(),
        memory_unit: MemoryUnit::Factor(i64::from(chip.memory_factor)),
        default_cores: 0,
        count_checked: true,
        type_keys: None,
        uuid_keys: (format!("hami.io/use-{word}-uuid"), format!("hami.io/no-use-{word}-uuid")),
        admission: Admission::Vnpu,
        register_format: RegisterFormat::Json,
        devcore: None,
        fixed_request: None,
        checks: FitChecks::Standard,
        vnpu: Some(Box::new(Vnpu {
            templates: chip.templates.iter().map(|t| (t.name.clone(), t.memory)).collect(),
            memory_allocatable: chip.memory_allocatable,
            memory_capacity: chip.memory_capacity,
            super_pod: chip.super_pod,
            soft_split_default,
            network_groups: word.starts_with("Ascend910"),
            card_pairs: word == "Ascend910C",
            overwrite_env: chip.overwrite_env,
            runtime_class_name: chip.runtime_class_name.clone(),
        })),
        ..Backend::default()
    }
}

impl Vnpu {
    /// The memory a request of `m` MiB is given, with its template's name: the smallest template
    /// that holds it, else the whole allocatable memory when the card holds it, else 0.
    pub fn trim_memory(&self, m: i64) -> (i64, &str) {
        if let Some((name, memory)) = self.templates.iter().find(|(_, memory)| m <= *memory) {
            return (*memory, name);
        }
        if m <= self.memory_capacity {
            return (self.memory_allocatable, "");
        }
        (0, "")
    }
}

/// What the webhook sets on a container asking this chip (its count in the limits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedLimits {
    /// The count, when the webhook raised it (a 910C super-pod request of 1 becomes 2).
    pub count: Option<i64>,
    /// The memory (MiB, as written in the limits and requests).
    pub memory: i64,
}

/// The container's limits as the webhook reads them.
#[derive(Debug, Clone, Copy, Default)]
pub struct AskedLimits {
    pub count: i64,
    /// The memory limit, if any.
    pub memory: Option<i64>,
    /// The core limit, else request, if any.
    pub cores: Option<i64>,
}

/// HAMi's Ascend webhook for one container: `Err` with HAMi's message when it refuses the pod.
pub fn admit(b: &Backend, vnpu: &Vnpu, asked: AskedLimits, soft_split: bool) -> Result<AdmittedLimits, String> {
    let mut count = None;
    if vnpu.card_pairs && vnpu.super_pod {
        if asked.count == 1 {
            count = Some(2);
        } else if asked.count % 2 != 0 {
            return Err(format!("{} device request must be 1 or 2*n, got {}", b.common_word, asked.count));
        }
    }
    if !soft_split && !b.core_name.is_empty() && asked.cores.is_some_and(|c| c > 0) {
        return Err(format!("{} is only supported in hami-core (soft split) mode", b.core_name));
    }
    let memory = match asked.memory {
        None => vnpu.memory_allocatable,
        Some(m) if soft_split => m,
        Some(m) => match vnpu.trim_memory(m).0 {
            trimmed if trimmed <= 0 => return Err(format!("{} {m} is invalid", b.memory_name)),
            trimmed => trimmed,
        },
    };
    if asked.count > 1 && !soft_split && memory != vnpu.memory_allocatable {
        return Err("vNPU not supported for multiple devices".into());
    }
    Ok(AdmittedLimits { count, memory })
}

/// One entry of the `huawei.com/<chip>` runtime list (HAMi's `RuntimeInfo`, empty fields left out).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RuntimeInfo<'a> {
    #[serde(rename = "UUID", skip_serializing_if = "str::is_empty")]
    pub uuid: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub temp: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    pub memory: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub core: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The `huawei.com/<chip>` annotation: every device the pod got, container by container, with the
/// template its memory rounds to (none in the soft split). `null` when it got none.
pub fn runtime_annotation(vnpu: &Vnpu, devices: &[Vec<crate::codec::ContainerDevice>], soft_split: bool) -> String {
    let infos: Vec<RuntimeInfo> = devices
        .iter()
        .flatten()
        .map(|d| RuntimeInfo {
            uuid: &d.uuid,
            temp: if soft_split { "" } else { vnpu.trim_memory(i64::from(d.usedmem)).1 },
            memory: i64::from(d.usedmem),
            core: i64::from(d.usedcores),
        })
        .collect();
    if infos.is_empty() {
        return "null".into();
    }
    serde_json::to_string(&infos).unwrap_or_else(|_| "null".into())
}

/// Whether a node runs the soft split: its `hami-vnpu-core` annotation (`"true"` or not), else the
/// config's default.
pub fn node_supports_soft_split(vnpu: &Vnpu, node_annotation: Option<&str>) -> bool {
    node_annotation.map_or(vnpu.soft_split_default, |v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::ContainerDevice;

    fn chart(word: &str) -> Backend {
        let config = DeviceConfig::chart_default();
        let chip = config.vnpus.configs.iter().find(|c| c.common_word == word).unwrap();
        backend(chip, false)
    }

    fn asked(count: i64, memory: Option<i64>, cores: Option<i64>) -> AskedLimits {
        AskedLimits { count, memory, cores }
    }

    #[test]
    fn chart_chips_become_backends_with_their_keys() {
        let list = backends(DeviceConfig::chart_default());
        assert_eq!(list.len(), 7);
        let b = chart("Ascend910B3");
        assert_eq!(b.register_key, "hami.io/node-register-Ascend910B3");
        assert_eq!(b.handshake_key, "hami.io/node-handshake-Ascend910B3");
        assert_eq!(b.allocated_key, "hami.io/Ascend910B3-devices-allocated");
        assert_eq!(b.uuid_keys.1, "hami.io/no-use-Ascend910B3-uuid");
        let v = b.vnpu.unwrap();
        assert!(v.network_groups && !v.card_pairs);
        assert!(!chart("Ascend310P").vnpu.unwrap().network_groups);
        assert!(chart("Ascend910C").vnpu.unwrap().card_pairs);
    }

    #[test]
    fn memory_rounds_up_to_a_template_else_the_whole_card() {
        let b = chart("Ascend310P");
        let v = b.vnpu.as_deref().unwrap();
        assert_eq!(v.trim_memory(1), (3072, "vir01"));
        assert_eq!(v.trim_memory(3072), (3072, "vir01"));
        assert_eq!(v.trim_memory(3073), (6144, "vir02"));
        assert_eq!(v.trim_memory(20000), (21527, ""), "above every template: memoryAllocatable");
        assert_eq!(v.trim_memory(24577), (0, ""), "above memoryCapacity");
    }

    #[test]
    fn webhook_refuses_as_hami_words_it() {
        let b = chart("Ascend910B3");
        let v = b.vnpu.as_deref().unwrap();
        assert_eq!(admit(&b, v, asked(1, Some(100), None), false).unwrap().memory, 16384);
        assert_eq!(admit(&b, v, asked(1, None, None), false).unwrap().memory, 65536);
        assert_eq!(
            admit(&b, v, asked(1, Some(70000), None), false).unwrap_err(),
            "huawei.com/Ascend910B3-memory 70000 is invalid"
        );
        assert_eq!(admit(&b, v, asked(1, Some(70000), None), true).unwrap().memory, 70000, "soft split: as asked");
        assert_eq!(
            admit(&b, v, asked(1, None, Some(5)), false).unwrap_err(),
            "huawei.com/Ascend910B3-core is only supported in hami-core (soft split) mode"
        );
        assert!(admit(&b, v, asked(1, None, Some(0)), false).is_ok());
        assert_eq!(
            admit(&b, v, asked(2, Some(100), None), false).unwrap_err(),
            "vNPU not supported for multiple devices"
        );
        assert!(admit(&b, v, asked(2, Some(100), None), true).is_ok());
    }

    #[test]
    fn super_pod_910c_takes_pairs() {
        let b = chart("Ascend910C");
        let v = b.vnpu.as_deref().unwrap();
        assert_eq!(admit(&b, v, asked(1, None, None), false).unwrap().count, Some(2));
        assert_eq!(admit(&b, v, asked(4, None, None), false).unwrap().count, None);
        assert_eq!(
            admit(&b, v, asked(3, None, None), false).unwrap_err(),
            "Ascend910C device request must be 1 or 2*n, got 3"
        );
    }

    #[test]
    fn runtime_list_names_the_template() {
        let b = chart("Ascend910B3");
        let v = b.vnpu.as_deref().unwrap();
        let d = |uuid: &str, mem: i32, cores: i32| ContainerDevice {
            uuid: uuid.into(),
            device_type: "Ascend910B3".into(),
            usedmem: mem,
            usedcores: cores,
        };
        let devices = vec![vec![d("a", 16384, 0)], vec![], vec![d("b", 65536, 10)]];
        assert_eq!(
            runtime_annotation(v, &devices, false),
            r#"[{"UUID":"a","temp":"vir05_1c_16g","memory":16384},{"UUID":"b","memory":65536,"core":10}]"#
        );
        assert_eq!(runtime_annotation(v, &devices[..1], true), r#"[{"UUID":"a","memory":16384}]"#);
        assert_eq!(runtime_annotation(v, &[vec![]], false), "null");
    }

    #[test]
    fn node_annotation_overrides_the_default() {
        let v = chart("Ascend910B3").vnpu.unwrap();
        assert!(!node_supports_soft_split(&v, None));
        assert!(node_supports_soft_split(&v, Some("true")));
        assert!(!node_supports_soft_split(&v, Some("yes")));
    }
}
