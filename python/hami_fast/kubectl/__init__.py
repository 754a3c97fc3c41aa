"""`kubectl hami` (the `kubectl-hami` plugin): why, top, plan on the live cluster through the user's kubeconfig."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hami_fast import device_config

SORT_HELP = "memory (default), cores, slots, pods, fragmentation (nodes only) or name"


def build_parser() -> argparse.ArgumentParser:
    from hami_fast.argtypes import OneLineParser, non_negative_int, positive_int
    from hami_fast.kubectl.top import SORT_KEYS

    parser = OneLineParser(
        prog="kubectl hami",
        description="HAMi vGPU scheduling on the live cluster, decided by hami-fast's engine (read-only).",
    )
    parser.add_argument("--kubeconfig", default="", help="kubeconfig file (default: KUBECONFIG, ~/.kube/config)")
    device_config.add_arguments(parser)
    parser.add_argument(
        "--device-config-map",
        default="",
        metavar="NAMESPACE/NAME",
        help="read the device config from this ConfigMap's device-config.yaml instead of a file "
        "(e.g. kube-system/hami-scheduler-device)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    why = sub.add_parser("why", help="why a pod is (or would be) placed where it is, node by node")
    why.add_argument("pod", metavar="POD", help="pod name")
    why.add_argument("-n", "--namespace", default="default", help="namespace of the pod (default: default)")
    why.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text (default) or explain's JSON"
    )
    why.add_argument("--all", action="store_true", help="one line per node with its full reason")
    why.add_argument("--top", type=positive_int, default=5, metavar="N", help="fitting nodes to list (default 5)")

    top = sub.add_parser("top", help="vGPU allocation per node or per GPU (memory, cores, slots, pods, fragmentation)")
    top.add_argument("what", choices=["nodes", "gpus"], help="nodes or gpus")
    top.add_argument("--sort", choices=SORT_KEYS, default="memory", help=SORT_HELP)
    top.add_argument(
        "--color", choices=["auto", "always", "never"], default="auto", help="colour on a terminal (default auto)"
    )

    plan = sub.add_parser("plan", help="the descheduler's defragmentation plan for the live cluster (dry run)")
    plan.add_argument("--max-moves", type=non_negative_int, default=None, help="move budget (default: 5%% of GPU pods)")
    plan.add_argument("--planner", choices=["drain", "greedy"], default="drain", help="default drain")
    plan.add_argument("-o", "--output", choices=["table", "json"], default="table", help="table (default) or json")
    return parser


def _colour(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def run(args: argparse.Namespace) -> int:
    from hami_fast.kubectl import live

    client = live.connect(args.kubeconfig)
    config = engine_config(args, client)
    if args.command == "plan":
        from hami_fast.descheduler.planner import plan_live, render_table

        result = plan_live(client, args.max_moves, args.planner, config=config)
        if args.output == "json":
            import orjson

            print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        else:
            print(render_table(result))
        return 0
    if args.command == "why":
        from hami_fast.kubectl.why import why

        pod = live.get_pod(client, args.namespace, args.pod)
        print(why(live.snapshot(client, config), pod, args.output, args.top, args.all))
        return 0
    from hami_fast.kubectl.top import top

    print(top(live.snapshot(client, config), args.what, args.sort, _colour(args.color)))
    return 0


def engine_config(args: argparse.Namespace, client: object) -> bytes:
    """The device settings of the flags; `--device-config-map` reads the file from the cluster."""
    from hami_fast.kubectl import live

    settings = device_config.from_args(args)
    if args.device_config_map:
        if args.device_config_file:
            raise ValueError("give --device-config-file or --device-config-map, not both")
        text = live.device_config_map(client, args.device_config_map)  # type: ignore[arg-type]
        settings = device_config.DeviceSettings(
            config=device_config.parse(text, f"configmap {args.device_config_map}"),
            enable_ascend=settings.enable_ascend,
            enable_iluvatar=settings.enable_iluvatar,
        )
    return settings.engine_config()


def main(argv: Sequence[str] | None = None) -> int:
    from hami_fast.cli import run_command

    args = build_parser().parse_args(argv)
    return run_command(f"kubectl hami {args.command}", lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
