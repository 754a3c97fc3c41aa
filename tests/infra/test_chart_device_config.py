"""The chart's device config (HAMi's format): the ConfigMap it renders, or an existing one it mounts,
the extender's and descheduler's flags and mounts, and the resources kube-scheduler leaves to the
extender. Compared with HAMi's own chart where ../shared has it (HAMi's default device config and
its rendered objects); those comparisons skip with a message where ../shared is absent."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import (
    CHART,
    container,
    device_config_text,
    find,
    helm,
    needs_helm,
    one,
    render,
    scheduler_config,
    set_args,
    with_local_device_config,
)

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[2].parent / "shared")
HAMI_DEFAULT_CONFIG = SHARED / "tools" / "hami-scheduler" / "device-config.yaml"
HAMI_CHART_OBJECTS = SHARED / "tools" / "hami-scheduler" / "hami-chart-objects.yaml"
SCHEDULER, DESCHEDULER, DEVICE_CM = (
    "hf-hami-fast-scheduler",
    "hf-hami-fast-descheduler",
    "hf-hami-fast-scheduler-device",
)
MOUNTED = "/device-config/device-config.yaml"
VENDOR_SECTIONS = {
    *("nvidia", "cambricon", "hygon", "metax", "enflame", "mthreads", "iluvatars"),
    *("kunlun", "awsneuron", "amd", "vastai", "biren", "vnpus"),
}
# HAMi chart's values.yaml: devices.ascend.customresources and devices.iluvatar.customresources.
HAMI_ASCEND_RESOURCES = {
    f"huawei.com/Ascend{chip}{suffix}"
    for chip in ("910A", "910B2", "910B3", "910B4", "910B4-1", "310P", "910C")
    for suffix in ("", "-memory", "-core")
}
HAMI_ILUVATAR_RESOURCES = {
    f"iluvatar.ai/{chip}{suffix}"
    for chip in ("BI-V100", "BI-V150", "MR-V100", "MR-V50")
    for suffix in ("-vgpu", ".vCore", ".vMem")
}
OLD_NVIDIA_FLAGS = ("--resource-", "--default-mem", "--default-cores", "--default-gpu-num", "--gpu-core-policy")

pytestmark = needs_helm


def shared_file(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared not mounted): nothing of HAMi's to compare with")
    return path


def device_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(objs, "ConfigMap", DEVICE_CM)["data"]["device-config.yaml"])


def managed(objs: list[dict[str, Any]]) -> list[str]:
    (ext,) = scheduler_config(objs)["extenders"]
    assert all(r["ignoredByScheduler"] is True for r in ext["managedResources"])
    return [r["name"] for r in ext["managedResources"]]


def pod(objs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    return one(objs, "Deployment", deployment)["spec"]["template"]


def hami_managed_resources() -> list[str]:
    objs = [d for d in yaml.safe_load_all(shared_file(HAMI_CHART_OBJECTS).read_text()) if d]
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "hami-scheduler"]
    (ext,) = yaml.safe_load(cm["data"]["config.yaml"])["extenders"]
    return [r["name"] for r in ext["managedResources"]]


# ---- the rendered ConfigMap ----------------------------------------------------------------------


def test_the_default_device_config_is_hamis():
    rendered = device_config(render())
    assert rendered == yaml.safe_load(shared_file(HAMI_DEFAULT_CONFIG).read_text())


def test_the_default_device_config_has_every_vendor_section():
    cm = one(render(), "ConfigMap", DEVICE_CM)
    assert list(cm["data"]) == ["device-config.yaml"]  # HAMi's key
    config = yaml.safe_load(cm["data"]["device-config.yaml"])
    assert set(config) == VENDOR_SECTIONS and next(iter(config)) == "nvidia"
    assert len(config["nvidia"]["migProfileAllowlist"]) == 9
    assert [c["commonWord"] for c in config["iluvatars"]] == ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
    chips = config["vnpus"]["configs"]
    assert [c["commonWord"] for c in chips][-1] == "Ascend910C" and len(chips) == 7
    assert all(c["templates"] and c["resourceName"] == f"huawei.com/{c['commonWord']}" for c in chips)


def test_hamis_values_shape_the_device_config():
    """The values a HAMi values file carries land where HAMi's chart puts them."""
    hami_values = {
        "resourceName": "nvidia.com/vgpu",
        "mluResourceName": "cambricon.com/mlu",
        "dcuResourceMem": "hygon.com/dcu-memory",
        "metaxsGPUTopologyAware": "true",
        "enflameResourceNameGCUCore": "enflame.com/core",
        "kunlunResourceVCountName": "kunlunxin.com/vxpu2",
        "vastaiResourceName": "vastaitech.com/va2",
        "birenResourceName": "birentech.com/gpu2",
        "scheduler": {"overwriteEnv": "true"},
        "devicePlugin": {"deviceSplitCount": 20, "runtimeClassName": "nvidia", "enableNumaTopology": True},
        "devices": {
            "nvidia": {"gpuCorePolicy": "force", "libCudaLogLevel": 3},
            "ascend": {"runtimeClassName": "ascend", "hamiVnpuCore": True},
        },
    }
    config = device_config(render(hami_values))
    nvidia = config["nvidia"]
    assert nvidia["resourceCountName"] == "nvidia.com/vgpu" and nvidia["overwriteEnv"] is True
    assert nvidia["deviceSplitCount"] == 20 and nvidia["runtimeClassName"] == "nvidia"
    assert nvidia["enableNumaTopology"] is True
    assert nvidia["gpuCorePolicy"] == "force" and nvidia["libCudaLogLevel"] == 3
    assert config["cambricon"]["resourceCountName"] == "cambricon.com/mlu"
    assert config["hygon"]["resourceMemoryName"] == "hygon.com/dcu-memory"
    assert config["metax"]["sgpuTopologyAware"] is True
    assert config["enflame"]["resourceNameGCUCore"] == "enflame.com/core"
    assert config["kunlun"]["resourceVCountName"] == "kunlunxin.com/vxpu2"
    assert config["vastai"] == {"resourceCountName": "vastaitech.com/va2"}
    assert config["biren"] == {"resourceCountName": "birentech.com/gpu2"}
    assert config["vnpus"]["hamiVnpuCore"] is True
    assert {(c["runtimeClassName"], c["overwriteEnv"]) for c in config["vnpus"]["configs"]} == {("ascend", True)}


def test_a_values_override_shows_in_the_config_and_in_managed_resources():
    objs = render(
        {
            "resourceName": "example.com/vgpu",
            "mluResourceName": "example.com/mlu",
            "devices": {"nvidia": {"memoryFactor": 2, "defaultMemory": 1024, "defaultCores": 30, "defaultGPUNum": 2}},
        }
    )
    nvidia = device_config(objs)["nvidia"]
    assert nvidia["memoryFactor"] == 2 and nvidia["resourceCountName"] == "example.com/vgpu"
    assert (nvidia["defaultMemory"], nvidia["defaultCores"], nvidia["defaultGPUNum"]) == (1024, 30, 2)
    names = managed(objs)
    assert names[0] == "example.com/vgpu" and "example.com/mlu" in names
    assert "nvidia.com/gpu" not in names and "cambricon.com/vmlu" not in names


def test_a_changed_config_restarts_the_pods():
    def checksum(values):
        objs = render({"descheduler": {"enabled": True}, **values})
        sums = {pod(objs, d)["metadata"]["annotations"]["checksum/device-config"] for d in (SCHEDULER, DESCHEDULER)}
        assert len(sums) == 1
        return sums.pop()

    assert checksum({}) != checksum({"devices": {"nvidia": {"memoryFactor": 2}}})


def test_the_whole_config_can_be_given_as_content():
    """HAMi's device-config.content: the file as given; kube-scheduler's resources follow it."""
    content = (
        "nvidia:\n  resourceCountName: example.com/gpu\n  resourceMemoryName: example.com/mem\n  memoryFactor: 4\n"
    )
    objs = render({"device-config": {"content": content}})
    assert one(objs, "ConfigMap", DEVICE_CM)["data"]["device-config.yaml"] == content.rstrip("\n")
    assert managed(objs) == ["example.com/gpu", "example.com/mem"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"device-config": {"content": "nvidia: [\n"}}, "device-config.content: not a YAML mapping"),
        ({"device-config": {"content": "- nvidia\n"}}, "device-config.content: not a YAML mapping"),
        (
            {"device-config": {"content": "nvidia: {}\n"}, "devices": {"existingConfigMap": "hami-scheduler-device"}},
            "devices.existingConfigMap and device-config.content are both set",
        ),
    ],
)
def test_a_bad_device_config_source_fails_with_one_clear_line(values, message):
    proc = helm("template", "hf", str(CHART), "--kube-version", "1.37.2", *set_args(values), check=False)
    assert proc.returncode != 0
    assert message in proc.stderr.splitlines()[0], proc.stderr


@pytest.mark.parametrize(
    "bad",
    [
        {"devices": {"existingConfigMap": "Hami_Device"}},
        {"devices": {"nvidia": {"memoryFactor": 0}}},
        {"metaxsGPUTopologyAware": "yes"},
        {"mluResourceName": "cambricon.com/v mlu"},
        {"devices": {"amd": {"customresources": ["amd.com/gpu count"]}}},
    ],
)
def test_the_values_schema_rejects_bad_device_values(bad):
    proc = helm("template", "hf", str(CHART), "--kube-version", "1.37.2", *set_args(bad), check=False)
    assert proc.returncode != 0, f"accepted {bad}"
    assert "values don't meet the specifications of the schema" in proc.stderr, proc.stderr


# ---- an existing ConfigMap (switching over from HAMi) -------------------------------------------


def test_an_existing_configmap_is_mounted_instead_of_one_of_the_charts():
    objs = render(
        {
            "devices": {"existingConfigMap": "hami-scheduler-device", "existingConfigMapKey": "custom.yaml"},
            "descheduler": {"enabled": True},
        }
    )
    assert not [o for o in find(objs, "ConfigMap") if "device" in o["metadata"]["name"]]
    for deployment in (SCHEDULER, DESCHEDULER):
        spec = pod(objs, deployment)["spec"]
        (volume,) = [v for v in spec["volumes"] if v["name"] == "device-config"]
        assert volume["configMap"] == {
            "name": "hami-scheduler-device",
            "items": [{"key": "custom.yaml", "path": "device-config.yaml"}],
        }
    # kube-scheduler's resources: the values' ones (the ConfigMap is not readable at render time)
    assert managed(objs) == managed(render())


# ---- the pods: mount and flags --------------------------------------------------------------------


@pytest.mark.parametrize("values", [{}, {"devices": {"existingConfigMap": "hami-scheduler-device"}}])
def test_both_deployments_mount_the_config_where_the_flag_points(values):
    objs = render({"descheduler": {"enabled": True}, **values})
    for deployment, name in ((SCHEDULER, "vgpu-scheduler-extender"), (DESCHEDULER, "descheduler")):
        c = container(objs, deployment, name)
        assert f"--device-config-file={MOUNTED}" in c["args"]
        (mount,) = [m for m in c["volumeMounts"] if m["name"] == "device-config"]
        assert mount["readOnly"] is True
        (volume,) = [v for v in pod(objs, deployment)["spec"]["volumes"] if v["name"] == "device-config"]
        (item,) = volume["configMap"]["items"]
        assert f"{mount['mountPath']}/{item['path']}" == MOUNTED
        assert volume["configMap"]["name"] == values.get("devices", {}).get("existingConfigMap", DEVICE_CM)
        assert not [a for a in c["args"] if a.startswith(OLD_NVIDIA_FLAGS)], "the file carries NVIDIA's settings"


@pytest.mark.parametrize(("ascend", "iluvatar"), [(False, False), (True, False), (False, True), (True, True)])
def test_ascend_and_iluvatar_follow_their_values(ascend, iluvatar):
    objs = render(
        {
            "devices": {"ascend": {"enabled": ascend}, "iluvatar": {"enabled": iluvatar}},
            "descheduler": {"enabled": True},
        }
    )
    for deployment, name in ((SCHEDULER, "vgpu-scheduler-extender"), (DESCHEDULER, "descheduler")):
        args = container(objs, deployment, name)["args"]
        assert f"--enable-ascend={str(ascend).lower()}" in args
        assert f"--enable-iluvatar={str(iluvatar).lower()}" in args
    config = device_config(objs)
    ascend_names = {
        c[k] for c in config["vnpus"]["configs"] for k in ("resourceName", "resourceMemoryName", "resourceCoreName")
    }
    iluvatar_names = {
        c[k] for c in config["iluvatars"] for k in ("resourceCountName", "resourceMemoryName", "resourceCoreName")
    }
    assert ascend_names == HAMI_ASCEND_RESOURCES and iluvatar_names == HAMI_ILUVATAR_RESOURCES
    names = set(managed(objs))
    assert ascend_names & names == (ascend_names if ascend else set())
    assert iluvatar_names & names == (iluvatar_names if iluvatar else set())


# ---- kube-scheduler's managedResources -----------------------------------------------------------


def test_managed_resources_are_hamis_by_default():
    assert managed(render()) == hami_managed_resources()


def test_enabled_ascend_and_iluvatar_add_hamis_customresources():
    """HAMi's chart adds devices.{ascend,iluvatar}.customresources (its values.yaml) when enabled."""
    names = managed(render({"devices": {"ascend": {"enabled": True}, "iluvatar": {"enabled": True}}}))
    assert set(names) == set(managed(render())) | HAMI_ASCEND_RESOURCES | HAMI_ILUVATAR_RESOURCES


def test_vendor_switches_and_customresources_shape_managed_resources():
    default = managed(render())
    objs = render(
        {
            "devices": {
                "mthreads": {"enabled": False},
                "biren": {"enabled": False},
                "amd": {"customresources": ["amd.com/gpu", "amd.com/extra"]},
                "kunlun": {"enabled": False, "customresources": ["kunlunxin.com/ignored"]},
            },
            "scheduler": {"extender": {"extraManagedResources": ["example.com/vgpu"]}},
        }
    )
    names = managed(objs)
    assert len(names) == len(set(names))
    gone = {"mthreads.com/vgpu", "birentech.com/gpu", "kunlunxin.com/xpu", "kunlunxin.com/vxpu"}
    assert set(names) == (set(default) - gone - {"kunlunxin.com/vxpu-memory"}) | {"amd.com/extra", "example.com/vgpu"}


# ---- hami-fast reads what the chart mounts -------------------------------------------------------


def _parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    try:
        if command == "serve":
            from hami_fast import config as module
        else:
            from hami_fast.descheduler import cli as module
    except ImportError:
        pytest.skip("hami_fast is not importable (make install)")
    module.add_arguments(parser)
    return parser


@pytest.mark.parametrize(
    ("command", "deployment", "name"),
    [("serve", SCHEDULER, "vgpu-scheduler-extender"), ("descheduler", DESCHEDULER, "descheduler")],
)
def test_hami_fast_takes_the_flags_and_the_rendered_file(command, deployment, name, tmp_path):
    parser = _parser(command)
    objs = render({"descheduler": {"enabled": True}, "devices": {"ascend": {"enabled": True}}})
    args = with_local_device_config(container(objs, deployment, name)["args"], device_config_text(objs), tmp_path)
    parsed = vars(parser.parse_args(args))
    assert str(tmp_path / "device-config.yaml") in parsed.values()
    if command == "serve":
        from hami_fast import config as hf_config

        hf_config.load(argparse.Namespace(**parsed), environ={})
