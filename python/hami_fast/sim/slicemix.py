"""Workloads whose GPU slices come in other sizes than openb's.

openb's sharing pods ask for 810 milli (a third of them), 470, 320, 650, … — a mix where the
rooms slices leave beside each other are mostly dead ends for every other slice. A policy tuned on
that mix can go wrong where the sizes pair differently (most slices 450 milli: two leave 100
whatever a policy does). Each variant keeps every pod of a trace as it is and only redraws the
GPU milli of its sharing pods (one GPU, less than a whole one) from a named mix, with a seeded
generator; the CSVs are written to a folder the caller names, never stored in the repository.
"""

from __future__ import annotations

import argparse
import csv
import io
import random
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

#: Slice sizes (milli) per mix, each as likely as it is listed.
MIXES: dict[str, tuple[int, ...]] = {
    "all450": (450,),
    "mix450": (450, 450, 450, 300, 600, 250),
    "unif": tuple(range(100, 1000, 50)),
    "third": (330, 330, 330, 500, 250),
    "mix2": (470, 470, 320, 650, 810, 810, 230),
    "halves": (500, 500, 500, 250, 250, 400),
    "quarters": (250, 250, 250, 500, 750),
    "sixty": (600, 600, 400, 300, 700),
    "tenths": (100, 200, 300, 400, 500, 600, 700, 800, 900),
}


def _number(row: dict[str, str], column: str) -> int:
    text = row.get(column)
    try:
        return int((text or "").strip())
    except ValueError:
        raise ValueError(f"column `{column}`: {text!r} is not a number") from None


def is_slice(row: dict[str, str]) -> bool:
    """A sharing pod: one GPU, less than a whole one."""
    return _number(row, "num_gpu") == 1 and 0 < _number(row, "gpu_milli") < 1000


def redraw(pods_csv: bytes, sizes: Sequence[int], seed: int) -> str:
    """The pod CSV with every sharing pod's ``gpu_milli`` drawn from ``sizes``; other pods and
    columns unchanged."""
    if not sizes or any(not 0 < s < 1000 for s in sizes):
        raise ValueError(f"slice sizes {list(sizes)}: want milli in 1..999")
    reader = csv.DictReader(io.StringIO(pods_csv.decode()))
    fields = list(reader.fieldnames or [])
    if "gpu_milli" not in fields or "num_gpu" not in fields:
        raise ValueError("pod CSV: want the columns num_gpu and gpu_milli")
    rng = random.Random(seed)
    rows = []
    for line, r in enumerate(reader, start=2):
        try:
            share = is_slice(r)
        except ValueError as e:
            raise ValueError(f"pod CSV line {line}: {e}") from None
        if share:
            r["gpu_milli"] = str(rng.choice(sizes))
        rows.append(r)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def build_mixes(pods: Path, names: Iterable[str], out_dir: Path, seed: int = 11) -> list[Path]:
    """Writes ``out_dir/slices-<mix>.csv`` for every named mix."""
    out_dir.mkdir(parents=True, exist_ok=True)
    raw = pods.read_bytes()
    written = []
    for name in names:
        path = out_dir / f"slices-{name}.csv"
        path.write_text(redraw(raw, MIXES[name], seed))
        written.append(path)
    return written


def parse_names(text: str) -> list[str]:
    names = list(MIXES) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in MIXES]
    if not names or unknown:
        raise ValueError(f"--mixes {text!r}: want 'all' or a comma list of {', '.join(MIXES)}")
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hami_fast.sim.slicemix", description=__doc__.splitlines()[0])
    p.add_argument("--pods", required=True, type=Path, help="the trace whose sharing pods are redrawn")
    p.add_argument("--mixes", default="all", help=f"'all' or a comma list of {', '.join(MIXES)}")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--out", required=True, type=Path, help="folder for the generated CSVs")
    args = p.parse_args(argv)
    try:
        names = parse_names(args.mixes)
        if not args.pods.is_file():
            raise ValueError(f"{args.pods}: no such file")
        for path in build_mixes(args.pods, names, args.out, args.seed):
            print(path)
    except (ValueError, KeyError, UnicodeDecodeError) as e:
        print(f"slicemix: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
