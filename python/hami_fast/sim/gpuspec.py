"""Workloads where a share of the GPU pods name the GPU models they accept (openb's ``gpu_spec``).

The public openb release has ``gpuspec`` traces (5, 10, 20, 25 and 33 % of the GPU pods
constrained) that the team's data set lacks. They keep every pod of ``default`` as it is and only
fill ``gpu_spec`` for a random share of the GPU pods. Read back, they show how:

- the pods are picked at random, whole-GPU pods about 1.3× as often as GPU-sharing ones
  (21 % against 16 % over the five files);
- the allowed-model list is drawn from a distribution that depends on the pod's kind: a sharing
  pod asks for T4 or P100 (the small GPUs), a one-GPU pod for T4, G2, the V100s, G3 or a mix, a
  multi-GPU pod for a model whose nodes have that many GPUs.

``SPEC_WEIGHTS`` is that distribution, counted over the five public files; this module draws from
it with a seeded generator, keeping only lists whose models are in the node list and that admit a
node where the pod fits empty. The output is a pod CSV with the ``gpu_spec`` column filled, written
to a folder the caller names (the traces are generated at run time, never stored in the repository).
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Relative odds of a pod of each kind being constrained (sharing pods about 0.77× whole ones).
PICK_WEIGHT = {"share": 0.77, "whole": 1.0, "multi": 1.0}

#: Allowed-model lists and how often each was drawn, per pod kind, in the public gpuspec traces.
SPEC_WEIGHTS: dict[str, list[tuple[str, int]]] = {
    "share": [("T4", 1609), ("P100", 839), ("G2|P100|T4|V100M16|V100M32", 45)],
    "whole": [
        ("T4", 1865),
        ("G2", 933),
        ("V100M16|V100M32", 498),
        ("P100|V100M16|V100M32", 268),
        ("G3", 209),
        ("P100|T4|V100M16|V100M32", 76),
        ("G2|P100|T4|V100M16|V100M32", 74),
        ("A10|G2|T4|V100M16|V100M32", 64),
        ("V100M32", 48),
        ("P100|V100M16", 31),
        ("A10|T4", 21),
        ("V100M16", 17),
        ("P100", 10),
        ("A10|G2|P100|T4|V100M16|V100M32", 10),
    ],
    "multi": [
        ("G2", 33),
        ("G3", 16),
        ("V100M16|V100M32", 12),
        ("P100|V100M16|V100M32", 6),
        ("T4|V100M16|V100M32", 3),
        ("V100M32", 3),
    ],
}

#: The shares of GPU pods (%) of the variants built by default, as the public release's.
DEFAULT_SHARES = (5, 10, 20, 33)


@dataclass(frozen=True)
class NodeShape:
    cpu: int
    mem: int
    gpus: int
    model: str


def pod_kind(num_gpu: int, gpu_milli: int) -> str:
    if num_gpu > 1:
        return "multi"
    return "share" if gpu_milli < 1000 else "whole"


def read_node_shapes(nodes_csv: bytes) -> list[NodeShape]:
    rows = csv.DictReader(io.StringIO(nodes_csv.decode()))
    shapes = {
        NodeShape(int(r["cpu_milli"]), int(r["memory_mib"]), int(r["gpu"]), r["model"].strip())
        for r in rows
        if int(r["gpu"]) > 0
    }
    return sorted(shapes, key=lambda s: (s.model, s.gpus, s.cpu, s.mem))


def spec_fits(spec: str, row: dict[str, str], nodes: Sequence[NodeShape]) -> bool:
    """Some node of an allowed model would host the pod when empty."""
    models = set(spec.split("|"))
    cpu, mem, gpus = int(row["cpu_milli"]), int(row["memory_mib"]), int(row["num_gpu"])
    return any(n.model in models and n.gpus >= gpus and n.cpu >= cpu and n.mem >= mem for n in nodes)


def draw_spec(rng: random.Random, row: dict[str, str], nodes: Sequence[NodeShape]) -> str:
    """A list for this pod from its kind's distribution, models missing from the node list left
    out, among the lists that admit a node for it ("" when none does)."""
    kind = pod_kind(int(row["num_gpu"]), int(row["gpu_milli"]))
    present = {n.model for n in nodes}
    lists = [("|".join(m for m in s.split("|") if m in present), w) for s, w in SPEC_WEIGHTS[kind]]
    options = [(s, w) for s, w in lists if s and spec_fits(s, row, nodes)]
    if not options:
        return ""
    return rng.choices([s for s, _ in options], weights=[w for _, w in options])[0]


def pick_pods(rng: random.Random, rows: Sequence[dict[str, str]], share_pct: float) -> list[int]:
    """round(share × GPU pods) GPU pods, without replacement, weighted by kind (Efraimidis–Spirakis keys)."""
    gpu = [i for i, r in enumerate(rows) if int(r["num_gpu"]) > 0]
    want = round(len(gpu) * share_pct / 100)
    keyed = []
    for i in gpu:
        w = PICK_WEIGHT[pod_kind(int(rows[i]["num_gpu"]), int(rows[i]["gpu_milli"]))]
        keyed.append((rng.random() ** (1.0 / w), i))
    keyed.sort(reverse=True)
    return sorted(i for _, i in keyed[:want])


def constrain(pods_csv: bytes, nodes_csv: bytes, share_pct: float, seed: int) -> str:
    """The pod CSV with ``gpu_spec`` filled for ``share_pct`` % of its GPU pods; other pods and
    columns unchanged (a ``gpu_spec`` column is added after ``gpu_milli`` where missing)."""
    if not 0 <= share_pct <= 100:
        raise ValueError(f"gpuspec share {share_pct}: want a percentage in 0..100")
    reader = csv.DictReader(io.StringIO(pods_csv.decode()))
    fields = list(reader.fieldnames or [])
    rows = list(reader)
    if "gpu_spec" not in fields:
        fields.insert(fields.index("gpu_milli") + 1, "gpu_spec")
    nodes = read_node_shapes(nodes_csv)
    rng = random.Random(seed)
    for r in rows:
        r["gpu_spec"] = ""
    for i in pick_pods(rng, rows, share_pct):
        rows[i]["gpu_spec"] = draw_spec(rng, rows[i], nodes)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def variant_path(out_dir: Path, pods_path: Path, share_pct: float) -> Path:
    """``openb_pod_list_default.csv`` at 10 % -> ``out_dir/openb_pod_list_default-spec10.csv``."""
    return out_dir / f"{pods_path.stem}-spec{share_pct:g}.csv"


def build_variants(
    nodes: Path, pods: Iterable[Path], shares: Iterable[float], out_dir: Path, seed: int = 1
) -> list[Path]:
    """Writes every (trace, share) variant; the seed of each is derived from ``seed`` and the share."""
    out_dir.mkdir(parents=True, exist_ok=True)
    nodes_csv = nodes.read_bytes()
    written = []
    for p in pods:
        raw = p.read_bytes()
        for share in shares:
            path = variant_path(out_dir, p, share)
            path.write_text(constrain(raw, nodes_csv, share, seed * 1000 + round(share * 10)))
            written.append(path)
    return written


def parse_shares(text: str) -> list[float]:
    try:
        shares = [float(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--shares {text!r}: want a comma list of percentages") from None
    if not shares or any(not 0 <= s <= 100 for s in shares):
        raise ValueError(f"--shares {text!r}: want a comma list of percentages in 0..100")
    return shares


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hami_fast.sim.gpuspec", description=__doc__.splitlines()[0])
    p.add_argument("--nodes", required=True, type=Path)
    p.add_argument("--pods", required=True, nargs="+", type=Path)
    p.add_argument("--shares", default=",".join(map(str, DEFAULT_SHARES)), help="percent of GPU pods, comma list")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, type=Path, help="folder for the generated CSVs")
    args = p.parse_args(argv)
    try:
        shares = parse_shares(args.shares)
        for path in (args.nodes, *args.pods):
            if not path.is_file():
                raise ValueError(f"{path}: no such file")
        for path in build_variants(args.nodes, args.pods, shares, args.out, args.seed):
            print(path)
    except (ValueError, KeyError) as e:
        print(f"gpuspec: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
