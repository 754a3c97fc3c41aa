"""A background pass run when woken (a watch event, a Filter rejection) and every `period`
seconds, at most once per `min_gap`: the loop of retry at release and of vGPU preemption."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("hami_fast.server")


class WakeLoop(threading.Thread):
    """Calls `pass_once` after each wake or `period`, while `ready()`; a failing pass is logged and
    the loop goes on. `passes` counts the turns (tests wait on it)."""

    what = "pass"

    def __init__(
        self, name: str, stop: threading.Event, ready: Callable[[], bool], period: float, min_gap: float
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.stop_event, self.ready, self.period, self.min_gap = stop, ready, period, min_gap
        self.woken = threading.Event()
        self.passes = 0

    def wake(self) -> None:
        self.woken.set()

    def pass_once(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.woken.wait(self.period)
            self.woken.clear()
            if self.stop_event.is_set():
                return
            if self.ready():
                try:
                    self.pass_once()
                except Exception:  # a bug must not end the loop silently
                    log.exception("%s failed", self.what)
            self.passes += 1
            self.stop_event.wait(self.min_gap)
