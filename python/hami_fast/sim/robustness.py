"""The workload-robustness table: every policy on every trace and generated variant.

Reads sweep results (``hami-fast simulate --results``, one JSON per line) and, optionally, a saved
table of rows (``--table x.json``) for traces swept earlier; prints one row per trace with the
mean unallocated GPU % per policy and ``fgd-balance`` minus ``fgd`` (pp).

    python -m hami_fast.sim.robustness out/variants.jsonl --rows docs/sim_table.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hami_fast.sim.report import _trace_key, rows
from hami_fast.sim.runner import POLICIES, aggregate


def load(results: list[Path], saved_rows: list[Path]) -> list[dict[str, Any]]:
    """Table rows of the results, then the saved rows of (trace, policy) pairs not in them."""
    runs = {}
    for p in results:
        for line in p.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:  # blank, or the cut-off last line of a stopped sweep
                continue
            runs[(r["trace"], r["policy"], r["seed"])] = r  # a run repeated counts once
    table = rows(aggregate(runs.values()))
    have = {(r["trace"], r["policy"]) for r in table}
    for p in saved_rows:
        table += [r for r in json.loads(p.read_text()) if (r["trace"], r["policy"]) not in have]
    return table


def markdown(table: list[dict[str, Any]], base: str = "fgd", new: str = "fgd-balance") -> str:
    policies = [p for p in POLICIES if any(r["policy"] == p for r in table)]
    by = {(r["trace"], r["policy"]): r for r in table}
    traces = sorted({r["trace"] for r in table}, key=_trace_key)
    head = "| trace | " + " | ".join(policies) + f" | {new} − {base} (pp) |"
    lines = [head, "|---|" + "---:|" * (len(policies) + 1)]
    for t in traces:
        cells = []
        for p in policies:
            r = by.get((t, p))
            cells.append("" if r is None else f"{r['mean']:.2f}" + ("" if r["runs"] == 10 else f" ({r['runs']})"))
        a, b = by.get((t, new)), by.get((t, base))
        diff = f"{a['mean'] - b['mean']:+.2f}" if a and b else ""
        lines.append(f"| {t} | " + " | ".join(cells) + f" | {diff} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hami_fast.sim.robustness", description=__doc__.splitlines()[0])
    p.add_argument("results", nargs="+", type=Path, help="sweep results (.jsonl)")
    p.add_argument("--rows", nargs="*", type=Path, default=[], help="saved table rows (.json) for other traces")
    args = p.parse_args(argv)
    for path in [*args.results, *args.rows]:
        if not path.is_file():
            print(f"robustness: {path}: no such file", file=sys.stderr)
            return 2
    print(markdown(load(args.results, args.rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
