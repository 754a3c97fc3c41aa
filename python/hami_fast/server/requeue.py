"""Retry at release: when vGPU capacity frees up, the pods Filter rejected that fit now are put back
in kube-scheduler's active queue by an update of the pod (a `hami-fast.io/requeued-at` annotation),
rate-limited, in the engine's order (priority, then age). The engine decides which pods and marks
them; a pod is not requeued again before Filter rejects it again (docs/pending-pods.md)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import orjson

from hami_fast import annotations as keys
from hami_fast._native import Cluster, RequeuedPod
from hami_fast.kube.errors import NotFound
from hami_fast.server.metrics import Metrics
from hami_fast.server.wakeloop import WakeLoop

log = logging.getLogger("hami_fast.requeue")


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate, max(1, burst), clock
        self.tokens, self.at = float(self.burst), clock()
        self.waits = 0  # how often a take had to wait for its token

    def delay(self) -> float:
        """Seconds until a token is there (0 when one is)."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) / self.rate

    def take(self, stop: threading.Event) -> bool:
        """Waits for a token and takes it; False when stopped meanwhile."""
        while (wait := self.delay()) > 0:
            self.waits += 1
            if stop.wait(wait):
                return False
        self.tokens -= 1
        return True


def requeue_patch(pod: RequeuedPod, now_ns: int) -> bytes:
    """A new annotation value each time (an unchanged object is no update); the UID as precondition,
    so that a pod recreated under the same name is not touched."""
    return orjson.dumps({"metadata": {"uid": pod.uid, "annotations": {keys.REQUEUED_AT: str(now_ns)}}})


class Requeuer(WakeLoop):
    """Asks the engine after every wake (a watch event that may free capacity) and every `period`
    seconds (holds lapse by the clock), at most once per `min_gap`, and patches the pods it names."""

    def __init__(
        self,
        cluster: Cluster,
        patch_pod: Callable[[str, str, bytes], None],
        metrics: Metrics,
        ready: Callable[[], bool],
        stop: threading.Event,
        bucket: TokenBucket,
        period: float = 1.0,
        min_gap: float = 0.05,
    ) -> None:
        super().__init__("requeue", stop, ready, period, min_gap)
        self.cluster, self.patch_pod, self.metrics, self.bucket = cluster, patch_pod, metrics, bucket

    what = "requeue pass"

    def pass_once(self) -> None:
        self.requeue_once()

    def requeue_once(self) -> int:
        """One pass: the pods that fit now, patched in order as the rate allows; how many were. A
        pass the engine stopped short (bounded work) is followed by another at once."""
        pods, more = self.cluster.requeue(int(time.time()))
        if more:
            self.wake()
        patched = 0
        for pod in pods:
            if not self.bucket.take(self.stop_event):
                break
            patched += self._patch(pod)
        return patched

    def _patch(self, pod: RequeuedPod) -> int:
        try:
            self.patch_pod(pod.namespace, pod.name, requeue_patch(pod, time.time_ns()))
        except NotFound:
            return 0  # gone meanwhile: its DELETED event forgets it
        except Exception as exc:
            self.metrics.requeue_failures.inc()
            log.warning("requeue patch failed", extra={"pod": f"{pod.namespace}/{pod.name}", "error": str(exc)})
            return 0
        self.metrics.requeued.inc()
        log.info("requeued after a release", extra={"pod": f"{pod.namespace}/{pod.name}", "node": pod.node})
        return 1
