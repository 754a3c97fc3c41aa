"""hami_fast against HAMi v2.10.0's own code under device configs other than the chart's default.

Each case is a random cluster and pod (tests/hamigen/strategies.py) and a random variant of HAMi's
chart device config: NVIDIA's resources renamed or left out, `memoryFactor`, `defaultMemory`,
`defaultCores`, `defaultGPUNum`, `gpuCorePolicy`, `runtimeClassName`, `overwriteEnv`. The cluster's
objects name the renamed resources. HAMi starts as its binary does in production
(`--device-config-file`), hami_fast's engine gets the same file through `_native.load_device_config`,
and the comparison is test_hami_oracle's: admission and patch, verdict, node, reasons, scores, devices.

HAMI_ORACLE_CONFIG_BATCHES batches of HAMI_ORACLE_BATCH cases (CI: 100 x 8); seeded as
test_hami_oracle is (HAMI_ORACLE_SEED=random explores).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hami_fast import _native
from hamigen import oracle, seeding
from hamigen.renaming import renamed
from hamigen.strategies import cases
from hypothesis import given
from hypothesis import strategies as st
from test_hami_oracle import check_batch

CHART_CONFIG = Path(oracle.REPO.parent / "shared" / "tools" / "hami-scheduler" / "device-config.yaml")
pytestmark = [
    pytest.mark.skipif(oracle.find_oracle() is None, reason=oracle.SKIP_REASON),
    pytest.mark.skipif(not CHART_CONFIG.exists(), reason=f"HAMi's chart device config not found at {CHART_CONFIG}"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

BATCH = int(os.environ.get("HAMI_ORACLE_BATCH", "8"))
BATCHES = int(os.environ.get("HAMI_ORACLE_CONFIG_BATCHES", "100"))
CONFIG_DIR = Path(tempfile.mkdtemp(prefix="hami-device-config-"))
atexit.register(shutil.rmtree, CONFIG_DIR, True)

# NVIDIA's resource keys in the chart's config, and what a variant may call them instead.
RESOURCE_KEYS = {
    "resourceCountName": ("nvidia.com/gpu", "example.com/vgpu"),
    "resourceMemoryName": ("nvidia.com/gpumem", "example.com/vgpu-memory"),
    "resourceMemoryPercentageName": ("nvidia.com/gpumem-percentage", "example.com/vgpu-memory-percentage"),
    "resourceCoreName": ("nvidia.com/gpucores", "example.com/vgpu-cores"),
    "resourcePriorityName": ("nvidia.com/priority", "example.com/vgpu-priority"),
}


@st.composite
def nvidia_variants(draw) -> dict[str, Any]:
    """The `nvidia:` settings a variant changes; a resource key mapped to None is left out."""
    out: dict[str, Any] = {}
    for key, (chart, other) in RESOURCE_KEYS.items():
        out[key] = draw(st.sampled_from([chart, chart, other, None] if key != "resourceCountName" else [chart, other]))
    out["memoryFactor"] = draw(st.sampled_from([0, 1, 1, 2, 4]))
    out["defaultMemory"] = draw(st.sampled_from([0, 0, 1000, 3000]))
    out["defaultCores"] = draw(st.sampled_from([0, 0, 20, 50, 100]))
    out["defaultGPUNum"] = draw(st.sampled_from([1, 1, 0, 2]))
    out["gpuCorePolicy"] = draw(st.sampled_from(["default", "force", "disable"]))
    out["runtimeClassName"] = draw(st.sampled_from(["", "", "nvidia"]))
    out["overwriteEnv"] = draw(st.booleans())
    return out


def config_file(variant: dict[str, Any]) -> tuple[Path, dict[str, str]]:
    """HAMi's chart config with the variant applied, written to a file; the renames it makes."""
    config = yaml.safe_load(CHART_CONFIG.read_text())
    nvidia = config["nvidia"]
    names = {}
    for key, value in variant.items():
        if key in RESOURCE_KEYS and value is None:
            nvidia.pop(key, None)
            continue
        if key in RESOURCE_KEYS and value != nvidia[key]:
            names[nvidia[key]] = value
        nvidia[key] = value
    text = yaml.safe_dump(config, sort_keys=False).encode()
    path = CONFIG_DIR / f"device-config-{abs(hash(text))}.yaml"
    path.write_bytes(text)
    return path, names


@st.composite
def config_cases(draw) -> dict[str, Any]:
    case = draw(cases())
    path, names = config_file(draw(nvidia_variants()))
    case = {**case, "items": renamed(case["items"], names), "pod": renamed(case["pod"], names)}
    device_config = orjson.loads(_native.load_device_config(path.read_bytes(), str(path)))
    case["settings"] = {"device_config": device_config}
    case["hami_args"] = f"--device-config-file={path}"
    case["count_name"] = device_config["nvidia"]["resourceCountName"]
    return case


@seeding.seeded_batches(BATCHES)
@given(st.lists(config_cases(), min_size=BATCH, max_size=BATCH))
def test_random_device_configs_match_hami(batch):
    check_batch(batch)


def test_a_renamed_count_resource_is_what_hami_schedules():
    """A pod asking the chart's `nvidia.com/gpu` under a config that renamed it asks for nothing."""
    path, names = config_file({"resourceCountName": "example.com/vgpu"})
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "node-0",
            "annotations": {
                "hami.io/node-nvidia-register": '[{"id":"GPU-0","count":10,"devmem":32768,"devcore":100,'
                '"type":"NVIDIA-Tesla V100","numa":0,"mode":"hami-core","health":true}]',
                "hami.io/node-handshake": "Reported 2026-12-02 10:00:00",
            },
        },
        "status": {"allocatable": {"example.com/vgpu": "10"}},
    }
    settings = {"device_config": orjson.loads(_native.load_device_config(path.read_bytes(), str(path)))}
    for resource, scheduled in (("example.com/vgpu", True), ("nvidia.com/gpu", False)):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {resource: "1"}}}]},
        }
        batch = [{"items": [node], "pod": pod, "node_policy": "binpack", "gpu_policy": "spread"}]
        batch[0].update(settings=settings, hami_args=f"--device-config-file={path}")
        check_batch(batch)
        hami = oracle.run([node], pod, "binpack", "spread", hami_args=f"--device-config-file={path}")
        assert bool(hami["annotations"].get("hami.io/vgpu-devices-allocated")) is scheduled, (resource, hami)
