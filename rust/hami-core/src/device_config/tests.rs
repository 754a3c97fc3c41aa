use super::*;

fn parse(text: &str) -> Result<DeviceConfig, Error> {
    DeviceConfig::from_yaml(text.as_bytes(), "cfg.yaml")
}

fn message(text: &str) -> String {
    parse(text).expect_err("must be refused").to_string()
}

#[test]
fn chart_default_has_every_vendor() {
    let c = DeviceConfig::chart_default();
    assert_eq!(c.nvidia.resource_count_name, "nvidia.com/gpu");
    assert_eq!(c.nvidia.default_gpu_num, 1);
    assert_eq!(c.nvidia.memory_factor, 1);
    assert_eq!(c.nvidia.mig_profile_allowlist.len(), 9);
    assert_eq!(c.hygon.resource_memory_name, "hygon.com/dcumem");
    assert_eq!(
        c.iluvatars.iter().map(|i| i.common_word.as_str()).collect::<Vec<_>>(),
        ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
    );
    assert_eq!(c.vnpus.configs.len(), 7);
    let c910 = c.vnpus.configs.iter().find(|c| c.common_word == "Ascend910C").unwrap();
    assert!(c910.super_pod);
    assert_eq!(c.enflame.drs_count_name(), "enflame.com/drs-gcu");
    assert_eq!(c.biren.resource_count_name, "birentech.com/gpu");
}

#[test]
fn unknown_keys_and_nulls_are_ignored_as_yaml_v2_does() {
    let c = parse("nvidia:\n  resourceCountName: x.io/gpu\n  someFutureKey: 3\n  defaultMemory: ~\nhygon:\nfoo: [1]\n")
        .unwrap();
    assert_eq!(c.nvidia.resource_count_name, "x.io/gpu");
    assert_eq!(c.nvidia.default_memory, 0);
    assert_eq!(c.hygon, HygonSection::default());
}

#[test]
fn scalars_decode_into_strings_and_yaml_1_1_booleans() {
    let c =
        parse("nvidia:\n  resourceCountName: 42\n  overwriteEnv: yes\n  runtimeClassName: true\n  memoryFactor: 2.0\n")
            .unwrap();
    assert_eq!(c.nvidia.resource_count_name, "42");
    assert!(c.nvidia.overwrite_env);
    assert_eq!(c.nvidia.runtime_class_name, "true");
    assert_eq!(c.nvidia.memory_factor, 2);
}

#[test]
fn templates_are_sorted_by_memory() {
    let c = parse(
        "vnpus:\n  configs:\n  - commonWord: Ascend910B3\n    templates:\n    - {name: big, memory: 32768}\n    - {name: small, memory: 16384}\n",
    )
    .unwrap();
    let names: Vec<&str> = c.vnpus.configs[0].templates.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["small", "big"]);
}

#[test]
fn type_errors_name_the_file_and_the_field() {
    let m = message("nvidia:\n  memoryFactor: abc\n");
    assert!(m.starts_with("cfg.yaml: nvidia.memoryFactor: "), "{m}");
    let m = message("nvidia:\n  defaultMemory: 99999999999\n");
    assert!(m.contains("nvidia.defaultMemory") && m.contains("32-bit"), "{m}");
    let m = message("vnpus:\n  configs:\n  - commonWord: A\n    memoryAllocatable: [1]\n");
    assert!(m.contains("vnpus.configs[0].memoryAllocatable"), "{m}");
    let m = message("nvidia:\n  overwriteEnv: maybe\n");
    assert!(m.contains("nvidia.overwriteEnv"), "{m}");
}

#[test]
fn broken_yaml_names_one_position() {
    let m = message("nvidia:\n  resourceCountName: [unclosed\n");
    assert!(m.starts_with("cfg.yaml: line "), "{m}");
    assert_eq!(m.matches("line").count(), 1, "{m}");
}

#[test]
fn empty_and_non_mapping_files_are_refused() {
    assert!(message("").contains("all configurations are empty"));
    assert!(message("nvidia: {}\n").contains("all configurations are empty"));
    assert!(message("- a\n- b\n").contains("expected a mapping"));
}

#[test]
fn duplicate_and_empty_common_words_are_refused() {
    let m = message("iluvatars:\n- commonWord: X\n- commonWord: X\n");
    assert_eq!(m, "cfg.yaml: iluvatars[1].commonWord: \"X\" is already the common word of iluvatars[0].commonWord");
    let m = message("vnpus:\n  configs:\n  - commonWord: NVIDIA\n");
    assert!(m.contains("vnpus.configs[0].commonWord") && m.contains("built-in"), "{m}");
    let m = message("iluvatars:\n- chipName: MR-V100\n");
    assert!(m.contains("iluvatars[0].commonWord: is empty"), "{m}");
}

#[test]
fn core_policy_and_mig_allowlist_are_checked() {
    let m = message("nvidia:\n  gpuCorePolicy: sometimes\n");
    assert!(m.contains("nvidia.gpuCorePolicy") && m.contains("sometimes"), "{m}");
    for policy in ["default", "force", "disable"] {
        assert!(parse(&format!("nvidia:\n  gpuCorePolicy: {policy}\n")).is_ok());
    }
    let m = message("nvidia:\n  migProfileAllowlist:\n  - models: [A30]\n    profiles: [1x.6gb]\n");
    assert!(m.contains("nvidia.migProfileAllowlist[0].profiles") && m.contains("1x.6gb"), "{m}");
    let m = message("nvidia:\n  migProfileAllowlist:\n  - models: [A30]\n");
    assert!(m.contains("must list models and profiles"), "{m}");
}

#[test]
fn round_trips_through_json() {
    let c = DeviceConfig::chart_default();
    let json = serde_json::to_vec(&c).unwrap();
    let back: DeviceConfig = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, *c);
}

#[test]
fn vendor_backends_follow_the_config_and_the_switches() {
    let c = DeviceConfig::chart_default();
    let off = c.vendor_backends(VendorSwitches::default());
    let find =
        |list: &[VendorBackend], r: &str| list.iter().find(|b| b.count_resource == r).map(|b| b.common_word.clone());
    assert_eq!(find(&off, "hygon.com/dcunum").as_deref(), Some("DCU"));
    assert_eq!(find(&off, "metax-tech.com/sgpu").as_deref(), Some("Metax-SGPU"));
    assert_eq!(find(&off, "enflame.com/drs-gcu").as_deref(), Some("Enflame"));
    assert_eq!(find(&off, "huawei.com/Ascend910B3"), None, "Ascend needs --enable-ascend");
    assert_eq!(find(&off, "iluvatar.ai/MR-V100-vgpu"), None, "Iluvatar needs --enable-iluvatar");
    assert!(off.iter().all(|b| !b.count_resource.is_empty() && b.common_word != "NVIDIA"));
    let on = c.vendor_backends(VendorSwitches { enable_ascend: true, enable_iluvatar: true });
    assert_eq!(find(&on, "huawei.com/Ascend910B3").as_deref(), Some("Ascend910B3"));
    assert_eq!(find(&on, "iluvatar.ai/BI-V150-vgpu").as_deref(), Some("BI-V150"));
    let renamed = parse("hygon:\n  resourceCountName: example.com/dcu\n").unwrap();
    let list = renamed.vendor_backends(VendorSwitches::default());
    assert_eq!(list.iter().map(|b| b.count_resource.as_str()).collect::<Vec<_>>(), ["example.com/dcu"]);
}
