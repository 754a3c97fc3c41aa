"""Prometheus metrics: HAMi's `hami_*` gauges from the engine's usage, plus latency and failure counters."""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from hami_fast import __version__
from hami_fast._native import Cluster
from hami_fast.kube.retry import RETRIES

MIB = 1048576
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class UsageCollector:
    """Computed on scrape from the live cluster, as HAMi's are; constant label zone="vGPU"."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        labels = ["node", "device_uuid", "device_index", "device_type", "zone"]
        mem_limit = GaugeMetricFamily("hami_gpu_memory_limit_bytes", "GPU device memory limit", labels=labels)
        core_limit = GaugeMetricFamily("hami_gpu_core_limit_ratio", "GPU device core limit", labels=labels)
        mem_alloc = GaugeMetricFamily(
            "hami_gpu_memory_allocated_bytes",
            "GPU device memory allocated",
            labels=["node", "device_uuid", "device_index", "device_cores", "device_type", "zone"],
        )
        shared = GaugeMetricFamily("hami_gpu_shared_count", "Tasks sharing the GPU", labels=labels)
        core_alloc = GaugeMetricFamily("hami_gpu_core_allocated_ratio", "GPU device cores allocated", labels=labels)
        overview = GaugeMetricFamily(
            "hami_node_gpu_overview",
            "GPU overview on the node",
            labels=[
                "node",
                "device_uuid",
                "device_index",
                "device_cores",
                "device_memory_limit",
                "device_type",
                "zone",
            ],
        )
        mem_ratio = GaugeMetricFamily(
            "hami_node_gpu_memory_allocated_ratio", "Allocated over total device memory", labels=labels
        )
        for node in orjson.loads(self.cluster.usage()):
            for d in node["devices"]:
                base = [node["name"], d["uuid"], str(d["index"]), d["type"], "vGPU"]
                mem_limit.add_metric(base, d["devmem"] * MIB)
                core_limit.add_metric(base, d["devcore"])
                mem_alloc.add_metric(
                    [node["name"], d["uuid"], str(d["index"]), str(d["usedcores"]), d["type"], "vGPU"],
                    d["usedmem"] * MIB,
                )
                shared.add_metric(base, d["used"])
                core_alloc.add_metric(base, d["usedcores"])
                overview.add_metric(
                    [
                        node["name"],
                        d["uuid"],
                        str(d["index"]),
                        str(d["usedcores"]),
                        str(d["devmem"] * MIB),
                        d["type"],
                        "vGPU",
                    ],
                    d["usedmem"] * MIB,
                )
                if d["devmem"] > 0:
                    mem_ratio.add_metric(base, d["usedmem"] / d["devmem"])
        yield from self._accounting()
        build = GaugeMetricFamily(
            "hami_build_info",
            "Build information",
            labels=["version", "revision", "build_date", "go_version", "compiler", "platform"],
        )
        build.add_metric([__version__, "", "", "", "hami-fast (rust+python)", "linux"], 1)
        yield from (mem_limit, core_limit, mem_alloc, shared, core_alloc, overview, mem_ratio, build)

    def _accounting(self) -> Iterator[Metric]:
        accounting = orjson.loads(self.cluster.accounting())
        pod_labels = ["namespace", "node", "pod", "container_index", "device_uuid", "zone"]
        vgpu_mem = GaugeMetricFamily(
            "hami_vgpu_memory_allocated_bytes", "vGPU memory allocated to a pod", labels=pod_labels
        )
        vgpu_core = GaugeMetricFamily(
            "hami_vgpu_core_allocated_ratio", "vGPU cores allocated to a pod", labels=pod_labels
        )
        for pod in accounting["pods"]:
            for d in pod["devices"]:
                labels = [pod["namespace"], pod["node"], pod["name"], "0", d["uuid"], "vGPU"]
                vgpu_mem.add_metric(labels, d["usedmem"] * MIB)
                vgpu_core.add_metric(labels, d["usedcores"])
        used = GaugeMetricFamily(
            "hami_resource_quota_used", "vGPU quota used", labels=["namespace", "quota_name", "limit", "zone"]
        )
        limit = GaugeMetricFamily(
            "hami_resource_quota_limit", "vGPU quota limit", labels=["namespace", "quota_name", "zone"]
        )
        for q in accounting["quotas"]:
            used.add_metric([q["namespace"], q["resource"], str(q["limit"]), "vGPU"], q["used"])
            limit.add_metric([q["namespace"], q["resource"], "vGPU"], q["limit"])
        yield from (vgpu_mem, vgpu_core, used, limit)


class EventSinkCollector:
    """The event sink's counters, read on scrape (no metric call per event)."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def collect(self) -> Iterator[Metric]:
        results = CounterMetricFamily(
            "hami_fast_events",
            "Events accepted into the queue, coalesced into a queued identical one, created, count-patched "
            "(updated), posted as combined (aggregated), post attempts retried, and occurrences the spam "
            "filter kept from a write (filtered)",
            labels=["result"],
        )
        for result, value in sorted(self.sink.counts.items()):
            results.add_metric([result], value)
        dropped = CounterMetricFamily(
            "hami_fast_events_dropped",
            "Event occurrences not posted: queue_full, retries_exhausted, rejected (4xx), shutdown",
            labels=["reason"],
        )
        for reason, value in sorted(self.sink.dropped.items()):
            dropped.add_metric([reason], value)
        queued = GaugeMetricFamily("hami_fast_events_queued", "Events waiting to be posted")
        queued.add_metric([], self.sink.queued)
        yield from (results, dropped, queued)


class WriteRetriesCollector:
    """The API writes retried after no answer, a 429 or a 5xx (`kube/retry.py`), by status; read on scrape."""

    def collect(self) -> Iterator[Metric]:
        retries = CounterMetricFamily(
            "hami_fast_api_write_retries",
            "Pod patches, bindings and lock writes tried again, by the failed try's status (0: no answer)",
            labels=["status"],
        )
        for status, value in sorted(RETRIES.items()):
            retries.add_metric([str(status)], value)
        yield retries


class Labelled:
    """A labelled metric whose `labels(...)` children are kept: prometheus_client looks them up under
    a lock with some validation each call, a few µs that showed in every /filter."""

    def __init__(self, metric: Any) -> None:
        self.metric = metric
        self.children: dict[tuple[str, ...], Any] = {}

    def labels(self, *values: str) -> Any:
        child = self.children.get(values)
        if child is None:
            child = self.children[values] = self.metric.labels(*values)
        return child


# Request latency, recorded off the request path.
class BatchedHistogram:
    """A histogram with one label whose `observe` is one deque append (atomic, no lock): the
    prometheus_client Histogram takes two locks per observation, ~3 µs of every /filter in the
    profile. Observations are folded into the bucket counts at scrape, or once `FOLD_AT` have
    gathered (memory stays bounded without a scraper). Exposed as prometheus_client exposes its
    Histogram: `_bucket` per `le`, `_count`, `_sum`, `_created`."""

    FOLD_AT = 4096

    def __init__(
        self, name: str, documentation: str, label: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        self.bounds = (*(float(b) for b in buckets), math.inf)
        self.pending: deque[tuple[str, float]] = deque()
        self.counts: dict[str, list[int]] = {}
        self.sums: dict[str, float] = {}
        self.created: dict[str, float] = {}
        self._fold_lock = threading.Lock()
        registry.register(self)

    def observe(self, value: str, seconds: float) -> None:
        self.pending.append((value, seconds))
        if len(self.pending) >= self.FOLD_AT:
            self.fold()

    def labels(self, value: str) -> _Route:
        return _Route(self, value)

    def fold(self) -> None:
        with self._fold_lock:
            pending, bounds = self.pending, self.bounds
            for _ in range(len(pending)):
                value, seconds = pending.popleft()
                counts = self.counts.get(value)
                if counts is None:
                    counts = self.counts[value] = [0] * len(bounds)
                    self.sums[value], self.created[value] = 0.0, time.time()
                # prometheus_client counts an observation in the first bucket with `seconds <= bound`.
                counts[bisect.bisect_left(bounds, seconds)] += 1
                self.sums[value] += seconds

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=[self.label])]

    def collect(self) -> Iterator[Metric]:
        self.fold()
        family = HistogramMetricFamily(self.name, self.documentation, labels=[self.label])
        with self._fold_lock:
            for value, counts in self.counts.items():
                cumulative = list(itertools.accumulate(counts))
                family.add_metric(
                    [value], [(floatToGoString(b), n) for b, n in zip(self.bounds, cumulative)], self.sums[value]
                )
                family.samples.append(Sample(f"{self.name}_created", {self.label: value}, self.created[value]))
        yield family


class _Route:
    """`BatchedHistogram.labels(value)`: `observe` and `time()` as a prometheus_client child offers them."""

    def __init__(self, histogram: BatchedHistogram, value: str) -> None:
        self.histogram, self.value = histogram, value

    def observe(self, seconds: float) -> None:
        self.histogram.observe(self.value, seconds)

    @contextmanager
    def time(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.histogram.observe(self.value, time.perf_counter() - started)


# ---- end request latency -----------------------------------------------------------------------


class Metrics:
    def __init__(self, cluster: Cluster) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(UsageCollector(cluster))
        self.registry.register(WriteRetriesCollector())
        self.latency = BatchedHistogram(
            "hami_fast_request_duration_seconds",
            "Latency of extender and webhook calls",
            "route",
            BUCKETS,
            self.registry,
        )
        self.filter_failures = Labelled(
            Counter(
                "hami_fast_filter_node_failures",
                "Nodes rejected by Filter, by reason",
                ["reason"],
                registry=self.registry,
            )
        )
        self.filter_results = Labelled(
            Counter("hami_fast_filter_results", "Filter outcomes", ["result"], registry=self.registry)
        )
        self.bind_results = Labelled(
            Counter("hami_fast_bind_results", "Bind outcomes", ["result"], registry=self.registry)
        )
        self.bind_wait = Histogram(
            "hami_fast_bind_queue_seconds",
            "Time a bind spent in its node's queue, waiting for the node lock and running",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.webhook_results = Labelled(
            Counter("hami_fast_webhook_results", "Webhook outcomes", ["result"], registry=self.registry)
        )
        self.requeued = Counter(
            "hami_fast_requeued_pods",
            "Pods Filter rejected for vGPU reasons that a release made room for, put back in kube-scheduler's queue",
            registry=self.registry,
        )
        self.requeue_failures = Counter(
            "hami_fast_requeue_patch_failures",
            "Requeue patches the API server refused or did not answer (the pod then waits for the next release)",
            registry=self.registry,
        )
        self.preemptions = Labelled(
            Counter(
                "hami_fast_preemptions",
                "vGPU preemptions by outcome: done (every victim evicted), incomplete (a victim refused; the "
                "hold expires), blocked (a PodDisruptionBudget or a victim gone; nothing evicted), failed",
                ["result"],
                registry=self.registry,
            )
        )
        self.preemption_victims = Counter(
            "hami_fast_preemption_victims",
            "Lower-priority pods evicted to free vGPU for a pending pod",
            registry=self.registry,
        )
        waiting = Gauge(
            "hami_fast_waiting_pods",
            "Pods Filter rejected for vGPU reasons, waiting for a release",
            registry=self.registry,
        )
        waiting.set_function(cluster.waiting_count)

    def watch_events(self, sink: Any) -> None:
        self.registry.register(EventSinkCollector(sink))

    def time(self, route: str) -> Any:
        return self.latency.labels(route).time()

    def count_failed_reasons(self, reasons: dict[str, int]) -> None:
        for reason, nodes in reasons.items():
            self.filter_failures.labels(reason).inc(nodes)


def serve_metrics(metrics: Metrics, address: str, split: Callable[[str], tuple[str, int]]) -> Any:
    from prometheus_client import start_http_server

    host, port = split(address)
    try:
        server, _thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as exc:
        from hami_fast.server.listen import ListenError

        raise ListenError(f"cannot listen on {address} (--metrics-bind-address): {exc.strerror or exc}") from None
    return server
