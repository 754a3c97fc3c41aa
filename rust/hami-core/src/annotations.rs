//! Every HAMi annotation (and label) key the engine reads or writes, in one place.

// Node registration and the node lock (written by HAMi's device plugin and scheduler).
pub const REGISTER_KEY: &str = "hami.io/node-nvidia-register";
pub const PAIR_SCORE_KEY: &str = "hami.io/node-nvidia-score";
pub const DEVICE_CORDON_KEY: &str = "hami.io/device-cordon";
pub const NODE_LOCK_KEY: &str = "hami.io/mutex.lock";
pub const NODE_HANDSHAKE_KEY: &str = "hami.io/node-handshake";
/// The handshake annotations HAMi's default device config writes: NVIDIA's, then the vendors'
/// whose backends use the same handshake (Hygon DCU, Kunlun XPU, Vastai, Biren).
pub const NODE_HANDSHAKE_KEYS: [&str; 5] = [
    NODE_HANDSHAKE_KEY,
    "hami.io/node-handshake-dcu",
    "hami.io/node-handshake-xpu",
    "hami.io/node-handshake-va",
    "hami.io/node-handshake-biren",
];

/// Kunlunxin whole cards' allocation (no `-devices-` in it, unlike the other backends').
pub const KUNLUN_ALLOCATED_KEY: &str = "hami.io/kunlun-allocated";

/// The node label AWS Neuron's backend reads: the instance type (`inf*` types take any run of devices).
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// Enflame DRS's registration: devices and profiles, JSON (not under `hami.io/`).
pub const ENFLAME_DRS_CAPACITY_KEY: &str = "enflame.com/gcu-drs-capacity";
/// MetaX sGPU: the node's cards (JSON), and the pod's app class, QoS policy and topology switch.
pub const SGPU_NODE_DEVICES_KEY: &str = "metax-tech.com/node-gpu-devices";
pub const SGPU_APP_CLASS_KEY: &str = "metax-tech.com/sgpu-app-class";
pub const SGPU_QOS_KEY: &str = "metax-tech.com/sgpu-qos-policy";
pub const SGPU_TOPOLOGY_KEY: &str = "metax-tech.com/sgpu-topology-aware";

/// MetaX's per-node topology tables (`.losses`, `.scores`), read by its GPU backend's node score.
pub const METAX_TOPOLOGY_PREFIX: &str = "metax-tech.com/gpu.topology.";

// A pod's allocation (written by Filter and Bind).
pub const VGPU_NODE_KEY: &str = "hami.io/vgpu-node";
pub const VGPU_TIME_KEY: &str = "hami.io/vgpu-time";
pub const TO_ALLOCATE_KEY: &str = "hami.io/vgpu-devices-to-allocate";
pub const ALLOCATED_KEY: &str = "hami.io/vgpu-devices-allocated";
/// The MIG instances (profile and placement) Filter reserved, when it chose MIG GPUs.
pub const MIG_ALLOCATIONS_KEY: &str = "hami.io/vgpu-mig-allocations";
pub const BIND_PHASE_KEY: &str = "hami.io/bind-phase";
pub const BIND_TIME_KEY: &str = "hami.io/bind-time";

// Pod hints (read by `policy::hints`).
pub const USE_TYPE_KEY: &str = "nvidia.com/use-gputype";
pub const NOUSE_TYPE_KEY: &str = "nvidia.com/nouse-gputype";
pub const USE_UUID_KEY: &str = "nvidia.com/use-gpuuuid";
pub const NOUSE_UUID_KEY: &str = "nvidia.com/nouse-gpuuuid";
pub const NUMA_BIND_KEY: &str = "nvidia.com/numa-bind";
pub const VGPU_MODE_KEY: &str = "nvidia.com/vgpu-mode";
pub const NODE_POLICY_KEY: &str = "hami.io/node-scheduler-policy";
pub const GPU_POLICY_KEY: &str = "hami.io/gpu-scheduler-policy";
pub const WEIGHTS_KEY: &str = "hami.io/device-scoring-weights";

/// The coscheduling plugin's PodGroup label (HAMi's `util.PodGroupLabel`).
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";

// The descheduler's opt-outs.
/// Keeps a pod out of every plan (any value but "false").
pub const DESCHEDULER_SKIP_KEY: &str = "hami.io/descheduler-skip";
/// sig-descheduler's opt-out, honoured as well.
pub const PREFER_NO_EVICTION_KEY: &str = "descheduler.alpha.kubernetes.io/prefer-no-eviction";

// hami-fast's own keys (HAMi ignores them: switching back to HAMi is undisturbed).
/// On a pending pod: the GPUs held for it, `<node>/<GPU-uuid>[,<GPU-uuid>...]` (written by the descheduler).
pub const RESERVATION_KEY: &str = "hami-fast.io/reservation";
/// On a pending pod: when its reservation lapses, RFC 3339 (`2026-12-01T12:05:00Z`).
pub const RESERVATION_EXPIRES_KEY: &str = "hami-fast.io/reservation-expires";
/// On a pending pod Filter rejected: when a release made room for it (Unix nanoseconds). Writing it
/// is an update of the pod, which moves it out of kube-scheduler's unschedulable pods.
pub const REQUEUED_KEY: &str = "hami-fast.io/requeued-at";

/// Ascend: the node annotation saying whether its NPUs run the soft split (`"true"`).
pub const VNPU_CORE_NODE_KEY: &str = "hami-vnpu-core";

/// Every key above by its constant's name (exported to Python as `hami_fast._native.ANNOTATIONS`).
pub const ALL: &[(&str, &str)] = &[
    ("REGISTER_KEY", REGISTER_KEY),
    ("PAIR_SCORE_KEY", PAIR_SCORE_KEY),
    ("DEVICE_CORDON_KEY", DEVICE_CORDON_KEY),
    ("NODE_LOCK_KEY", NODE_LOCK_KEY),
    ("NODE_HANDSHAKE_KEY", NODE_HANDSHAKE_KEY),
    ("VGPU_NODE_KEY", VGPU_NODE_KEY),
    ("VGPU_TIME_KEY", VGPU_TIME_KEY),
    ("TO_ALLOCATE_KEY", TO_ALLOCATE_KEY),
    ("ALLOCATED_KEY", ALLOCATED_KEY),
    ("MIG_ALLOCATIONS_KEY", MIG_ALLOCATIONS_KEY),
    ("BIND_PHASE_KEY", BIND_PHASE_KEY),
    ("BIND_TIME_KEY", BIND_TIME_KEY),
    ("USE_TYPE_KEY", USE_TYPE_KEY),
    ("NOUSE_TYPE_KEY", NOUSE_TYPE_KEY),
    ("USE_UUID_KEY", USE_UUID_KEY),
    ("NOUSE_UUID_KEY", NOUSE_UUID_KEY),
    ("NUMA_BIND_KEY", NUMA_BIND_KEY),
    ("VGPU_MODE_KEY", VGPU_MODE_KEY),
    ("NODE_POLICY_KEY", NODE_POLICY_KEY),
    ("GPU_POLICY_KEY", GPU_POLICY_KEY),
    ("WEIGHTS_KEY", WEIGHTS_KEY),
    ("POD_GROUP_LABEL", POD_GROUP_LABEL),
    ("DESCHEDULER_SKIP_KEY", DESCHEDULER_SKIP_KEY),
    ("PREFER_NO_EVICTION_KEY", PREFER_NO_EVICTION_KEY),
    ("RESERVATION_KEY", RESERVATION_KEY),
    ("RESERVATION_EXPIRES_KEY", RESERVATION_EXPIRES_KEY),
    ("REQUEUED_KEY", REQUEUED_KEY),
];
