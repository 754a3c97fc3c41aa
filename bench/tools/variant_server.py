"""One serving process of `http_variants.py`: the 5,000-node snapshot loaded as `hami-fast serve
--snapshot` loads it, Granian embedded with the product's settings, and `/filter` answered by one
layer of the product less or more, to tell where the time over the trivial floor goes.

`python bench/tools/variant_server.py PORT SNAPSHOT VARIANT [TIMES_FILE]`, VARIANT one of VARIANTS. With
TIMES_FILE, the `/filter` handler is timed inside each request (the product's App excepted) and on
SIGTERM those times (seconds, a JSON array) are written there before the process exits.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from hami_fast.config import Config
from hami_fast.server.app import App
from hami_fast.server.router import Route, Router
from hami_fast.server.serve import build_runtime
from trivial_server import serve

FIXED = b'{"Nodes":null,"NodeNames":["n00000"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}'
VARIANTS = {
    "fixed": "the router answering fixed bytes (no engine)",
    "decide": "the router and the engine call alone (no Scheduler, no bookkeeping)",
    "scheduler": "the router and Scheduler.filter_answer (the product's Filter, bookkeeping included)",
    "product": "the product's App as `serve` builds it",
}


def timed(handler: Callable[[bytes], Any], spent: list[float]) -> Callable[[bytes], Any]:
    clock = time.perf_counter

    def run(body: bytes) -> Any:
        started = clock()
        try:
            return handler(body)
        finally:
            spent.append(clock() - started)

    return run


def write_times_on_term(path: str, spent: list[float]) -> None:
    """On SIGTERM: the handler's times to `path`, then exit at once."""

    def on_term(signum: int, frame: Any) -> None:
        with open(path, "wb") as f:
            f.write(orjson.dumps(spent))
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)


def app_for(variant: str, runtime: Any, executor: ThreadPoolExecutor, spent: list[float] | None = None) -> Router:
    health = Route("GET", "/healthz", lambda _: (200, b"ok", "text/plain"), "inline")
    cluster, scheduler = runtime.cluster, runtime.scheduler
    if variant == "product":
        return App(scheduler, executor)
    handler = {
        "fixed": lambda body: FIXED,
        "decide": lambda body: cluster.decide(body, int(time.time())).response,
        "scheduler": scheduler.filter_answer,
    }[variant]
    if spent is not None:
        handler = timed(handler, spent)
    return Router([Route("POST", "/filter", handler, "inline"), health], executor)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4) or argv[2] not in VARIANTS:
        print(f"usage: variant_server.py PORT SNAPSHOT {{{','.join(VARIANTS)}}} [TIMES_FILE]", file=sys.stderr)
        return 2
    port, snapshot, variant = int(argv[0]), argv[1], argv[2]
    spent: list[float] | None = None
    if len(argv) == 4:
        spent = []
        write_times_on_term(argv[3], spent)
    runtime = build_runtime(Config(snapshot=snapshot))
    gc.collect()  # as `serve` does once the snapshot is loaded
    gc.freeze()
    asyncio.run(serve(app_for(variant, runtime, ThreadPoolExecutor(4), spent), port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
