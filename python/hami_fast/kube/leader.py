"""Leadership without a Lease (snapshot and demo modes). The Lease-backed kinds live in `kube/lease.py`."""

from __future__ import annotations

import threading


class AlwaysLeader:
    def __init__(self) -> None:
        self.leading = threading.Event()
        self.leading.set()

    def start(self) -> None:
        pass
