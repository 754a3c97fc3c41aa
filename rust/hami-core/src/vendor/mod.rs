//! HAMi's device backends beside NVIDIA, one module each; what they share is written once here
//! (the backend's description) and in [`crate::fit::standard`] (HAMi's standard Fit).
//!
//! A backend is described by data: the annotations it registers and writes, the resources that
//! request it, how a request is read, and which of the standard Fit's checks it applies. The
//! backends a device config sets up are [`Backends::from_config`].

pub mod amd;
pub mod ascend;
pub mod ascend_topology;
mod biren;
mod cambricon;
mod enflame;
pub mod enflame_drs;
mod hygon;
mod iluvatar;
pub mod kunlun;
pub mod metax;
mod mthreads;
pub mod neuron;
pub mod request;
pub mod sgpu;
pub mod vastai;

use crate::config::Config;
use crate::device_config::DeviceConfig;

/// How a backend reads its memory request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryUnit {
    /// MiB, scaled by the section's `memoryFactor` when above 1 (Hygon).
    Factor(i64),
    /// A fixed multiple of the resource's value (Iluvatar: 256 MiB).
    Fixed(i64),
}

impl Default for MemoryUnit {
    fn default() -> Self {
        Self::Factor(1)
    }
}

/// How a backend's device plugin writes its register annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RegisterFormat {
    /// HAMi's `UUID,count,mem,core,type,numa,health[,index,mode]:` form (`DecodeNodeDevices`).
    Legacy,
    /// A JSON array of devices (`UnMarshalNodeDevices`).
    #[default]
    Json,
    /// No annotation: one device per unit of the count resource's capacity, named
    /// `<node>-<word>-<i>`, with this memory and these cores (Enflame GCU).
    Capacity { devmem: i32, devcore: i32, id_word: &'static str },
    /// No annotation: devices cut from the node's capacity of the core resource ([`CoreShares`]).
    CoreShares(CoreShares),
    /// No annotation: Kunlunxin's whole cards from the count resource's capacity ([`kunlun::cards`]).
    KunlunCards,
    /// No annotation: AWS Neuron devices from the count and core capacities ([`neuron::devices`]).
    NeuronCapacity,
    /// Enflame DRS's capacity annotation: devices and profiles ([`enflame_drs::devices`]).
    DrsCapacity,
    /// MetaX sGPU's own JSON list of cards ([`sgpu::devices`]).
    Sgpu,
}

/// Devices HAMi derives from a node's capacity of a backend's core resource: one per
/// `cores_per_device` (rounded up), named `<node>-<id_word>-<i>`, each with `slots` slots, the
/// node's memory capacity shared out by cores (Cambricon, Moore Threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreShares {
    pub cores_per_device: i64,
    /// MiB per unit of the memory resource.
    pub memory_unit: i64,
    pub id_word: &'static str,
    pub slots: i32,
}

/// The node lock a backend's Bind takes when the pod's regular containers ask for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeLock {
    /// None (Enflame GCU).
    None,
    /// HAMi's shared `hami.io/mutex.lock` (`<RFC3339>,<namespace>,<name>`), taken once per pod.
    #[default]
    Shared,
    /// An annotation of the backend's own holding the time it was taken (RFC 3339): refused while
    /// younger than `expiry_secs`, and released by any failed Bind whoever holds it (Cambricon).
    Stamp { key: &'static str, expiry_secs: i64 },
}

/// Annotations a backend writes on the pod beside its device lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodExtras {
    #[default]
    None,
    /// `CAMBRICON_DSMLU_ASSIGNED` and `CAMBRICON_DSMLU_PROFILE`.
    Cambricon,
    /// `mthreads.com/gpu-index`, `predicate-node` and `predicate-time`.
    Mthreads,
    /// `BAIDU_COM_DEVICE_IDX` ([`kunlun::extra_annotations`]).
    Kunlun,
    /// `AWS_NEURON_IDS` and the other `NEURON_*` keys ([`neuron::extra_annotations`]).
    Neuron,
    /// `enflame.com/gcu-assigned*` and `assigned-containers` ([`enflame_drs::extra_annotations`]).
    EnflameDrs,
    /// MetaX sGPU's JSON per container and predicate time ([`sgpu::extra_annotations`]).
    Sgpu,
}

/// Which of the standard Fit's per-card checks a backend applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FitChecks {
    /// Health, type, UUID, slots, mutex, memory, cores, exclusive use, compute exhausted.
    #[default]
    Standard,
    /// Health, type, UUID, slots and mutex only; no memory or cores are granted (Biren).
    SlotsOnly,
    /// Health and type, then a card anyone uses is refused (Enflame GCU: whole cards).
    Exclusive,
    /// Health, type, UUID, slots, mutex, then memory (none asked: the whole card) and cores as a
    /// share of the card's compute units ([`amd::card_cores`]); no exclusive or exhausted rule, and
    /// the device's own type in the allocation (AMD).
    ComputeUnits,
    /// Health, type, UUID, slots and mutex only, as `SlotsOnly`; in die mode every eligible die is
    /// collected and the fullest cards taken, and `mutex` refuses a die whose card is in use
    /// ([`vastai`]).
    Dies,
    /// Standard, then a card other than those the pod's earlier containers (of its init or app
    /// phase) took is refused, `CardNotFoundCustomFilterRule` (MetaX GPU).
    SameDevices,
    /// Standard, then every device the pod's earlier containers took must be this card (Moore
    /// Threads: one card per pod).
    SameDevice,
    /// Kunlunxin whole cards: a card anyone uses is refused; the cards are chosen on the
    /// interconnect graph ([`crate::fit::xpu`]); only the slot is counted as taken.
    XpuCards,
    /// Kunlunxin vXPU slices: free memory, and the slices on a card all of one size; chosen on the
    /// interconnect graph ([`crate::fit::xpu`]).
    XpuSlices,
    /// AWS Neuron: several devices as one run of positions, one device by its free core bits
    /// ([`crate::fit::neuron`]).
    Neuron,
    /// Enflame DRS: a profile chosen for the request, then one device with a free slot, the
    /// profile's memory and cores ([`crate::fit::drs`]); its slices counted as slots taken.
    DrsProfile,
    /// MetaX sGPU: app classes, QoS policies, then a choice among every card that passes
    /// ([`crate::fit::sgpu`]).
    Sgpu,
}

/// What a backend adds to a node's score (HAMi's `ScoreNode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeScore {
    /// Nothing.
    #[default]
    Zero,
    /// Per container, the share of its devices on its largest card ([`vastai::die_share`]).
    DieShare,
    /// The node's topology table for the policy, by the number of devices the pod takes; every
    /// pod placed on a node with these devices gets it ([`metax`]).
    Topology,
    /// The bubbles the pod's cards leave in the interconnect's wings ([`kunlun::bubble_score`]).
    Bubble,
    /// MetaX sGPU's policy-neutral score, weighted by HAMi ([`sgpu::node_score`]); the config's
    /// `sgpuTopologyAware`.
    Sgpu { topology_aware: bool },
}

/// What a backend's webhook does to a container asking for it, beyond routing the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// Nothing more (Hygon).
    #[default]
    Route,
    /// A count over 1 sets the core limit to 100 per card; the container's name goes into
    /// `SOL_CONTINER_NAME` unless set (Iluvatar).
    CoresPerCardAndContainerName,
    /// Ascend's: memory rounded to a vNPU template, 910C pairs, the soft split's rules
    /// ([`ascend::admit`]).
    Vnpu,
    /// The core limit must be an integer percentage 1..=100 (else the webhook fails the pod); the
    /// memory or core resource alone also routes the pod (AMD).
    CorePercent,
    /// Whole-card sizes set or checked ([`Backend::admission_edit`]: Moore Threads).
    CardSizes,
    /// A memory limit rounded to a slice size, in the limits and the requests ([`kunlun::trim_memory`]).
    XpuMemory,
    /// Either resource (limits or requests) routes the pod; HAMi's checks of the values
    /// ([`neuron::admission`]).
    NeuronAsk,
    /// Enflame DRS's checks of the count, memory and cores, each copied between limits and
    /// requests ([`enflame_drs::admission`]).
    DrsProfile,
    /// App class and QoS policy checked, the QoS policy defaulted ([`sgpu::admit`]).
    Sgpu,
}

/// How a backend reads a container's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestFormat {
    /// Limits, then requests; memory in [`MemoryUnit`]s; `default_cores` when none is named.
    #[default]
    Standard,
    /// Limits only; memory in MiB; cores a percentage 1..=100, 100 when none is named; a value
    /// out of range drops the request ([`amd::container_request`]).
    CorePercent,
    /// Memory (limits, then requests) rounded to a slice size, cores its share of a card
    /// ([`kunlun::container_request`]).
    XpuMemory,
    /// Devices, else cores, resolved per node ([`neuron::container_request`]).
    Neuron,
    /// A profile asked by its slices, or by memory and cores ([`enflame_drs::container_request`]).
    DrsProfile,
    /// Limits only; memory in GiB or bytes ([`sgpu::container_request`]).
    Sgpu,
}

/// When HAMi keeps a node's devices of a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Health {
    /// By the handshake annotation, if the backend has one.
    #[default]
    Handshake,
    /// While the node's capacity of the count resource is above 0 (AMD).
    Capacity,
}

/// What a backend's webhook sets on a pod for one container asking it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdmissionEdit {
    /// Container limits set (resource, value), replacing any there.
    pub limits: Vec<(String, i64)>,
    pub pod_annotations: Vec<(String, String)>,
}

/// One non-NVIDIA backend HAMi's scheduler runs, as data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Backend {
    /// HAMi's `CommonWord`: the request type, and the key of its devices in HAMi's maps.
    pub common_word: String,
    pub register_key: String,
    pub handshake_key: String,
    pub to_allocate_key: String,
    pub allocated_key: String,
    pub count_name: String,
    pub memory_name: String,
    pub core_name: String,
    pub memory_unit: MemoryUnit,
    /// Cores granted when the container names none.
    pub default_cores: i64,
    /// Counts outside 1..=i32::MAX make no request (Hygon checks; Iluvatar takes any integer).
    pub count_checked: bool,
    /// `use`/`nouse` device type annotations the Fit honours (none: every type is accepted).
    pub type_keys: Option<(String, String)>,
    /// `use`/`nouse` device UUID annotations.
    pub uuid_keys: (String, String),
    pub admission: Admission,
    pub register_format: RegisterFormat,
    /// Cores HAMi sets on every registered device, whatever the plugin wrote (Biren: 100).
    pub devcore: Option<i32>,
    pub checks: FitChecks,
    /// A request whose memory (MiB) and cores are fixed whatever the container asks (Enflame GCU).
    pub fixed_request: Option<(i64, i64)>,
    /// Ascend's vNPU rules: templates, the soft split, network groups and 910C pairs.
    pub vnpu: Option<Box<ascend::Vnpu>>,
    pub request_format: RequestFormat,
    pub health: Health,
    pub score: NodeScore,
    pub lock: NodeLock,
    pub extras: PodExtras,
    /// The namespace quota is checked card by card in the Fit (HAMi's `fitQuota`: Cambricon).
    pub quota_per_card: bool,
    /// The memory and cores a container asks are shared out over its cards (Moore Threads).
    pub split_over_cards: bool,
}

impl Backend {
    /// The device type a request for this backend carries (and matches devices by).
    pub fn request_type(&self) -> &str {
        &self.common_word
    }

    /// The annotations this backend writes beside its device lists, for `placed` (one entry per
    /// container slot) of `pod` on `node`; `requests` are the pod's, per container slot.
    pub fn extra_annotations(
        self: &std::sync::Arc<Self>,
        node: &crate::model::GpuNode,
        placed: &crate::codec::PodDevices,
        requests: &[Vec<request::VendorRequest>],
        pod: &crate::k8s::Pod,
        now: i64,
    ) -> Vec<(String, String)> {
        match self.extras {
            PodExtras::None => Vec::new(),
            PodExtras::Cambricon => cambricon::extra_annotations(node, placed),
            PodExtras::Mthreads => mthreads::extra_annotations(node, placed, now),
            PodExtras::Kunlun => kunlun::extra_annotations(node, placed),
            PodExtras::Neuron => neuron::extra_annotations(node, self, placed, requests, now),
            PodExtras::EnflameDrs => enflame_drs::extra_annotations(node, self, placed, pod, now),
            PodExtras::Sgpu => sgpu::extra_annotations(placed, now.saturating_mul(1_000_000_000)),
        }
    }

    /// What the webhook sets for a container asking `count` of this backend with `memory` in its
    /// limits; an error is HAMi's message (HTTP 500).
    pub fn admission_edit(&self, count: i64, memory: Option<i64>) -> Result<AdmissionEdit, String> {
        match self.admission {
            Admission::CardSizes => mthreads::admission_edit(self, count, memory),
            _ => Ok(AdmissionEdit::default()),
        }
    }

    /// What HAMi's `FitQuota` multiplies this backend's memory limit by (its `MemoryFactor`).
    pub fn quota_factor(&self) -> i64 {
        match self.memory_unit {
            MemoryUnit::Factor(f) | MemoryUnit::Fixed(f) => f,
        }
    }
}

/// The other backends' footprints of a pod, each with its backend.
pub type VendorFootprint = Vec<(std::sync::Arc<Backend>, Vec<crate::model::Collapsed>)>;

/// The backends a device config sets up, in a fixed order (HAMi's own order is a Go map's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backends(pub Vec<std::sync::Arc<Backend>>);

impl Backends {
    pub fn from_config(config: &Config) -> Self {
        let devices: &DeviceConfig = config.devices();
        let mut list = Vec::new();
        list.extend(cambricon::backend(devices));
        list.extend(hygon::backend(devices));
        list.extend(biren::backend(devices));
        list.extend(enflame::gcu_backend(devices));
        list.extend(enflame_drs::backend(devices));
        list.extend(amd::backend(devices));
        list.extend(vastai::backend(devices));
        list.extend(metax::gpu_backend(devices));
        list.extend(mthreads::backend(devices));
        list.extend(kunlun::card_backend(devices));
        list.extend(kunlun::slice_backend(devices));
        list.extend(neuron::backend(devices));
        list.extend(sgpu::backend(devices));
        if config.vendors.enable_iluvatar {
            list.extend(iluvatar::backends(devices));
        }
        if config.vendors.enable_ascend {
            list.extend(ascend::backends(devices));
        }
        Self(list.into_iter().map(std::sync::Arc::new).collect())
    }

    pub fn iter(&self) -> impl Iterator<Item = &std::sync::Arc<Backend>> {
        self.0.iter()
    }

    pub fn get(&self, id: u8) -> Option<&Backend> {
        self.0.get(usize::from(id).checked_sub(1)?).map(|b| &**b)
    }

    /// Backend ids start at 1 (0 is NVIDIA on a [`crate::codec::Device`]).
    pub fn with_ids(&self) -> impl Iterator<Item = (u8, &Backend)> {
        self.0.iter().enumerate().map(|(i, b)| ((i + 1) as u8, &**b))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The resources a ResourceQuota can limit for these backends (`limits.<name>`): each
    /// backend's memory and core names.
    pub fn quota_resources(&self) -> Vec<String> {
        let names = self.0.iter().flat_map(|b| [&b.memory_name, &b.core_name]);
        let mut out: Vec<String> = names.filter(|n| !n.is_empty()).cloned().collect();
        out.dedup();
        out
    }
}

/// The devices HAMi derives from a node's capacity of `backend`'s core resource (`cores`) and
/// memory resource (`memory`, in the resource's units); none without cores.
pub fn core_share_devices(
    node: &str,
    backend: &Backend,
    shares: CoreShares,
    cores: i64,
    memory: i64,
    id: u8,
) -> Vec<crate::codec::Device> {
    if cores <= 0 {
        return Vec::new();
    }
    let per = shares.cores_per_device;
    let devmem = memory.saturating_mul(shares.memory_unit).saturating_mul(per) / cores;
    (0..(cores + per - 1) / per)
        .map(|i| crate::codec::Device {
            id: format!("{node}-{}-{i}", shares.id_word),
            index: i as u32,
            count: shares.slots,
            devmem: devmem as i32,
            devcore: per as i32,
            device_type: backend.common_word.clone(),
            health: true,
            vendor: id,
            ..crate::codec::Device::default()
        })
        .collect()
}

/// The devices HAMi derives from a node's capacity of `backend`'s count resource: `count` cards
/// named `<node>-<id_word>-<i>`, each with one slot.
pub fn capacity_devices(
    node: &str,
    backend: &Backend,
    count: i64,
    (devmem, devcore, id_word): (i32, i32, &str),
    id: u8,
) -> Vec<crate::codec::Device> {
    (0..count.max(0))
        .map(|i| crate::codec::Device {
            id: format!("{node}-{id_word}-{i}"),
            index: i as u32,
            count: 1,
            devmem,
            devcore,
            device_type: backend.common_word.clone(),
            health: true,
            vendor: id,
            ..crate::codec::Device::default()
        })
        .collect()
}
