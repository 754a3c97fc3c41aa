"""Every vendor backend as HAMi v2.10.0 (commit 4707fb02) reads it: resources, node registration,
pod annotations. Read from HAMi's source (`pkg/device/<vendor>/...`), cited as file:line.

Shared by every backend:

- Colon/comma registration (`devices.go:317-381`, DecodeNodeDevices): per device
  `ID,count,devmem,devcore,type,numa,health[,index,mode]:` (7 or 9 fields), health a Go bool.
- JSON registration (`devices.go:445-449`, UnMarshalNodeDevices): a list of DeviceInfo
  (`devices.go:127-141`): `id`, `index`, `count`, `devmem`, `devcore`, `type`, `numa`, `mode`,
  `health` (absent = false), `custominfo`.
- Handshake (`devices.go:576-615`, CheckHealth): anything but `Requesting_<time>` → HAMi stamps it
  and registers; `Requesting_` younger than 60 s → registered; older → registered only while
  `status.allocatable[<count name>]` is above 0.
- Candidates for a request of type T: devices whose lowercase Type contains lowercase T
  (`sched/score.go:43-52`).
- Pod device lists (`devices.go:451-484`): `UUID,Type,Usedmem,Usedcores:` per device, `;` per
  container, under the backend's to-allocate and allocated keys; resident pods are read from every
  allocated key when they carry `hami.io/vgpu-node` (`sched/scheduler.go:144-170`,
  `devices.go:529-556`).
- UUID pinning (`devices.go:693-713`, CheckUUID): comma list, entries trimmed; empty value ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backend:
    """One of HAMi's device backends (a key of its DevicesMap)."""

    family: str  # the test's vendor name (parametrization id)
    common_word: str  # the request Type and the key of the pod's device map
    count: str
    memory: str = ""
    cores: str = ""
    registration: str = "json"  # "json", "colon", "capacity" or "drs" (Enflame DRS's capacity JSON)
    register_key: str = ""
    handshake_key: str = ""
    allocated: str = ""
    to_allocate: str = ""
    type_keys: tuple[str, ...] = ()  # use, nouse: read by HAMi's Fit
    uuid_keys: tuple[str, ...] = ()  # use, nouse
    inert_keys: tuple[str, ...] = ()  # defined by HAMi but never read by its Fit: must change nothing
    # Registered (type, devmem MiB, devcore); the last of several is a type without the vendor's word.
    models: tuple[tuple[str, int, int], ...] = ()
    extra_annotations: tuple[str, ...] = ()  # vendor keys HAMi's PatchAnnotations writes
    derived_id: str = ""  # capacity backends: the device IDs HAMi makes up, from node and index
    source: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


HYGON = Backend(
    family="hygon",
    common_word="DCU",
    count="hygon.com/dcunum",
    memory="hygon.com/dcumem",  # x memoryFactor (chart: 1)
    cores="hygon.com/dcucores",  # default 100
    registration="colon",
    register_key="hami.io/node-dcu-register",
    handshake_key="hami.io/node-handshake-dcu",
    allocated="hami.io/dcu-devices-allocated",
    to_allocate="hami.io/dcu-devices-to-allocate",
    type_keys=("hygon.com/use-dcutype", "hygon.com/nouse-dcutype"),
    uuid_keys=("hygon.com/use-gpuuuid", "hygon.com/nouse-gpuuuid"),
    models=(("DCU-Z100L", 32768, 100), ("DCU-K100_AI", 65536, 100), ("DCU", 16384, 100), ("Z100", 32768, 100)),
    source={
        "keys": "hygon/device.go:39-53,77-79",
        "registration": "hygon/device.go:131-151 (DecodeNodeDevices)",
        "requests": "hygon/device.go:168-239 (limits then requests; memory x memoryFactor; cores default 100)",
        "fit": "hygon/device.go:264-369 (standard; type via CheckType)",
    },
)

BIREN = Backend(
    family="biren",
    common_word="Biren",
    count="birentech.com/gpu",
    registration="json",
    register_key="hami.io/node-biren-register",
    handshake_key="hami.io/node-handshake-biren",
    allocated="hami.io/Biren-devices-allocated",
    to_allocate="hami.io/Biren-devices-to-allocate",
    uuid_keys=("birentech.com/use-gpuuuid", "birentech.com/nouse-gpuuuid"),
    inert_keys=("birentech.com/use-biren", "birentech.com/nouse-biren"),
    models=(("Biren-BR104P", 32768, 0), ("Biren", 65536, 0), ("BR106", 32768, 0)),
    source={
        "keys": "biren/device.go:37-44,60-62",
        "registration": "biren/device.go:71-91 (JSON; Devcore forced to 100)",
        "requests": "biren/device.go:141-165 (count only; memory 100%, cores 0)",
        "fit": "biren/device.go:190-249 (health, UUID, count, mutex; checkType ignores the type keys)",
    },
)


def iluvatar(chip: str) -> Backend:
    return Backend(
        family="iluvatar",
        common_word=chip,
        count=f"iluvatar.ai/{chip}-vgpu",
        memory=f"iluvatar.ai/{chip}.vMem",  # x256
        cores=f"iluvatar.ai/{chip}.vCore",  # default 0; webhook sets count*100 when count > 1
        registration="colon",
        register_key=f"hami.io/node-{chip}-register",
        handshake_key=f"hami.io/node-handshake-{chip}",
        allocated=f"hami.io/{chip}-devices-allocated",
        to_allocate=f"hami.io/{chip}-devices-to-allocate",
        uuid_keys=(f"hami.io/use-{chip}-uuid", f"hami.io/no-use-{chip}-uuid"),
        models=((chip, 32768, 100), (chip, 16384, 100)),
        source={
            "keys": "iluvatar/device.go:61-82 (per iluvatars[] entry; needs --enable-iluvatar)",
            "webhook": "iluvatar/device.go:92-118 (core limit count*100, env SOL_CONTINER_NAME)",
            "registration": "iluvatar/device.go:120-141 (DecodeNodeDevices)",
            "requests": "iluvatar/device.go:201-254 (memory x256, cores default 0)",
            "fit": "iluvatar/device.go:267-372 (standard)",
        },
    )


ILUVATAR_CHIPS = ("MR-V100", "MR-V50", "BI-V150", "BI-V100")  # the chart's iluvatars[]

METAX = Backend(
    derived_id="{node}-metax-{i}",
    family="metax",
    common_word="Metax-GPU",
    count="metax-tech.com/gpu",
    registration="capacity",
    allocated="hami.io/metax-gpu-devices-allocated",
    to_allocate="hami.io/metax-gpu-devices-to-allocate",
    source={
        "keys": "metax/device.go:37-42,48-56",
        "registration": "metax/device.go:67-89 (status.capacity count: <node>-metax-<i>, 65536 MiB, 100 cores)",
        "health": "metax/device.go:128-132 (capacity > 0)",
        "requests": "metax/device.go:134-154 (count; memory 100%, cores 100)",
        "fit": "metax/device.go:223-334 (standard + one device per container set, 156-166)",
        "score": "metax/device.go:168-214 (2000 - metax-tech.com/gpu.topology.losses|scores[devices])",
    },
)
METAX_TOPOLOGY = ("metax-tech.com/gpu.topology.losses", "metax-tech.com/gpu.topology.scores")

SGPU = Backend(
    family="metax-sgpu",
    common_word="Metax-SGPU",
    count="metax-tech.com/sgpu",
    memory="metax-tech.com/vmemory",  # limits only: a bare number is GiB, a unit bytes
    cores="metax-tech.com/vcore",  # limits only; default 100
    registration="sgpu",
    register_key="metax-tech.com/node-gpu-devices",
    allocated="hami.io/metax-sgpu-devices-allocated",
    to_allocate="hami.io/metax-sgpu-devices-to-allocate",
    uuid_keys=("metax-tech.com/use-gpuuuid", "metax-tech.com/nouse-gpuuuid"),
    extra_annotations=("metax-tech.com/gpu-devices-allocated",),
    source={
        "keys": "metax/sdevice.go:40-85, protocol.go:26-48",
        "webhook": "metax/sdevice.go:91-129 (app class online|offline with one device; QoS policy set or checked)",
        "registration": "metax/sdevice.go:131-140,507-527, protocol.go:112-140 (JSON cards; none: unhealthy)",
        "requests": "metax/sdevice.go:226-296 (limits only; vmemory bare = GiB, with a unit = bytes)",
        "fit": "metax/sdevice.go:332-495 (health, app class, QoS, UUID, slots, mutex, memory, cores; online first, "
        "whole cards by MetaLink zone)",
        "score": "metax/sdevice.go:298-321,597-700, score.go (online pods on the cards; MetaLink pairs; x10000)",
        "qos": "metax/qos.go, sdevice.go:153-156,529-574 (pending switches, in memory)",
    },
)
SGPU_APP_CLASS = "metax-tech.com/sgpu-app-class"
SGPU_QOS = "metax-tech.com/sgpu-qos-policy"
SGPU_TOPOLOGY = "metax-tech.com/sgpu-topology-aware"

MTHREADS = Backend(
    derived_id="{node}-mthreads-{i}",
    family="mthreads",
    common_word="Mthreads",
    count="mthreads.com/vgpu",
    memory="mthreads.com/sgpu-memory",  # x512; webhook: one of 2,4,8,16,32,64,96
    cores="mthreads.com/sgpu-core",  # divided by count
    registration="capacity",
    allocated="hami.io/mthreads-vgpu-devices-allocated",
    uuid_keys=("mthreads.ai/use-gpuuuid", "mthreads.ai/nouse-gpuuuid"),
    extra_annotations=("mthreads.com/gpu-index", "mthreads.com/predicate-node", "mthreads.com/predicate-time"),
    source={
        "keys": "mthreads/device.go:41-57,72-82 (no to-allocate written)",
        "webhook": "mthreads/device.go:94-128 (count > 0; count > 1 sets 16*count cores, 96*count memory; "
        "memory outside [2..96] slices is an error)",
        "registration": "mthreads/device.go:130-153 (capacity sgpu-core/16 devices <node>-mthreads-<i>, "
        "Count 100, memory capacity*512*16/cores)",
        "requests": "mthreads/device.go:202-264 (memory x512 / count, cores / count)",
        "annotations": "mthreads/device.go:155-177 (gpu-index, predicate-node, predicate-time = now)",
        "fit": "mthreads/device.go:289-406 (standard + same device across containers)",
    },
)

CAMBRICON = Backend(
    derived_id="{node}-cambricon-mlu-{i}",
    family="cambricon",
    common_word="MLU",
    count="cambricon.com/vmlu",
    memory="cambricon.com/mlu.smlu.vmemory",  # x256
    cores="cambricon.com/mlu.smlu.vcore",  # default 100
    registration="capacity",
    allocated="hami.io/cambricon-mlu-devices-allocated",
    to_allocate="hami.io/cambricon-mlu-devices-to-allocate",
    uuid_keys=("cambricon.com/use-gpuuuid", "cambricon.com/nouse-gpuuuid"),
    inert_keys=("cambricon.com/use-mlutype", "cambricon.com/nouse-mlutype"),
    extra_annotations=("CAMBRICON_DSMLU_ASSIGNED", "CAMBRICON_DSMLU_PROFILE"),
    source={
        "keys": "cambricon/device.go:42-61,84-94",
        "lock": "cambricon/device.go:125-153 (node annotation cambricon.com/dsmlu.lock, RFC 3339, 2 min)",
        "registration": "cambricon/device.go:209-232 (capacity vcore/100 devices <node>-cambricon-mlu-<i>, "
        "Count 100, memory capacity*256*100/vcore)",
        "requests": "cambricon/device.go:250-310 (memory x256, cores default 100)",
        "annotations": "cambricon/device.go:312-332 (CAMBRICON_DSMLU_ASSIGNED=false, PROFILE idx_cores_mem/256)",
        "fit": "cambricon/device.go:378-488 (standard + quota per device, 351-376)",
    },
)
CAMBRICON_LOCK = "cambricon.com/dsmlu.lock"

AMD = Backend(
    family="amd",
    common_word="AMD",
    count="amd.com/gpu",
    memory="amd.com/gpumem",
    cores="amd.com/gpucores",  # percent 1-100, default 100
    registration="json",
    register_key="hami.io/node-amd-register",
    allocated="hami.io/amd-devices-allocated",
    to_allocate="hami.io/amd-devices-to-allocate",
    type_keys=("amd.com/use-gputype", "amd.com/nouse-gputype"),
    uuid_keys=("amd.com/use-gpu-uuid", "amd.com/nouse-gpu-uuid"),
    inert_keys=("amd.com/use-gpuuuid",),
    # The plugin's product names; a card registered as plain "AMD" has the backend's word as its
    # type, so HAMi pads the pod's AMD list per container as it does the other backends'.
    models=(
        ("AMD-Instinct-MI300X", 196608, 304),
        ("AMD-Instinct-MI210", 65536, 104),
        ("AMD", 65536, 104),
        ("MI100", 32768, 120),
    ),
    source={
        "keys": "amd/device.go:42-53,61-72",
        "webhook": "amd/device.go:78-98 (core limit outside 1-100 is an error)",
        "registration": "amd/device.go:100-118 (JSON); health 195-207 (status.capacity amd.com/gpu > 0)",
        "requests": "amd/device.go:217-266 (limits only; memory <= 0 = whole card; cores %)",
        "fit": "amd/device.go:279-372 (type substring 165-186; cores % of CUs, min 1; entry Type = device type)",
    },
)

ENFLAME = Backend(
    derived_id="{node}-GCU-{i}",
    family="enflame",
    common_word="GCU",
    count="enflame.com/gcu",
    registration="capacity",
    allocated="hami.io/enflame-gcu-devices-allocated",
    to_allocate="hami.io/enflame-gcu-devices-to-allocate",
    source={
        "keys": "enflame/gcu.go:31-47",
        "health": "enflame/gcu.go:58-61 (capacity > 0)",
        "registration": "enflame/gcu.go:67-89 (capacity count: <node>-GCU-<i>, Count 1)",
        "requests": "enflame/gcu.go:91-111 (count; memory 100, cores 100)",
        "fit": "enflame/gcu.go:144-192 (whole cards: a used device conflicts)",
    },
)

ENFLAME_DRS = Backend(
    derived_id="{node}-enflame-drs-{i}",  # i: the device's index
    family="enflame-drs",
    common_word="Enflame",
    count="enflame.com/drs-gcu",  # a profile by its slices
    memory="enflame.com/gcu-memory",  # GB, or MiB above twice the largest profile's GB
    cores="enflame.com/gcu-core",  # percent
    registration="drs",
    register_key="enflame.com/gcu-drs-capacity",
    allocated="hami.io/enflame-vgpu-devices-allocated",
    uuid_keys=("enflame.com/use-gpuuuid", "enflame.com/nouse-gpuuuid"),
    extra_annotations=(
        "enflame.com/gcu-assigned",
        "enflame.com/gcu-assigned-time",
        "enflame.com/gcu-assigned-index",
        "enflame.com/gcu-assigned-id",
        "enflame.com/gcu-assigned-minor",
        "enflame.com/gcu-request-size",
        "assigned-containers",
    ),
    source={
        "keys": "enflame/device.go:40-62,84-107 (names default when the config leaves them out; no to-allocate)",
        "webhook": "enflame/device.go:113-177 (count > 0; memory > 0; cores in (0,100]; copied limits <-> requests)",
        "registration": "enflame/device.go:179-243 (JSON devices + profiles; any flaw drops the node's devices)",
        "requests": "enflame/device.go:321-365 (count: direct; memory/cores: by spec; MemPercentagereq 0 / -1)",
        "annotations": "enflame/device.go:245-296 (gcu-assigned*, request-size, assigned-containers)",
        "fit": "enflame/device.go:382-479, 499-641 (profile first, ModeNotFit; slots, mutex, memory, cores)",
        "usage": "enflame/device.go:371-380 (the profile's slices counted as slots within the pod)",
    },
)

VASTAI = Backend(
    family="vastai",
    common_word="Vastai",
    count="vastaitech.com/va",
    registration="json",
    register_key="hami.io/node-va-register",
    handshake_key="hami.io/node-handshake-va",
    allocated="hami.io/Vastai-devices-allocated",
    to_allocate="hami.io/Vastai-devices-to-allocate",
    uuid_keys=("vastaitech.com/use-gpuuuid", "vastaitech.com/nouse-gpuuuid"),
    inert_keys=("vastaitech.com/use-va", "vastaitech.com/nouse-va"),
    models=(("Vastai-VA1", 16384, 0), ("Vastai", 32768, 0), ("VA10", 16384, 0)),
    source={
        "keys": "vastai/device.go:38-47,57-67",
        "registration": "vastai/device.go:73-93 (JSON, Devcore forced to 100; custominfo DeviceStrategy/AIC)",
        "requests": "vastai/device.go:143-167 (count only)",
        "fit": "vastai/device.go:228-328 (die mode 389-403: every free die collected, then best AIC "
        "combination 336-374; mutex rejects a die whose card is in use)",
        "score": "vastai/device.go:181-219 (die mode: share of the largest AIC group per container)",
    },
)

# Both Kunlunxin backends honour their own UUID pins and Baidu's (kunlun/device.go:38-39).
KUNLUN_UUID_KEYS = (
    "hami.io/use-xpu-uuid",
    "hami.io/no-use-xpu-uuid",
    "baidu.com/use-gpuuuid",
    "baidu.com/nouse-gpuuuid",
)

KUNLUN = Backend(
    derived_id="{node}-kunlun-{i}",
    family="kunlun",
    common_word="kunlun",
    count="kunlunxin.com/xpu",
    registration="capacity",
    allocated="hami.io/kunlun-allocated",
    uuid_keys=KUNLUN_UUID_KEYS,
    extra_annotations=("BAIDU_COM_DEVICE_IDX",),
    source={
        "keys": "kunlun/device.go:31-54 (no to-allocate written)",
        "registration": "kunlun/device.go:65-92 (capacity count: <node>-kunlun-<i>, 98304 MiB, Count 100, "
        "NUMA 1 from count/2)",
        "requests": "kunlun/device.go:135-157 (count; memory 100%, cores 0)",
        "annotations": "kunlun/device.go:94-110 (BAIDU_COM_DEVICE_IDX: the last container's indexes)",
        "fit": "kunlun/device.go:188-232, topo.go:225-272 (unused cards only; wings by position, links by index)",
        "score": "kunlun/device.go:159-181, topo.go:63-96 (bubbles before and after, 0-3000)",
    },
)

XPU = Backend(
    family="kunlun",
    common_word="XPU",
    count="kunlunxin.com/vxpu",
    memory="kunlunxin.com/vxpu-memory",  # rounded to 24576, 49152 or 98304
    registration="json",
    register_key="hami.io/node-register-xpu",
    handshake_key="hami.io/node-handshake-xpu",
    allocated="hami.io/xpu-devices-allocated",
    to_allocate="hami.io/xpu-devices-to-allocate",
    uuid_keys=KUNLUN_UUID_KEYS,
    models=(("XPU", 98304, 100), ("XPU", 49152, 100), ("P800-OAM", 98304, 100)),
    source={
        "keys": "kunlun/vdevice.go:35-61",
        "webhook": "kunlun/vdevice.go:77-95 (memory limit rounded, set in limits and requests)",
        "registration": "kunlun/vdevice.go:105-124 (JSON)",
        "requests": "kunlun/vdevice.go:184-225 (memory rounded; cores memory*100/98304; none: whole card)",
        "fit": "kunlun/vdevice.go:250-318 (FitVXPU: free memory, one slice size per card; mutex; same graph)",
    },
)

NEURON = Backend(
    derived_id="{node}-AWSNeuron-{i}",
    family="neuron",
    common_word="AWSNeuron",
    count="aws.amazon.com/neuron",
    cores="aws.amazon.com/neuroncore",
    registration="capacity",
    allocated="hami.io/aws-neuron-devices-allocated",
    uuid_keys=("aws.amazon.com/use-neuron-uuid", "aws.amazon.com/nouse-neuron-uuid"),
    extra_annotations=(
        "AWS_NEURON_IDS",
        "NEURON_RESOURCE_TYPE",
        "NEURON_ALLOCATED",
        "NEURON_ALLOC_TIME",
        "aws.amazon.com/predicate-node",
    ),
    source={
        "keys": "awsneuron/device.go:36-60,67-77 (no to-allocate written)",
        "webhook": "awsneuron/device.go:83-105 (either resource, limits then requests: an integer 1..MaxInt32, "
        "cores split by min(cores per device, 2), else an error)",
        "registration": "awsneuron/device.go:155-199 (capacity count: <node>-AWSNeuron-<i>, Count and core "
        "bitmask from core capacity / count of the FIRST node registered; label node.kubernetes.io/instance-type)",
        "requests": "awsneuron/device.go:296-347 (devices: Coresreq = cores per device; cores: split)",
        "annotations": "awsneuron/device.go:201-241 (AWS_NEURON_IDS: indexes for count limits, else cores "
        "per device x index (+1) by core bits 1 and 2, over the containers cumulatively)",
        "fit": "awsneuron/device.go:355-541 (several: a free run of sorted positions mapped to device indexes, "
        "any run on inf* types else 1/4/8/16 aligned; one: free core bits; awsusageinfo counter)",
    },
)
# The instance types the label may carry; HAMi only asks whether it contains "inf" or "Inf".
NEURON_INSTANCE_TYPES = ("inf1.xlarge", "inf2.48xlarge", "Inf2", "trn1.32xlarge", "trn2.48xlarge", "trn1n.32xlarge")


def ascend(chip: str, devmem: int, aicore: int) -> Backend:
    return Backend(
        family="ascend",
        common_word=chip,
        count=f"huawei.com/{chip}",
        memory=f"huawei.com/{chip}-memory",  # x memoryFactor (chart: 1, or unset)
        cores=f"huawei.com/{chip}-core",  # default 0; only in the soft split (hami-core)
        registration="json",
        register_key=f"hami.io/node-register-{chip}",
        handshake_key=f"hami.io/node-handshake-{chip}",
        allocated=f"hami.io/{chip}-devices-allocated",
        to_allocate=f"hami.io/{chip}-devices-to-allocate",
        uuid_keys=(f"hami.io/use-{chip}-uuid", f"hami.io/no-use-{chip}-uuid"),
        # The plugin writes its CommonWord as the type; the last is a type HAMi never offers.
        models=((chip, devmem, aicore), (chip, devmem, 100), ("Ascend", devmem, aicore)),
        extra_annotations=(f"huawei.com/{chip}", "predicate-time"),
        source={
            "keys": "ascend/device.go:83-110 (per vnpus.configs[] chip; needs --enable-ascend)",
            "webhook": "ascend/device.go:119-196 (910C superPod 1 -> 2, odd refused; -core only in hami-core; "
            "memory rounded to the smallest template, else memoryAllocatable, else refused; several "
            "devices need the whole card)",
            "registration": "ascend/device.go:198-216 (JSON; custominfo.NetworkID); plugin: "
            "ascend-device-plugin internal/server/register.go (index i, type = CommonWord, NetworkID "
            "0 for idx <= 3 else 1, 0 on the 910C; node annotation hami-vnpu-core true/false)",
            "requests": "ascend/device.go:327-412 (memory x memoryFactor; cores default 0)",
            "annotations": "ascend/device.go:218-258 (huawei.com/<chip> [{UUID,temp,memory,core}], predicate-time)",
            "fit": "ascend/device.go:503-665 (ModeNotFit; soft split counts cores of 100; Ascend910* with "
            "NetworkIDs: every card collected, largest network groups first, 682-733; 910C: whole cards "
            "of two, 735-800)",
            "score": "ascend/device.go:414-456 (share of the largest network group per container, x10)",
        },
    )


# The chart's vnpus.configs[]: chip, memory the plugin registers, AI cores.
ASCEND_CHIPS = (
    ("Ascend910A", 32768, 30),
    ("Ascend910B2", 65536, 24),
    ("Ascend910B3", 65536, 20),
    ("Ascend910B4-1", 65536, 20),
    ("Ascend910B4", 32768, 20),
    ("Ascend310P", 21527, 8),
    ("Ascend910C", 65536, 20),
)
ASCEND_MODE = "huawei.com/vnpu-mode"
ASCEND_NODE_MODE = "hami-vnpu-core"

NVIDIA = Backend(
    family="nvidia",
    common_word="NVIDIA",
    count="nvidia.com/gpu",
    memory="nvidia.com/gpumem",
    cores="nvidia.com/gpucores",
    registration="json",
    register_key="hami.io/node-nvidia-register",
    handshake_key="hami.io/node-handshake",
    allocated="hami.io/vgpu-devices-allocated",
    to_allocate="hami.io/vgpu-devices-to-allocate",
    source={"all": "tests/hamigen/strategies.py (the NVIDIA generator)"},
)

FAMILIES: dict[str, tuple[Backend, ...]] = {
    "hygon": (HYGON,),
    "biren": (BIREN,),
    "iluvatar": tuple(iluvatar(c) for c in ILUVATAR_CHIPS),
    "metax": (METAX,),
    "mthreads": (MTHREADS,),
    "cambricon": (CAMBRICON,),
    "amd": (AMD,),
    "enflame": (ENFLAME,),
    "vastai": (VASTAI,),
    "ascend": tuple(ascend(*c) for c in ASCEND_CHIPS),
    "kunlun": (KUNLUN, XPU),
    "neuron": (NEURON,),
    "enflame-drs": (ENFLAME_DRS,),
    "metax-sgpu": (SGPU,),
    "nvidia": (NVIDIA,),
}
VENDORS = tuple(FAMILIES)

# Annotations HAMi writes that hold a time: compared for presence only.
TIME_ANNOTATIONS = (
    "hami.io/vgpu-time",
    "mthreads.com/predicate-time",
    "predicate-time",
    "NEURON_ALLOC_TIME",
    "enflame.com/gcu-assigned-time",
    "metax-tech.com/predicate-time",
)
