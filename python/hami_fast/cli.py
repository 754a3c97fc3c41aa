"""`hami-fast` command line: explain, serve, demo, simulate (and more subcommands registered by their packages)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from hami_fast import device_config
from hami_fast._native import EngineError
from hami_fast.argtypes import OneLineParser, positive_int
from hami_fast.manifests import ManifestError


def _add_explain(sub: argparse._SubParsersAction) -> None:
    from hami_fast.policies import GPU_POLICY_HELP, gpu_policy_arg, node_policy_arg, node_policy_help

    p = sub.add_parser(
        "explain",
        help="where would this pod go, and why not elsewhere",
        description="Where would this pod go, and why not elsewhere. Exit status: 0 the pod fits (a node is "
        "chosen), 1 it fits on no node, 2 bad input (a file, a flag, or a pod the webhook rejects or "
        "hami-fast does not schedule).",
    )
    p.add_argument(
        "--snapshot",
        required=True,
        help="Kubernetes List of Nodes and Pods (YAML or JSON), as kubectl get -o yaml prints",
    )
    p.add_argument("--pod", required=True, help="Pod manifest as a user submits it")
    p.add_argument("--output", choices=["json", "text"], default="text", help="text (default) or explain's JSON object")
    p.add_argument(
        "--all", action="store_true", help="text: one line per node instead of the top candidates and grouped failures"
    )
    p.add_argument(
        "--top", type=positive_int, default=5, metavar="N", help="text: how many fitting nodes to list (default 5)"
    )
    p.add_argument("--node-scheduler-policy", type=node_policy_arg, default=None, help=node_policy_help())
    p.add_argument("--gpu-scheduler-policy", type=gpu_policy_arg, default=None, help=GPU_POLICY_HELP)
    device_config.add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        from hami_fast.explain import run as explain_run

        return explain_run(args)

    p.set_defaults(func=run)


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="start hami-fast on the built-in demo cluster and drive demo pods through /webhook, /filter, /bind over HTTP",
        description="Serve the built-in demo cluster (50 GPU nodes) over HTTP, schedule demo pods through "
        "/webhook, /filter and /bind as kube-apiserver and kube-scheduler would, then summarise where they went.",
    )
    p.add_argument("--pods", type=positive_int, default=300, help="how many demo pods to schedule (default 300)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the demo pods' shapes (default 7)")
    p.add_argument(
        "--verbose", "-v", action="store_true", help="also print one line per pod with its allocation annotation"
    )

    def run(args: argparse.Namespace) -> int:
        from hami_fast.demo.run import run as demo_run

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
        logs.setup(cfg.log_level, cfg.log_format)
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
    parser = OneLineParser(prog="hami-fast", description="HAMi-compatible GPU-sharing scheduler with a Rust engine")
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", required=True)
    _add_explain(sub)
    _add_serve(sub)
    _add_demo(sub)
    _add_simulate(sub)
    _add_plan(sub)
    _add_descheduler(sub)
    return parser


def version_line() -> str:
    from hami_fast import _native

    return f"hami-fast {package_version()} (engine hami-core {_native.__version__}, Python {sys.version.split()[0]})"


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hami-fast")
    except PackageNotFoundError:  # running from a source tree without an install
        from hami_fast import _native

        return _native.__version__


def run_command(prog: str, func: Callable[[], int]) -> int:
    """Run a command: a user mistake is one line on stderr and exit 2; a closed pipe (`| head`) is not an error."""
    from hami_fast.kube.client import ApiError

    try:
        return int(func() or 0)
    except (ManifestError, EngineError, ValueError, ApiError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file named on the command line that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{prog}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code = run_command(f"hami-fast {args.command}", lambda: args.func(args))
    from hami_fast.server.listen import granian_started

    if argv is None and granian_started():
        exit_after_granian(code)
    return code


def exit_after_granian(code: int) -> None:
    """End the process without interpreter finalization once a Granian server has stopped.

    Granian's Rust threads (its runtime and blocking pool) can outlive `Server.stop()` by a moment;
    one that touches Python while the interpreter finalizes aborts the process ("panic in a function
    that cannot unwind", about 1 run of `make demo` in 20-100). Everything this process owes is
    written by then, so flush it and leave directly. Only the console script does this (argv is
    None), never a caller in the same interpreter.
    """
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
