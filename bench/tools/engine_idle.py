"""Why Filter's engine call costs 3-10x more inside the server than in a loop: the same call
timed in one process back to back, and after the thread has slept or spun as long as the event loop
waits between kube-scheduler's requests at concurrency 1.

    python bench/tools/engine_idle.py [--calls N] [--gaps-us 300,3000] [--rotating] [--so FILE]

Prints, for `Cluster.decide` and `Scheduler.filter_answer` (the answer path of /filter: engine call and
Python glue, the bookkeeping after the answer left out) on the 5,000-node snapshot with 500 names, the
median and p90 per call: back to back, after each gap slept (`time.sleep`, the thread off the CPU as
in `epoll_wait`) and after each gap spun (the thread on the CPU, touching nothing). `--rotating`
sends the HTTP ratio benchmark's rotating windows in turn (a new list each call) instead of one list;
`--so FILE` loads the engine module built into FILE (another commit's) in place of the installed one.
Not a test.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path[:0] = [str(HERE), str(BENCH), str(BENCH.parent / "tests")]
if "--so" in sys.argv[:-1]:
    from ab_filter import load  # noqa: E402

    load(sys.argv[sys.argv.index("--so") + 1])

from hami_fast.config import Config  # noqa: E402
from hami_fast.server.serve import build_runtime  # noqa: E402
from http_variants import write_inputs  # noqa: E402
from test_http_ratio import filter_bodies, percentile  # noqa: E402


def idle(gap: float, spin: bool) -> None:
    if not spin:
        time.sleep(gap)
        return
    until = time.perf_counter() + gap
    while time.perf_counter() < until:
        pass


def timed(call: Callable[[], object], calls: int, gap: float, spin: bool) -> tuple[float, float]:
    """Median and p90 of `call` in µs, each call after `gap` seconds slept or spun (0: back to back)."""
    times = []
    clock = time.perf_counter
    for _ in range(calls):
        if gap:
            idle(gap, spin)
        started = clock()
        call()
        times.append(clock() - started)
    return percentile(times, 0.5) * 1e6, percentile(times, 0.9) * 1e6


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1500, help="calls per measurement")
    parser.add_argument("--gaps-us", default="300,3000", help="idle gaps before each call, µs, comma-separated")
    parser.add_argument("--rotating", action="store_true", help="a new candidate window each call")
    parser.add_argument("--so", help="the engine module to load instead of the installed one")
    args = parser.parse_args(argv)
    try:
        gaps = [int(g) / 1e6 for g in args.gaps_us.split(",") if g.strip()]
    except ValueError:
        parser.error(f"--gaps-us: not a comma-separated list of integers: {args.gaps_us!r}")
    if args.calls < 10 or any(g <= 0 for g in gaps):
        parser.error("--calls must be at least 10 and every gap positive")
    with tempfile.TemporaryDirectory() as folder:
        snapshot, _ = write_inputs(folder)
        runtime = build_runtime(Config(snapshot=snapshot))
    gc.collect()  # as `serve` does once the snapshot is loaded
    gc.freeze()
    bodies, now = filter_bodies(), int(time.time())
    turn = itertools.cycle(bodies if args.rotating else bodies[:1])
    cluster, scheduler = runtime.cluster, runtime.scheduler
    calls = {
        "Cluster.decide": lambda: cluster.decide(next(turn), now),
        "Scheduler.filter_answer": lambda: scheduler.filter_answer(next(turn)),
    }
    for call in calls.values():
        timed(call, 300, 0, False)  # warm: the candidate cache, the kept order of fits
    cases = [("back to back", 0.0, False)]
    cases += [(f"after {g * 1e6:.0f} us {how}", g, how == "spun") for g in gaps for how in ("slept", "spun")]
    print(f"median / p90 per call, µs ({args.calls} calls each)")
    print(f"{'':<22}" + "".join(f"{name:>26}" for name in calls))
    for label, gap, spin in cases:
        cells = [timed(call, args.calls, gap, spin) for call in calls.values()]
        print(f"{label:<22}" + "".join(f"{f'{p50:.1f} / {p90:.1f}':>26}" for p50, p90 in cells))
    runtime.scheduler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
