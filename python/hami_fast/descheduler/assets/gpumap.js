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
  return q.containers.map(c => c.gpus + " GPU × " + (c.memory_mib ? c.memory_mib + " MiB" : c.memory_percentage != null ? c.memory_percentage + "%" : "any memory")
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
