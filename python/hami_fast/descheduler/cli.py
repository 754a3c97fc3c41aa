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

log = logging.getLogger("hami_fast.descheduler")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bind", default="0.0.0.0:8083", help="REST API and webhook address (default 0.0.0.0:8083)")
    p.add_argument("--kubeconfig", default="", help="kubeconfig path (default: KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--snapshot", default="", help="serve the read-only API on a snapshot file instead of a cluster")
    p.add_argument("--leader-elect", action="store_true", help="lead through the descheduler's own Lease; followers serve the API read-only")
    p.add_argument("--lease-name", default="hami-gpu-descheduler")
    p.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "kube-system"))
    p.add_argument("--dry-run", action="store_true", help="validate placements, never evict")
    p.add_argument("--eviction-timeout", type=float, default=300.0)
    p.add_argument("--replacement-timeout", type=float, default=600.0)
    p.add_argument("--bind-timeout", type=float, default=900.0)
    p.add_argument("--period", type=float, default=1.0, help="reconcile period, seconds")
    p.add_argument("--cert-file", default="", help="serve HTTPS with this certificate (webhooks need TLS in a real cluster)")
    p.add_argument("--key-file", default="")
    p.add_argument("--kube-qps", type=float, default=20.0)
    p.add_argument("--kube-burst", type=int, default=40)


class Runtime:
    def __init__(self, args: argparse.Namespace, stop: threading.Event | None = None) -> None:
        from hami_fast.descheduler.api import ApiApp, Source
        from hami_fast.descheduler.controller import Controller, ControllerLoop, Timeouts
        from hami_fast.descheduler.kube import LeaseElector
        from hami_fast.descheduler.planner import snapshot_bytes
        from hami_fast.descheduler.webhook import Pinner

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
            pinner = Pinner(client)
            if args.leader_elect:
                elector = LeaseElector(client, args.lease_namespace, args.lease_name, self.stop)
                self.leading = elector.leading
                self.threads.append(elector)
            else:
                self.leading.set()
            timeouts = Timeouts(eviction=args.eviction_timeout, replacement=args.replacement_timeout, bind=args.bind_timeout)
            self.controller = Controller(client, timeouts, dry_run=args.dry_run)
            self.threads.append(ControllerLoop(self.controller, self.leading, self.stop, args.period))
        self.executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="desched-api")
        self.app = ApiApp(source, pinner, self.leading.is_set, self.executor)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    async def serve(self, ready: threading.Event | None = None) -> None:
        host, _, port = self.args.bind.rpartition(":")
        tls: dict[str, Any] = {"ssl_cert": Path(self.args.cert_file), "ssl_key": Path(self.args.key_file)} if self.args.cert_file else {}
        server = Server(self.app, address=host or "0.0.0.0", port=int(port), interface=Interfaces.RSGI, log_enabled=False, **tls)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (RuntimeError, ValueError):
                pass
        task = asyncio.create_task(server.serve())
        log.info("descheduler API on %s", self.args.bind)
        if ready:
            loop.call_later(0.3, ready.set)
        while not task.done() and not self.stop.is_set():
            await asyncio.sleep(0.2)
        server.stop()
        await task
        self.stop.set()
        self.executor.shutdown(wait=False, cancel_futures=True)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("descheduler", help="GPU descheduler: placements controller, pinning webhook, REST API on 8083")
    add_arguments(p)

    def run(args: argparse.Namespace) -> int:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
        runtime = Runtime(args)
        runtime.start()
        asyncio.run(runtime.serve())
        return 0

    p.set_defaults(func=run)
