"""`hami-fast serve`: wire the cluster source, the scheduler, Granian (embedded, one process) and metrics."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

from hami_fast._native import Cluster
from hami_fast.config import Config, split_address
from hami_fast.kube import events as kube_events
from hami_fast.kube.handshake import Handshaker, kube_node_patcher, memory_node_patcher
from hami_fast.kube.leader import AlwaysLeader
from hami_fast.kube.lease import Leadership, LeaseFollower, leading_guard
from hami_fast.kube.nodelock import LOCK_KEY
from hami_fast.kube.writer import MemoryWriter
from hami_fast.manifests import load_objects, require_nodes
from hami_fast.server.app import App
from hami_fast.server.binding_support import effective_allocation_write
from hami_fast.server.listen import ListenError, probe, start_listening
from hami_fast.server.metrics import Metrics, serve_metrics
from hami_fast.server.preempt import PreemptionApi, Preemptor
from hami_fast.server.requeue import Requeuer, TokenBucket
from hami_fast.server.scheduler import Scheduler

log = logging.getLogger("hami_fast.serve")

# How long the queued Events may take to go out at shutdown: at HAMi's client limits (QPS 5) a
# burst of distinct events needs seconds, and a pod's grace period (30 s by default) allows it.
SHUTDOWN_EVENT_FLUSH = 10.0

# Preemptions carried out per second at most, and at once: each evicts pods, so few and deliberate.
PREEMPTIONS_PER_SECOND = 1.0
PREEMPTION_BURST = 3


@dataclass
class Runtime:
    """Everything one serving process owns."""

    config: Config
    cluster: Cluster
    scheduler: Scheduler
    stop: threading.Event
    metrics: Metrics
    threads: list[Any] = field(default_factory=list)
    reflectors: list[Any] = field(default_factory=list)
    memory: MemoryWriter | None = None
    events: Any = None
    event_sink: kube_events.EventSink | None = None
    requeuer: Requeuer | None = None
    preemptor: Preemptor | None = None


def scheduler_leading() -> Leadership:
    return AlwaysLeader().leading


def _memory_runtime(
    config: Config, cluster: Cluster, metrics: Metrics, objects: list[dict[str, Any]], stop: threading.Event
) -> Runtime:
    cluster.apply(orjson.dumps({"kind": "List", "items": objects}, default=str))
    writer = MemoryWriter(cluster, objects)
    writer.stamp_keys = tuple(key for key, _ in cluster.stamp_locks())
    memory_events = kube_events.MemoryEvents()
    sink = kube_events.EventSink(memory_events, capacity=config.event_queue_size, posters=1)
    metrics.watch_events(sink)
    synced = threading.Event()
    synced.set()

    scheduler = Scheduler(
        config, cluster, writer, sink.emit, metrics, synced, AlwaysLeader().leading, before_patch=writer.remember_pod
    )
    handshake = Handshaker(
        cluster, memory_node_patcher(cluster, writer.nodes, writer.lock), scheduler_leading(), synced, stop
    )
    runtime = Runtime(
        config,
        cluster,
        scheduler,
        stop,
        metrics,
        threads=[handshake],
        memory=writer,
        events=memory_events,
        event_sink=sink,
    )
    return runtime


def _kube_runtime(config: Config, cluster: Cluster, metrics: Metrics, stop: threading.Event) -> Runtime:
    from hami_fast.kube.client import KubeClient, load_api_client
    from hami_fast.kube.reflector import NODES, PODS, QUOTAS, Reflector, Resource, Store
    from hami_fast.kube.writer import KubeWriter, NodeLockFeed, NodeLocks, PodKeys

    client = KubeClient(load_api_client(config.kubeconfig), config.kube_qps, config.kube_burst, config.kube_timeout)
    config = effective_allocation_write(config, client)
    nodes = Resource(NODES.kind, NODES.path, config.node_label_selector)
    node_locks = NodeLocks(tuple(key for key, _ in cluster.stamp_locks()))
    pods = PodKeys(cluster)
    stores: tuple[Store, ...] = (NodeLockFeed(cluster, node_locks), pods, cluster)
    reflectors = [
        Reflector(client, store, r, stop, watch_seconds=int(config.watch_timeout))
        for store, r in zip(stores, (nodes, PODS, QUOTAS), strict=True)
    ]
    gate = SyncGate([r.stats.synced for r in reflectors], stop)
    if config.leader_elect:
        namespace = config.leader_elect_resource_namespace or os.environ.get("POD_NAMESPACE", "kube-system")
        leader: Any = LeaseFollower(
            client, namespace, config.leader_elect_resource_name, stop, identity=os.environ.get("POD_NAME", "")
        )
    else:
        leader = AlwaysLeader()
    sink = kube_events.EventSink(kube_events.KubeEventApi(client), capacity=config.event_queue_size)
    metrics.watch_events(sink)
    scheduler = Scheduler(
        config,
        cluster,
        KubeWriter(client, node_locks, pods, guard=leading_guard(leader.leading)),
        sink.emit,
        metrics,
        gate.synced,
        leader.leading,
    )
    requeuer = _requeuer(config, cluster, scheduler, stop)
    preemptor = _preemptor(config, cluster, scheduler, client, sink.emit, stop)
    wakers = [t.wake for t in (requeuer, preemptor) if t is not None]
    reflectors[0].on_event = lambda node, line: _node_event(scheduler, node_locks, node, line, wakers)
    reflectors[1].on_event = reflectors[2].on_event = lambda _key, _line: _wake(wakers)
    handshake = Handshaker(cluster, kube_node_patcher(client, node_locks.observe), leader.leading, gate.synced, stop)
    threads = [*reflectors, gate, handshake, *([leader] if isinstance(leader, LeaseFollower) else [])]
    runtime = Runtime(
        config, cluster, scheduler, stop, metrics, threads=threads, reflectors=reflectors, events=sink, event_sink=sink
    )
    if requeuer:
        runtime.threads.append(requeuer)
        runtime.requeuer = requeuer
    if preemptor:
        runtime.threads.append(preemptor)
        runtime.preemptor = preemptor
    return runtime


def _wake(wakers: list[Any]) -> None:
    for wake in wakers:
        wake()


def _preemptor(
    config: Config, cluster: Cluster, scheduler: Scheduler, client: Any, emit: Any, stop: threading.Event
) -> Preemptor | None:
    """vGPU-aware preemption (off with --vgpu-preemption=false): a few preemptions a second at most."""
    if not config.vgpu_preemption:
        return None
    bucket = TokenBucket(PREEMPTIONS_PER_SECOND, PREEMPTION_BURST)
    api = PreemptionApi(client)
    return Preemptor(cluster, api, emit, scheduler.metrics, scheduler.ready, stop, bucket, config.scheduler_name)


def _requeuer(config: Config, cluster: Cluster, scheduler: Scheduler, stop: threading.Event) -> Requeuer | None:
    """Retry at release (off with --requeue-qps=0): every pod and quota event, and every node event,
    may free vGPU capacity."""
    if config.requeue_qps <= 0:
        return None
    bucket = TokenBucket(config.requeue_qps, config.requeue_burst)
    return Requeuer(cluster, scheduler.writer.patch_pod, scheduler.metrics, scheduler.ready, stop, bucket)


def _node_event(scheduler: Scheduler, node_locks: Any, node: str, line: bytes, wakers: list[Any]) -> None:
    """Every node event keeps the node's lock and resourceVersion for the next lock read (saving its
    GET) and wakes the binds queued on the node once its lock is gone (or a backend's own lock was
    just released); events that still show a lock
    (heartbeats, the lock just taken) wake nobody. Expiry and dangling owners are caught by the
    queue's periodic recheck."""
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        node_locks.forget(node)
        return
    meta = (event.get("object") or {}).get("metadata") or {}
    released = False
    if event.get("type") == "DELETED":
        node_locks.drop(node)
    else:
        released = node_locks.observe(node, meta)
    if scheduler.binds.waiting_on(node) and (released or not (meta.get("annotations") or {}).get(LOCK_KEY)):
        scheduler.binds.node_changed(node)
    _wake(wakers)


class SyncGate(threading.Thread):
    """Sets `synced` once every reflector has completed its first list."""

    def __init__(self, parts: list[threading.Event], stop: threading.Event) -> None:
        super().__init__(name="sync-gate", daemon=True)
        self.parts, self.stop_event = parts, stop
        self.synced = threading.Event()

    def run(self) -> None:
        for part in self.parts:
            while not part.wait(0.5):
                if self.stop_event.is_set():
                    return
        self.synced.set()
        log.info("caches synced")


def build_runtime(config: Config, stop: threading.Event | None = None) -> Runtime:
    stop = stop or threading.Event()
    cluster = Cluster(config.engine_config())
    metrics = Metrics(cluster)
    if config.snapshot:
        objects = require_nodes(load_objects(config.snapshot), config.snapshot)
        log.info("cluster source: the in-memory cluster of %s", config.snapshot, extra={"source": "snapshot"})
        runtime = _memory_runtime(config, cluster, metrics, objects, stop)
    elif config.demo or not _kube_reachable(config):
        from hami_fast.demo.cluster import demo_nodes

        log.info("cluster source: the built-in demo cluster (no cluster configured)", extra={"source": "demo"})
        runtime = _memory_runtime(config, cluster, metrics, demo_nodes(50), stop)
    else:
        runtime = _kube_runtime(config, cluster, metrics, stop)
    for thread in runtime.threads:
        thread.start()
    return runtime


def _kube_reachable(config: Config) -> bool:
    if config.kubeconfig or os.environ.get("KUBECONFIG") or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True  # a named kubeconfig that is missing is an error, not the demo cluster
    return (Path.home() / ".kube" / "config").is_file()


def _cert_stamp(config: Config) -> tuple[float, float]:
    if not config.tls:
        return (0.0, 0.0)
    return (Path(config.cert_file).stat().st_mtime, Path(config.key_file).stat().st_mtime)


async def run_http(runtime: Runtime, ready: threading.Event | None = None) -> None:
    """Serve until stopped; a rotated certificate restarts the listener (state stays in this process)."""
    config = runtime.config
    host, port = split_address(config.http_bind, "127.0.0.1")
    executor = ThreadPoolExecutor(max_workers=32, thread_name_prefix="handler")
    app = App(runtime.scheduler, executor)
    if config.metrics_bind_address:
        serve_metrics(runtime.metrics, config.metrics_bind_address, split_address)
    loop = asyncio.get_running_loop()
    stop_async = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop_async.set)
        except (RuntimeError, ValueError):  # not the main thread
            pass
    while not runtime.stop.is_set() and not stop_async.is_set():
        stamp = _cert_stamp(config)
        tls: dict[str, Any] = (
            {"ssl_cert": Path(config.cert_file), "ssl_key": Path(config.key_file)} if config.tls else {}
        )
        server = Server(
            app,
            address=host,
            port=port,
            interface=Interfaces.RSGI,
            http=HTTPModes(config.http_mode),
            runtime_threads=config.runtime_threads,
            log_enabled=False,
            **tls,
        )
        try:
            task = await start_listening(server, f"{host}:{port}", flag="--http_bind")
        except ListenError:
            runtime.stop.set()
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        log.info("serving", extra={"address": f"{'https' if config.tls else 'http'}://{host}:{port}"})
        if ready:
            ready.set()
        while not task.done() and not runtime.stop.is_set() and not stop_async.is_set():
            await _wait_stop(runtime.stop, stop_async, 1.0)
            if config.tls and _safe_stamp(config) != stamp:
                log.info("certificate changed: restarting the listener")
                break
        server.stop()
        await task
    runtime.stop.set()
    runtime.scheduler.close()
    if runtime.event_sink is not None:  # what is queued goes out (or is counted) before the process ends
        runtime.event_sink.close(SHUTDOWN_EVENT_FLUSH)
    executor.shutdown(wait=False, cancel_futures=True)


async def _wait_stop(stop: threading.Event, stop_async: asyncio.Event, seconds: float) -> None:
    """Sleep up to `seconds`, waking within 20 ms of either stop signal."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not stop.is_set() and not stop_async.is_set() and asyncio.get_running_loop().time() < deadline:
        try:
            await asyncio.wait_for(stop_async.wait(), 0.02)
        except TimeoutError:
            pass


def _safe_stamp(config: Config) -> tuple[float, float]:
    try:
        return _cert_stamp(config)
    except OSError:
        return (0.0, 0.0)


def serve(config: Config) -> int:
    host, port = split_address(config.http_bind, "127.0.0.1")
    probe(f"{host}:{port}", "--http_bind")  # a busy port fails before anything touches the cluster
    if config.metrics_bind_address:
        split_address(config.metrics_bind_address, "0.0.0.0")  # a malformed address too
    runtime = build_runtime(config)
    # Objects loaded at start-up live for the whole process: keep them out of the cyclic GC's full
    # passes, which otherwise stall requests for hundreds of milliseconds on large snapshots.
    gc.collect()
    gc.freeze()
    asyncio.run(run_http(runtime))
    return 0
