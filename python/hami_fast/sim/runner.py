"""Running replays: one run, or a sweep over traces × policies × seeds on several processes."""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hami_fast import _native

#: Every node policy, in table order: the engine's own list.
POLICIES: list[str] = list(_native.policy_names())


@dataclass(frozen=True)
class Run:
    """One replay to perform."""

    nodes: str
    pods: str
    policy: str
    seed: int = 42
    tune: float = 1.3

    @property
    def trace(self) -> str:
        return trace_name(self.pods)


def trace_name(pods_path: str) -> str:
    """``.../openb_pod_list_gpushare40.csv`` -> ``gpushare40``; other files keep their stem."""
    stem = Path(pods_path).stem
    return stem.removeprefix("openb_pod_list_")


@functools.lru_cache(maxsize=32)
def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def replay(run: Run) -> dict[str, Any]:
    """Replay one trace in the Rust engine; returns its summary dict (see ``_native.replay``)."""
    raw = _native.replay(
        _read(run.nodes),
        _read(run.pods),
        run.policy,
        seed=run.seed,
        tune=run.tune,
        nodes_name=run.nodes,
        pods_name=run.pods,
    )
    out: dict[str, Any] = json.loads(raw)
    for key, value in out.items():
        if key.endswith("_by_arrived"):
            out[key] = {k: value[k] for k in sorted(value, key=int)}
    out["trace"] = run.trace
    return out


def summary(result: dict[str, Any]) -> dict[str, Any]:
    """The ``--output json`` object of a single run (the keys the CLI promises)."""
    keys = [
        "policy",
        "seed",
        "pods",
        "failed",
        "total_gpus",
        "unallocated_pct_at_100",
        "alloc_pct_by_arrived",
        "elapsed_s",
    ]
    return {k: result[k] for k in keys}


def parse_seeds(text: str) -> list[int]:
    """``42``, ``42-51`` or ``42,45,50-51``."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"--seeds {text!r}: want N, N-M or a comma list of those") from None
    if not seeds:
        raise ValueError(f"--seeds {text!r}: no seed given")
    return seeds


def parse_policies(text: str) -> list[str]:
    names = POLICIES if text.strip() == "all" else [p.strip().lower() for p in text.split(",") if p.strip()]
    for name in names:
        if name not in POLICIES:
            raise ValueError(f"--policy {name!r}: want one of {', '.join(POLICIES)} or all")
    return names


class Progress:
    """Progress on stderr: a one-line bar on a terminal (or when forced), else a plain line at each
    tenth of the runs, so a log or a pipe shows the sweep moving; `enabled=False` is silent."""

    def __init__(self, total: int, enabled: bool | None = None, stream=sys.stderr) -> None:
        self.total, self.done, self.start, self.stream = total, 0, time.monotonic(), stream
        self.mode = "bar" if enabled or (enabled is None and stream.isatty()) else "lines" if enabled is None else "off"
        self.next_line = self._tenth(1)

    def _tenth(self, k: int) -> int:
        return max(1, -(-self.total * k // 10))

    def step(self, label: str = "") -> None:
        self.done += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        if self.mode == "bar":
            self._bar(elapsed, eta, label)
        elif self.mode == "lines" and self.done >= self.next_line:
            self.stream.write(
                f"simulate: {self.done}/{self.total} runs done ({label}), {elapsed:.0f} s elapsed, about {eta:.0f} s left\n"
            )
            self.stream.flush()
            self.next_line = self._tenth(10 * self.done // max(self.total, 1) + 1)

    def _bar(self, elapsed: float, eta: float, label: str) -> None:
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {elapsed:5.0f}s elapsed, ETA {eta:4.0f}s {label:<28.28}")
        if self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()


def sweep(
    runs: Sequence[Run],
    jobs: int | None = None,
    progress: bool | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every replay, ``jobs`` processes at a time (default: all cores); results in input order."""
    jobs = max(1, jobs or os.cpu_count() or 1)
    if progress is not False:
        procs = min(jobs, len(runs))
        replays = f"{len(runs)} replay{'s' if len(runs) != 1 else ''}"
        print(f"simulate: {replays} on {procs} process{'es' if procs != 1 else ''}", file=sys.stderr, flush=True)
    bar = Progress(len(runs), progress)
    results: list[dict[str, Any] | None] = [None] * len(runs)
    if jobs == 1 or len(runs) == 1:
        for i, run in enumerate(runs):
            results[i] = replay(run)
            bar.step(f"{run.trace}/{run.policy}/{run.seed}")
            if on_result:
                on_result(results[i])  # type: ignore[arg-type]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(replay, run): i for i, run in enumerate(runs)}
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                run = runs[i]
                bar.step(f"{run.trace}/{run.policy}/{run.seed}")
                if on_result:
                    on_result(results[i])  # type: ignore[arg-type]
    return [r for r in results if r is not None]


def aggregate(results: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    """Per (trace, policy): mean, sd, median, min and max of unallocated % at 100, run count,
    mean failed pods and mean replay seconds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["trace"], r["policy"]), []).append(r)
    out: dict[tuple[str, str], dict[str, float]] = {}
    for key, rs in groups.items():
        vals = [r["unallocated_pct_at_100"] for r in rs if r["unallocated_pct_at_100"] is not None]
        out[key] = {
            "n": len(rs),
            "mean": statistics.fmean(vals) if vals else float("nan"),
            "sd": statistics.stdev(vals) if len(vals) > 1 else 0.0,
            "median": statistics.median(vals) if vals else float("nan"),
            "min": min(vals) if vals else float("nan"),
            "max": max(vals) if vals else float("nan"),
            "failed": statistics.fmean(r["failed"] for r in rs),
            "elapsed_s": statistics.fmean(r["elapsed_s"] for r in rs),
        }
    return out
