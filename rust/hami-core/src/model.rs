//! Compact engine model: registered GPUs per node, per-device usage, collapsed per-pod usage.

use crate::codec::{self, ContainerDevice, Device, MigPlacement};
use crate::k8s::view::HamiAnnotations;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceUsage {
    pub used: i64,
    pub usedmem: i64,
    pub usedcores: i64,
    /// Entries of resident pods of MetaX sGPU's app classes on the device (HAMi's `PodInfos`).
    pub online: i32,
    pub offline: i32,
}

/// A pod's footprint on one GPU after HAMi's collapse (init peak vs app sums).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collapsed {
    pub uuid: Box<str>,
    pub mem: i64,
    pub cores: i64,
    pub slots: i64,
    /// The pod's MetaX sGPU app class (its cards' `PodInfos` count it).
    pub app_class: AppClass,
}

/// A pod's MetaX sGPU app class (`metax-tech.com/sgpu-app-class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppClass {
    #[default]
    Unset,
    Online,
    Offline,
    /// Set to something else (the webhook refuses it; Filter treats it as neither class).
    Other,
}

impl AppClass {
    pub fn read(value: Option<&str>) -> Self {
        match value {
            None => Self::Unset,
            Some("online") => Self::Online,
            Some("offline") => Self::Offline,
            Some(_) => Self::Other,
        }
    }
}

/// Collapses per-container device lists into one footprint per GPU (spec §4.3).
pub fn collapse(slots: &[Vec<ContainerDevice>], init_count: usize, init_released: bool) -> Vec<Collapsed> {
    #[derive(Default)]
    struct Acc {
        init: Option<(i64, i64)>,
        app: (i64, i64, i64),
    }
    let mut order: Vec<&str> = Vec::new();
    let mut acc: BTreeMap<&str, Acc> = BTreeMap::new();
    for (slot, devices) in slots.iter().enumerate() {
        for d in devices {
            let entry = acc.entry(d.uuid.as_str()).or_insert_with(|| {
                order.push(d.uuid.as_str());
                Acc::default()
            });
            let (mem, cores) = (i64::from(d.usedmem), i64::from(d.usedcores));
            if slot < init_count {
                let (m, c) = entry.init.unwrap_or((0, 0));
                entry.init = Some((m.max(mem), c.max(cores)));
            } else {
                entry.app = (entry.app.0 + mem, entry.app.1 + cores, entry.app.2 + 1);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|uuid| {
            let a = &acc[uuid];
            let (app_mem, app_cores, app_slots) = a.app;
            if init_released {
                return (app_slots > 0).then(|| Collapsed {
                    uuid: uuid.into(),
                    mem: app_mem,
                    cores: app_cores,
                    slots: app_slots,
                    app_class: Default::default(),
                });
            }
            let (init_mem, init_cores) = a.init.unwrap_or((0, 0));
            let init_slots = i64::from(a.init.is_some());
            Some(Collapsed {
                mem: init_mem.max(app_mem),
                cores: init_cores.max(app_cores),
                slots: init_slots.max(app_slots).max(1),
                uuid: uuid.into(),
                app_class: Default::default(),
            })
        })
        .collect()
}

/// Sums over a node's devices, kept alongside the per-device usage so the node score is O(1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub count: i64,
    pub core: i64,
    pub mem: i64,
    pub used: i64,
    pub usedcores: i64,
    pub usedmem: i64,
}

pub const HEALTHY: u8 = 1;
pub const CORDONED: u8 = 2;
pub const NVIDIA: u8 = 4;
pub const MIG: u8 = 8;
/// Held for a pending pod by a reservation ([`crate::state::reservations`]): unavailable to any other.
pub const RESERVED: u8 = 16;
/// Marked unhealthy by resident pods' inconsistent MIG data, as HAMi's usage snapshot marks it.
pub const MIG_UNHEALTHY: u8 = 32;

/// The device plugin's operating mode of a MIG GPU (`mode: mig`).
pub const MIG_MODE: &str = "mig";

/// One MIG instance a resident pod holds: the GPU and the placement on it
/// (`hami.io/vgpu-mig-allocations`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigHold {
    pub gpu: Box<str>,
    pub placement: MigPlacement,
}

/// What resident pods hold of a node's MIG GPUs, as HAMi's usage snapshot (`getNodesUsage`)
/// rebuilds it: the occupied placements per device, and the devices it marks unhealthy because a
/// pod's MIG data do not match its devices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigUsage {
    /// Per device, the placements held (HAMi's `MigAllocationsInUse`).
    pub occupied: Vec<Vec<MigPlacement>>,
    /// Per device, how many resident pods mark it unhealthy.
    unhealthy: Vec<u32>,
    /// Resident pods whose reservations name a GPU the node lacks: every MIG device is unhealthy.
    every_mig_unhealthy: u32,
}

/// What every fit check reads of a device, packed so a node's devices share one cache-friendly array.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceHot {
    pub count: i32,
    pub devmem: i32,
    pub devcore: i32,
    pub numa: i32,
    pub flags: u8,
}

impl DeviceHot {
    fn of(d: &Device, cordoned: bool) -> Self {
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        Self {
            count: d.count,
            devmem: d.devmem,
            devcore: d.devcore,
            numa: d.numa,
            flags: flag(d.health, HEALTHY)
                | flag(cordoned, CORDONED)
                | flag(d.vendor == 0 && d.device_type.to_uppercase().contains(codec::VENDOR_NVIDIA), NVIDIA)
                | flag(d.mode == "mig", MIG),
        }
    }

    pub fn has(&self, bit: u8) -> bool {
        self.flags & bit != 0
    }
}

/// A node's CPU, memory and pod-count capacity and what pods request of it, as kube-scheduler's
/// `NodeResourcesFit` checks them. Only the trace replay fills this in: the live extender runs
/// behind kube-scheduler, which already applies that check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostResources {
    pub cpu_milli: i64,
    pub memory_mib: i64,
    pub pods: i64,
    pub cpu_requested: i64,
    pub memory_requested: i64,
    pub pods_requested: i64,
}

impl HostResources {
    pub fn cpu_left(&self) -> i64 {
        self.cpu_milli - self.cpu_requested
    }

    pub fn memory_left(&self) -> i64 {
        self.memory_mib - self.memory_requested
    }
}

/// A node as the engine sees it: its registered GPUs (or why it is unusable) and their usage.
#[derive(Debug, Clone, Default)]
pub struct GpuNode {
    pub name: String,
    pub devices: Vec<Device>,
    pub hot: Vec<DeviceHot>,
    /// `pair[i][j]`: topology score from device i to device j; empty without the score annotation.
    pub pair: Vec<Vec<i64>>,
    pub usage: Vec<DeviceUsage>,
    pub totals: Totals,
    /// Some device registered in MIG mode: Fit plans MIG instances on this node.
    pub has_mig: bool,
    pub mig: MigUsage,
    /// Why its register annotation gives no devices (missing or malformed): then it is not registered.
    pub register_error: Option<crate::error::Error>,
    /// CPU / memory / pods capacity, when known (trace replay); `None` = not checked here.
    pub host: Option<HostResources>,
    /// The handshake and allocatable GPUs HAMi's registration rule reads.
    pub registration: crate::health::Registration,
    /// Whether HAMi's node cache holds the node, as registration passes left it.
    pub membership: crate::health::Membership,
    /// The other backends whose devices HAMi's cache holds for this node (their ids).
    pub vendor_members: Vec<u8>,
    /// NVIDIA's devices while HAMi's cache holds the node for another backend only (NVIDIA's
    /// registration pending), with their topology scores: out of the device list until then.
    pub parked: Option<(Vec<Device>, Vec<Vec<i64>>)>,
    /// The cordon annotation, to rebuild the device list as it was registered.
    pub cordon: Option<String>,
    /// The `hami-vnpu-core` annotation: whether its Ascend NPUs run the soft split.
    pub vnpu_core: Option<String>,
    /// A backend's node score tables (MetaX GPU), when the node has that backend's devices.
    pub score_tables: Option<Box<ScoreTables>>,
    /// MetaX sGPU cards of the node a placement asked to switch QoS policy, not yet shown by their
    /// registration (UUID, policy): the cluster's pending switches for this node's cards.
    pub sgpu_qos: Vec<(Box<str>, Box<str>)>,
}

/// A node's score tables by the number of devices a pod takes: for binpack (losses) and spread
/// (scores), each absent when the node has no such annotation; one that does not parse is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScoreTables {
    pub binpack: Option<Vec<(i64, i64)>>,
    pub spread: Option<Vec<(i64, i64)>>,
}

impl GpuNode {
    /// The node from its annotations: NVIDIA's registration, and `vendor_devices` the other
    /// backends registered (after NVIDIA's, as one device list like HAMi's usage snapshot). A node
    /// with another vendor's devices is registered even without NVIDIA's annotation.
    pub fn from_annotations(name: &str, ann: &HamiAnnotations, vendor_devices: Vec<Device>) -> Self {
        let mut out = Self { name: name.to_owned(), ..Self::default() };
        let decoded = match ann.register.as_deref() {
            None => {
                Err(crate::error::Error::not_found("", format_args!("annotation {} not found", codec::REGISTER_KEY)))
            }
            Some(v) => codec::decode_node_register(v)
                .map_err(|e| e.in_field(format_args!("annotation {}", codec::REGISTER_KEY))),
        };
        out.cordon = ann.cordon.as_deref().map(str::to_owned);
        let pair_scores = match ann.pair_scores.as_deref() {
            None => Ok(BTreeMap::new()),
            Some(v) => codec::decode_pair_scores(v)
                .map_err(|e| e.in_field(format_args!("annotation {}", codec::PAIR_SCORE_KEY))),
        };
        match (decoded, pair_scores) {
            (Ok(mut devices), Ok(pairs)) => {
                devices.extend(vendor_devices);
                out.set_devices(devices, &pairs, ann.cordon.as_deref());
            }
            (Err(_), _) | (_, Err(_)) if !vendor_devices.is_empty() => {
                out.set_devices(vendor_devices, &BTreeMap::new(), ann.cordon.as_deref());
            }
            (Err(e), _) | (_, Err(e)) => out.register_error = Some(e),
        }
        out
    }

    /// A node built from a device list directly (trace replay, tests): no annotations involved.
    pub fn with_devices(name: &str, devices: Vec<Device>, host: Option<HostResources>) -> Self {
        let mut out = Self { name: name.to_owned(), host, ..Self::default() };
        out.set_devices(devices, &BTreeMap::new(), None);
        out
    }

    fn set_devices(
        &mut self,
        devices: Vec<Device>,
        pairs: &BTreeMap<String, BTreeMap<String, i64>>,
        cordon: Option<&str>,
    ) {
        let cordoned_ids = cordon.map(codec::split_list).unwrap_or_default();
        self.hot = devices.iter().map(|d| DeviceHot::of(d, cordoned_ids.contains(&d.id))).collect();
        if !pairs.is_empty() {
            self.pair = devices
                .iter()
                .map(|a| {
                    let row = pairs.get(&a.id);
                    devices.iter().map(|b| row.and_then(|r| r.get(&b.id)).copied().unwrap_or(0)).collect()
                })
                .collect();
        }
        self.usage = vec![DeviceUsage::default(); devices.len()];
        self.has_mig = devices.iter().any(|d| d.mode == MIG_MODE);
        self.mig = MigUsage {
            occupied: vec![Vec::new(); devices.len()],
            unhealthy: vec![0; devices.len()],
            every_mig_unhealthy: 0,
        };
        self.totals = Totals {
            count: devices.iter().map(|d| i64::from(d.count)).sum(),
            core: devices.iter().map(|d| i64::from(d.devcore)).sum(),
            mem: devices.iter().map(|d| i64::from(d.devmem)).sum(),
            ..Totals::default()
        };
        self.devices = devices;
    }

    pub fn is_registered(&self) -> bool {
        self.register_error.is_none()
    }

    /// Registered devices, and in HAMi's node cache at `now` (Unix seconds).
    pub fn is_registered_at(&self, now: i64) -> bool {
        self.is_registered() && self.membership.registered(&self.registration, !self.devices.is_empty(), now)
    }

    /// Takes NVIDIA's devices out of the device list (`park`) while HAMi's cache holds the node for
    /// another backend only, or puts them back first; true when the list changed (the usage must
    /// then be counted again).
    pub fn park_nvidia(&mut self, park: bool) -> bool {
        match (park, self.parked.take()) {
            (true, None) => {
                let has_nvidia = self.devices.iter().any(|d| d.vendor == 0);
                if !has_nvidia || !self.holds_vendor_devices() {
                    return false;
                }
                let (nvidia, vendor): (Vec<Device>, Vec<Device>) =
                    std::mem::take(&mut self.devices).into_iter().partition(|d| d.vendor == 0);
                let pair = std::mem::take(&mut self.pair);
                self.set_devices(vendor, &BTreeMap::new(), self.cordon.clone().as_deref());
                self.parked = Some((nvidia, pair));
                true
            }
            (false, Some((mut nvidia, pair))) => {
                nvidia.append(&mut self.devices);
                self.set_devices(nvidia, &BTreeMap::new(), self.cordon.clone().as_deref());
                self.pair = pair;
                true
            }
            (_, kept) => {
                self.parked = kept;
                false
            }
        }
    }

    /// Whether NVIDIA's devices are in the device list (not parked).
    pub fn holds_nvidia_devices(&self) -> bool {
        self.devices.iter().any(|d| d.vendor == 0)
    }

    /// Whether another backend registered devices here (then HAMi's cache holds the node whatever
    /// NVIDIA's registration says).
    pub fn holds_vendor_devices(&self) -> bool {
        self.devices.iter().any(|d| d.vendor != 0)
    }

    /// Whether [`Self::is_registered_at`] can change with `now` alone: before any registration
    /// pass, while a handshake request is unanswered.
    pub fn registration_depends_on_time(&self) -> bool {
        self.membership.member.is_none() && self.registration.depends_on_time()
    }

    /// HAMi pads GPU-less containers in the NVIDIA device list only when one of the node's
    /// devices registered with the type `NVIDIA` itself (its padding goes under each device type).
    pub fn pads_device_lists(&self) -> bool {
        self.devices.iter().any(|d| d.device_type == codec::VENDOR_NVIDIA)
    }

    pub fn device_index(&self, uuid: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.id == uuid)
    }

    pub fn pair_score(&self, a: usize, b: usize) -> i64 {
        self.pair.get(a).and_then(|row| row.get(b)).copied().unwrap_or(0)
    }

    /// Adds (`sign = 1`) or removes (`sign = -1`) a pod's footprint; unknown UUIDs are skipped.
    /// Like HAMi's usage snapshot, an entry counts on every device of that UUID (two backends
    /// may register one id).
    pub fn account(&mut self, footprint: &[Collapsed], sign: i64) {
        for entry in footprint {
            for i in 0..self.devices.len() {
                if *self.devices[i].id != *entry.uuid {
                    continue;
                }
                let (slots, mem, cores) = (sign * entry.slots.max(1), sign * entry.mem, sign * entry.cores);
                let u = &mut self.usage[i];
                u.used += slots;
                u.usedmem += mem;
                u.usedcores += cores;
                match entry.app_class {
                    AppClass::Online => u.online += sign as i32,
                    AppClass::Offline => u.offline += sign as i32,
                    _ => {}
                }
                self.totals.used += slots;
                self.totals.usedmem += mem;
                self.totals.usedcores += cores;
            }
        }
    }

    /// Adds (`sign = 1`) or removes (`sign = -1`) what a resident pod holds of the node's MIG
    /// GPUs, as HAMi's `getNodesUsage` reads it: for each GPU of the pod's footprint, its first
    /// reservation on that GPU (none on a `hami-core` GPU, which is marked unhealthy instead; a MIG
    /// GPU without one is marked unhealthy); then its other reservations (on a GPU that is not in
    /// MIG mode: unhealthy; on a GPU the node lacks: every MIG GPU unhealthy).
    pub fn account_mig(&mut self, footprint: &[Collapsed], holds: &[MigHold], sign: i64) {
        if holds.is_empty() && !self.has_mig {
            return;
        }
        let mut left: Vec<Option<&MigHold>> = holds.iter().map(Some).collect();
        let mut occupy: Vec<(usize, MigPlacement)> = Vec::new();
        let mut unhealthy: Vec<usize> = Vec::new();
        for entry in footprint {
            let Some(i) = self.device_index(&entry.uuid) else { continue };
            let first = left.iter_mut().find(|h| h.is_some_and(|h| *h.gpu == *entry.uuid));
            match (first, self.devices[i].mode.as_str()) {
                (Some(_), "hami-core") => unhealthy.push(i),
                (Some(slot), _) => occupy.push((i, slot.take().map(|h| h.placement).unwrap_or_default())),
                (None, MIG_MODE) => unhealthy.push(i),
                (None, _) => {}
            }
        }
        let mut every_mig = false;
        let mut done: Vec<&str> = Vec::new();
        for hold in left.iter().flatten() {
            if done.contains(&&*hold.gpu) {
                continue;
            }
            done.push(&hold.gpu);
            let rest = left.iter().flatten().filter(|h| h.gpu == hold.gpu);
            match self.device_index(&hold.gpu) {
                Some(i) if self.devices[i].mode == MIG_MODE => occupy.extend(rest.map(|h| (i, h.placement))),
                Some(i) => unhealthy.push(i),
                None => every_mig = true,
            }
        }
        self.apply_mig(&occupy, &unhealthy, every_mig, sign);
    }

    fn apply_mig(&mut self, occupy: &[(usize, MigPlacement)], unhealthy: &[usize], every_mig: bool, sign: i64) {
        let step = |n: &mut u32| *n = if sign > 0 { n.saturating_add(1) } else { n.saturating_sub(1) };
        for &(i, placement) in occupy {
            let held = &mut self.mig.occupied[i];
            if sign > 0 {
                held.push(placement);
            } else if let Some(k) = held.iter().position(|p| *p == placement) {
                held.remove(k);
            }
        }
        unhealthy.iter().for_each(|&i| step(&mut self.mig.unhealthy[i]));
        if every_mig {
            step(&mut self.mig.every_mig_unhealthy);
        }
        for (i, h) in self.hot.iter_mut().enumerate() {
            let marked =
                self.mig.unhealthy[i] > 0 || (self.mig.every_mig_unhealthy > 0 && self.devices[i].mode == MIG_MODE);
            h.flags = (h.flags & !MIG_UNHEALTHY) | if marked { MIG_UNHEALTHY } else { 0 };
        }
    }

    pub fn clear_usage(&mut self) {
        self.usage.iter_mut().for_each(|u| *u = DeviceUsage::default());
        self.totals = Totals { used: 0, usedcores: 0, usedmem: 0, ..self.totals };
        self.mig.occupied.iter_mut().for_each(Vec::clear);
        self.mig.unhealthy.iter_mut().for_each(|n| *n = 0);
        self.mig.every_mig_unhealthy = 0;
        self.hot.iter_mut().for_each(|h| h.flags &= !MIG_UNHEALTHY);
    }

    pub fn copy_usage_from(&mut self, other: &Self) {
        self.usage.clone_from(&other.usage);
        self.mig.clone_from(&other.mig);
        for (h, o) in self.hot.iter_mut().zip(&other.hot) {
            h.flags = (h.flags & !MIG_UNHEALTHY) | (o.flags & MIG_UNHEALTHY);
        }
        self.totals = Totals {
            used: other.totals.used,
            usedcores: other.totals.usedcores,
            usedmem: other.totals.usedmem,
            ..self.totals
        };
    }

    /// Same devices, same order: usage carries over unchanged.
    pub fn same_inventory(&self, other: &Self) -> bool {
        self.devices == other.devices && self.register_error == other.register_error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(uuid: &str, mem: i32, cores: i32) -> ContainerDevice {
        ContainerDevice { uuid: uuid.into(), device_type: "NVIDIA".into(), usedmem: mem, usedcores: cores }
    }

    #[test]
    fn collapse_init_peak_and_app_sums() {
        let slots = vec![
            vec![d("A", 500, 10)],
            vec![d("A", 900, 5)],
            vec![d("A", 300, 20), d("B", 100, 0)],
            vec![d("A", 400, 30)],
        ];
        let c = collapse(&slots, 2, false);
        assert_eq!(c[0], Collapsed { uuid: "A".into(), mem: 900, cores: 50, slots: 2, app_class: Default::default() });
        assert_eq!(c[1], Collapsed { uuid: "B".into(), mem: 100, cores: 0, slots: 1, app_class: Default::default() });
        let released = collapse(&slots, 2, true);
        assert_eq!(
            released[0],
            Collapsed { uuid: "A".into(), mem: 700, cores: 50, slots: 2, app_class: Default::default() }
        );
        let only_init = collapse(&[vec![d("X", 1, 1)], vec![]], 1, true);
        assert!(only_init.is_empty());
    }

    #[test]
    fn nvidia_parks_beside_another_backend_and_comes_back_first() {
        let device = |id: &str, vendor: u8| Device {
            id: id.into(),
            count: 10,
            devmem: 1000,
            devcore: 100,
            device_type: if vendor == 0 { "NVIDIA-T4".into() } else { "DCU".into() },
            health: true,
            vendor,
            ..Device::default()
        };
        let mut node = GpuNode::with_devices("n", vec![device("GPU-0", 0), device("DCU-0", 1)], None);
        assert!(node.park_nvidia(true));
        assert_eq!(node.devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["DCU-0"]);
        assert_eq!(node.totals.count, 10, "the score counts the other backend's devices only");
        assert!(!node.park_nvidia(true), "already parked");
        assert!(node.park_nvidia(false));
        assert_eq!(node.devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), ["GPU-0", "DCU-0"]);
        let mut nvidia_only = GpuNode::with_devices("m", vec![device("GPU-1", 0)], None);
        assert!(!nvidia_only.park_nvidia(true), "nothing holds the node but NVIDIA");
    }
}
