//! Enflame DRS vGCU (`Enflame`): hard partitions of a GCU, in profiles named `<slices>g.<GB>gb`.
//!
//! Registration: the node annotation `enflame.com/gcu-drs-capacity`, a JSON object of `devices`
//! (`index`, `minor`, `capacity` in slices) and `profiles` (name → id). Every device is named
//! `<node>-enflame-drs-<index>`, holds `capacity` slots, the largest profile's memory and 100
//! cores, and carries the node's profiles. Any flaw (a field of the wrong type, a capacity that is
//! not positive, no valid profile, no device) drops the node's DRS devices.
//!
//! Requests: the count resource asks a profile by its slices ("direct"); memory (GB, or MiB when
//! far above the largest profile) and cores (percent) ask the smallest profile holding both
//! ("spec"). The Fit takes one device with a free slot, the profile's memory and its share of
//! cores; the pod's later containers see the profile's slices as slots taken (HAMi's
//! `AddResourceUsage`), a resident pod one slot per entry. Written: the allocated list only,
//! `enflame.com/gcu-assigned*`, `enflame.com/gcu-request-size` and `assigned-containers`. No lock,
//! no handshake; the names default to HAMi's when the config leaves them out.

use super::request::VendorRequest;
use super::{Admission, Backend, FitChecks, NodeLock, PodExtras, RegisterFormat, RequestFormat};
use crate::codec::{Device, PodDevices};
use crate::device_config::DeviceConfig;
use crate::k8s::{Container, Pod, Quantity};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

pub const WORD: &str = "Enflame";
pub const ALLOCATED_KEY: &str = "hami.io/enflame-vgpu-devices-allocated";
pub const ASSIGNED_KEY: &str = "enflame.com/gcu-assigned";
pub const ASSIGNED_TIME_KEY: &str = "enflame.com/gcu-assigned-time";
pub const ASSIGNED_INDEX_KEY: &str = "enflame.com/gcu-assigned-index";
pub const ASSIGNED_ID_KEY: &str = "enflame.com/gcu-assigned-id";
pub const ASSIGNED_MINOR_KEY: &str = "enflame.com/gcu-assigned-minor";
pub const REQUEST_SIZE_KEY: &str = "enflame.com/gcu-request-size";
pub const ASSIGNED_CONTAINERS_KEY: &str = "assigned-containers";

/// A request's mode, carried in its `mem_percentage` as HAMi carries it in `MemPercentagereq`
/// (which its device score reads as a percentage of the card's memory).
const DIRECT: i64 = 0;
const BY_SPEC: i64 = -1;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let section = &config.enflame;
    let or = |name: &str, default: &str| if name.is_empty() { default } else { name }.to_owned();
    Some(Backend {
        common_word: WORD.into(),
        register_key: crate::annotations::ENFLAME_DRS_CAPACITY_KEY.into(),
        allocated_key: ALLOCATED_KEY.into(),
        count_name: or(section.drs_count_name(), "enflame.com/drs-gcu"),
        memory_name: or(&section.resource_name_memory, "enflame.com/gcu-memory"),
        core_name: or(&section.resource_name_core, "enflame.com/gcu-core"),
        uuid_keys: ("enflame.com/use-gpuuuid".into(), "enflame.com/nouse-gpuuuid".into()),
        admission: Admission::DrsProfile,
        register_format: RegisterFormat::DrsCapacity,
        request_format: RequestFormat::DrsProfile,
        checks: FitChecks::DrsProfile,
        lock: NodeLock::None,
        extras: PodExtras::EnflameDrs,
        ..Backend::default()
    })
}

// --- registration -------------------------------------------------------------------------------

/// The node's DRS devices from its capacity annotation, or why there are none.
pub fn devices(node: &str, value: &str, backend: &Backend, id: u8) -> Result<Vec<Device>, String> {
    let spec: Value = serde_json::from_str(value).map_err(|e| format!("not JSON: {e}"))?;
    let (listed, profiles) = match &spec {
        Value::Null => (Vec::new(), Map::new()),
        Value::Object(o) => (device_specs(field(o, "devices"))?, profile_map(field(o, "profiles"))?),
        _ => return Err("not a JSON object".into()),
    };
    let sizes = profiles.keys().map(|name| parse_profile(name));
    let (max_slice, max_mem) = sizes.fold((0, 0), |(s, m), (size, mem)| (size.max(s), mem.max(m)));
    if max_slice <= 0 {
        return Err("no valid DRS profile (`<slices>g.<GB>gb`)".into());
    }
    let max_mem = if max_mem <= 0 { max_slice } else { max_mem };
    let mut out = Vec::with_capacity(listed.len());
    for (position, d) in listed.iter().enumerate() {
        let index = d.index.as_deref().and_then(go_atoi).unwrap_or(position as i64);
        let why = || format!("device {position}: capacity {} is not a positive number of slices", d.capacity);
        let count = capacity(&d.capacity).filter(|c| *c > 0).ok_or_else(why)?;
        let minor =
            d.minor.as_deref().map(str::trim).filter(|m| !m.is_empty()).map_or(index.to_string(), str::to_owned);
        let info = [
            ("minor".to_owned(), Value::from(minor)),
            ("index".to_owned(), Value::from(index.to_string())),
            ("profiles".to_owned(), Value::Object(profiles.clone())),
            ("maxSlice".to_owned(), Value::from(max_slice)),
        ];
        out.push(Device {
            id: format!("{node}-enflame-drs-{index}"),
            // HAMi keeps the index unsigned: a negative one sorts after every other.
            index: index as u32,
            count,
            devmem: max_mem.wrapping_mul(1024) as i32,
            devcore: 100,
            device_type: backend.common_word.clone(),
            health: true,
            custom_info: Some(Box::new(info.into_iter().collect())),
            vendor: id,
            ..Device::default()
        });
    }
    if out.is_empty() {
        return Err("no DRS device".into());
    }
    Ok(out)
}

/// One entry of `devices`.
#[derive(Default)]
struct DeviceSpec {
    index: Option<String>,
    minor: Option<String>,
    capacity: Value,
}

/// A field as Go's decoder finds it: the exact key, else one equal ignoring case.
fn field<'a>(o: &'a Map<String, Value>, name: &str) -> &'a Value {
    o.get(name).or_else(|| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v)).unwrap_or(&Value::Null)
}

fn device_specs(v: &Value) -> Result<Vec<DeviceSpec>, String> {
    let list = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(list) => list,
        _ => return Err("`devices` is not a list".into()),
    };
    let text = |o: &Map<String, Value>, name: &str| match field(o, name) {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(format!("`{name}` is not a string")),
    };
    list.iter()
        .map(|d| match d {
            Value::Null => Ok(DeviceSpec::default()),
            Value::Object(o) => Ok(DeviceSpec {
                index: text(o, "index")?,
                minor: text(o, "minor")?,
                capacity: field(o, "capacity").clone(),
            }),
            _ => Err("a device is not an object".into()),
        })
        .collect()
}

fn profile_map(v: &Value) -> Result<Map<String, Value>, String> {
    let map = match v {
        Value::Null => return Ok(Map::new()),
        Value::Object(map) => map,
        _ => return Err("`profiles` is not an object".into()),
    };
    map.iter()
        .map(|(name, id)| match id {
            Value::Null => Ok((name.clone(), Value::from(""))),
            Value::String(_) => Ok((name.clone(), id.clone())),
            _ => Err(format!("profile {name:?}: its id is not a string")),
        })
        .collect()
}

/// HAMi's reading of a capacity: a number (truncated) or a decimal string, within int32.
fn capacity(v: &Value) -> Option<i32> {
    match v {
        Value::Number(n) => {
            let f = n.as_f64()?;
            (f <= f64::from(i32::MAX) && f >= f64::from(i32::MIN)).then_some(f as i32)
        }
        Value::String(s) => go_atoi(s.trim()).map(|c| c.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32),
        _ => None,
    }
}

/// Go's `strconv.Atoi`: an optional sign and decimal digits, within int64.
fn go_atoi(s: &str) -> Option<i64> {
    s.parse().ok()
}

/// A profile name's (slices, GB): `<slices>[g].<GB>[gb]`, case and spaces ignored; (0, 0) when the
/// slices do not parse, GB 0 when only they do.
pub fn parse_profile(name: &str) -> (i64, i64) {
    let normalized = name.trim().to_lowercase();
    let mut parts = normalized.split('.');
    let (Some(size), Some(mem)) = (parts.next(), parts.next()) else { return (0, 0) };
    let size = size.trim();
    let Some(size) = go_atoi(size.strip_suffix('g').unwrap_or(size)) else { return (0, 0) };
    let mem = mem.trim();
    (size, go_atoi(mem.strip_suffix("gb").unwrap_or(mem)).unwrap_or(0))
}

// --- requests -----------------------------------------------------------------------------------

/// A container's DRS request: a positive integer count asks that many slices; else memory or
/// cores (rounded up) ask by spec; values beyond int32 drop the request.
pub fn container_request(c: &Container, b: &Arc<Backend>) -> Option<VendorRequest> {
    let res = c.resources();
    let max = i64::from(i32::MAX);
    let request = |memreq, mem_percentage, coresreq| {
        Some(VendorRequest { backend: b.clone(), backend_id: 0, nums: 1, memreq, mem_percentage, coresreq })
    };
    if let Some(n) = res.get(&b.count_name).and_then(Quantity::as_int).filter(|n| *n > 0) {
        return if n > max { None } else { request(n, DIRECT, 0) };
    }
    let memory = res.get(&b.memory_name).map(value);
    let cores = res.get(&b.core_name).map(value);
    if memory.is_none() && cores.is_none() || memory.unwrap_or(0) > max || cores.unwrap_or(0) > max {
        return None;
    }
    request(memory.unwrap_or(0), BY_SPEC, cores.unwrap_or(0))
}

/// Go's `Quantity.Value()`: rounded up to an integer.
fn value(q: &Quantity) -> i64 {
    let milli = || crate::k8s::quantity::cpu_milli(&q.0);
    q.as_int().or_else(|| milli().map(|m| m.div_euclid(1000) + i64::from(m.rem_euclid(1000) != 0))).unwrap_or(0)
}

/// What HAMi's webhook makes of a container: an error (HTTP 500), or whether it asks DRS and by
/// which resources (`Some(true)`: the count; `Some(false)`: memory or cores).
pub fn admission(c: &Container, b: &Backend) -> Result<Option<bool>, String> {
    let res = c.resources();
    if let Some(count) = res.get(&b.count_name) {
        return match value(count) > 0 {
            true => Ok(Some(true)),
            false => Err(format!("{} must be greater than 0", b.count_name)),
        };
    }
    let (memory, cores) = (res.get(&b.memory_name).map(value), res.get(&b.core_name).map(value));
    if memory.is_none() && cores.is_none() {
        return Ok(None);
    }
    if memory.is_some_and(|m| m <= 0) {
        return Err(format!("{} must be greater than 0", b.memory_name));
    }
    if cores.is_some_and(|c| c <= 0 || c > 100) {
        return Err(format!("{} must be in range (0,100]", b.core_name));
    }
    Ok(Some(false))
}

// --- profiles -----------------------------------------------------------------------------------

/// A profile a request can take: its slices, memory (GB) and share of the card's cores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub name: String,
    pub id: String,
    pub size: i64,
    pub memory_gb: i64,
    pub core_percent: i64,
}

/// HAMi's candidate profiles of a node's DRS devices, by slices then memory. Profiles of equal
/// both ("twins") come in Go's map order in HAMi; here in name order.
pub fn profiles<'a>(devices: impl Iterator<Item = &'a Device> + Clone) -> Vec<Profile> {
    let infos = devices.filter_map(|d| d.custom_info.as_deref());
    let named = |info: &'a Map<String, Value>| {
        let map = info.get("profiles").and_then(Value::as_object);
        map.into_iter().flatten().filter_map(|(n, id)| Some((n.as_str(), id.as_str()?)))
    };
    let mut max_slice = infos.clone().filter_map(|i| i.get("maxSlice")?.as_i64()).max().unwrap_or(0);
    if max_slice <= 0 {
        max_slice = infos.clone().flat_map(named).map(|(n, _)| parse_profile(n).0).max().unwrap_or(0);
    }
    if max_slice <= 0 {
        return Vec::new();
    }
    let mut seen: BTreeMap<&str, Profile> = BTreeMap::new();
    for (name, id) in infos.flat_map(named) {
        let (size, memory_gb) = parse_profile(name);
        if size <= 0 || memory_gb <= 0 {
            continue;
        }
        let core_percent = (size as f64 * 100.0 / max_slice as f64).ceil() as i64;
        seen.insert(name, Profile { name: name.to_owned(), id: id.to_owned(), size, memory_gb, core_percent });
    }
    let mut out: Vec<Profile> = seen.into_values().collect();
    out.sort_by_key(|p| (p.size, p.memory_gb));
    out
}

/// The profile a request takes: direct, the first of its slices; by spec, the first holding the
/// memory and cores asked.
pub fn select<'p>(profiles: &'p [Profile], r: &VendorRequest) -> Option<&'p Profile> {
    if r.mem_percentage == DIRECT {
        return profiles.iter().find(|p| p.size == r.memreq);
    }
    let memory = requested_gb(r.memreq, profiles.last()?.memory_gb);
    let cores = r.coresreq;
    profiles.iter().find(|p| (memory <= 0 || p.memory_gb >= memory) && (cores <= 0 || p.core_percent >= cores))
}

/// A memory request in GB: a value above twice the largest profile's GB is taken as MiB.
fn requested_gb(raw: i64, max_gb: i64) -> i64 {
    if raw <= 0 {
        0
    } else if raw > max_gb.wrapping_mul(2) {
        (raw as f64 / 1024.0).ceil() as i64
    } else {
        raw
    }
}

// --- annotations --------------------------------------------------------------------------------

/// What HAMi's DRS `PatchAnnotations` writes beside the allocated list, for `placed` (one entry per
/// container slot, init containers first) of `pod` on `node`.
pub fn extra_annotations(
    node: &crate::model::GpuNode,
    backend: &Arc<Backend>,
    placed: &PodDevices,
    pod: &Pod,
    now: i64,
) -> Vec<(String, String)> {
    if placed.is_empty() {
        return Vec::new();
    }
    let mut out = vec![
        (ASSIGNED_KEY.to_owned(), "false".to_owned()),
        (ASSIGNED_TIME_KEY.to_owned(), now.saturating_mul(1_000_000_000).to_string()),
    ];
    let typed = node.devices.iter().filter(|d| d.device_type.to_lowercase().contains(&WORD.to_lowercase()));
    let candidates = profiles(typed);
    let containers: Vec<&Container> = pod.spec.init_containers.iter().chain(&pod.spec.containers).collect();
    let mut assigned: BTreeMap<String, String> = BTreeMap::new();
    for (slot, devices) in placed.iter().enumerate() {
        let Some(chosen) = devices.first() else { continue };
        let profile = containers
            .get(slot)
            .and_then(|c| container_request(c, backend))
            .and_then(|r| select(&candidates, &r).cloned());
        let slices = profile.as_ref().map_or(1, |p| p.size.max(1));
        let name = containers.get(slot).map_or_else(|| format!("container-{slot}"), |c| c.name.clone());
        assigned.insert(name, assigned_entry(slices, profile.as_ref()));
        if out.len() == 2 {
            let info = node.devices.iter().find(|d| d.id == chosen.uuid).and_then(|d| d.custom_info.as_deref());
            let text = |key: &str| info.and_then(|i| i.get(key)?.as_str()).unwrap_or_default().to_owned();
            let index = text("index");
            if !index.is_empty() {
                out.push((ASSIGNED_INDEX_KEY.to_owned(), index.clone()));
                out.push((ASSIGNED_ID_KEY.to_owned(), index));
            }
            let minor = text("minor");
            if !minor.is_empty() {
                out.push((ASSIGNED_MINOR_KEY.to_owned(), minor));
            }
            out.push((REQUEST_SIZE_KEY.to_owned(), slices.to_string()));
        }
    }
    if !assigned.is_empty() {
        let entries: Vec<String> = assigned.iter().map(|(k, v)| format!("{}:{v}", go_json(k))).collect();
        out.push((ASSIGNED_CONTAINERS_KEY.to_owned(), format!("{{{}}}", entries.join(","))));
    }
    out
}

/// One container's entry of `assigned-containers`, with Go's field order and empty ids left out.
fn assigned_entry(slices: i64, profile: Option<&Profile>) -> String {
    let mut entry = format!("{{\"allocated\":false,\"request\":{slices}");
    for (key, v) in [("profileID", profile.map(|p| p.id.as_str())), ("profileName", profile.map(|p| p.name.as_str()))] {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            entry.push_str(&format!(",\"{key}\":{}", go_json(v)));
        }
    }
    entry.push('}');
    entry
}

/// A JSON string as Go's `json.Marshal` writes it (HTML characters escaped).
fn go_json(s: &str) -> String {
    let quoted = Value::from(s).to_string();
    quoted
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drs() -> Backend {
        backend(&DeviceConfig::default()).unwrap()
    }

    #[test]
    fn profile_names_parse_as_hami_reads_them() {
        assert_eq!(parse_profile("3g.20gb"), (3, 20));
        assert_eq!(parse_profile(" 3G.20GB "), (3, 20));
        assert_eq!(parse_profile("3.20"), (3, 20));
        assert_eq!(parse_profile("3g.xgb"), (3, 0), "slices alone still count toward the largest");
        assert_eq!(parse_profile("3gg.20gb"), (0, 0));
        assert_eq!(parse_profile("bad"), (0, 0));
        assert_eq!(parse_profile("+2g.8gb.x"), (2, 8));
    }

    #[test]
    fn registration_reads_devices_and_profiles() {
        let value = r#"{"devices":[{"index":"1","minor":" 7 ","capacity":6},{"Index":"x","capacity":"4"}],
            "profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2","bad":"3"}}"#;
        let list = devices("n", value, &drs(), 4).unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            (list[0].id.as_str(), list[0].count, list[0].devmem, list[0].devcore),
            ("n-enflame-drs-1", 6, 40960, 100)
        );
        let info = list[0].custom_info.as_deref().unwrap();
        assert_eq!((info["minor"].as_str(), info["maxSlice"].as_i64()), (Some("7"), Some(6)));
        assert_eq!(
            (list[1].id.as_str(), list[1].count),
            ("n-enflame-drs-1", 4),
            "an index that is no number: its position"
        );
        assert_eq!(list[1].custom_info.as_deref().unwrap()["minor"], "1");
    }

    #[test]
    fn a_flawed_registration_drops_the_node_s_devices() {
        let bad = [
            r#"{"devices":[{"index":0,"capacity":6}],"profiles":{"1g.6gb":"0"}}"#,
            r#"{"devices":[{"index":"0","capacity":0}],"profiles":{"1g.6gb":"0"}}"#,
            r#"{"devices":[{"index":"0","capacity":true}],"profiles":{"1g.6gb":"0"}}"#,
            r#"{"devices":[{"index":"0","capacity":6}],"profiles":{"bad":"0"}}"#,
            r#"{"devices":[],"profiles":{"1g.6gb":"0"}}"#,
            r#"{"devices":[{"index":"0","capacity":6}],"profiles":{"1g.6gb":0}}"#,
            r#"[]"#,
            r#"{"devices":"#,
        ];
        for value in bad {
            assert!(devices("n", value, &drs(), 4).is_err(), "{value}");
        }
        let truncated = devices("n", r#"{"devices":[{"capacity":2.9}],"profiles":{"2g.x":"0"}}"#, &drs(), 4).unwrap();
        assert_eq!((truncated[0].count, truncated[0].devmem), (2, 2048), "no memory in any profile: the slices");
    }

    #[test]
    fn assigned_entries_are_written_as_go_marshals_them() {
        let p = Profile { name: "3g.<20>gb&".into(), id: String::new(), size: 3, memory_gb: 20, core_percent: 50 };
        assert_eq!(
            assigned_entry(3, Some(&p)),
            r#"{"allocated":false,"request":3,"profileName":"3g.\u003c20\u003egb\u0026"}"#,
            "an empty id is left out; HTML characters escaped"
        );
        assert_eq!(assigned_entry(1, None), r#"{"allocated":false,"request":1}"#);
    }

    fn request(memreq: i64, mem_percentage: i64, coresreq: i64) -> VendorRequest {
        VendorRequest { backend: Arc::new(drs()), backend_id: 0, nums: 1, memreq, mem_percentage, coresreq }
    }

    #[test]
    fn a_request_takes_the_smallest_profile_that_holds_it() {
        let value =
            r#"{"devices":[{"capacity":6}],"profiles":{"1g.6gb":"a","3g.24gb":"d","3g.20gb":"b","6g.40gb":"c"}}"#;
        let list = profiles(devices("n", value, &drs(), 1).unwrap().iter());
        let name = |r: VendorRequest| select(&list, &r).map(|p| p.name.clone());
        assert_eq!(name(request(3, DIRECT, 0)).as_deref(), Some("3g.20gb"));
        assert_eq!(name(request(2, DIRECT, 0)), None);
        assert_eq!(name(request(21, BY_SPEC, 0)).as_deref(), Some("3g.24gb"));
        assert_eq!(name(request(0, BY_SPEC, 51)).as_deref(), Some("6g.40gb"), "3 of 6 slices: 50% of the cores");
        assert_eq!(name(request(20480, BY_SPEC, 0)).as_deref(), Some("3g.20gb"), "far above 40 GB: MiB");
        assert_eq!(name(request(81, BY_SPEC, 0)).as_deref(), Some("1g.6gb"), "81 is MiB: 1 GB");
    }
}
