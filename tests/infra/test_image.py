"""The container image of `make image`, smoke-tested from its OCI archive.

podman run is refused on these machines (setting rlimits is not allowed), so the image's root
filesystem runs under `buildah run --isolation chroot`: the image's own files, user, environment
and entrypoint, with the host's network. Set HAMI_FAST_IMAGE to the archive (.ci/run does, after
`make image`); without it the smoke tests skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = os.environ.get("HAMI_FAST_IMAGE", "")


def cargo_version() -> str:
    return re.search(r'^version = "(.+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)


def test_the_charts_default_image_is_the_one_make_image_builds():
    script = (ROOT / "scripts" / "build-image.sh").read_text()
    assert 'IMAGE="${IMAGE:-localhost/hami-fast:v$VERSION}"' in script
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "hami-fast" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "hami-fast" / "values.yaml").read_text())
    image = values["scheduler"]["extender"]["image"]
    assert chart["appVersion"] == cargo_version()
    # The chart's tag defaults to v<appVersion> (hami-fast.appTag).
    assert (
        f"{image['registry']}/{image['repository']}:v{chart['appVersion']}" == f"localhost/hami-fast:v{cargo_version()}"
    )
    assert image["tag"] == "" and values["global"]["imageTag"] == ""


needs_image = pytest.mark.skipif(
    not ARCHIVE or not shutil.which("buildah"),
    reason="no image: set HAMI_FAST_IMAGE=dist/hami-fast-v<version>.oci.tar after `make image` (buildah needed)",
)


def buildah(*args: str, timeout: float = 120) -> str:
    proc = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def container():
    name = f"hami-fast-smoke-{os.getpid()}"
    buildah("from", "--quiet", "--name", name, f"oci-archive:{ARCHIVE}")
    yield name
    subprocess.run(["buildah", "rm", name], capture_output=True, timeout=60)


def run_in(container: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["buildah", "run", "--isolation", "chroot", container, "--", *argv], capture_output=True, text=True, timeout=120
    )


@needs_image
def test_archive_names_the_image_the_chart_points_at():
    with tarfile.open(ARCHIVE) as tar:
        index = json.load(tar.extractfile("index.json"))
    names = [m.get("annotations", {}).get("org.opencontainers.image.ref.name", "") for m in index["manifests"]]
    assert f"localhost/hami-fast:v{cargo_version()}" in names or f"v{cargo_version()}" in names, names


@needs_image
def test_version_inside_the_image(container):
    proc = run_in(container, "hami-fast", "--version")
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"hami-fast \S+ \(engine hami-core \S+, Python 3\.11\.\d+\)\n", proc.stdout)


@needs_image
def test_entrypoint_user_and_no_build_tools(container):
    config = json.loads(buildah("inspect", "--type", "container", container))["OCIv1"]["config"]
    assert config["Entrypoint"] == ["hami-fast"] and config["User"] == "65532:65532"
    assert run_in(container, "id", "-u").stdout.strip() == "65532"
    tools = run_in(container, "sh", "-c", "for t in gcc cc make pip pip3 cargo; do command -v $t; done; true")
    assert tools.stdout == "", tools.stdout
    assert run_in(container, "python3", "-c", "import pip").returncode != 0, "pip is left out of the image"
    assert run_in(container, "kubectl-hami", "--help").returncode == 0


@needs_image
def test_the_gpu_maps_page_assets_are_inside_the_image(container):
    check = (
        "from hami_fast.descheduler.gpumap import page_template; page = page_template(); "
        "print('{{style}}' not in page and '{{script}}' not in page and 'getElementById' in page)"
    )
    proc = run_in(container, "python3", "-c", check)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True", proc.stdout


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@needs_image
def test_serve_inside_the_image_answers_healthz_and_filter(container):
    from serving import free_port

    port = free_port()
    proc = subprocess.Popen(
        ["buildah", "run", "--isolation", "chroot", container, "--"]
        + ["hami-fast", "serve", "--demo", f"--http_bind=127.0.0.1:{port}", "--metrics-bind-address="],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "no /healthz within 60 s"
                time.sleep(0.2)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "smoke", "namespace": "default", "uid": "uid-smoke"},
            "spec": {
                "containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "3000"}}}
                ]
            },
        }
        result = _post(f"http://127.0.0.1:{port}/filter", {"Pod": pod, "Nodes": None, "NodeNames": ["demo-gpu-001"]})
        assert result["NodeNames"] == ["demo-gpu-001"] and result["Error"] == ""
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stderr.close()
