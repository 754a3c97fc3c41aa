"""HAMi v2.10.0's own scheduler code (`shared/tools/hami-oracle`) run on generated cases.

The oracle is found as `$HAMI_ORACLE`, else `$HAMI_FAST_SHARED/tools/hami-oracle/hami-oracle`,
else `<repo>/../shared/tools/hami-oracle/hami-oracle`. A call costs about 0.2 s of wall time but
only about 20 ms of CPU (HAMi's informers poll until their caches sync), so many calls run at
once: `ORACLE_PARALLEL` processes (default 16) finish a batch of cases in the time of a few.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[2]
PARALLEL = int(os.environ.get("ORACLE_PARALLEL", "16"))


def find_oracle() -> Path | None:
    if explicit := os.environ.get("HAMI_ORACLE"):
        return Path(explicit)
    shared = Path(os.environ.get("HAMI_FAST_SHARED", REPO.parent / "shared"))
    path = shared / "tools" / "hami-oracle" / "hami-oracle"
    return path if path.exists() else None


def examples_dir() -> Path | None:
    oracle = find_oracle()
    if oracle is None:
        return None
    examples = oracle.parent / "examples"
    return examples if examples.is_dir() else None


SKIP_REASON = (
    "HAMi's oracle not found: set HAMI_ORACLE to the hami-oracle binary, or HAMI_FAST_SHARED to the "
    "shared/ folder (default <repo>/../shared/tools/hami-oracle/hami-oracle)"
)


def run(
    items: list[dict[str, Any]],
    pod: dict[str, Any],
    node_policy: str,
    gpu_policy: str,
    *,
    resync: bool = True,
    names: list[str] | None = None,
    hami_args: str = "",
) -> dict[str, Any]:
    """One oracle call: HAMi's webhook then Filter on the snapshot (`hami_args`: HAMi's own flags,
    e.g. `--device-config-file=FILE`)."""
    oracle = find_oracle()
    assert oracle is not None, SKIP_REASON
    with tempfile.TemporaryDirectory(prefix="hami-oracle-") as tmp:
        snapshot, pod_file = Path(tmp, "cluster.json"), Path(tmp, "pod.json")
        snapshot.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        pod_file.write_bytes(orjson.dumps(pod))
        argv = [str(oracle), "explain", "--snapshot", str(snapshot), "--pod", str(pod_file)]
        argv += ["--node-policy", node_policy, "--gpu-policy", gpu_policy]
        if resync:
            argv.append("--resync")
        if names is not None:
            argv += ["--names", ",".join(names)]
        if hami_args:
            argv += ["--hami-args", hami_args]
        done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"hami-oracle exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    return orjson.loads(done.stdout)


def run_many(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several oracle calls at once; `calls` holds keyword arguments of `run`."""
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        return list(pool.map(lambda kw: run(**kw), calls))
