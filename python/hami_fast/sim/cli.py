"""``hami-fast simulate``: replay openb traces through the Rust engine under a node policy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hami_fast.argtypes import OneLineParser, non_negative_float, positive_int, require_file

HELP = "replay GPU-cluster traces (openb CSV) under a node policy; sweeps policies × seeds × traces in parallel"

EPILOG = """\
examples:
  hami-fast simulate --nodes ../shared/data/openb/openb_node_list_gpu_node.csv \\
      --pods ../shared/data/openb/openb_pod_list_default.csv --policy fgd --seed 42 --output json
  hami-fast simulate --nodes NODES.csv --pods P1.csv P2.csv --policy all --seeds 42-51 \\
      --table results.md --figures docs/figures --results results.jsonl
"""


def register(sub: argparse._SubParsersAction) -> None:
    """Adds the ``simulate`` subcommand to a ``hami-fast`` subparsers object."""
    p = sub.add_parser(
        "simulate", help=HELP, description=HELP, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--nodes", required=True, help="node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
    p.add_argument(
        "--pods",
        required=True,
        nargs="+",
        help="pod list CSV(s) (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec])",
    )
    p.add_argument(
        "--policy",
        default="fgd",
        help="fgd, fgd-balance, bestfit, dotprod, packing, clustering, random, binpack, spread; "
        "a comma list or 'all' sweeps",
    )
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument(
        "--seed", type=int, default=42, help="seed of the shuffle, tuning and node order (Go math/rand stream)"
    )
    seeds.add_argument("--seeds", default=None, help="sweep seeds: N, N-M or a comma list (e.g. 42-51)")
    p.add_argument(
        "--tune",
        type=non_negative_float,
        default=1.3,
        help="inflate/deflate the trace to this × cluster GPU capacity (0: as is)",
    )
    p.add_argument("--output", choices=["json", "text"], default="text")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="allocation/fragmentation vs arrived figure")
    p.add_argument("--table", default=None, metavar="FILE", help="sweep: write the table (.md, .json or .csv)")
    p.add_argument(
        "--figures", default=None, metavar="DIR", help="sweep: write per-trace curves and per-family bar charts"
    )
    p.add_argument(
        "--results", default=None, metavar="FILE.jsonl", help="sweep: write every run's summary, one JSON per line"
    )
    p.add_argument(
        "--bound",
        default=None,
        metavar="FILE.json",
        help="sweep: add the offline lower bound (python -m hami_fast.sim.bound --out) to the table and bar charts",
    )
    p.add_argument("--jobs", type=positive_int, default=None, help="sweep: parallel processes (default: all cores)")
    p.add_argument(
        "--from-results",
        default=None,
        metavar="FILE.jsonl",
        help="re-tabulate and re-plot a saved sweep instead of replaying",
    )
    p.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="always draw the progress bar"
    )
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never draw the progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hami_fast.sim import report
    from hami_fast.sim.runner import Run, parse_policies, parse_seeds, replay, summary

    for path in [args.nodes, *args.pods] if not args.from_results else [args.from_results]:
        require_file(path)
    prepare_outputs(args)
    policies = parse_policies(args.policy)
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    if args.from_results:
        return _sweep(args, policies, seeds, saved=read_results(args.from_results))
    sweep_outputs = args.table or args.figures or args.results or args.bound
    if len(policies) == 1 and len(seeds) == 1 and len(args.pods) == 1 and not sweep_outputs:
        result = replay(Run(args.nodes, args.pods[0], policies[0], seeds[0], args.tune))
        if args.output == "json":
            print(json.dumps(summary(result)))
        else:
            print(report.text_summary(result))
        if args.plot:
            from hami_fast.sim.plots import plot_run

            plot_run(result, args.plot)
            print(f"wrote {args.plot}", file=sys.stderr)
        return 0
    return _sweep(args, policies, seeds)


#: What --plot can write (matplotlib's common formats), checked before any replay runs.
PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp", ".eps", ".ps", ".tif", ".tiff")


def prepare_outputs(args: argparse.Namespace) -> None:
    """Refuse a --plot format matplotlib cannot write and create the output folders, before a sweep
    of minutes runs, not after it."""
    if args.plot and not args.plot.lower().endswith(PLOT_SUFFIXES):
        raise ValueError(f"--plot {args.plot}: want an image file ending in {', '.join(PLOT_SUFFIXES)}")
    for file in (args.plot, args.table, args.results):
        if file:
            Path(file).parent.mkdir(parents=True, exist_ok=True)
    if args.figures:
        Path(args.figures).mkdir(parents=True, exist_ok=True)


def read_results(path: str) -> list[dict[str, Any]]:
    """A sweep's --results file: one JSON object per line."""
    results = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            results.append(json.loads(line))
        except ValueError:
            raise ValueError(
                f"--from-results {path}:{number}: not a JSON line (want a sweep's --results file)"
            ) from None
    if not results or not all(isinstance(r, dict) and "unallocated_pct_at_100" in r for r in results):
        raise ValueError(f"--from-results {path}: want a sweep's --results file (one run's JSON per line)")
    return results


def _sweep(
    args: argparse.Namespace, policies: list[str], seeds: list[int], saved: list[dict[str, Any]] | None = None
) -> int:
    from hami_fast.sim import report
    from hami_fast.sim.runner import Run, aggregate, sweep

    if saved is not None:
        results = saved
    else:
        runs = [
            Run(args.nodes, pods, policy, seed, args.tune)
            for pods in args.pods
            for policy in policies
            for seed in seeds
        ]
        sink = open(args.results, "w") if args.results else None
        try:
            results = sweep(
                runs,
                jobs=args.jobs,
                progress=args.progress,
                on_result=(lambda r: _write_line(sink, r)) if sink else None,
            )
        finally:
            if sink:
                sink.close()
    table = report.rows(aggregate(results))
    bounds = report.load_bounds(args.bound) if args.bound else None
    if args.table:
        _write_table(Path(args.table), table, bounds)
    if args.output == "json":
        print(json.dumps({"rows": table, "bounds": bounds}))
    else:
        print(report.wide_caption(table, bounds))
        print()
        print(report.wide_markdown(table, bounds=bounds))
        print()
        if bounds:
            print(report.GAP_CAPTION)
            print()
            print(report.gap_markdown(table, bounds))
            print()
        print(report.LONG_CAPTION)
        print()
        print(report.markdown(table))
    if args.figures or args.plot:
        for path in draw_figures(results, Path(args.figures) if args.figures else None, args.plot, bounds):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _write_line(sink: Any, result: dict[str, Any]) -> None:
    sink.write(json.dumps(result) + "\n")
    sink.flush()


def _write_table(path: Path, table: list[dict[str, Any]], bounds: dict[str, float] | None = None) -> None:
    from hami_fast.sim import report

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json.dumps(table, indent=1) + "\n")
    elif path.suffix == ".csv":
        import csv

        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]) if table else [])
            w.writeheader()
            w.writerows(table)
    else:
        parts = [report.wide_caption(table, bounds), report.wide_markdown(table, bounds=bounds)]
        if bounds:
            parts += [report.GAP_CAPTION, report.gap_markdown(table, bounds)]
        parts += [report.LONG_CAPTION, report.markdown(table)]
        path.write_text("\n\n".join(parts) + "\n")


FAMILIES = {
    "gpushare": ["gpushare20", "gpushare40", "gpushare60", "gpushare80", "gpushare100"],
    "multigpu": ["multigpu20", "multigpu30", "multigpu40", "multigpu50"],
}


def draw_figures(
    results: list[dict[str, Any]],
    out_dir: Path | None,
    plot_file: str | None = None,
    bounds: dict[str, float] | None = None,
) -> list[Path]:
    """Per trace: allocation and fragmentation curves; per family: bar charts at 100 % arrived."""
    from hami_fast.sim import plots
    from hami_fast.sim.runner import POLICIES, aggregate

    written: list[Path] = []
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_trace.setdefault(r["trace"], []).append(r)
    if plot_file:
        first = next(iter(by_trace))
        written.append(plots.plot_allocation(by_trace[first], plot_file, title=f"{first}: median over seeds"))
    if out_dir is None:
        return written
    for trace, rs in by_trace.items():
        written.append(
            plots.plot_allocation(rs, out_dir / f"alloc_{trace}.png", title=f"{trace}: median over seeds, 25–75 % band")
        )
        written.append(plots.plot_fragmentation(rs, out_dir / f"frag_{trace}.png", title=f"{trace}: median over seeds"))
    agg = aggregate(results)
    policies = [p for p in POLICIES if any(k[1] == p for k in agg)]
    for family, traces in FAMILIES.items():
        present = [t for t in traces if t in by_trace]
        if present:
            written.append(
                plots.plot_bars(
                    agg,
                    present,
                    policies,
                    out_dir / f"bars_{family}.png",
                    title=f"{family}: unallocated GPU % at 100 % arrived",
                    bounds=bounds,
                )
            )
    return written


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (``python -m hami_fast.sim.cli``), same as ``hami-fast simulate``."""
    parser = OneLineParser(prog="hami-fast")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["simulate", *(sys.argv[1:] if argv is None else argv)])
    from hami_fast._native import EngineError

    try:
        return int(args.func(args) or 0)
    except (EngineError, ValueError) as exc:
        print(f"hami-fast simulate: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
