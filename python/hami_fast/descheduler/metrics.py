"""Prometheus metrics of the descheduler, served on its API port at GET /metrics.

- `hami_fast_descheduler_moves_total{result}`: placements that reached an end, by how they ended:
  `completed`, `partially_completed`, `rejected` (invalid target or evictee: nothing was evicted),
  `failed` (after validation: eviction, replacement or bind went wrong), `expired` (TTL, never consumed).
- `hami_fast_descheduler_eviction_duration_seconds`: first eviction attempt -> accepted by the
  Eviction API (includes the time a PodDisruptionBudget held it).
- `hami_fast_descheduler_move_duration_seconds`: eviction accepted -> replacement bound on the target.
- `hami_fast_descheduler_placements{phase}`: placements in the cache by status.phase (`New` for
  ones not validated yet), computed on scrape.
- `hami_fast_descheduler_reservations` / `hami_fast_descheduler_reserved_gpus`: live holds
  (`hami-fast.io/reservation` on pending pods, not lapsed) and the GPUs they hold, as the scheduler
  engine reads them from the cached hami-scheduler pods, computed on scrape.
- `hami_fast_descheduler_auto_passes_total{outcome}`: passes of `--auto` by what they did:
  `started` (a run began moving pods for a pending pod), `busy` (`--max-concurrent-moves` runs
  going on), `dry_run`, `no_plan` (pods wait but no opted-in move unblocks them), `idle` (no pod
  waits), `budget_spent` (`--max-moves-per-hour` reached, counting the moves runs hold), `error`.
- `hami_fast_descheduler_auto_runs_total{result}`: runs that ended: `moved` (at least one pod
  evicted), `refused` (no eviction accepted, e.g. a disruption budget, or the budget was spent
  by then), `error`.
- `hami_fast_descheduler_auto_runs_in_flight` / `hami_fast_descheduler_auto_moves_reserved`:
  runs going on now, and the moves they hold of the hour's budget but have not begun.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from hami_fast import _native
from hami_fast import annotations as keys
from hami_fast.descheduler import status as s
from hami_fast.descheduler.cache import ObjectStore
from hami_fast.descheduler.placement import Placement

RESULTS = ("completed", "partially_completed", "rejected", "failed", "expired")
AUTO_OUTCOMES = ("started", "busy", "dry_run", "no_plan", "idle", "budget_spent", "error")
RUN_RESULTS = ("moved", "refused", "error")
PHASES = ("New", s.PENDING, s.DELETING, s.PARTIAL, s.COMPLETED, s.FAILED)
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class PhaseCollector:
    def __init__(self, placements: ObjectStore) -> None:
        self.placements = placements

    def collect(self) -> Iterator[Metric]:
        counts = Tally((Placement(p).status.phase or "New") for p in self.placements.items())
        gauge = GaugeMetricFamily(
            "hami_fast_descheduler_placements", "HamiPodPlacements by status.phase", labels=["phase"]
        )
        for phase in PHASES:
            gauge.add_metric([phase], counts.pop(phase, 0))
        for phase, count in sorted(counts.items()):  # a phase written by something else: still shown
            gauge.add_metric([phase], count)
        yield gauge


class HoldCollector:
    """Live holds, decided by the engine (lapsed, conflicting and malformed ones do not count)."""

    def __init__(self, pods: ObjectStore, clock: Callable[[], float] = time.time) -> None:
        self.pods, self.clock = pods, clock

    def holds(self) -> list[dict]:
        owners = self.pods.select(lambda p: keys.RESERVATION in ((p.get("metadata") or {}).get("annotations") or {}))
        if not owners:
            return []
        engine = _native.Cluster()
        engine.apply_list_page(orjson.dumps({"kind": "PodList", "items": owners}))
        return orjson.loads(engine.holds(int(self.clock())))

    def collect(self) -> Iterator[Metric]:
        holds = self.holds()
        yield GaugeMetricFamily(
            "hami_fast_descheduler_reservations", "GPU reservations live for pending pods", value=len(holds)
        )
        yield GaugeMetricFamily(
            "hami_fast_descheduler_reserved_gpus",
            "GPUs held for pending pods",
            value=sum(len(h["gpus"]) for h in holds),
        )


class AutoCollector:
    def __init__(self, in_flight: Callable[[], tuple[int, int]]) -> None:
        self.in_flight = in_flight

    def collect(self) -> Iterator[Metric]:
        runs, reserved = self.in_flight()
        yield GaugeMetricFamily(
            "hami_fast_descheduler_auto_runs_in_flight", "Runs of the automatic mode going on", value=runs
        )
        yield GaugeMetricFamily(
            "hami_fast_descheduler_auto_moves_reserved",
            "Moves the automatic mode's runs hold of the hour's budget and have not begun",
            value=reserved,
        )


class DeschedulerMetrics:
    def __init__(self, placements: ObjectStore | None = None, pods: ObjectStore | None = None) -> None:
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
        self.auto_passes = Counter(
            "hami_fast_descheduler_auto_passes",
            "Passes of the automatic mode, by what they did",
            ["outcome"],
            registry=self.registry,
        )
        for outcome in AUTO_OUTCOMES:
            self.auto_passes.labels(outcome)
        self.auto_runs = Counter(
            "hami_fast_descheduler_auto_runs",
            "Runs of the automatic mode that ended, by result",
            ["result"],
            registry=self.registry,
        )
        for result in RUN_RESULTS:
            self.auto_runs.labels(result)
        self._auto: AutoCollector | None = None
        if placements is not None:
            self.registry.register(PhaseCollector(placements))
        if pods is not None:
            self.registry.register(HoldCollector(pods))

    def watch_auto(self, in_flight: Callable[[], tuple[int, int]]) -> None:
        """The automatic mode's in-flight gauges (one mover per process; a second replaces the first)."""
        if self._auto is not None:
            self.registry.unregister(self._auto)
        self._auto = AutoCollector(in_flight)
        self.registry.register(self._auto)

    def moved(self, result: str) -> None:
        self.moves.labels(result).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
