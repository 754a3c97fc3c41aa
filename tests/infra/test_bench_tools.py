"""The measuring tools in `bench/tools/` (scripts, not benchmarks) still run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "bench" / "tools"


def run_idle(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(TOOLS / "engine_idle.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_engine_idle_times_both_calls_back_to_back_and_after_each_gap() -> None:
    done = run_idle("--calls", "10", "--gaps-us", "50,200")
    assert done.returncode == 0, done.stderr
    rows = {line[:22].strip(): line[22:].split() for line in done.stdout.splitlines()[2:]}
    labels = ["back to back"] + [f"after {g} us {how}" for g in (50, 200) for how in ("slept", "spun")]
    assert list(rows) == labels
    for label, cells in rows.items():
        # "p50 / p90" for Cluster.decide, then for Scheduler.filter_answer
        assert len(cells) == 6 and cells[1] == cells[4] == "/", (label, cells)
        assert all(float(cells[k]) > 0 for k in (0, 2, 3, 5)), (label, cells)


def test_engine_idle_rejects_a_bad_gap_list_in_one_line() -> None:
    done = run_idle("--gaps-us", "300,soon")
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert re.search(r"--gaps-us: not a comma-separated list of integers: '300,soon'", last), done.stderr
    assert "Traceback" not in done.stderr


def test_http_variants_reports_each_server_and_the_handler_time_inside_the_request() -> None:
    cmd = [sys.executable, str(TOOLS / "http_variants.py"), "--instances", "1", "fixed", "decide"]
    env = {**os.environ, "HTTP_RATIO_BLOCKS": "2", "HTTP_RATIO_PER_BLOCK": "20"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert list(lines) == ["trivial", "fixed#1", "decide#1"], done.stdout
    assert "handler p50" not in lines["trivial"]  # the floor is not timed inside
    handler = {side: re.search(r"handler p50 ([\d.]+) us", lines[side]) for side in ("fixed#1", "decide#1")}
    assert all(handler.values()), done.stdout
    # the engine call takes longer than answering fixed bytes
    assert float(handler["decide#1"][1]) > float(handler["fixed#1"][1]), done.stdout
