"""`hami-fast` command line: explain, serve, demo, simulate (and more subcommands registered by their packages)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hami_fast._native import EngineError
from hami_fast.manifests import ManifestError


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="where would this pod go, and why not elsewhere")
    p.add_argument(
        "--snapshot",
        required=True,
        help="Kubernetes List of Nodes and Pods (YAML or JSON), as kubectl get -o yaml prints",
    )
    p.add_argument("--pod", required=True, help="Pod manifest as a user submits it")
    p.add_argument("--output", choices=["json", "text"], default="text")
    p.add_argument(
        "--node-scheduler-policy",
        default=None,
        help="binpack (default), spread, fgd, fgd-balance, bestfit, dotprod, packing, clustering or random",
    )
    p.add_argument(
        "--gpu-scheduler-policy", default=None, help="spread (default), binpack, topology-aware, mutex, numa or a chain"
    )

    def run(args: argparse.Namespace) -> int:
        from hami_fast.explain import run as explain_run

        return explain_run(args)

    p.set_defaults(func=run)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="start hami-fast on the built-in demo cluster and drive demo pods through /webhook, /filter, /bind over HTTP",
    )
    p.add_argument("--pods", type=int, default=300)
    p.add_argument("--seed", type=int, default=7)

    def run(args: argparse.Namespace) -> int:
        from hami_fast.demo import run as demo_run

        return demo_run(args)

    p.set_defaults(func=run)


def _add_serve(sub: argparse._SubParsersAction) -> None:
    from hami_fast import config

    p = sub.add_parser(
        "serve", help="run the scheduler extender and webhook (Granian), with no cluster on the demo cluster"
    )
    config.add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        from hami_fast.server import logs
        from hami_fast.server.serve import serve

        cfg = config.load(args)
        logs.setup(cfg.log_level)
        return serve(cfg)

    p.set_defaults(func=run)


def _add_simulate(sub: argparse._SubParsersAction) -> None:
    from hami_fast.sim.cli import register

    register(sub)


def _add_plan(sub: argparse._SubParsersAction) -> None:
    from hami_fast.descheduler.planner import register

    register(sub)


def _add_descheduler(sub: argparse._SubParsersAction) -> None:
    from hami_fast.descheduler.cli import register

    register(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hami-fast", description="HAMi-compatible GPU-sharing scheduler with a Rust engine"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_explain(sub)
    _add_serve(sub)
    _add_demo(sub)
    _add_simulate(sub)
    _add_plan(sub)
    _add_descheduler(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ManifestError, EngineError, ValueError) as exc:
        print(f"hami-fast {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
