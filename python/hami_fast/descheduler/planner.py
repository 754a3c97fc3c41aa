"""`hami-fast plan`: the defragmentation planner on a snapshot (or a replayed trace)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from hami_fast import _native, device_config
from hami_fast.argtypes import non_negative_float, non_negative_int, positive_float, positive_int, require_file
from hami_fast.manifests import ManifestError, as_list_bytes, load_document, load_objects, load_one

OBJECTIVES = ("free-gpus", "frag", "pending")


def snapshot_bytes(path: str | Path) -> bytes:
    """The snapshot file as JSON bytes the engine reads: JSON passes through untouched, YAML is converted."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: {exc.strerror or exc}") from exc
    if not raw.strip():
        raise ManifestError(
            f"{path}: empty; a snapshot is a List of Nodes and Pods (kubectl get nodes,pods -A -o json)"
        )
    if raw.lstrip()[:1] in (b"{", b"["):
        return raw
    return as_list_bytes(load_objects(path))


def plan(
    inputs: list[bytes],
    max_moves: int | None = None,
    max_moves_pct: float = 5.0,
    planner: str = "drain",
    baseline: bool = True,
    objective: str = "free-gpus",
    workload: str | list[dict[str, Any]] = "typical",
    for_pod: dict[str, Any] | None = None,
    max_moves_per_pod: int | None = None,
    movable: list[str] | None = None,
    exclude_nodes: list[str] | None = None,
    config: bytes | None = None,
) -> dict[str, Any]:
    """The planner (Rust) on Kubernetes objects: the one entry point of `hami-fast plan`,
    `kubectl hami plan`, `POST /api/v1/plan` and the automatic mode. `exclude_nodes`: nodes the
    plan leaves out with the pods bound to them; `config`: the engine config (the device config
    file's settings)."""
    options = orjson.dumps(
        {
            "max_moves": max_moves,
            "max_moves_pct": max_moves_pct,
            "planner": planner,
            "baseline": baseline,
            "objective": objective,
            "workload": workload,
            "for_pod": for_pod,
            "max_moves_per_pod": max_moves_per_pod,
            "movable": movable,
            "exclude_nodes": exclude_nodes,
        }
    )
    return orjson.loads(_native.plan(inputs, options, config))


def load_workload(spec: str) -> str | list[dict[str, Any]]:
    """`typical`, `whole-gpu`, or a JSON/YAML file listing task types
    (`[{"gpu_milli": 500, "num_gpu": 1, "weight": 3}, ...]`)."""
    if spec in ("typical", "whole-gpu"):
        return spec
    if not Path(spec).is_file():
        raise ManifestError(f"--workload {spec}: want typical, whole-gpu or a JSON/YAML file of task types")
    try:
        doc = load_document(spec)
    except ManifestError as exc:
        raise ManifestError(f"--workload: {exc}") from None
    if isinstance(doc, dict):
        doc = doc.get("types", doc.get("items"))
    if not isinstance(doc, list) or not doc:
        raise ManifestError(f"--workload {spec}: want a non-empty list of task types")
    return doc


def load_pending_pod(spec: str, client: Any = None) -> dict[str, Any]:
    """`--for`: a Pod manifest file, or `namespace/name` read from the cluster with --live."""
    if client is not None and not Path(spec).exists():
        from hami_fast.descheduler.kube import get_pod

        namespace, _, name = spec.rpartition("/")
        pod = get_pod(client, namespace or "default", name)
        if pod is None:
            raise ValueError(f"--for {spec}: pod not found")
        return pod
    if not Path(spec).exists() and "/" in spec and not spec.endswith((".yaml", ".yml", ".json")):
        raise ValueError(f"--for {spec}: no such file (namespace/name needs --live)")
    return load_one(spec, "Pod")


def place_text(place: dict[str, Any]) -> str:
    """`node/gpu,...`, then the MIG instances on them as `[profile@start,...]`."""
    text = f"{place['node']}/{','.join(place['gpus'])}"
    instances = place.get("mig") or []
    if instances:
        text += " [" + ",".join(f"{i['profile']}@{i['placement']['start']}" for i in instances) + "]"
    return text


def render_unblock(result: dict[str, Any]) -> str:
    lines = [result["message"]]
    for i, m in enumerate(result["moves"], 1):
        lines.append(f"{i:>3}  {m['pod']}  {place_text(m['from'])} -> {place_text(m['to'])}")
    if result.get("target"):
        t = result["target"]
        held = "held for it (reservation)" if result.get("reservation") else "free now"
        lines.append(f"target: {place_text(t)} ({held})")
    reasons = result.get("reasons") or {}
    if reasons:
        lines.append(f"why not, per node ({len(reasons)}):")
        for node, why in list(reasons.items())[:20]:
            lines.append(f"  {node}: {why}")
        if len(reasons) > 20:
            lines.append(f"  ... {len(reasons) - 20} more (--output json lists all)")
    lines.append(f"budget {result['max_moves']} moves; planned in {result['elapsed_ms']:.1f} ms")
    return "\n".join(lines)


def render_pending(result: dict[str, Any]) -> str:
    lines = [
        f"{result['pending']} pending vGPU pods: {result['unblocked_by_moves']} unblocked by "
        f"{len(result['moves'])} moves, {result['fit_without_moves']} fit as they are"
    ]
    for i, m in enumerate(result["moves"], 1):
        lines.append(f"{i:>3}  {m['pod']}  {place_text(m['from'])} -> {place_text(m['to'])}")
    for p in result["placements"]:
        lines.append(f"  {p['pod']} -> {place_text(p)} ({p['moves']} moves)")
    for q in result.get("queue", []):
        if q.get("never"):
            lines.append(f"  {q['pod']} can never fit, whatever moves: {q['never']}")
    if "baseline" in result:
        b = result["baseline"]
        lines.append(f"baseline ({b['planner']}): {b['unblocked']} unblocked by {b['moves']} moves")
    lines.append(f"budget {result['max_moves']} moves; planned in {result['elapsed_ms']:.1f} ms")
    return "\n".join(lines)


def plan_live(
    client: Any, max_moves: int | None = None, planner: str = "drain", baseline: bool = True, **options: Any
) -> dict[str, Any]:
    """The plan for the live cluster (dry run): `hami-fast plan --live` and `kubectl hami plan`.
    `options` are [`plan`]'s objective options (objective, workload, for_pod, max_moves_per_pod)."""
    from hami_fast.descheduler.kube import snapshot_inputs

    return plan(snapshot_inputs(client), max_moves, planner=planner, baseline=baseline, **options)


def render_table(result: dict[str, Any]) -> str:
    if result.get("objective") == "for":
        return render_unblock(result)
    if result.get("objective") == "pending":
        return render_pending(result)
    lines = []
    moves = result["moves"]
    if moves:
        rows = [
            (
                m["pod"],
                place_text(m["from"]),
                place_text(m["to"]),
            )
            for m in moves
        ]
        w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(("POD", "FROM", "TO"))]
        lines.append(f"{'#':>3}  {'POD':<{w[0]}}  {'FROM':<{w[1]}}  TO")
        for i, (p, f, t) in enumerate(rows, 1):
            lines.append(f"{i:>3}  {p:<{w[0]}}  {f:<{w[1]}}  {t}")
    else:
        lines.append("no move improves the cluster within the budget")
    lines.append("")
    cols = [("before", result["before"]), (result["planner"], result["after"])]
    if "baseline" in result:
        cols.append((f"{result['baseline']['planner']} (baseline)", result["baseline"]["after"]))
    moves_row = ["-", str(len(moves))] + ([str(result["baseline"]["moves"])] if "baseline" in result else [])
    width = max(len(c[0]) for c in cols) + 2
    lines.append(f"{'':<26}" + "".join(f"{c[0]:>{width}}" for c in cols))
    lines.append(f"{'moves':<26}" + "".join(f"{m:>{width}}" for m in moves_row))
    for key, label in (
        ("free_whole_gpus", "free whole GPUs"),
        ("fragmentation", "fragmentation (GPUs)"),
        ("fragmentation_pct_of_idle", "fragmentation % of idle"),
    ):
        lines.append(f"{label:<26}" + "".join(f"{c[1][key]:>{width}}" for c in cols))
    lines.append("")
    lines.append(
        f"{result['pods']} GPU pods ({result['movable_pods']} movable) on {result['nodes']} nodes; budget {result['max_moves']} moves; planned in {result['elapsed_ms']:.1f} ms"
    )
    lines += why_nothing_moves(result)
    return "\n".join(lines)


def why_nothing_moves(result: dict[str, Any]) -> list[str]:
    """Why a plan can move little: the pods that may not move, by reason, and a budget of 0."""
    lines = [f"  {count} not movable: {why}" for why, count in sorted((result.get("immovable") or {}).items())]
    if result["max_moves"] == 0 and result["pods"]:
        lines.append("  budget 0 moves: the default is 5 % of the GPU pods, rounded down; --max-moves sets it")
    return lines


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="defragmentation plan (dry run) for a cluster snapshot")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--snapshot", help="Kubernetes List of Nodes and Pods (JSON or YAML), e.g. kubectl get nodes,pods -A -o json"
    )
    src.add_argument("--live", action="store_true", help="plan on the live cluster (kubeconfig)")
    src.add_argument(
        "--replay",
        metavar="NODES_CSV,PODS_CSV",
        help="build the snapshot by replaying a trace (openb CSVs) to --arrived %%",
    )
    p.add_argument("--policy", default=None, help="node policy of --replay (default spread)")
    p.add_argument(
        "--arrived",
        type=positive_float,
        default=None,
        help="--replay stops at this %% of GPU capacity arrived (default 90)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of --replay (default 42)")
    p.add_argument("--save-snapshot", help="write the replayed snapshot (JSON) here")
    p.add_argument("--max-moves", type=non_negative_int, default=None, help="move budget (default: 5%% of GPU pods)")
    p.add_argument("--planner", choices=["drain", "greedy"], default="drain")
    p.add_argument(
        "--objective",
        choices=OBJECTIVES,
        default="free-gpus",
        help="free-gpus (default): most whole free GPUs, then fewest moves, then lowest fragmentation; "
        "frag: FGD's fragmentation against --workload; pending: the snapshot's pending vGPU pods, in order, "
        "each with the fewest moves (what --auto applies)",
    )
    p.add_argument(
        "--workload",
        default="typical",
        help="what fragmentation is measured against: typical (the cluster's own pods), whole-gpu, "
        "or a JSON/YAML file of task types",
    )
    p.add_argument(
        "--max-moves-per-pod",
        type=positive_int,
        default=None,
        help="--objective pending: most moves for one pod (default 8)",
    )
    p.add_argument(
        "--for",
        dest="for_pod",
        metavar="POD",
        help="the fewest moves after which this pending pod fits: a Pod manifest, or namespace/name with --live "
        "(exit 1 when it cannot be unblocked within the budget)",
    )
    p.add_argument("--no-baseline", action="store_true", help="skip the greedy baseline beside the plan")
    p.add_argument("--output", choices=["json", "table"], default="table")
    p.add_argument(
        "--apply",
        action="store_true",
        help="with --live: write one HamiPodPlacement per move, in order, waiting for each",
    )
    p.add_argument(
        "--kubeconfig", default="", help="for --live / --apply (default: KUBECONFIG, ~/.kube/config, in-cluster)"
    )
    p.add_argument(
        "--interval", type=non_negative_float, default=5.0, help="--apply: seconds between moves (rate limit)"
    )
    p.add_argument(
        "--move-timeout", type=positive_float, default=900.0, help="--apply: seconds to wait for each placement"
    )
    p.add_argument(
        "--reservation-ttl",
        type=non_negative_float,
        default=600.0,
        help="--apply --for: seconds the freed GPUs stay held for the pod after the last completed move (default 600)",
    )

    device_config.add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        client = None
        if args.apply and not args.live:
            raise ValueError("--apply needs --live: moves are only applied to the cluster they were planned on")
        replay_only = {"--policy": args.policy, "--arrived": args.arrived, "--seed": args.seed}
        replay_only["--save-snapshot"] = args.save_snapshot
        given = [flag for flag, value in replay_only.items() if value is not None]
        if given and not args.replay:
            raise ValueError(f"{given[0]} applies to --replay only (the trace replayed into a snapshot)")
        if args.live:
            from hami_fast.kube.client import KubeClient, load_api_client

            client = KubeClient(load_api_client(args.kubeconfig), qps=20, burst=40)
            inputs = None
        elif args.snapshot:
            inputs = [snapshot_bytes(args.snapshot)]
        else:
            nodes, _, pods = args.replay.partition(",")
            if not pods:
                raise ValueError("--replay wants NODES_CSV,PODS_CSV")
            for path in (nodes, pods):
                require_file(path, "--replay")
            snap = _native.replay_snapshot(
                Path(nodes).read_bytes(),
                Path(pods).read_bytes(),
                args.policy or "spread",
                90.0 if args.arrived is None else args.arrived,
                42 if args.seed is None else args.seed,
                nodes_name=nodes,
                pods_name=pods,
            )
            if args.save_snapshot:
                Path(args.save_snapshot).write_bytes(snap)
            inputs = [snap]
        workload = load_workload(args.workload)
        for_pod = load_pending_pod(args.for_pod, client) if args.for_pod else None
        try:
            options = dict(
                objective=args.objective,
                workload=workload,
                for_pod=for_pod,
                max_moves_per_pod=args.max_moves_per_pod,
                config=device_config.from_args(args).engine_config(),
            )
            if inputs is None:
                result = plan_live(client, args.max_moves, args.planner, baseline=not args.no_baseline, **options)
            else:
                result = plan(inputs, args.max_moves, planner=args.planner, baseline=not args.no_baseline, **options)
        except _native.EngineError as exc:
            raise ValueError(f"{args.snapshot or args.replay}: {exc}") from exc
        if args.output == "json":
            sys.stdout.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            print(render_table(result))
        if for_pod is not None and not result["unblocked"]:
            return 1
        if args.apply and client is not None:
            from hami_fast.descheduler.apply import apply_for, apply_moves
            from hami_fast.descheduler.status import COMPLETED

            say = lambda m: print(m, file=sys.stderr)  # noqa: E731
            if for_pod is not None:
                done = apply_for(client, result, args.reservation_ttl, args.interval, args.move_timeout, say=say)
            else:
                done = apply_moves(client, result["moves"], args.interval, args.move_timeout, say=say)
            return 0 if all(r["phase"] == COMPLETED for r in done) and len(done) == len(result["moves"]) else 1
        return 0

    p.set_defaults(func=run)
