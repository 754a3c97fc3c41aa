"""HAMi's annotation keys for Python, read from the engine's own table (`rust/hami-core/src/annotations.rs`,
exported as `_native.ANNOTATIONS`), so Python and Rust cannot spell a key differently."""

from __future__ import annotations

from typing import Final

from hami_fast._native import ANNOTATIONS as _ENGINE

# Node registration and the node lock (HAMi's device plugin and scheduler).
NODE_REGISTER: Final = _ENGINE["REGISTER_KEY"]
NODE_PAIR_SCORE: Final = _ENGINE["PAIR_SCORE_KEY"]
DEVICE_CORDON: Final = _ENGINE["DEVICE_CORDON_KEY"]
NODE_LOCK: Final = _ENGINE["NODE_LOCK_KEY"]
NODE_HANDSHAKE: Final = _ENGINE["NODE_HANDSHAKE_KEY"]

# A pod's allocation (written by Filter and Bind).
VGPU_NODE: Final = _ENGINE["VGPU_NODE_KEY"]
VGPU_TIME: Final = _ENGINE["VGPU_TIME_KEY"]
TO_ALLOCATE: Final = _ENGINE["TO_ALLOCATE_KEY"]
ALLOCATED: Final = _ENGINE["ALLOCATED_KEY"]
MIG_ALLOCATIONS: Final = _ENGINE["MIG_ALLOCATIONS_KEY"]
BIND_PHASE: Final = _ENGINE["BIND_PHASE_KEY"]
BIND_TIME: Final = _ENGINE["BIND_TIME_KEY"]

# Pod hints.
USE_GPU_TYPE: Final = _ENGINE["USE_TYPE_KEY"]
NOUSE_GPU_TYPE: Final = _ENGINE["NOUSE_TYPE_KEY"]
USE_GPU_UUID: Final = _ENGINE["USE_UUID_KEY"]
NOUSE_GPU_UUID: Final = _ENGINE["NOUSE_UUID_KEY"]
NUMA_BIND: Final = _ENGINE["NUMA_BIND_KEY"]
VGPU_MODE: Final = _ENGINE["VGPU_MODE_KEY"]
NODE_POLICY: Final = _ENGINE["NODE_POLICY_KEY"]
GPU_POLICY: Final = _ENGINE["GPU_POLICY_KEY"]
SCORING_WEIGHTS: Final = _ENGINE["WEIGHTS_KEY"]

# The coscheduling plugin's PodGroup label (HAMi retries a member's node lock).
POD_GROUP_LABEL: Final = _ENGINE["POD_GROUP_LABEL"]

# The descheduler's opt-outs (read by the planner).
DESCHEDULER_SKIP: Final = _ENGINE["DESCHEDULER_SKIP_KEY"]
PREFER_NO_EVICTION: Final = _ENGINE["PREFER_NO_EVICTION_KEY"]

# The descheduler's stamps on a pinned pod: Python only, the engine never reads them.
PLACEMENT_NAME: Final = "placement.hami.io/name"
PLACEMENT_REQ_ID: Final = "placement.hami.io/req-id"
PLACEMENT_TARGET: Final = "placement.hami.io/target"

# hami-fast's own: the GPUs the descheduler holds for a pending pod (HAMi ignores them).
RESERVATION: Final = _ENGINE["RESERVATION_KEY"]
RESERVATION_EXPIRES: Final = _ENGINE["RESERVATION_EXPIRES_KEY"]
# hami-fast's own: written on a rejected pod when a release makes room for it (requeues it).
REQUEUED_AT: Final = _ENGINE["REQUEUED_KEY"]


def is_allocation_key(key: str) -> bool:
    """A backend's allocation annotation: NVIDIA's ALLOCATED or another vendor's `hami.io/<word>-devices-allocated`."""
    return key.startswith("hami.io/") and key.endswith("-devices-allocated")


_hami_prefix: Final = ALLOCATED.split("/", 1)[0] + "/"


def is_allocation_list(key: str) -> bool:
    """A backend's device list on a bound pod: NVIDIA's `ALLOCATED`, Hygon's `hami.io/dcu-devices-allocated`,
    Kunlunxin's `hami.io/kunlun-allocated`, ... (`uuid,type,mem,cores:` per device, `;` between containers)."""
    return key.startswith(_hami_prefix) and key.endswith("-allocated")
