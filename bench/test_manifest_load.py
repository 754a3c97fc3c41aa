"""Loading a `kubectl get nodes,pods -A -o yaml` snapshot side by side: the native YAML reader that
`hami-fast explain/plan/serve --snapshot` use (Rust, one pass to JSON), PyYAML with libyaml's C
loader and PyYAML's pure-Python loader, and the same snapshot as JSON. The cluster is the openb `default` trace replayed with `spread` to
90 % arrived (1,213 nodes, ~6,000 pods), as the descheduler's benchmarks use it.

Run with ``python -m pytest bench/test_manifest_load.py --benchmark-enable``. Skips when ../shared (or $HAMI_FAST_SHARED) is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import yaml
from hami_fast import _native, manifests

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")
OPENB = SHARED / "data" / "openb"
pytestmark = pytest.mark.skipif(
    not (OPENB / "openb_node_list_gpu_node.csv").is_file(), reason=f"openb traces not found at {OPENB}"
)


GROUP = "load openb snapshot (1,213 nodes)"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    nodes = (OPENB / "openb_node_list_gpu_node.csv").read_bytes()
    pods = (OPENB / "openb_pod_list_default.csv").read_bytes()
    snapshot = orjson.loads(_native.replay_snapshot(nodes, pods, "spread", 90.0, 42))
    folder = tmp_path_factory.mktemp("snapshots")
    (folder / "cluster.json").write_bytes(orjson.dumps(snapshot))
    (folder / "cluster.yaml").write_text(yaml.dump(snapshot, Dumper=yaml.CSafeDumper, sort_keys=False))
    return folder / "cluster.json", folder / "cluster.yaml"


def test_load_json(benchmark, files):
    benchmark.group = GROUP
    objects = benchmark(manifests.load_objects, files[0])
    assert sum(o.get("kind") == "Node" for o in objects) == 1213


def test_load_yaml_native(benchmark, files):
    """What `--snapshot cluster.yaml` uses: YAML to JSON in Rust, then orjson."""
    benchmark.group = GROUP
    objects = benchmark.pedantic(manifests.load_objects, args=(files[1],), rounds=5, iterations=1)
    assert objects == manifests.load_objects(files[0])


def _pyyaml(path: Path, loader: type) -> list:
    return yaml.load(path.read_bytes(), Loader=loader)["items"]


def test_load_yaml_pyyaml_libyaml(benchmark, files):
    benchmark.group = GROUP
    items = benchmark.pedantic(_pyyaml, args=(files[1], yaml.CSafeLoader), rounds=2, iterations=1)
    assert len(items) == len(manifests.load_objects(files[0]))


def test_load_yaml_pyyaml_pure_python(benchmark, files):
    benchmark.group = GROUP
    items = benchmark.pedantic(_pyyaml, args=(files[1], yaml.SafeLoader), rounds=1, iterations=1)
    assert len(items) == len(manifests.load_objects(files[0]))
