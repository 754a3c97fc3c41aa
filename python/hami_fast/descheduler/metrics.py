"""Prometheus metrics of the descheduler, served on its API port at GET /metrics.

- `hami_fast_descheduler_moves_total{result}`: placements that reached an end, by how they ended:
  `completed`, `partially_completed`, `rejected` (invalid target or evictee: nothing was evicted),
  `failed` (after validation: eviction, replacement or bind went wrong), `expired` (TTL, never consumed).
- `hami_fast_descheduler_eviction_duration_seconds`: first eviction attempt -> accepted by the
  Eviction API (includes the time a PodDisruptionBudget held it).
- `hami_fast_descheduler_move_duration_seconds`: eviction accepted -> replacement bound on the target.
- `hami_fast_descheduler_placements{phase}`: placements in the cache by status.phase (`New` for
  ones not validated yet), computed on scrape.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from hami_fast.descheduler.cache import ObjectStore

RESULTS = ("completed", "partially_completed", "rejected", "failed", "expired")
PHASES = ("New", "Pending", "DeletingOldPod", "PartiallyCompleted", "Completed", "Failed")
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class PhaseCollector:
    def __init__(self, placements: ObjectStore) -> None:
        self.placements = placements

    def collect(self) -> Iterator[Metric]:
        counts = Tally(((p.get("status") or {}).get("phase") or "New") for p in self.placements.items())
        gauge = GaugeMetricFamily(
            "hami_fast_descheduler_placements", "HamiPodPlacements by status.phase", labels=["phase"]
        )
        for phase in PHASES:
            gauge.add_metric([phase], counts.pop(phase, 0))
        for phase, count in sorted(counts.items()):  # a phase written by something else: still shown
            gauge.add_metric([phase], count)
        yield gauge


class DeschedulerMetrics:
    def __init__(self, placements: ObjectStore | None = None) -> None:
        self.registry = CollectorRegistry()
        self.moves = Counter(
            "hami_fast_descheduler_moves",
            "Placements that reached an end, by result",
            ["result"],
            registry=self.registry,
        )
        for result in RESULTS:
            self.moves.labels(result)
        self.eviction_seconds = Histogram(
            "hami_fast_descheduler_eviction_duration_seconds",
            "First eviction attempt to eviction accepted (includes disruption-budget waits)",
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.move_seconds = Histogram(
            "hami_fast_descheduler_move_duration_seconds",
            "Eviction accepted to the replacement bound on the target",
            buckets=BUCKETS,
            registry=self.registry,
        )
        if placements is not None:
            self.registry.register(PhaseCollector(placements))  # type: ignore[arg-type]

    def moved(self, result: str) -> None:
        self.moves.labels(result).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
