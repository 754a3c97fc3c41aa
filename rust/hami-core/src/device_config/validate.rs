//! What makes a device config unusable: HAMi's own start-up checks, and the mistakes HAMi lets
//! through into a scheduler that then misbehaves (two backends under one common word, a core
//! policy the device plugin does not know).

use super::DeviceConfig;
use crate::error::Error;

/// The common words of the backends that are not configured per chip.
pub const FIXED_COMMON_WORDS: [&str; 14] = [
    "NVIDIA",
    "MLU",
    "DCU",
    "GCU",
    "Enflame",
    "Mthreads",
    "Metax-GPU",
    "Metax-SGPU",
    "kunlun",
    "XPU",
    "AWSNeuron",
    "AMD",
    "Vastai",
    "Biren",
];

const CORE_POLICIES: [&str; 4] = ["", "default", "force", "disable"];

pub fn check(config: &DeviceConfig, file: &str) -> Result<(), Error> {
    if *config == DeviceConfig::default() {
        return Err(Error::config(file, "all configurations are empty (no vendor section sets anything)"));
    }
    if !CORE_POLICIES.contains(&config.nvidia.gpu_core_policy.as_str()) {
        return Err(Error::config(
            file,
            format!("{:?} is not a core policy (default, force or disable)", config.nvidia.gpu_core_policy),
        )
        .field("nvidia.gpuCorePolicy"));
    }
    check_mig_allowlist(config, file)?;
    check_common_words(config, file)
}

/// HAMi's `ValidateMigProfileAllowlist` (fatal at HAMi's start-up).
fn check_mig_allowlist(config: &DeviceConfig, file: &str) -> Result<(), Error> {
    for (i, entry) in config.nvidia.mig_profile_allowlist.iter().enumerate() {
        let field = format!("nvidia.migProfileAllowlist[{i}]");
        if entry.models.is_empty() || entry.profiles.is_empty() {
            return Err(Error::config(file, "a MIG profile allowlist entry must list models and profiles").field(field));
        }
        for profile in &entry.profiles {
            let slices = profile.split_once('.').map(|(slices, _)| slices);
            if !slices.is_some_and(|s| s.len() >= 2 && s.ends_with('g')) {
                return Err(Error::config(file, format!("invalid MIG profile {profile:?} (e.g. 1g.10gb)"))
                    .field(format!("{field}.profiles")));
            }
        }
    }
    Ok(())
}

/// Every backend's common word names its annotations; two backends under one word would read
/// each other's devices.
fn check_common_words(config: &DeviceConfig, file: &str) -> Result<(), Error> {
    let mut seen: Vec<(String, String)> =
        FIXED_COMMON_WORDS.iter().map(|w| (w.to_string(), "built-in".into())).collect();
    let chips =
        config.iluvatars.iter().enumerate().map(|(i, c)| (format!("iluvatars[{i}].commonWord"), &c.common_word));
    let npus = config
        .vnpus
        .configs
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("vnpus.configs[{i}].commonWord"), &c.common_word));
    for (field, word) in chips.chain(npus) {
        if word.is_empty() {
            return Err(Error::config(file, "is empty: every chip needs its own common word").field(field));
        }
        if let Some((_, owner)) = seen.iter().find(|(w, _)| w == word) {
            let owner = if owner == "built-in" { "a built-in backend".to_owned() } else { owner.clone() };
            return Err(Error::config(file, format!("{word:?} is already the common word of {owner}")).field(field));
        }
        seen.push((word.clone(), field));
    }
    Ok(())
}
