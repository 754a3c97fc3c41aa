"""Trace files in the openb format the simulator replays (`hami-fast simulate --nodes --pods`)."""

from __future__ import annotations

import random
from pathlib import Path

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)


def write_cluster(tmp_path: Path, nodes: int = 60, pods: int = 160, seed: int = 1) -> tuple[Path, Path]:
    """A small openb-shaped cluster: 8-, 2- and 1-GPU nodes; CPU-only, sharing, whole and multi-GPU tasks."""
    rng = random.Random(seed)
    shapes = [(96000, 393216, 8, "G2"), (104000, 524288, 2, "T4"), (32000, 131072, 1, "P100")]
    node_lines = [NODE_HEADER]
    for i in range(nodes):
        cpu, mem, gpu, model = shapes[i % 3]
        node_lines.append(f"openb-node-{i:04d},{cpu},{mem},{gpu},{model}")
    pod_lines = [POD_HEADER]
    for i in range(pods):
        kind = rng.random()
        if kind < 0.13:
            num, milli = 0, 0
        elif kind < 0.45:
            num, milli = 1, rng.choice([810, 470, 320, 650, 230, 460])
        elif kind < 0.92:
            num, milli = 1, 1000
        else:
            num, milli = rng.choice([2, 4, 8]), 1000
        spec = "T4|P100" if num and rng.random() < 0.05 else ""
        cpu = rng.choice([3152, 11300, 11400, 8000, 12000, 12500, 32000])
        pod_lines.append(
            f"openb-pod-{i:04d},{cpu},{rng.choice([8192, 16384, 30517])},{num},{milli},{spec},LS,Running,0,1,0"
        )
    n, p = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    n.write_text("\n".join(node_lines) + "\n")
    p.write_text("\n".join(pod_lines) + "\n")
    return n, p


def write_spec_variant(tmp_path: Path, nodes: Path, pods: Path, seed: int, share: int = 33) -> Path:
    """``pods`` with ``share`` % of its GPU pods naming the models they accept (`gpu_spec`)."""
    from hami_fast.sim import gpuspec

    spec = tmp_path / "openb_pod_list_spec.csv"
    spec.write_text(gpuspec.constrain(pods.read_bytes(), nodes.read_bytes(), share, seed=seed))
    return spec
