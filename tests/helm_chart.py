"""Rendering the Helm chart for tests: helm is looked up as $HELM, then the cache
scripts/install-helm.sh fills, then PATH; without it the tests that need it skip and say how to get it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "hami-fast"
NS = "hami-system"
HELM_VERSION = "v3.22.0"  # keep in step with scripts/install-helm.sh


def _find_helm() -> str | None:
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    cache = Path(os.environ.get("HAMI_FAST_CACHE", Path.home() / ".cache" / "hami-fast"))
    cached = cache / "bin" / f"helm-{HELM_VERSION}" / "helm"
    if cached.is_file() and os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which("helm")


HELM = _find_helm()
needs_helm = pytest.mark.skipif(
    HELM is None,
    reason=f"helm not found: run scripts/install-helm.sh (builds helm {HELM_VERSION} with Go into ~/.cache/hami-fast) or set HELM",
)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    proc = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def set_args(values: dict[str, Any]) -> list[str]:
    """--set-json flags for a nested dict of values (exact JSON types, no --set string guessing)."""
    out: list[str] = []

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict) and v:
            for k, sub in v.items():
                walk(f"{prefix}.{k}" if prefix else k, sub)
        else:
            out.extend(["--set-json", f"{prefix}={json.dumps(v)}"])

    walk("", values)
    return out


_render_cache: dict[tuple[str, str], list[dict[str, Any]]] = {}


def render(
    values: dict[str, Any] | None = None, kube_version: str = "1.37.2", release: str = "hf"
) -> list[dict[str, Any]]:
    key = (json.dumps(values or {}, sort_keys=True), kube_version + release)
    if key not in _render_cache:
        proc = helm(
            "template", release, str(CHART), "--namespace", NS, "--kube-version", kube_version, *set_args(values or {})
        )
        _render_cache[key] = [d for d in yaml.safe_load_all(proc.stdout) if d]
    return _render_cache[key]


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def scheduler_config(objs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = one(objs, "ConfigMap", "hf-hami-fast-scheduler")
    return yaml.safe_load(cm["data"]["config.yaml"])


def container(objs: list[dict[str, Any]], deployment: str, name: str) -> dict[str, Any]:
    dep = one(objs, "Deployment", deployment)
    (c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


# ---- a pod's flags run here: the mounted device config replaced by a local copy -----------------


def device_config_text(objs: list[dict[str, Any]]) -> str:
    """The device config the chart rendered (the default one when it mounts an existing ConfigMap)."""
    found = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-scheduler-device")]
    (cm,) = found or [one(render(), "ConfigMap", "hf-hami-fast-scheduler-device")]
    return cm["data"]["device-config.yaml"]


def with_local_device_config(args: list[str], text: str, directory: Path) -> list[str]:
    """The flags with --device-config-file pointing at `text` written under `directory`."""
    path = directory / "device-config.yaml"
    path.write_text(text)
    return [f"--device-config-file={path}" if a.startswith("--device-config-file=") else a for a in args]
