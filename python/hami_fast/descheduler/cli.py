"""`hami-fast descheduler`: REST API on 8083 + pinning webhook + HamiPodPlacement controller."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from granian.constants import Interfaces
from granian.server.embed import Server

from hami_fast.config import parse_duration
from hami_fast.server import logs
from hami_fast.server.listen import ListenError, start_listening

log = logging.getLogger("hami_fast.descheduler")


def duration(value: str) -> float:
    """Seconds, or a Go duration such as `5m`, `90s`, `1h30m` (as the Helm chart writes them)."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def flag(value: str) -> bool:
    if value.lower() in ("1", "t", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {value!r}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    # Flag spellings follow the Helm chart (deploy/helm/hami-fast/templates/descheduler/deployment.yaml).
    p.add_argument(
        "--bind",
        "--http_bind",
        "--http-bind",
        dest="bind",
        default="0.0.0.0:8083",
        help="REST API address (default 0.0.0.0:8083); serves /webhook too unless --webhook-bind is set",
    )
    p.add_argument(
        "--webhook-bind", default="", help="separate listener for the pinning webhook (TLS with --cert-file/--key-file)"
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
    p.add_argument("--period", type=duration, default=1.0, help="reconcile period (default 1s)")
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
    p.add_argument("--kube-qps", type=float, default=20.0, help="API client queries per second (default 20)")
    p.add_argument("--kube-burst", type=int, default=40, help="API client burst (default 40)")
    logs.add_arguments(p)


class Runtime:
    def __init__(self, args: argparse.Namespace, stop: threading.Event | None = None) -> None:
        from hami_fast.descheduler.api import ApiApp, Source
        from hami_fast.descheduler.controller import Controller, ControllerLoop, Timeouts
        from hami_fast.descheduler.planner import snapshot_bytes
        from hami_fast.descheduler.webhook import Pinner
        from hami_fast.kube.lease import LeaseElector

        self.args = args
        self.stop = stop or threading.Event()
        self.threads: list[threading.Thread] = []
        self.leading = threading.Event()
        if args.snapshot:
            source = Source(snapshot=snapshot_bytes(args.snapshot))
            pinner = None
        else:
            from hami_fast.kube.client import KubeClient, load_api_client

            client = KubeClient(load_api_client(args.kubeconfig), args.kube_qps, args.kube_burst)
            source = Source(client=client)
            pinner = Pinner(client, args.scheduler_name)
            if args.leader_elect:
                elector = LeaseElector(client, args.lease_namespace, args.lease_name, self.stop)
                self.leading = elector.leading
                self.threads.append(elector)
            else:
                self.leading.set()
            timeouts = Timeouts(
                eviction=args.eviction_timeout,
                replacement=args.replacement_timeout,
                bind=args.bind_timeout,
                max_in_flight=args.max_in_flight,
            )
            self.controller = Controller(client, timeouts, dry_run=args.dry_run, scheduler_name=args.scheduler_name)
            self.threads.append(ControllerLoop(self.controller, self.leading, self.stop, args.period))
        self.executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="desched-api")
        self.app = ApiApp(source, pinner, self.leading.is_set, self.executor)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    async def serve(self, ready: threading.Event | None = None) -> None:
        def listener(bind: str, tls: bool) -> Server:
            host, _, port = bind.rpartition(":")
            ssl: dict[str, Any] = (
                {"ssl_cert": Path(self.args.cert_file), "ssl_key": Path(self.args.key_file)} if tls else {}
            )
            return Server(
                self.app, address=host or "0.0.0.0", port=int(port), interface=Interfaces.RSGI, log_enabled=False, **ssl
            )

        has_tls = bool(self.args.cert_file and self.args.key_file)
        servers = [listener(self.args.bind, has_tls and not self.args.webhook_bind)]
        if self.args.webhook_bind:
            servers.append(listener(self.args.webhook_bind, has_tls))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (RuntimeError, ValueError):
                pass
        binds = [self.args.bind] + ([self.args.webhook_bind] if self.args.webhook_bind else [])
        tasks: list[asyncio.Task[None]] = []
        try:
            for server, bind in zip(servers, binds, strict=True):
                tasks.append(await start_listening(server, bind))
        except ListenError:
            for server, task in zip(servers, tasks, strict=False):
                server.stop()
                await task
            self.stop.set()
            self.executor.shutdown(wait=False, cancel_futures=True)
            raise
        log.info(
            "descheduler API on %s%s",
            self.args.bind,
            f", webhook on {self.args.webhook_bind}" if self.args.webhook_bind else "",
        )
        if ready:
            ready.set()
        while not any(t.done() for t in tasks) and not self.stop.is_set():
            await asyncio.sleep(0.2)
        for server in servers:
            server.stop()
        for task in tasks:
            await task
        self.stop.set()
        self.executor.shutdown(wait=False, cancel_futures=True)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("descheduler", help="GPU descheduler: placements controller, pinning webhook, REST API on 8083")
    add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        logs.setup(args.log_level, args.log_format)
        runtime = Runtime(args)
        runtime.start()
        asyncio.run(runtime.serve())
        return 0

    p.set_defaults(func=run)
