"""`kubectl hami top nodes|gpus`: vGPU allocation per node and per GPU, from the engine's accounting.

Usage, pods per GPU and fragmentation are the engine's (`usage`, `accounting`, `fragmentation`);
this module adds them up per row, sorts and colours.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.kubectl.live import Snapshot

GREEN, YELLOW, RED, DIM, RESET = "\033[32m", "\033[33m", "\033[31m", "\033[2m", "\033[0m"
SORT_KEYS = ("memory", "cores", "slots", "pods", "fragmentation", "name")


def _pct(used: float, total: float) -> float:
    return 100.0 * used / total if total else 0.0


def _paint(text: str, pct: float, colour: bool) -> str:
    if not colour:
        return text
    return f"{GREEN if pct < 50 else YELLOW if pct < 80 else RED}{text}{RESET}"


def _pods_per_gpu(snap: Snapshot) -> dict[str, set[str]]:
    pods: dict[str, set[str]] = defaultdict(set)
    for pod in orjson.loads(snap.cluster.accounting())["pods"]:
        for device in pod["devices"]:
            pods[device["uuid"]].add(f"{pod['namespace']}/{pod['name']}")
    return pods


def gpu_rows(snap: Snapshot) -> list[dict[str, Any]]:
    pods = _pods_per_gpu(snap)
    rows = []
    for node in orjson.loads(snap.cluster.usage()):
        for d in node["devices"]:
            rows.append(
                {
                    "node": node["name"],
                    "gpu": d["uuid"],
                    "type": d["type"],
                    "memory": (d["usedmem"], d["devmem"]),
                    "cores": (d["usedcores"], d["devcore"]),
                    "slots": (d["used"], d["count"]),
                    "pods": len(pods.get(d["uuid"], ())),
                    "state": "cordoned" if d["cordoned"] else ("ok" if d["health"] else "unhealthy"),
                }
            )
    return rows


def _sums(devices: list[dict[str, Any]], used: str, total: str) -> tuple[int, int]:
    return sum(d[used] for d in devices), sum(d[total] for d in devices)


def node_rows(snap: Snapshot) -> list[dict[str, Any]]:
    frag = {n["node"]: n for n in orjson.loads(_native.fragmentation(snap.inputs()))["nodes"]}
    pods = _pods_per_gpu(snap)
    rows = []
    for node in orjson.loads(snap.cluster.usage()):
        devices = node["devices"]
        if not devices and not node["registered"]:
            continue  # a node without HAMi's device plugin: nothing to show
        rows.append(
            {
                "node": node["name"],
                "gpus": len(devices),
                "memory": _sums(devices, "usedmem", "devmem"),
                "cores": _sums(devices, "usedcores", "devcore"),
                "slots": _sums(devices, "used", "count"),
                "pods": len(set().union(*(pods.get(d["uuid"], set()) for d in devices))),
                "fragmentation": frag.get(node["name"], {}).get("fragmentation", 0.0),
                "free_whole_gpus": frag.get(node["name"], {}).get("free_whole_gpus", 0),
                "registered": node["registered"],
            }
        )
    return rows


def sort_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Fullest first (by share of the resource), then by name; `name` sorts by name only."""
    if key == "name":
        return sorted(rows, key=lambda r: (r["node"], r.get("gpu", "")))

    def share(row: dict[str, Any]) -> float:
        value = row[key]
        return _pct(*value) if isinstance(value, tuple) else float(value)

    return sorted(rows, key=lambda r: (-share(r), r["node"], r.get("gpu", "")))


def _cell(pair: tuple[int, int], unit: str, colour: bool) -> str:
    used, total = pair
    pct = _pct(used, total)
    return _paint(f"{used}/{total}{unit} {pct:3.0f}%", pct, colour)


def _render(header: list[str], rows: list[list[str]], colour: bool) -> str:
    plain = [[_strip(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in plain]) for i, h in enumerate(header)]

    def line(cells: list[str], raw: list[str]) -> str:
        out = []
        for i, (cell, text) in enumerate(zip(cells, raw, strict=True)):
            pad = " " * (widths[i] - len(text))
            out.append(cell + pad if i == 0 else pad + cell)
        return "  ".join(out).rstrip()

    head = line(header, header)
    return "\n".join(
        [f"{DIM}{head}{RESET}" if colour else head, *(line(r, p) for r, p in zip(rows, plain, strict=True))]
    )


def _strip(text: str) -> str:
    for code in (GREEN, YELLOW, RED, DIM, RESET):
        text = text.replace(code, "")
    return text


def render_nodes(rows: list[dict[str, Any]], colour: bool) -> str:
    header = ["NODE", "GPUS", "MEMORY (MiB)", "CORES", "SLOTS", "PODS", "FRAG (GPUs)", "FREE GPUS"]
    cells = [
        [
            r["node"] + ("" if r["registered"] else " (unregistered)"),
            str(r["gpus"]),
            _cell(r["memory"], "", colour),
            _cell(r["cores"], "", colour),
            _cell(r["slots"], "", colour),
            str(r["pods"]),
            f"{r['fragmentation']:.2f}",
            str(r["free_whole_gpus"]),
        ]
        for r in rows
    ]
    return _render(header, cells, colour)


def render_gpus(rows: list[dict[str, Any]], colour: bool) -> str:
    header = ["NODE", "GPU", "TYPE", "MEMORY (MiB)", "CORES", "SLOTS", "PODS", "STATE"]
    cells = [
        [
            r["node"],
            r["gpu"],
            r["type"],
            _cell(r["memory"], "", colour),
            _cell(r["cores"], "", colour),
            _cell(r["slots"], "", colour),
            str(r["pods"]),
            r["state"],
        ]
        for r in rows
    ]
    return _render(header, cells, colour)


def top(snap: Snapshot, what: str, sort: str, colour: bool) -> str:
    if what == "nodes":
        rows = node_rows(snap)
        return render_nodes(sort_rows(rows, sort), colour) if rows else "no GPU nodes"
    rows = gpu_rows(snap)
    if sort == "fragmentation":
        sort = "memory"  # fragmentation is a node measure
    return render_gpus(sort_rows(rows, sort), colour) if rows else "no GPUs"
