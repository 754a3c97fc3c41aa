"""`hami-fast descheduler`: REST API on 8083 + pinning webhook + HamiPodPlacement controller."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hami_fast.descheduler import config, listeners
from hami_fast.descheduler.access import auth_mode
from hami_fast.descheduler.config import DeschedulerConfig
from hami_fast.server import logs
from hami_fast.server.guard import Guarded
from hami_fast.server.listen import ListenError
from hami_fast.server.router import Route

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # the format generate_latest writes

log = logging.getLogger("hami_fast.descheduler")


def add_arguments(p: argparse.ArgumentParser) -> None:
    config.add_arguments(p)


class Runtime:
    def __init__(self, config: DeschedulerConfig, stop: threading.Event | None = None) -> None:
        from hami_fast.descheduler.api import ApiApp, Source, webhook_app
        from hami_fast.descheduler.controller import Controller, ControllerLoop, Timeouts
        from hami_fast.descheduler.planner import snapshot_bytes
        from hami_fast.descheduler.view import ClusterView
        from hami_fast.descheduler.webhook import Pinner
        from hami_fast.kube.lease import Leadership, LeaseElector

        self.config = config
        self.stop = stop or threading.Event()
        self.threads: list[threading.Thread] = []
        self.leading = Leadership()
        self.elector: Any = None
        engine_config = config.engine_config()
        if config.snapshot:
            source = Source(snapshot=snapshot_bytes(config.snapshot), config=engine_config)
            pinner = None
        else:
            from hami_fast.kube.client import KubeClient, load_api_client

            client = KubeClient(load_api_client(config.kubeconfig), config.kube_qps, config.kube_burst)
            # One view of the cluster (nodes and pods, watched) for the controller, --auto and the API.
            self.view = ClusterView.watching(client, self.stop, engine_config)
            if config.leader_elect:
                self.elector = LeaseElector(client, config.lease_namespace, config.lease_name, self.stop)
                self.leading = self.elector.leading
                self.threads.append(self.elector)
            else:
                self.leading.set()
            self.controller = Controller(
                client,
                Timeouts.of(config),
                dry_run=config.dry_run,
                config=engine_config,
                scheduler_name=config.scheduler_name,
                stop=self.stop,
                view=self.view,
            )
            source = Source(
                client, config=engine_config, view=self.view, placement_store=self.controller.placements.store
            )
            # One placement informer feeds the controller and the webhook (every replica watches; only the leader acts).
            pinner = Pinner(
                client,
                config.scheduler_name,
                self.controller.placements,
                ttl=config.placement_ttl,
                leading=self.leading.is_set if config.leader_elect else None,
                term=(lambda: self.elector.terms) if config.leader_elect else None,
                engine_config=engine_config,
            )
            self.threads.append(ControllerLoop(self.controller, self.leading, self.stop, config.period))
            if config.auto:
                self.threads.append(self.auto_loop(client))
        self.executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="desched-api")
        self.app = ApiApp(source, pinner, self.leading.is_set, self.executor, webhook=not config.webhook_bind)
        self.webhook_app = webhook_app(pinner, self.executor)
        if not config.snapshot:
            self.app.add(Route("GET", "/metrics", lambda _: (200, self.controller.metrics.render(), PROMETHEUS_TEXT)))
        self.access = self.kube_access(source.client)

    def kube_access(self, client: Any) -> Any:
        """The KubeAccess guarding the API, or None when --api-auth resolves to none."""
        from hami_fast.kube.access import KubeAccess
        from hami_fast.kube.client import KubeClient

        if auth_mode(self.config.api_auth, self.config.bind, client is None) == "none":
            return None
        # Its own rate limit: a flood of bad tokens must not slow the controller's calls.
        limited = KubeClient(client.api_client, self.config.kube_qps, self.config.kube_burst)
        return KubeAccess(limited, ttl=self.config.api_auth_cache_ttl)

    def auto_loop(self, client: Any) -> threading.Thread:
        from hami_fast.descheduler.auto import AutoLoop, AutoMover, AutoOptions

        a = self.config
        options = AutoOptions.of(a)
        log.info("automatic mode on%s: pods matching %r may move", " (dry run)" if a.dry_run else "", a.selector)
        mover = AutoMover(
            client, options, self.controller.metrics, leading=self.leading.is_set, stop=self.stop, view=self.view
        )
        return AutoLoop(mover, self.leading, self.stop)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    async def serve(self, ready: threading.Event | None = None) -> None:
        found = listeners.build(self.config, self.app, self.webhook_app, self.access)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self.stop.set)
            except (RuntimeError, ValueError):
                pass
        try:
            running = await listeners.serve_all(found, self.config, self.stop)
        except ListenError:
            self.close(found)
            raise
        listeners.warn_if_open(self.config, self.access is not None)
        log.info(listeners.describe(self.config, self.access is not None))
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
        options = config.load(args)
        logs.setup(options.log_level, options.log_format)
        listeners.check(options)  # a busy port or flags that cannot work fail before the cluster is touched
        runtime = Runtime(options)
        runtime.start()
        asyncio.run(runtime.serve())
        return 0

    p.set_defaults(func=run)
