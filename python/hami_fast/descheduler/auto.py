"""`hami-fast descheduler --auto`: unblock pods that are Pending for lack of vGPU resources.

Each pass (leader only, every `--auto-period`): the oldest such pod (its PodScheduled condition
carries one of the extender's vGPU reasons) is planned with `--for` over the opted-in pods only,
and the plan is handed to a run in the background, which applies it as `plan --for --apply` does:
the reservation on the pending pod first, then one HamiPodPlacement per move, each waited on. A
slow move (a disruption budget refusing, a slow API server) therefore never delays a pass.

Runs are bounded: at most `--max-concurrent-moves` at once (moves within a run go one after the
other), one per pending pod, and a pod being moved by one run is never planned by another. Moves
are capped per sliding hour: a run reserves its moves when it starts, and each move is recorded
in a ConfigMap (`descheduler/ledger.py`) right before its placement is created, by a write whose
check of the count (recorded moves, this mode's placements, other runs' reservations) is made on
the record as that guarded write read it, so the cap holds with runs in flight, with an old
leader still finishing, across restarts and new leaders, and when placements are deleted. A
move whose eviction was refused (a disruption budget) is taken off the record: not a move. Bare
pods are never moved (the planner refuses them). With `--dry-run` a pass only logs and posts an
Event on the pending pod for the moves it would make.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.descheduler.apply import MANAGED_BY, apply_for
from hami_fast.descheduler.config import DEFAULT_LEASE_NAMESPACE, DEFAULTS, DeschedulerConfig
from hami_fast.descheduler.ledger import Full, MoveLedger
from hami_fast.descheduler.metrics import DeschedulerMetrics
from hami_fast.descheduler.placement import Placement
from hami_fast.descheduler.view import ClusterView
from hami_fast.kube import times
from hami_fast.kube.client import KubeClient, path_of
from hami_fast.kube.errors import ApiError
from hami_fast.kube.events import event_body
from hami_fast.kube.lease import Leadership

log = logging.getLogger("hami_fast.descheduler.auto")

COMPONENT = "hami-fast-descheduler"
BY_AUTO = "hami-fast-descheduler-auto"  # the managed-by label of the placements this mode creates
HOUR = 3600.0
WOULD_MOVE_EVENT = "WouldMove"  # the Event reason of a dry run's moves, on the pending pod


@dataclass
class AutoOptions:
    max_moves_per_hour: int = DEFAULTS.max_moves_per_hour
    max_moves_per_pod: int = DEFAULTS.max_moves_per_pending_pod
    selector: str = DEFAULTS.selector
    namespace_selector: str = DEFAULTS.namespace_selector
    dry_run: bool = DEFAULTS.dry_run
    period: float = DEFAULTS.auto_period
    reservation_ttl: float = DEFAULTS.reservation_ttl
    interval: float = 5.0  # between two moves of one run
    move_timeout: float = 900.0  # how long one move's placement is waited on
    max_concurrent_moves: int = DEFAULTS.max_concurrent_moves
    record_namespace: str = DEFAULT_LEASE_NAMESPACE
    record_name: str = DEFAULTS.moves_configmap

    @classmethod
    def of(cls, config: DeschedulerConfig) -> AutoOptions:
        return cls(
            max_moves_per_hour=config.max_moves_per_hour,
            max_moves_per_pod=config.max_moves_per_pending_pod,
            selector=config.selector,
            namespace_selector=config.namespace_selector,
            dry_run=config.dry_run,
            period=config.auto_period,
            reservation_ttl=config.reservation_ttl,
            max_concurrent_moves=config.max_concurrent_moves,
            record_namespace=config.lease_namespace,
            record_name=config.moves_configmap,
        )


def pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


@dataclass
class Run:
    """The moves planned for one pending pod, applied in the background."""

    pod: str
    moves: list[dict[str, Any]]
    run_id: str
    reserved_on: str = ""  # the node of the pending pod's reservation
    started: int = 0  # moves recorded and begun
    recorded: list[str] = field(default_factory=list)  # their reqIDs
    thread: threading.Thread | None = None

    def moved_pods(self) -> set[str]:
        return {m["pod"] for m in self.moves}

    def nodes(self) -> set[str]:
        """Nodes whose GPUs the run is changing: the moves' sources and targets, the reservation's."""
        touched = {m[end]["node"] for m in self.moves for end in ("from", "to")}
        return touched | ({self.reserved_on} if self.reserved_on else set())

    def reserved(self) -> int:
        """Moves of the hour's budget it holds and has not begun yet."""
        return len(self.moves) - self.started


class AutoMover:
    def __init__(
        self,
        client: KubeClient,
        options: AutoOptions,
        metrics: DeschedulerMetrics | None = None,
        leading: Callable[[], bool] | None = None,
        stop: threading.Event | None = None,
        ledger: MoveLedger | None = None,
        view: ClusterView | None = None,
    ) -> None:
        self.client, self.options, self.metrics = client, options, metrics
        self.view = view or ClusterView.watching(client, stop or threading.Event())
        self.leading = leading or (lambda: True)
        self.stop = stop or threading.Event()
        self.ledger = ledger or MoveLedger(client, options.record_namespace, options.record_name, manager=BY_AUTO)
        self.announced: set[tuple[str, str]] = set()
        self.runs: dict[str, Run] = {}  # by pending pod
        self.finished: deque[dict[str, Any]] = deque(maxlen=64)  # the last runs' summaries
        self._runs_lock = threading.Lock()  # self.runs
        self._budget_lock = threading.RLock()  # one count-and-record at a time
        if metrics is not None:
            metrics.watch_auto(self.in_flight)

    # -- the hour's budget -----------------------------------------------------------------------

    def budget(self, now: float) -> int:
        with self._budget_lock:
            return self.options.max_moves_per_hour - self.moves_within_the_hour(now) - self.reserved()

    def moves_within_the_hour(self, now: float) -> int:
        return len(self.counted(now))

    def counted(self, now: float) -> set[str]:
        """The reqIDs of the hour's moves: recorded in the ledger, or seen on this mode's placements
        (evicted within the hour, or still open: created within the hour, about to evict)."""
        recorded = {entry["reqID"] for entry in self.ledger.entries(now)}
        return recorded | self.placements_within_the_hour(now)

    def placements_within_the_hour(self, now: float) -> set[str]:
        query = [("labelSelector", f"{MANAGED_BY}={BY_AUTO}")]
        items = self.client.request("GET", k.placements_path(), query=query).json().get("items") or []
        at = datetime.fromtimestamp(now, UTC)

        def within(stamp: str | None) -> bool:
            age = times.age_seconds(stamp, at) if stamp else None
            return age is not None and age < HOUR

        counted = set()
        for p in (Placement(body) for body in items):
            req_id = p.spec.req_id or p.key
            if p.status.evicted_at:
                if within(p.status.evicted_at):
                    counted.add(req_id)
            elif p.status.phase in (None, s.PENDING) and within(p.created_at):
                counted.add(req_id)
        return counted

    def reserved(self) -> int:
        with self._runs_lock:
            return sum(run.reserved() for run in self.runs.values())

    def in_flight(self) -> tuple[int, int]:
        """Runs going on, and the moves they hold but have not begun."""
        with self._runs_lock:
            return len(self.runs), sum(run.reserved() for run in self.runs.values())

    def busy_pods(self) -> set[str]:
        """Pending pods with a run, and the pods those runs move: planned by no other run."""
        with self._runs_lock:
            return set(self.runs) | {pod for run in self.runs.values() for pod in run.moved_pods()}

    def busy_nodes(self) -> set[str]:
        """Nodes runs are changing: another plan neither takes GPUs there nor frees them (the
        snapshot does not show a move half done: its pod has not reached its target yet)."""
        with self._runs_lock:
            return {node for run in self.runs.values() for node in run.nodes()}

    def opt_in(self, busy: set[str]) -> dict[str, Any]:
        """The planner's opt-in: pods matching --selector, or in a namespace matching
        --namespace-selector (the planner reads their labels from its own watched objects; only the
        namespaces, a short list, are asked of the API server), less the pods runs are moving."""
        namespaces: list[str] = []
        if self.options.namespace_selector:
            query = [("labelSelector", self.options.namespace_selector)]
            found = self.client.request("GET", "/api/v1/namespaces", query=query).json().get("items") or []
            namespaces = sorted(ns["metadata"]["name"] for ns in found)
        return {"selector": self.options.selector or None, "namespaces": namespaces, "except": sorted(busy)}

    def run_once(self) -> dict[str, Any] | None:
        """One pass: plans for the oldest pod it can unblock and starts a run; what it did, or None."""
        try:
            outcome, result = self._pass()
        except Exception:
            self._count("error")
            raise
        self._count(outcome)
        return result

    def _count(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.auto_passes.labels(outcome).inc()

    def _pass(self) -> tuple[str, dict[str, Any] | None]:
        now = time.time()
        with self._runs_lock:
            running = len(self.runs)
        if running >= self.options.max_concurrent_moves:
            return "busy", None
        budget = self.budget(now)
        if budget <= 0:
            return "budget_spent", None
        if not self.view.running():
            self.view.relist()  # one-shot use: no reflectors keep the view current
        busy_nodes = sorted(self.busy_nodes())  # left out of the plans: moves in flight change them
        busy = self.busy_pods()
        waiting = [(key, uid) for key, uid in self.view.waiting_for_moves() if key not in busy]
        if not waiting:
            return "idle", None
        opt_in = self.opt_in(busy)
        for key, uid in waiting:
            options = {
                "max_moves": min(budget, self.options.max_moves_per_pod),
                "baseline": False,
                "for_pod_key": key,
                "opt_in": opt_in,
                "exclude_nodes": busy_nodes,
            }
            result = self.view.plan(options)
            if not result["unblocked"] or not result["moves"]:
                continue
            if self.options.dry_run:
                self.announce(key, uid, result)
                return "dry_run", {"pod": key, "dry_run": True, "moves": result["moves"], "moved": 0}
            run = self.start(key, result)
            return "started", {"pod": run.pod, "dry_run": False, "moves": result["moves"], "run": run.run_id}
        return "no_plan", None

    # -- runs ------------------------------------------------------------------------------------

    def start(self, pod: str, result: dict[str, Any]) -> Run:
        run_id = f"auto-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"
        run = Run(pod, result["moves"], run_id, (result.get("reservation") or {}).get("node", ""))
        run.thread = threading.Thread(target=self._apply, args=(run, result), name=f"auto-run-{pod}", daemon=True)
        with self._runs_lock:
            self.runs[pod] = run
        run.thread.start()
        return run

    def _apply(self, run: Run, result: dict[str, Any]) -> None:
        done: list[dict[str, Any]] = []
        outcome = "error"
        try:
            done = apply_for(
                self.client,
                result,
                self.options.reservation_ttl,
                self.options.interval,
                self.options.move_timeout,
                say=lambda line: log.info("%s: %s", run.pod, line),
                run_id=run.run_id,
                manager=BY_AUTO,
                starting=lambda move, req_id: self._starting(run, move, req_id),
                stop=self.stop,
            )
            moved = sum(1 for r in done if self.evicted(r))
            outcome = "moved" if moved else "refused"
            self.finished.append(
                {"pod": run.pod, "run": run.run_id, "moves": run.moves, "moved": moved, "results": done}
            )
        except Exception:  # a run never takes the loop down; its pod is planned again later
            log.exception("automatic mode: the run for %s failed", run.pod)
            self.finished.append({"pod": run.pod, "run": run.run_id, "moves": run.moves, "moved": 0, "error": True})
        finally:
            self._refund(run, done)
            with self._runs_lock:
                self.runs.pop(run.pod, None)
            if self.metrics is not None:
                self.metrics.auto_runs.labels(outcome).inc()

    def _starting(self, run: Run, move: dict[str, Any], req_id: str) -> str:
        """Right before a move's placement is created: count again, then record it ('' = go on)."""
        if self.stop.is_set():
            return "stopping"
        if not self.leading():
            return "this replica no longer leads"
        with self._budget_lock:
            now, cap = time.time(), self.options.max_moves_per_hour
            try:
                placements = self.placements_within_the_hour(now)
            except ApiError as exc:
                return f"the hour's moves could not be read: {exc}"

            def fits(entries: list[dict[str, str]]) -> bool:
                # The record as the guarded write read it. This move is among the reservations:
                # begun, it leaves them and joins the record.
                counted = {e["reqID"] for e in entries} | placements
                return len(counted) + self.reserved() <= cap

            try:
                self.ledger.record({"reqID": req_id, "pod": move["pod"], "for": run.pod}, now, fits)
            except Full:
                return f"--max-moves-per-hour {cap} reached"
            except ApiError as exc:
                return f"not recorded in {self.ledger}, so not started: {exc}"
            with self._runs_lock:
                run.started += 1
                run.recorded.append(req_id)
        return ""

    def _refund(self, run: Run, done: list[dict[str, Any]]) -> None:
        """Takes a move off the record when it evicted nothing: its placement was never created, or
        failed before any eviction (a disruption budget). Anything unsure stays counted."""
        by_req = {r.get("reqID"): r for r in done}
        for req_id in run.recorded:
            r = by_req.get(req_id)
            if r is None:
                continue
            if r.get("placement") and (r.get("phase") != s.FAILED or r.get("evictedAt")):
                continue
            try:
                self.ledger.forget(req_id, time.time())
            except ApiError as exc:
                log.warning("automatic mode: %s stays counted (%s not updated: %s)", req_id, self.ledger, exc)

    def wait(self, timeout: float) -> bool:
        """Until no run is going on (tests, shutdown); False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            with self._runs_lock:
                threads = [run.thread for run in self.runs.values() if run.thread is not None]
            if not threads:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            threads[0].join(left)

    def evicted(self, result: dict[str, Any]) -> bool:
        """A move counts once its pod was evicted: Completed, or failed after the old pod left.
        A refused eviction (a disruption budget) leaves the pod in place: not moved."""
        if result.get("phase") == s.COMPLETED or result.get("evictedAt"):
            return True
        if not result.get("placement"):
            return False
        namespace, name = result["move"]["pod"].split("/", 1)
        return k.get_pod(self.client, namespace, name) is None

    def announce(self, pod: str, uid: str, result: dict[str, Any]) -> None:
        moves = "; ".join(
            f"{m['pod']} {m['from']['node']}/{','.join(m['from']['gpus'])} -> {m['to']['node']}/{','.join(m['to']['gpus'])}"
            for m in result["moves"]
        )
        target = result["target"]
        message = f"dry run: would move {moves}; then it fits on {target['node']}/{','.join(target['gpus'])}"
        log.info("%s: %s", pod, message)
        if (uid, message) in self.announced:
            return
        self.announced.add((uid, message))
        namespace, name = pod.split("/", 1)
        body = event_body(namespace, name, uid, "Normal", WOULD_MOVE_EVENT, message, COMPONENT)
        try:
            self.client.request("POST", path_of("api", "v1", "namespaces", namespace, "events"), body=body)
        except ApiError as exc:
            log.warning("event for %s not posted: %s", pod, exc)


class AutoLoop(threading.Thread):
    """Runs [`AutoMover.run_once`] every period while this replica leads."""

    def __init__(self, mover: AutoMover, leading: Leadership, stop: threading.Event) -> None:
        super().__init__(name="descheduler-auto", daemon=True)
        self.mover, self.leading, self.stop_event = mover, leading, stop

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.leading.is_set():
                try:
                    self.mover.run_once()
                except ApiError as exc:
                    log.warning("automatic mode: %s", exc)
                except Exception:  # keep the loop alive; the next pass tries again
                    log.exception("automatic mode: pass failed")
            self.stop_event.wait(self.mover.options.period)
