//! Where HAMi reads a container's vGPU request otherwise than it is written: a quantity it cannot
//! read (the request is dropped, or the field falls back to its default) and a value it caps.
//! Scheduling follows HAMi either way ([`crate::request`]); these notes only say so.

use crate::config::Config;
use crate::k8s::{Container, Pod};
use serde::Serialize;

/// One field of one container that HAMi reads otherwise than written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestNote {
    pub container: String,
    /// The resource name (`nvidia.com/gpumem`).
    pub field: String,
    pub message: String,
    /// HAMi ignores the container's whole vGPU request because of it.
    pub drops_request: bool,
}

impl std::fmt::Display for RequestNote {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "container {}: {}: {}", self.container, self.field, self.message)
    }
}

/// Every note of the pod's containers, init containers first.
pub fn request_notes(pod: &Pod, config: &Config) -> Vec<RequestNote> {
    pod.spec.init_containers.iter().chain(&pod.spec.containers).flat_map(|c| container_notes(c, config)).collect()
}

fn container_notes(container: &Container, config: &Config) -> Vec<RequestNote> {
    let res = container.resources();
    let note = |field: &str, message: String, drops_request: bool| RequestNote {
        container: container.name.clone(),
        field: field.to_owned(),
        message,
        drops_request,
    };
    let count_name = &config.resource_count_name;
    let Some(count) = res.get(count_name) else { return Vec::new() };
    let Some(nums) = count.as_int() else {
        let message = format!("{:?} is not a whole number; HAMi ignores the container's vGPU request", count.0);
        return vec![note(count_name, message, true)];
    };
    if nums < 0 {
        let message = format!("{:?} is negative; HAMi ignores the container's vGPU request", count.0);
        return vec![note(count_name, message, true)];
    }
    if nums == 0 {
        return Vec::new();
    }
    let mut notes = Vec::new();
    let memory_name = &config.resource_memory_name;
    if let Some(q) = res.get(memory_name) {
        let limit = i64::from(i32::MAX) / config.memory_factor.max(1);
        let problem = match q.as_int() {
            None => Some(format!("{:?} is not a whole number of MiB", q.0)),
            Some(m) if m < 0 => Some(format!("{:?} is negative", q.0)),
            Some(m) if m > limit => Some(format!("{:?} is {m} MiB, more than {limit}{}", q.0, mib_hint(&q.0, m))),
            Some(m) => {
                if has_binary_suffix(&q.0) {
                    notes.push(note(memory_name, format!("{:?} is read as {m} MiB{}", q.0, mib_hint(&q.0, m)), false));
                }
                None
            }
        };
        if let Some(problem) = problem {
            notes.push(note(memory_name, format!("{problem}; HAMi ignores the container's vGPU request"), true));
        }
    }
    let percentage_name = &config.resource_memory_percentage_name;
    if let Some(q) = res.get(percentage_name).filter(|q| q.as_int().is_none()) {
        notes.push(note(percentage_name, format!("{:?} is not a whole number; HAMi ignores it", q.0), false));
    }
    let cores_name = &config.resource_core_name;
    match res.get(cores_name).map(|q| (q, q.as_int())) {
        Some((q, None)) => {
            let message = format!("{:?} is not a whole number; HAMi uses the default {}", q.0, config.default_cores);
            notes.push(note(cores_name, message, false));
        }
        Some((_, Some(cores))) if cores > 100 => {
            notes.push(note(cores_name, format!("{cores} is more than 100 %; HAMi takes 100"), false));
        }
        _ => {}
    }
    notes
}

/// A quantity written with a binary unit (`16Gi`): a byte count written where MiB are counted. The
/// API server itself rewrites a plain `30000` as `30k`, so decimal units alone say nothing.
fn has_binary_suffix(quantity: &str) -> bool {
    quantity.trim().ends_with('i') && has_suffix(quantity)
}

/// A quantity written with a unit (`16Gi`, `3k`), which the MiB-counting memory field multiplies out.
fn has_suffix(quantity: &str) -> bool {
    quantity.trim().chars().last().is_some_and(|c| c.is_ascii_alphabetic())
}

/// For a byte-like quantity (`16Gi`): the field counts MiB, so what to write for that much memory.
fn mib_hint(quantity: &str, mib: i64) -> String {
    const MIB: i64 = 1 << 20;
    match has_suffix(quantity) && mib % MIB == 0 {
        true => format!(" (the field counts MiB: for {quantity} of memory write {})", mib / MIB),
        false if has_suffix(quantity) => " (the field counts MiB)".to_owned(),
        false => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(limits: &str) -> Vec<String> {
        let json = format!(r#"{{"spec":{{"containers":[{{"name":"c","resources":{{"limits":{limits}}}}}]}}}}"#);
        let pod: Pod = serde_json::from_str(&json).unwrap();
        request_notes(&pod, &Config::default()).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn an_unreadable_memory_drops_the_request_and_says_so() {
        assert_eq!(
            notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"abc"}"#),
            [
                r#"container c: nvidia.com/gpumem: "abc" is not a whole number of MiB; HAMi ignores the container's vGPU request"#
            ]
        );
        assert!(notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"-5"}"#)[0].contains("\"-5\" is negative"));
        assert!(notes(r#"{"nvidia.com/gpu":"x"}"#)[0].starts_with(r#"container c: nvidia.com/gpu: "x" is not"#));
        assert_eq!(
            notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"16Gi"}"#),
            [
                r#"container c: nvidia.com/gpumem: "16Gi" is 17179869184 MiB, more than 2147483647 (the field counts MiB: for 16Gi of memory write 16384); HAMi ignores the container's vGPU request"#
            ]
        );
    }

    #[test]
    fn a_negative_count_drops_the_request_and_says_so() {
        let notes = notes(r#"{"nvidia.com/gpu":"-1","nvidia.com/gpumem":"1000"}"#);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("nvidia.com/gpu") && notes[0].contains("negative"), "{notes:?}");
        assert!(self::notes(r#"{"nvidia.com/gpu":"0"}"#).is_empty(), "zero GPUs is no request, not a mistake");
    }

    #[test]
    fn capped_and_unreadable_cores_are_noted() {
        assert_eq!(
            notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpucores":300}"#),
            ["container c: nvidia.com/gpucores: 300 is more than 100 %; HAMi takes 100"]
        );
        assert!(notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpucores":"2.5"}"#)[0].contains("HAMi uses the default 0"));
    }

    #[test]
    fn a_memory_with_a_binary_unit_is_noted_as_the_mib_it_is_read_as() {
        assert_eq!(
            notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"1Gi"}"#),
            [
                r#"container c: nvidia.com/gpumem: "1Gi" is read as 1073741824 MiB (the field counts MiB: for 1Gi of memory write 1024)"#
            ]
        );
    }

    #[test]
    fn a_decimal_unit_as_the_api_server_writes_30000_has_no_note() {
        assert!(notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"30k"}"#).is_empty());
        assert!(notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"3M"}"#).is_empty());
    }

    #[test]
    fn a_request_read_as_written_has_no_note() {
        assert!(notes(r#"{"nvidia.com/gpu":1,"nvidia.com/gpumem":"3000","nvidia.com/gpucores":100}"#).is_empty());
        assert!(notes(r#"{"nvidia.com/gpu":0,"nvidia.com/gpumem":"abc"}"#).is_empty());
        assert!(notes(r#"{"nvidia.com/gpumem":"abc"}"#).is_empty());
    }
}
