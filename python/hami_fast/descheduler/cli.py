"""`hami-fast descheduler`: REST API on 8083 + pinning webhook + HamiPodPlacement controller."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hami_fast import device_config
from hami_fast.config import parse_bool, parse_duration
from hami_fast.descheduler import listeners
from hami_fast.descheduler.access import AUTH_MODES, auth_mode
from hami_fast.server import logs
from hami_fast.server.guard import Guarded
from hami_fast.server.listen import ListenError
from hami_fast.server.router import Route

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # the format generate_latest writes

log = logging.getLogger("hami_fast.descheduler")


def duration(value: str) -> float:
    """Seconds, or a Go duration such as `5m`, `90s`, `1h30m` (as the Helm chart writes them)."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def flag(value: str) -> bool:
    try:
        return parse_bool(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"want a whole number of at least 1, got {value!r}")
    return number


def add_arguments(p: argparse.ArgumentParser) -> None:
    # Flag spellings follow the Helm chart (deploy/helm/hami-fast/templates/descheduler/deployment.yaml).
    p.add_argument(
        "--bind",
        "--http_bind",
        "--http-bind",
        dest="bind",
        default="127.0.0.1:8083",
        help="REST API and GPU map address (default 127.0.0.1:8083; in a cluster 0.0.0.0:8083);"
        " serves /webhook too unless --webhook-bind is set",
    )
    p.add_argument(
        "--webhook-bind",
        default="",
        help="separate listener for the pinning webhook alone (TLS with --cert-file/--key-file)",
    )
    p.add_argument(
        "--api-auth",
        choices=AUTH_MODES,
        default="auto",
        help="who may use the API: kubernetes = a bearer token checked with TokenReview and SubjectAccessReview;"
        " none = anyone who reaches it; auto (default) = none on a loopback --bind, else kubernetes",
    )
    p.add_argument(
        "--api-auth-cache-ttl",
        type=duration,
        default=10.0,
        help="how long a TokenReview's and a SubjectAccessReview's answer is reused (default 10s, as kube-apiserver's)",
    )
    p.add_argument(
        "--api-tls",
        type=flag,
        nargs="?",
        const=True,
        default=False,
        help="serve the API over TLS with --cert-file/--key-file (always so without --webhook-bind)",
    )
    p.add_argument(
        "--local-bind",
        default="",
        help="a second API listener without authentication, loopback only (in a pod: reached through"
        " kubectl port-forward, which the API server authorises); off by default",
    )
    p.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--snapshot", default="", help="serve the read-only API on a snapshot file instead of a cluster")
    p.add_argument(
        "--scheduler-name", default="hami-scheduler", help="pods pinned by the webhook must use this scheduler"
    )
    p.add_argument(
        "--leader-elect",
        type=flag,
        nargs="?",
        const=True,
        default=False,
        help="lead through the descheduler's own Lease; followers serve the API read-only",
    )
    p.add_argument("--lease-name", "--leader-elect-resource-name", dest="lease_name", default="hami-gpu-descheduler")
    p.add_argument(
        "--lease-namespace",
        "--leader-elect-resource-namespace",
        dest="lease_namespace",
        default=os.environ.get("POD_NAMESPACE", "kube-system"),
    )
    p.add_argument(
        "--eviction-mode",
        choices=["Eviction"],
        default="Eviction",
        help="only the Eviction API: pods are never deleted directly",
    )
    p.add_argument(
        "--dry-run", type=flag, nargs="?", const=True, default=False, help="validate placements, never evict"
    )
    p.add_argument(
        "--eviction-timeout",
        type=duration,
        default=300.0,
        help="how long a disruption budget may block an eviction (seconds or a Go duration; default 5m0s)",
    )
    p.add_argument(
        "--replacement-timeout",
        type=duration,
        default=600.0,
        help="how long to wait for the evicted pod's replacement (default 10m0s)",
    )
    p.add_argument(
        "--bind-timeout", type=duration, default=900.0, help="how long the replacement may take to bind (default 15m0s)"
    )
    p.add_argument(
        "--period",
        "--resync-period",
        dest="period",
        type=duration,
        default=30.0,
        help="resync: every placement is reconciled at least this often; watch events act at once (default 30s)",
    )
    p.add_argument(
        "--placement-ttl",
        type=duration,
        default=3600.0,
        help="a Pending placement no pod consumed fails as Expired this long after creation; 0: never (default 1h)",
    )
    p.add_argument(
        "--max-in-flight",
        type=int,
        default=2,
        help="evictions whose replacement has not completed yet, cluster-wide (one per workload always)",
    )
    p.add_argument(
        "--cert-file",
        "--cert_file",
        dest="cert_file",
        default="",
        help="TLS certificate (for the webhook listener, else the API)",
    )
    p.add_argument("--key-file", "--key_file", dest="key_file", default="")
    # Automatic mode (descheduler/auto.py).
    p.add_argument(
        "--auto",
        type=flag,
        nargs="?",
        const=True,
        default=False,
        help="unblock pods Pending for lack of vGPU resources: plan --for them (oldest first) and apply (off by default)",
    )
    p.add_argument("--max-moves-per-hour", type=int, default=6, help="--auto: most evictions in any hour (default 6)")
    p.add_argument(
        "--max-moves-per-pending-pod", type=int, default=4, help="--auto: most moves for one pod (default 4)"
    )
    p.add_argument(
        "--selector",
        default="hami-fast.io/movable=true",
        help="--auto: label selector of the pods it may move (default hami-fast.io/movable=true; '' = none by label)",
    )
    p.add_argument(
        "--namespace-selector",
        default="",
        help="--auto: label selector of namespaces whose pods it may move (default none)",
    )
    p.add_argument("--auto-period", type=duration, default=30.0, help="--auto: seconds between passes (default 30s)")
    p.add_argument(
        "--max-concurrent-moves",
        type=positive,
        default=2,
        help="--auto: pending pods whose moves run at once, in the background (default 2; one move per pod at a time)",
    )
    p.add_argument(
        "--moves-configmap",
        default="hami-gpu-descheduler-auto-moves",
        help="--auto: ConfigMap (in --lease-namespace) recording the hour's moves for --max-moves-per-hour",
    )
    p.add_argument(
        "--reservation-ttl",
        type=duration,
        default=600.0,
        help="--auto: how long freed GPUs stay held for the pending pod after its last move (default 10m0s)",
    )
    p.add_argument("--kube-qps", type=float, default=20.0, help="API client queries per second (default 20)")
    p.add_argument("--kube-burst", type=int, default=40, help="API client burst (default 40)")
    device_config.add_arguments(p)
    logs.add_arguments(p)


class Runtime:
    def __init__(self, args: argparse.Namespace, stop: threading.Event | None = None) -> None:
        from hami_fast.descheduler.api import ApiApp, Source, webhook_app
        from hami_fast.descheduler.controller import Controller, ControllerLoop, Timeouts
        from hami_fast.descheduler.planner import snapshot_bytes
        from hami_fast.descheduler.view import ClusterView
        from hami_fast.descheduler.webhook import Pinner
        from hami_fast.kube.lease import Leadership, LeaseElector

        self.args = args
        self.stop = stop or threading.Event()
        self.threads: list[threading.Thread] = []
        self.leading = Leadership()
        self.elector: Any = None
        engine_config = device_config.from_args(args).engine_config()
        if args.snapshot:
            source = Source(snapshot=snapshot_bytes(args.snapshot), config=engine_config)
            pinner = None
        else:
            from hami_fast.kube.client import KubeClient, load_api_client

            client = KubeClient(load_api_client(args.kubeconfig), args.kube_qps, args.kube_burst)
            # One view of the cluster (nodes and pods, watched) for the controller, --auto and the API.
            self.view = ClusterView.watching(client, self.stop, engine_config)
            if args.leader_elect:
                self.elector = LeaseElector(client, args.lease_namespace, args.lease_name, self.stop)
                self.leading = self.elector.leading
                self.threads.append(self.elector)
            else:
                self.leading.set()
            timeouts = Timeouts(
                eviction=args.eviction_timeout,
                replacement=args.replacement_timeout,
                bind=args.bind_timeout,
                max_in_flight=args.max_in_flight,
                ttl=args.placement_ttl,
            )
            self.controller = Controller(
                client,
                timeouts,
                dry_run=args.dry_run,
                config=engine_config,
                scheduler_name=args.scheduler_name,
                stop=self.stop,
                view=self.view,
            )
            source = Source(
                client, config=engine_config, view=self.view, placement_store=self.controller.placements.store
            )
            # One placement informer feeds the controller and the webhook (every replica watches; only the leader acts).
            pinner = Pinner(
                client,
                args.scheduler_name,
                self.controller.placements,
                ttl=args.placement_ttl,
                leading=self.leading.is_set if args.leader_elect else None,
                term=(lambda: self.elector.terms) if args.leader_elect else None,
                engine_config=engine_config,
            )
            self.threads.append(ControllerLoop(self.controller, self.leading, self.stop, args.period))
            if args.auto:
                self.threads.append(self.auto_loop(client))
        self.executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="desched-api")
        self.app = ApiApp(source, pinner, self.leading.is_set, self.executor, webhook=not args.webhook_bind)
        self.webhook_app = webhook_app(pinner, self.executor)
        if not args.snapshot:
            self.app.add(Route("GET", "/metrics", lambda _: (200, self.controller.metrics.render(), PROMETHEUS_TEXT)))
        self.access = self.kube_access(source.client)

    def kube_access(self, client: Any) -> Any:
        """The KubeAccess guarding the API, or None when --api-auth resolves to none."""
        from hami_fast.kube.access import KubeAccess
        from hami_fast.kube.client import KubeClient

        if auth_mode(self.args.api_auth, self.args.bind, client is None) == "none":
            return None
        # Its own rate limit: a flood of bad tokens must not slow the controller's calls.
        limited = KubeClient(client.api_client, self.args.kube_qps, self.args.kube_burst)
        return KubeAccess(limited, ttl=self.args.api_auth_cache_ttl)

    def auto_loop(self, client: Any) -> threading.Thread:
        from hami_fast.descheduler.auto import AutoLoop, AutoMover, AutoOptions

        a = self.args
        options = AutoOptions(
            max_moves_per_hour=a.max_moves_per_hour,
            max_moves_per_pod=a.max_moves_per_pending_pod,
            selector=a.selector,
            namespace_selector=a.namespace_selector,
            dry_run=a.dry_run,
            period=a.auto_period,
            reservation_ttl=a.reservation_ttl,
            max_concurrent_moves=a.max_concurrent_moves,
            record_namespace=a.lease_namespace,
            record_name=a.moves_configmap,
        )
        log.info("automatic mode on%s: pods matching %r may move", " (dry run)" if a.dry_run else "", a.selector)
        mover = AutoMover(
            client, options, self.controller.metrics, leading=self.leading.is_set, stop=self.stop, view=self.view
        )
        return AutoLoop(mover, self.leading, self.stop)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    async def serve(self, ready: threading.Event | None = None) -> None:
        found = listeners.build(self.args, self.app, self.webhook_app, self.access)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (RuntimeError, ValueError):
                pass
        try:
            running = await listeners.serve_all(found, self.args, self.stop)
        except ListenError:
            self.close(found)
            raise
        listeners.warn_if_open(self.args, self.access is not None)
        log.info(listeners.describe(self.args, self.access is not None))
        if ready:
            ready.set()
        while not any(task.done() for _, task in running) and not self.stop.is_set():
            await asyncio.sleep(0.2)
        await listeners.stop_all(running)
        self.stop.set()
        self.close(found)

    def close(self, found: list[listeners.Listener]) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        for listener in found:
            if isinstance(listener.app, Guarded):
                listener.app.close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("descheduler", help="GPU descheduler: placements controller, pinning webhook, REST API on 8083")
    add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        logs.setup(args.log_level, args.log_format)
        listeners.check(args)  # a busy port or flags that cannot work fail before the cluster is touched
        runtime = Runtime(args)
        runtime.start()
        asyncio.run(runtime.serve())
        return 0

    p.set_defaults(func=run)
