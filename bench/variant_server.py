"""One serving process of `http_variants.py`: the 5,000-node snapshot loaded as `hami-fast serve
--snapshot` loads it, Granian embedded with the product's settings, and `/filter` answered by one
layer of the product less or more, to tell where the time over the trivial floor goes.

`python bench/variant_server.py PORT SNAPSHOT VARIANT`, VARIANT one of VARIANTS.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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


def app_for(variant: str, runtime: Any, executor: ThreadPoolExecutor) -> Router:
    health = Route("GET", "/healthz", lambda _: (200, b"ok", "text/plain"), "inline")
    cluster, scheduler = runtime.cluster, runtime.scheduler
    if variant == "product":
        return App(scheduler, executor)
    handler = {
        "fixed": lambda body: FIXED,
        "decide": lambda body: cluster.decide(body, int(time.time())).response,
        "scheduler": scheduler.filter_answer,
    }[variant]
    return Router([Route("POST", "/filter", handler, "inline"), health], executor)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[2] not in VARIANTS:
        print(f"usage: variant_server.py PORT SNAPSHOT {{{','.join(VARIANTS)}}}", file=sys.stderr)
        return 2
    port, snapshot, variant = int(argv[0]), argv[1], argv[2]
    runtime = build_runtime(Config(snapshot=snapshot))
    gc.collect()  # as `serve` does once the snapshot is loaded
    gc.freeze()
    asyncio.run(serve(app_for(variant, runtime, ThreadPoolExecutor(4)), port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
