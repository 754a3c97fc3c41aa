"""Where `/filter`'s time over the trivial floor goes: the trivial Granian server and serving
processes that each add one layer of the product (`variant_server.py`), measured side by side in
alternating blocks as `test_http_ratio.py` measures, several instances of each variant so that a
difference between variants can be told from the noise between processes.

    python bench/tools/http_variants.py [--instances N] [VARIANT ...]     (default: every variant, 2 each)

Prints per server: p50 and p99, their ratio to the floor's, the CPU per request of each of its
threads (`/proc/<pid>/task/*/schedstat`), the loop thread first, and for the variants that time it
the `/filter` handler's own median inside the request (warm-up included). Not a test: nothing is
asserted.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
from pathlib import Path

import orjson

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
sys.path[:0] = [str(HERE), str(BENCH), str(BENCH.parent / "tests")]

from clusters import build  # noqa: E402
from serving import free_port  # noqa: E402
from test_http_ratio import NODES, filter_bodies, measure, percentile, start  # noqa: E402
from variant_server import FIXED, VARIANTS  # noqa: E402


def cpu_by_thread(pid: int) -> dict[str, int]:
    """Nanoseconds each thread of `pid` has run, by thread id."""
    out = {}
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                out[path.split("/")[-2]] = int(f.read().split()[0])
        except OSError:
            pass  # the thread ended
    return out


def handler_median(path: str) -> str:
    """The median of the handler times `variant_server.py` wrote to `path` ("" if it wrote none)."""
    try:
        times = orjson.loads(Path(path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return ""
    return f"{percentile(times, 0.5) * 1e6:.1f} us" if times else ""


def write_inputs(folder: str) -> tuple[str, str]:
    nodes, pods = build(NODES)
    snapshot, answer = os.path.join(folder, "cluster.json"), os.path.join(folder, "answer.json")
    Path(snapshot).write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    Path(answer).write_bytes(orjson.dumps([FIXED.decode()]))
    return snapshot, answer


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "variants", nargs="*", metavar="VARIANT", help="; ".join(f"{k}: {v}" for k, v in VARIANTS.items())
    )
    parser.add_argument("--instances", type=int, default=2, help="serving processes per variant")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown or args.instances < 1:
        parser.error(f"unknown variant {unknown[0]!r}" if unknown else "--instances must be at least 1")
    variants = args.variants or list(VARIANTS)
    with tempfile.TemporaryDirectory() as folder:
        snapshot, answer = write_inputs(folder)
        procs, ports, handler_times = {}, {}, {}
        try:
            port = free_port()
            procs["trivial"] = start([sys.executable, str(BENCH / "trivial_server.py"), str(port), answer], port)
            ports["trivial"] = port
            for variant in variants:
                for i in range(args.instances):
                    side, port = f"{variant}#{i + 1}", free_port()
                    times = os.path.join(folder, f"{side}.times.json")
                    cmd = [sys.executable, str(HERE / "variant_server.py"), str(port), snapshot, variant, times]
                    handler_times[side] = times
                    procs[side], ports[side] = start(cmd, port), port
            before = {side: cpu_by_thread(p.pid) for side, p in procs.items()}
            samples = measure(ports, filter_bodies()[:1])  # one list, repeated
            after = {side: cpu_by_thread(p.pid) for side, p in procs.items()}
        finally:
            for proc in procs.values():
                proc.terminate()
            for proc in procs.values():
                proc.wait(10)
        handler = {side: handler_median(path) for side, path in handler_times.items()}
    floor50, floor99 = percentile(samples["trivial"], 0.5), percentile(samples["trivial"], 0.99)
    for side, xs in samples.items():
        p50, p99 = percentile(xs, 0.5), percentile(xs, 0.99)
        # warm-up requests included: per request of the whole run, for comparison between servers only
        spent = [(after[side][t] - before[side].get(t, 0)) / len(xs) / 1000 for t in sorted(after[side], key=int)]
        threads = " ".join(f"{us:.0f}" for us in spent if us >= 0.5)
        print(
            f"{side:<12} p50 {p50 * 1e6:5.0f} us ({p50 / floor50:.2f}x)  p99 {p99 * 1e6:5.0f} us ({p99 / floor99:.2f}x)"
            f"  CPU per request by thread: {threads} us"
            + (f"  handler p50 {handler[side]}" if handler.get(side) else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
