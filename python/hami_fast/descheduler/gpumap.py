"""The GPU map on the descheduler's port: `GET /` (one page, no external assets; its HTML, CSS and
JavaScript are in `assets/`) and `GET /api/v1/map` (the JSON the page polls).

Every number comes from the engine, all from one view of the cluster (`view.ClusterView`, one
parsed state per change): per-GPU usage, fragmentation, the pending vGPU pods and the moves of the
planner, the live holds (GPUs reserved for a pending pod, `hami-fast.io/reservation`). This module
only joins them by node name and renders them.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.descheduler.placement import Placement
from hami_fast.descheduler.view import ClusterView
from hami_fast.kube.client import ApiError
from hami_fast.server.router import HttpError, Route

# The page shows what this many moves would do: first for the pending vGPU pods (the objective
# `--auto` applies), and when nothing is pending, the moves that free whole GPUs.
MAP_MAX_MOVES = 10
REFRESH_SECONDS = 5


HTML = "text/html; charset=utf-8"


def _plan(view: ClusterView, objective: str) -> dict[str, Any]:
    return view.plan({"objective": objective, "max_moves": MAP_MAX_MOVES, "baseline": False})


def _gpu(d: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": d["index"],
        "uuid": d["uuid"],
        "type": d["type"],
        "health": d["health"],
        "cordoned": d["cordoned"],
        "shares": [d["used"], d["count"]],
        "memoryMiB": [d["usedmem"], d["devmem"]],
        "cores": [d["usedcores"], d["devcore"]],
        "heldFor": d.get("held"),  # {pod, expires} while reserved for a pending pod
    }


def _placement(p: Placement) -> dict[str, Any]:
    return {
        "name": p.key,
        "evictPod": p.spec.evict_pod or None,
        "nodeName": p.spec.node_name,
        "gpuDevices": p.spec.gpu_devices,
        "phase": p.status.phase or "",
        "message": p.status.message,
    }


def map_data(view: ClusterView, placements: list[Placement]) -> dict[str, Any]:
    """Nodes with their GPUs and fragmentation, the pending vGPU pods, the plan and the placements."""
    holds = view.holds()  # drops the lapsed ones first
    usage = view.usage()
    registered = {(n["name"], d["uuid"]) for n in usage for d in n["devices"]}
    frag = orjson.loads(view.fragmentation())
    frag_by_node = {n["node"]: n for n in frag["nodes"]}
    plan = _plan(view, "pending")
    placed = {p["pod"]: p for p in plan["placements"]}
    pending = [dict(q, placement=placed.get(q["pod"])) for q in plan["queue"]]
    if not pending:
        plan = _plan(view, "free-gpus")
    nodes = []
    for n in usage:
        measure = frag_by_node.get(n["name"]) or {}
        nodes.append(
            {
                "name": n["name"],
                "registered": n["registered"],
                "error": n["error"],
                "fragmentation": measure.get("fragmentation", 0.0),
                "freeWholeGpus": measure.get("free_whole_gpus", 0),
                "gpus": [_gpu(d) for d in n["devices"]],
            }
        )
    return {
        "summary": frag["cluster"],
        "nodes": nodes,
        "pending": pending,
        "plan": {
            "objective": plan["objective"],
            "maxMoves": plan["max_moves"],
            "moves": plan["moves"],
            "before": plan["before"],
            "after": plan["after"],
            "elapsedMs": plan["elapsed_ms"],
        },
        "placements": [_placement(p) for p in placements],
        "holds": [dict(h, onMap=all((h["node"], g) in registered for g in h["gpus"])) for h in holds],
    }


class GpuMap:
    """The two routes. The map is recomputed only when the cluster or the placements changed, or
    when it is older than a refresh (a hold may have lapsed meanwhile)."""

    def __init__(self, source: Any, leading: Callable[[], bool]) -> None:
        self.source, self.leading = source, leading
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, float], list[dict[str, Any]], dict[str, Any]] | None = None

    def data(self) -> dict[str, Any]:
        view: ClusterView = self.source.synced_view()
        placements = self.source.placements()
        with self._lock:
            now, cached = time.monotonic(), self._cached
            if cached is None or cached[1] != placements or self._stale(cached[0], view.generation(), now):
                cached = ((view.generation(), now), placements, map_data(view, placements))
                self._cached = cached
        live = self.source.client is not None
        head = {
            "generatedAt": k.now_rfc3339(),
            "source": "live" if live else "snapshot",
            "leader": self.leading(),
            "refreshSeconds": REFRESH_SECONDS,
        }
        return {**head, **cached[2]}

    @staticmethod
    def _stale(made: tuple[int, float], generation: int, now: float) -> bool:
        return made[0] != generation or now - made[1] >= REFRESH_SECONDS

    def json(self, _body: bytes) -> tuple[int, bytes]:
        return 200, orjson.dumps(self.data())

    def page(self, _body: bytes) -> tuple[int, bytes, str]:
        try:
            data: dict[str, Any] = self.data()
        except (ApiError, HttpError, _native.EngineError, ValueError) as exc:
            data = {"error": str(exc), "refreshSeconds": REFRESH_SECONDS}
        return 200, render_page(data), HTML

    def routes(self) -> list[Route]:
        return [Route("GET", "/", self.page), Route("GET", "/api/v1/map", self.json)]


def script_json(data: dict[str, Any]) -> str:
    """JSON that is safe inside a <script> element whatever the names hold."""
    raw = orjson.dumps(data).decode()
    return raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def page_template() -> str:
    """`assets/gpumap.html` with its style and script inlined: one document, no external assets."""
    assets = resources.files("hami_fast.descheduler") / "assets"
    html_text, style, script = ((assets / f"gpumap.{ext}").read_text(encoding="utf-8") for ext in ("html", "css", "js"))
    return html_text.replace("{{style}}", style).replace("{{script}}", script)


def render_page(data: dict[str, Any]) -> bytes:
    summary = data.get("summary") or {}
    title = f"GPU map: {len(data.get('nodes') or [])} nodes, {summary.get('gpus', 0)} GPUs"
    page = page_template().replace("{{title}}", html.escape(title))
    return page.replace("{{data}}", script_json(data)).encode()
