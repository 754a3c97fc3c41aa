"""The GPU map on the descheduler's port: `GET /` (one page, no external assets) and
`GET /api/v1/map` (the JSON the page polls).

Every number comes from the engine: per-GPU usage from `Cluster.usage()`, fragmentation from
`fragmentation()`, the pending vGPU pods and the moves from `plan()`, the live holds (GPUs reserved
for a pending pod, `hami-fast.io/reservation`) from `Cluster.holds()`. This module only joins them
by node name and renders them.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.descheduler import kube as k
from hami_fast.kube.client import ApiError
from hami_fast.server.router import Route

# The page shows what this many moves would do: first for the pending vGPU pods (the objective
# `--auto` applies), and when nothing is pending, the moves that free whole GPUs.
MAP_MAX_MOVES = 10
REFRESH_SECONDS = 5


HTML = "text/html; charset=utf-8"


def _plan(inputs: list[bytes], config: bytes | None, objective: str) -> dict[str, Any]:
    options = {"objective": objective, "max_moves": MAP_MAX_MOVES, "baseline": False}
    return orjson.loads(_native.plan(inputs, orjson.dumps(options), config))


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


def _placement(p: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
    return {
        "name": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
        "evictPod": spec.get("evictPod"),
        "nodeName": spec.get("nodeName"),
        "gpuDevices": spec.get("gpuDevices") or [],
        "phase": status.get("phase", ""),
        "message": status.get("message", ""),
    }


def map_data(inputs: list[bytes], config: bytes | None, placements: list[dict[str, Any]]) -> dict[str, Any]:
    """Nodes with their GPUs and fragmentation, the pending vGPU pods, the plan and the placements."""
    cluster = _native.Cluster(config)
    for blob in inputs:
        cluster.apply(blob)
    holds = orjson.loads(cluster.holds(int(time.time())))  # drops the lapsed ones first
    usage = orjson.loads(cluster.usage())
    registered = {(n["name"], d["uuid"]) for n in usage for d in n["devices"]}
    frag = orjson.loads(_native.fragmentation(inputs, config))
    frag_by_node = {n["node"]: n for n in frag["nodes"]}
    plan = _plan(inputs, config, "pending")
    placed = {p["pod"]: p for p in plan["placements"]}
    pending = [dict(q, placement=placed.get(q["pod"])) for q in plan["queue"]]
    if not pending:
        plan = _plan(inputs, config, "free-gpus")
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
    """The two routes. The map is recomputed only when the source hands out new inputs (the live
    source re-LISTs at most every `max_age` seconds, a snapshot never)."""

    def __init__(self, source: Any, leading: Callable[[], bool]) -> None:
        self.source, self.leading = source, leading
        self._lock = threading.Lock()
        self._cached: tuple[list[bytes], list[dict[str, Any]], dict[str, Any]] | None = None

    def data(self) -> dict[str, Any]:
        inputs, placements = self.source.inputs(), self.source.placements()
        with self._lock:
            cached = self._cached
            if cached is None or not _same(cached[0], inputs) or cached[1] != placements:
                cached = (inputs, placements, map_data(inputs, self.source.config, placements))
                self._cached = cached
        live = self.source.client is not None
        head = {
            "generatedAt": k.now_rfc3339(),
            "source": "live" if live else "snapshot",
            "leader": self.leading(),
            "refreshSeconds": REFRESH_SECONDS,
        }
        return {**head, **cached[2]}

    def json(self, _body: bytes) -> tuple[int, bytes]:
        return 200, orjson.dumps(self.data())

    def page(self, _body: bytes) -> tuple[int, bytes, str]:
        try:
            data: dict[str, Any] = self.data()
        except (ApiError, _native.EngineError, ValueError) as exc:
            data = {"error": str(exc), "refreshSeconds": REFRESH_SECONDS}
        return 200, render_page(data), HTML

    def routes(self) -> list[Route]:
        return [Route("GET", "/", self.page), Route("GET", "/api/v1/map", self.json)]


def _same(a: list[bytes], b: list[bytes]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def script_json(data: dict[str, Any]) -> str:
    """JSON that is safe inside a <script> element whatever the names hold."""
    raw = orjson.dumps(data).decode()
    return raw.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_page(data: dict[str, Any]) -> bytes:
    summary = data.get("summary") or {}
    title = f"GPU map: {len(data.get('nodes') or [])} nodes, {summary.get('gpus', 0)} GPUs"
    page = PAGE.replace("{{style}}", STYLE).replace("{{script}}", SCRIPT).replace("{{title}}", html.escape(title))
    return page.replace("{{data}}", script_json(data)).encode()


STYLE = """
:root { --bg:#f6f7f9; --card:#fff; --line:#d5d9e0; --ink:#1d2330; --mute:#667085; --free:#eef3ee;
  --l1:#b7e4c7; --l2:#ffe08a; --l3:#ffb36b; --l4:#f0605d; --bad:#6b6f76; --move:#2f6fed; --to:#0b9b6b; --held:#8e3fc9; }
* { box-sizing:border-box; }
body { margin:0; font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
  color:var(--ink); background:var(--bg); }
header { display:flex; flex-wrap:wrap; align-items:baseline; gap:6px 18px; padding:10px 16px;
  background:#1d2330; color:#fff; }
header h1 { font-size:16px; margin:0; }
header .meta { color:#c9d1e0; }
.chips { display:flex; flex-wrap:wrap; gap:6px; padding:10px 16px 0; }
.chip { background:var(--card); border:1px solid var(--line); border-radius:12px; padding:2px 10px; }
.chip b { font-variant-numeric:tabular-nums; }
.bar { display:flex; flex-wrap:wrap; gap:8px 16px; align-items:center; padding:8px 16px; }
.legend { display:flex; gap:4px; align-items:center; color:var(--mute); }
.legend i { display:inline-block; width:14px; height:14px; border:1px solid var(--line); border-radius:3px; }
#error { display:none; margin:8px 16px 0; padding:6px 10px; background:#fde8e8; border:1px solid #f0605d;
  border-radius:4px; }
main { display:flex; align-items:flex-start; gap:12px; padding:0 16px 16px; }
#grid { position:relative; flex:1; display:flex; flex-wrap:wrap; align-content:flex-start; gap:8px; min-width:0; }
#arrows { position:absolute; left:0; top:0; pointer-events:none; overflow:visible; z-index:2; }
aside { width:340px; flex:none; display:flex; flex-direction:column; gap:10px; }
section.panel { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:8px 10px; }
section.panel h2 { font-size:13px; margin:0 0 6px; }
section.panel ol, section.panel ul { margin:0; padding-left:20px; max-height:320px; overflow:auto; }
section.panel li { margin:2px 0; overflow-wrap:anywhere; }
.empty { color:var(--mute); } li.empty { list-style:none; margin-left:-16px; }
.node { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:6px 8px; min-width:120px; }
.node.unregistered { background:#f1f1f3; }
.node .name { font-weight:600; max-width:260px; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.node .stats { color:var(--mute); font-size:11px; margin-bottom:4px; max-width:236px; }
.node .gpus { display:flex; flex-wrap:wrap; gap:4px; max-width:236px; }
.node .nogpu { color:var(--mute); font-size:11px; font-style:italic; }
.gpu { position:relative; width:52px; height:44px; border:1px solid #aab2bf; border-radius:4px;
  background:var(--free); display:flex; align-items:flex-end; gap:3px; padding:3px 5px; }
.gpu .idx { position:absolute; left:3px; top:1px; font-size:10px; font-weight:600; color:#333; }
.gpu .m, .gpu .c { flex:1; height:100%; background:rgba(0,0,0,.06); border-radius:2px; display:flex;
  align-items:flex-end; margin-top:12px; }
.gpu .m { margin-left:14px; }
.gpu .m span, .gpu .c span { display:block; width:100%; border-radius:2px; }
.gpu.free { border-style:dashed; }
.gpu.used { background:#fff; } .gpu.used.bg2 { background:#fff8e1; } .gpu.used.bg3 { background:#fff0e0; }
.gpu.used.bg4 { background:#fde8e8; }
.gpu.full { border-color:#b3261e; }
.gpu.unhealthy { background:repeating-linear-gradient(45deg,#ddd,#ddd 4px,#bbb 4px,#bbb 8px); border-color:var(--bad); }
.gpu.cordoned { outline:2px dotted var(--bad); }
.gpu.held { outline:2px solid var(--held); outline-offset:1px; }
.gpu .hold { position:absolute; left:14px; top:1px; font-size:9px; font-weight:700; color:var(--held); }
.gpu.move-from { box-shadow:0 0 0 2px var(--move); }
.gpu.move-to { box-shadow:0 0 0 2px var(--to); }
.gpu.highlight { box-shadow:0 0 0 3px #000; }
.lvl0 { background:#cfd5dd; } .lvl1 { background:var(--l1); } .lvl2 { background:var(--l2); }
.lvl3 { background:var(--l3); } .lvl4 { background:var(--l4); }
.badge { position:absolute; right:2px; top:1px; font-size:10px; font-weight:700; color:var(--move); }
.move { cursor:default; } .move:hover { background:#eef3ff; }
.phase { font-weight:600; }
.small { color:var(--mute); font-size:11px; }
@media (max-width: 800px) { main { flex-direction:column; } aside { width:100%; } }
"""

SCRIPT = r"""
"use strict";
const state = { data: JSON.parse(document.getElementById("map-data").textContent), sort: "frag", filter: "" };
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const kid of kids) if (kid != null) e.append(kid);
  return e;
}
const FRAG_TIP = "frag: the GPUs' worth of free capacity the cluster's workload cannot use (FGD); free: whole free GPUs";
function pct(pair) { return pair[1] > 0 ? Math.min(100, Math.round(100 * pair[0] / pair[1])) : 0; }
function level(p) { return p <= 0 ? 0 : p < 34 ? 1 : p < 67 ? 2 : p < 100 ? 3 : 4; }
function place(p) { return p.node + "/" + p.gpus.map(u => state.names.get(u) || u).join(","); }
function gpuKey(node, gpu) { return node + "\u0000" + gpu; }
function gpuCell(node, g, marks) {
  const mem = pct(g.memoryMiB), cores = pct(g.cores);
  const idle = g.shares[0] === 0 && g.memoryMiB[0] === 0 && g.cores[0] === 0;
  const full = g.shares[1] > 0 && g.shares[0] >= g.shares[1] || mem >= 100 || cores >= 100;
  const cls = ["gpu", idle ? "free" : "used", "bg" + level(Math.max(mem, cores))];
  if (full) cls.push("full");
  if (!g.health) cls.push("unhealthy");
  if (g.cordoned) cls.push("cordoned");
  if (g.heldFor) cls.push("held");
  const name = "gpu-" + g.index, mark = marks.get(gpuKey(node.name, g.uuid));
  if (mark && mark.from.length) cls.push("move-from");
  if (mark && mark.to.length) cls.push("move-to");
  const tip = [node.name + " / " + name, g.uuid + " (" + g.type + ")",
    "memory " + g.memoryMiB[0] + " / " + g.memoryMiB[1] + " MiB (" + mem + "%)",
    "cores " + g.cores[0] + " / " + g.cores[1] + " (" + cores + "%)",
    "shares " + g.shares[0] + " / " + g.shares[1],
    g.health ? "healthy" : "UNHEALTHY", g.cordoned ? "cordoned" : "",
    g.heldFor ? "held for " + g.heldFor.pod + " until " + g.heldFor.expires : ""].filter(Boolean);
  if (mark) for (const m of mark.from) tip.push("move " + m + " leaves");
  if (mark) for (const m of mark.to) tip.push("move " + m + " arrives");
  const cell = el("div", { class: cls.join(" "), title: tip.join("\n"), "data-node": node.name, "data-gpu": name,
    "data-uuid": g.uuid, "data-mem-pct": String(mem), "data-core-pct": String(cores) },
    el("span", { class: "idx", text: String(g.index) }),
    el("div", { class: "m", title: "memory " + mem + "%" }, el("span", { class: "lvl" + level(mem), style: "height:" + mem + "%" })),
    el("div", { class: "c", title: "cores " + cores + "%" }, el("span", { class: "lvl" + level(cores), style: "height:" + cores + "%" })));
  if (mark) cell.append(el("span", { class: "badge", text: mark.from.concat(mark.to).map(n => "#" + n).join(" ") }));
  if (g.heldFor) {
    cell.dataset.heldFor = g.heldFor.pod; cell.dataset.heldUntil = g.heldFor.expires;
    cell.append(el("span", { class: "hold", text: "held" }));
  }
  return cell;
}
function moveMarks(moves) {
  const marks = new Map();
  const at = (node, gpu) => {
    const key = gpuKey(node, gpu);
    if (!marks.has(key)) marks.set(key, { from: [], to: [] });
    return marks.get(key);
  };
  moves.forEach((m, i) => {
    for (const g of m.from.gpus) at(m.from.node, g).from.push(i + 1);
    for (const g of m.to.gpus) at(m.to.node, g).to.push(i + 1);
  });
  return marks;
}
function sortedNodes(nodes) {
  const f = state.filter.toLowerCase();
  const shown = f ? nodes.filter(n => n.name.toLowerCase().includes(f)) : nodes.slice();
  const used = n => n.gpus.reduce((s, g) => s + pct(g.memoryMiB), 0) / Math.max(1, n.gpus.length);
  const by = {
    frag: (a, b) => b.fragmentation - a.fragmentation || b.gpus.length - a.gpus.length,
    free: (a, b) => b.freeWholeGpus - a.freeWholeGpus,
    use: (a, b) => used(b) - used(a),
    name: () => 0,
  }[state.sort];
  return shown.sort((a, b) => by(a, b) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
function renderGrid(d) {
  const grid = document.getElementById("grid");
  const marks = moveMarks(d.plan ? d.plan.moves : []);
  const cards = sortedNodes(d.nodes || []).map(n => {
    const cls = "node" + (n.registered ? "" : " unregistered");
    const stats = n.gpus.length
      ? "frag " + n.fragmentation.toFixed(2) + " · free " + n.freeWholeGpus + "/" + n.gpus.length
      : (n.error ? n.error : "no GPUs registered");
    const gpus = n.gpus.length ? el("div", { class: "gpus" }, ...n.gpus.map(g => gpuCell(n, g, marks)))
                               : el("div", { class: "nogpu", text: "no GPUs" });
    return el("div", { class: cls, "data-node": n.name, "data-frag": String(n.fragmentation) },
      el("div", { class: "name", title: n.name, text: n.name }), el("div", { class: "stats", text: stats, title: FRAG_TIP }), gpus);
  });
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.id = "arrows";
  grid.replaceChildren(svg, ...cards);
  if (!cards.length) grid.append(el("p", { class: "empty", text: (d.nodes || []).length ? "no node matches the filter" : "no nodes in the cluster" }));
  drawArrows(d);
}
function cellOf(node, gpu) {
  for (const c of document.querySelectorAll("#grid .gpu")) if (c.dataset.node === node && c.dataset.uuid === gpu) return c;
  return null;
}
function drawArrows(d) {
  const svg = document.getElementById("arrows"), grid = document.getElementById("grid");
  if (!svg) return;
  const box = grid.getBoundingClientRect();
  svg.setAttribute("width", grid.scrollWidth); svg.setAttribute("height", grid.scrollHeight);
  const ns = "http://www.w3.org/2000/svg";
  const parts = [];
  const defs = document.createElementNS(ns, "defs");
  const marker = document.createElementNS(ns, "marker");
  for (const [k, v] of Object.entries({ id: "head", markerWidth: 8, markerHeight: 8, refX: 7, refY: 4, orient: "auto" })) marker.setAttribute(k, v);
  const tip = document.createElementNS(ns, "path");
  tip.setAttribute("d", "M0,0 L8,4 L0,8 z"); tip.setAttribute("fill", "#2f6fed");
  marker.append(tip); defs.append(marker); parts.push(defs);
  (d.plan ? d.plan.moves : []).forEach((m, i) => {
    const a = cellOf(m.from.node, m.from.gpus[0]), b = cellOf(m.to.node, m.to.gpus[0]);
    if (!a || !b) return;
    const ra = a.getBoundingClientRect(), rb = b.getBoundingClientRect();
    const x1 = ra.left + ra.width / 2 - box.left, y1 = ra.top + ra.height / 2 - box.top;
    const x2 = rb.left + rb.width / 2 - box.left, y2 = rb.top + rb.height / 2 - box.top;
    const bend = Math.max(60, Math.hypot(x2 - x1, y2 - y1) / 3);
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", "M" + x1 + "," + y1 + " Q" + ((x1 + x2) / 2) + "," + (Math.min(y1, y2) - bend) + " " + x2 + "," + y2);
    path.setAttribute("class", "arrow"); path.setAttribute("data-move", String(i + 1));
    path.setAttribute("fill", "none"); path.setAttribute("stroke", "#2f6fed"); path.setAttribute("stroke-width", "2.5");
    path.setAttribute("stroke-opacity", "0.85"); path.setAttribute("marker-end", "url(#head)");
    parts.push(path);
  });
  svg.replaceChildren(...parts);
}
function highlight(m, on) {
  for (const [node, gpus] of [[m.from.node, m.from.gpus], [m.to.node, m.to.gpus]])
    for (const g of gpus) { const c = cellOf(node, g); if (c) c.classList.toggle("highlight", on); }
}
function list(id, items, empty) {
  const box = document.getElementById(id);
  box.replaceChildren(...(items.length ? items : [el("li", { class: "empty", text: empty })]));
}
function request(q) {
  return q.containers.map(c => c.gpus + " GPU × " + (c.memoryMiB ? c.memoryMiB + " MiB" : c.memoryPercentage != null ? c.memoryPercentage + "%" : "any memory")
    + (c.cores ? ", " + c.cores + "% cores" : "") + (c.init ? " (init)" : "")).join("; ");
}
function renderSide(d) {
  const plan = d.plan || { moves: [], objective: "", maxMoves: 0 };
  const what = plan.objective === "pending" ? "moves for the pending pods" : "moves that free whole GPUs";
  document.getElementById("plan-title").textContent = "Plan: " + what + " (budget " + plan.maxMoves + ")";
  list("moves", plan.moves.map((m, i) => {
    const li = el("li", { class: "move", "data-pod": m.pod, "data-from": place(m.from), "data-to": place(m.to) },
      el("b", { text: m.pod }), " ", el("span", { text: place(m.from) + " → " + place(m.to) }));
    li.addEventListener("mouseenter", () => highlight(m, true));
    li.addEventListener("mouseleave", () => highlight(m, false));
    return li;
  }), "no move within the budget");
  if (plan.before && plan.after) document.getElementById("plan-effect").textContent =
    "free whole GPUs " + plan.before.free_whole_gpus + " → " + plan.after.free_whole_gpus +
    ", fragmentation " + plan.before.fragmentation.toFixed(2) + " → " + plan.after.fragmentation.toFixed(2);
  const holdOf = new Map((d.holds || []).map(h => [h.pod, h]));
  list("pending", (d.pending || []).map(q => {
    const p = q.placement, hold = holdOf.get(q.pod);
    const fate = !p ? (q.never ? "can never fit: " + q.never : "cannot be unblocked within the budget")
      : p.moves ? "unblocked by " + p.moves + " move" + (p.moves > 1 ? "s" : "") + " → " + place(p)
      : "fits now → " + place(p);
    return el("li", { class: "pod" + (p ? " unblocked" : " blocked"), "data-pod": q.pod },
      el("b", { text: q.pod }), el("div", { class: "small", text: request(q) }), el("div", { class: "small", text: fate }),
      hold ? el("div", { class: "small held-by", text: "holds " + place(hold) + " until " + hold.expires }) : null);
  }), "no pending vGPU pods");
  list("holds", (d.holds || []).map(h => el("li", { "data-hold": h.pod },
    el("b", { text: h.pod }), " ", el("span", { text: place(h) }),
    el("div", { class: "small", text: "until " + h.expires + (h.onMap ? "" : " · GPU not registered on the map") }))),
    "no GPU is held");
  list("placements", (d.placements || []).map(p => el("li", { "data-placement": p.name },
    el("b", { text: p.name }), " ", el("span", { class: "phase", text: p.phase || "New" }),
    el("div", { class: "small", text: (p.evictPod ? p.evictPod + " → " : "") + p.nodeName + "/" + p.gpuDevices.join(",") }),
    p.message ? el("div", { class: "small", text: p.message }) : null)), "none");
}
function renderHead(d) {
  const s = d.summary || {};
  const chip = (label, value) => el("span", { class: "chip" }, label + " ", el("b", { text: String(value) }));
  const gpus = (d.nodes || []).reduce((n, x) => n + x.gpus.length, 0);
  document.getElementById("chips").replaceChildren(
    chip("nodes", (d.nodes || []).length), chip("GPUs", gpus), chip("healthy", s.healthy_gpus ?? 0),
    chip("free whole GPUs", s.free_whole_gpus ?? 0),
    chip("fragmentation", (s.fragmentation ?? 0).toFixed(2) + " GPUs (" + (s.fragmentation_pct_of_idle ?? 0).toFixed(1) + "% of idle)"),
    chip("pending vGPU pods", (d.pending || []).length),
    chip("held GPUs", (d.holds || []).reduce((n, h) => n + h.gpus.length, 0)));
  document.getElementById("meta").textContent = (d.source || "") + (d.leader ? " · leader" : "") + " · " + (d.generatedAt || "");
  const err = document.getElementById("error");
  err.style.display = d.error ? "block" : "none";
  err.textContent = d.error ? "cannot read the cluster: " + d.error : "";
}
function render() {
  const d = state.data;
  state.names = new Map((d.nodes || []).flatMap(n => n.gpus.map(g => [g.uuid, "gpu-" + g.index])));
  document.title = "GPU map: " + (d.nodes || []).length + " nodes";
  renderHead(d); renderGrid(d); renderSide(d);
}
async function refresh() {
  if (document.hidden || document.getElementById("pause").checked) return;
  try {
    const r = await fetch("api/v1/map", { cache: "no-store" });
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.status);
    state.data = body;
    document.body.dataset.refreshed = String(1 + Number(document.body.dataset.refreshed || 0));
  } catch (e) {
    state.data = Object.assign({}, state.data, { error: "refresh failed: " + e.message });
  }
  render();
}
document.getElementById("sort").addEventListener("change", e => { state.sort = e.target.value; render(); });
document.getElementById("filter").addEventListener("input", e => { state.filter = e.target.value; render(); });
window.addEventListener("resize", () => drawArrows(state.data));
render();
setInterval(refresh, 1000 * (state.data.refreshSeconds || 5));
"""

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}}</title>
<style>{{style}}</style>
</head>
<body>
<header><h1>hami_fast GPU map</h1><span class="meta" id="meta"></span></header>
<div id="error" role="alert"></div>
<div class="chips" id="chips"></div>
<div class="bar">
  <label>sort <select id="sort">
    <option value="frag">fragmentation</option><option value="free">free whole GPUs</option>
    <option value="use">memory use</option><option value="name">name</option></select></label>
  <label>filter <input id="filter" type="search" placeholder="node name" size="18"></label>
  <label><input id="pause" type="checkbox"> pause</label>
  <span class="legend">free <i style="background:#eef3ee;border-style:dashed"></i> use
    <i class="lvl1"></i><i class="lvl2"></i><i class="lvl3"></i><i class="lvl4"></i> full ·
    bars: memory | cores · <i style="box-shadow:0 0 0 2px #2f6fed"></i> leaves
    <i style="box-shadow:0 0 0 2px #0b9b6b"></i> arrives
    <i style="outline:2px solid #8e3fc9;outline-offset:1px"></i> held for a pending pod</span>
</div>
<main>
  <div id="grid"><noscript>The GPU map needs JavaScript; the data is at api/v1/map.</noscript></div>
  <aside>
    <section class="panel"><h2 id="plan-title">Plan</h2><ol id="moves"></ol>
      <div class="small" id="plan-effect"></div></section>
    <section class="panel"><h2>Pending vGPU pods</h2><ul id="pending"></ul></section>
    <section class="panel"><h2>Held GPUs</h2><ul id="holds"></ul></section>
    <section class="panel"><h2>Placements</h2><ul id="placements"></ul></section>
  </aside>
</main>
<script id="map-data" type="application/json">{{data}}</script>
<script>{{script}}</script>
</body>
</html>
"""
