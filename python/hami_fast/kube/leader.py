"""Leadership without a Lease (snapshot and demo modes). The Lease-backed kinds live in `kube/lease.py`."""

from __future__ import annotations

from hami_fast.kube.lease import Leadership


class AlwaysLeader:
    def __init__(self) -> None:
        self.leading = Leadership()
        self.leading.set()

    def start(self) -> None:
        pass
