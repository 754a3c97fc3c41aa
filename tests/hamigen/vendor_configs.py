"""HAMi's chart device config varied for one vendor family: its resources renamed, Hygon's
`memoryFactor` changed, Ascend's `memoryFactor`, `superPod` and `hamiVnpuCore`. The cluster and pod of a case are renamed to match, as an operator's would
be (the NVIDIA variants are test_hami_oracle_config's)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import yaml
from hypothesis import strategies as st

from hamigen.vendor_oracle import CHART_CONFIG

CONFIG_DIR = Path(tempfile.mkdtemp(prefix="hami-vendor-config-"))
atexit.register(shutil.rmtree, CONFIG_DIR, True)

# The chart config's section of each family and the resource-name keys in it.
NAME_KEYS = ("resourceCountName", "resourceMemoryName", "resourceCoreName")
SECTIONS = {
    "hygon": ("hygon", NAME_KEYS),
    "biren": ("biren", NAME_KEYS[:1]),
    "iluvatar": ("iluvatars", NAME_KEYS),
    "metax": ("metax", NAME_KEYS[:1]),
    "mthreads": ("mthreads", NAME_KEYS),
    "cambricon": ("cambricon", NAME_KEYS),
    "amd": ("amd", NAME_KEYS),
    "enflame": ("enflame", ("resourceNameGCU",)),
    "vastai": ("vastai", NAME_KEYS[:1]),
    "kunlun": ("kunlun", ("resourceCountName", "resourceVCountName", "resourceVMemoryName")),
    "neuron": ("awsneuron", ("resourceCountName", "resourceCoreName")),
    "enflame-drs": ("enflame", ("resourceNameDRSGCU", "resourceNameGCUMemory", "resourceNameGCUCore")),
    "metax-sgpu": ("metax", ("resourceVCountName", "resourceVMemoryName", "resourceVCoreName")),
    "ascend": ("vnpus", ("resourceName", "resourceMemoryName", "resourceCoreName")),
}


@st.composite
def variant(draw, family: str) -> tuple[Path, dict[str, str]]:
    """A config file varying `family`'s section, and the resource renames it makes."""
    config = yaml.safe_load(CHART_CONFIG.read_text())
    section, keys = SECTIONS[family]
    entries = config[section] if isinstance(config[section], list) else [config[section]]
    if family == "ascend":
        entries = config[section]["configs"]
    names: dict[str, str] = {}
    for entry in entries:
        for key in keys:
            if key in entry and draw(st.booleans()):
                names[entry[key]] = f"example.com/{entry.get('commonWord', family)}-{key[len('resource') :].lower()}"
                entry[key] = names[entry[key]]
    if family == "metax-sgpu":
        config["metax"]["sgpuTopologyAware"] = draw(st.booleans())
    if family == "hygon":
        config["hygon"]["memoryFactor"] = draw(st.sampled_from([1, 2, 4]))
    if family == "ascend":
        config["vnpus"]["hamiVnpuCore"] = draw(st.booleans())
        for entry in entries:
            entry["memoryFactor"] = draw(st.sampled_from([1, 1, 2]))
            entry["superPod"] = entry.get("superPod", False) != draw(st.sampled_from([False, False, True]))
    text = yaml.safe_dump(config, sort_keys=False).encode()
    path = CONFIG_DIR / f"device-config-{abs(hash(text))}.yaml"
    path.write_bytes(text)
    return path, names
