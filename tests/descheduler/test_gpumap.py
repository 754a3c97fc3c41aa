"""The GPU map on the descheduler's port: `GET /api/v1/map` (the engine's numbers, joined by node) and
`GET /` loaded in a real headless Chromium (Debian's package), screenshots kept as test artifacts.

Chromium: HAMI_FAST_CHROMIUM or /usr/bin/chromium. Where it is absent the browser tests skip, unless
HAMI_FAST_REQUIRE_BROWSER=1 (CI), where they fail. Screenshots go to $HAMI_FAST_ARTIFACTS/gpumap/
(else the test's tmp dir); each test prints the path.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import orjson
import pytest
from hami_fast import _native
from hami_fast.descheduler import gpumap
from hami_fast.descheduler.api import ApiApp, Source
from hami_fast.descheduler.view import ClusterView
from k8s_objects import pending_pod, registered_node, replica_pod
from serving import free_port

GPU_MEM = 16000


EVIL = '<img src=x onerror="document.body.dataset.pwned=1">'


def node(name: str, gpus: int = 2, mem: int = GPU_MEM, kind: str = "NVIDIA-A10", unhealthy: tuple = ()) -> dict:
    return registered_node(name, gpus, mem, kind, unhealthy)


def pod(name: str, node_name: str, gpu: int, mem: int, cores: int = 20) -> dict:
    """A ReplicaSet's running pod holding `mem` MiB and `cores` % of GPU `gpu` of `node_name`."""
    return replica_pod(name, node_name, gpu, mem, cores, namespace="team", scheduler=None)


def cluster(with_pending: bool = True) -> list[dict]:
    """Every A10 partly used, so the pending whole-GPU pod needs one move; node-b gpu-1 is full;
    node-e's small T4 is free (too small for the pending pod); node-c has no GPUs; node-d's GPU is
    unhealthy; a pod and a node with HTML in their names."""
    items = [
        node("node-a"),
        node("node-b"),
        node("node-c", gpus=0),
        node("node-d", gpus=1, unhealthy=(0,)),
        node("node-e", gpus=1, mem=8000, kind="NVIDIA-T4"),
        node("x<b>bold</b>&co", gpus=1),
        pod("a0", "node-a", 0, 4000),
        pod("a1", "node-a", 1, 12000, cores=60),
        pod("b0", "node-b", 0, 2000, cores=10),
        pod("b1", "node-b", 1, 16000, cores=100),
        pod(EVIL, "x<b>bold</b>&co", 0, 15000, cores=90),
    ]
    return items + ([pending_pod("train-0")] if with_pending else [])


def as_list(items: list[dict]) -> bytes:
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def map_of(items: list[dict]) -> dict:
    return gpumap.map_data(ClusterView.of_snapshot(as_list(items)), [])


def gpu_of(data: dict, node_name: str, index: int) -> dict:
    return next(n for n in data["nodes"] if n["name"] == node_name)["gpus"][index]


# -- the data the page polls -----------------------------------------------------------------------


def test_map_joins_usage_fragmentation_pending_and_plan():
    data = map_of(cluster())
    names = [n["name"] for n in data["nodes"]]
    assert set(names) == {"node-a", "node-b", "node-c", "node-d", "node-e", "x<b>bold</b>&co"}
    assert gpu_of(data, "node-b", 1)["memoryMiB"] == [16000, 16000] and gpu_of(data, "node-b", 1)["cores"] == [100, 100]
    assert gpu_of(data, "node-a", 0)["memoryMiB"] == [4000, 16000] and gpu_of(data, "node-a", 0)["shares"] == [1, 10]
    assert gpu_of(data, "node-e", 0)["memoryMiB"] == [0, 8000] and gpu_of(data, "node-e", 0)["type"] == "NVIDIA-T4"
    assert gpu_of(data, "node-d", 0)["health"] is False
    assert next(n for n in data["nodes"] if n["name"] == "node-c")["gpus"] == []
    by_name = {n["name"]: n for n in data["nodes"]}
    assert by_name["node-e"]["freeWholeGpus"] == 1 and by_name["node-a"]["freeWholeGpus"] == 0
    assert data["summary"]["free_whole_gpus"] == 1 and data["summary"]["gpus"] == 7
    # The pending pod, what it asks for, and the one move that frees a whole A10 for it.
    [queued] = data["pending"]
    assert queued["pod"] == "team/train-0" and queued["uid"] == "u-train-0"
    assert queued["containers"] == [
        {"init": False, "gpus": 1, "memory_mib": 16000, "memory_percentage": None, "cores": 0}
    ]
    plan = data["plan"]
    assert plan["objective"] == "pending" and plan["maxMoves"] == gpumap.MAP_MAX_MOVES
    [move] = plan["moves"]
    target = queued["placement"]
    assert target["moves"] == 1 and (target["node"], target["gpus"]) == (move["from"]["node"], move["from"]["gpus"])
    assert move["to"] != move["from"] and move["to"]["node"] in {"node-a", "node-b"}


def held(name: str, hold: str, expires: str) -> dict:
    """A pending whole-GPU pod holding `hold` (`node/GPU-uuid,...`) until `expires`."""
    p = pending_pod(name)
    p["metadata"]["annotations"] = {"hami-fast.io/reservation": hold, "hami-fast.io/reservation-expires": expires}
    return p


LATER = "2999-01-01T00:00:00Z"


def held_cluster() -> list[dict]:
    """node-e's free T4 is held for team/train-1; a lapsed hold on node-a's gpu-0 and one on a node
    that is not in the cluster."""
    return [
        *cluster(with_pending=False),
        held("train-1", "node-e/GPU-node-e-0", LATER),
        held("train-2", "node-a/GPU-node-a-0", "2001-01-01T00:00:00Z"),
        held("train-3", "gone/GPU-gone-0", LATER),
    ]


def test_map_shows_whom_a_gpu_is_held_for_and_until_when():
    data = map_of(held_cluster())
    assert gpu_of(data, "node-e", 0)["heldFor"] == {"pod": "team/train-1", "expires": LATER}
    assert gpu_of(data, "node-a", 0)["heldFor"] is None, "a lapsed hold holds nothing"
    assert gpu_of(data, "node-b", 0)["heldFor"] is None
    assert data["holds"] == [
        {"pod": "team/train-1", "node": "node-e", "gpus": ["GPU-node-e-0"], "expires": LATER, "onMap": True},
        {"pod": "team/train-3", "node": "gone", "gpus": ["GPU-gone-0"], "expires": LATER, "onMap": False},
    ]
    assert map_of(cluster())["holds"] == []


def test_without_pending_pods_the_plan_frees_whole_gpus():
    data = map_of(cluster(with_pending=False))
    assert data["pending"] == []
    plan = data["plan"]
    assert plan["objective"] == "free-gpus" and plan["moves"]
    assert plan["after"]["free_whole_gpus"] > plan["before"]["free_whole_gpus"] == 1


def test_empty_cluster_and_nodes_without_gpus():
    empty = map_of([])
    assert empty["nodes"] == [] and empty["pending"] == [] and empty["plan"]["moves"] == []
    assert empty["summary"]["gpus"] == 0
    only_cpu = map_of([node("cpu-1", gpus=0), node("cpu-2", gpus=0)])
    assert [n["gpus"] for n in only_cpu["nodes"]] == [[], []] and only_cpu["summary"]["free_whole_gpus"] == 0


def test_names_cannot_break_out_of_the_inline_data():
    page = gpumap.render_page({"nodes": [{"name": "</script><script>alert(1)</script>"}], "summary": {}}).decode()
    assert "</script><script>alert(1)" not in page
    assert "\\u003c/script\\u003e" in page
    assert page.count("</script>") == 2  # the data element and the page's own script


def test_the_page_is_one_document_with_its_style_and_script_inlined():
    assets = resources.files("hami_fast.descheduler") / "assets"
    page = gpumap.render_page({"nodes": [], "summary": {"gpus": 0}}).decode()
    for slot in ("{{style}}", "{{script}}", "{{title}}", "{{data}}"):
        assert slot not in page
    assert "<link" not in page and " src=" not in page  # nothing fetched from elsewhere
    for name in ("gpumap.css", "gpumap.js"):
        asset = (assets / name).read_text(encoding="utf-8").strip()
        assert len(asset) > 1000 and asset in page, name
    assert "<title>GPU map: 0 nodes, 0 GPUs</title>" in page


def test_a_source_error_still_serves_the_page():
    class Broken(ClusterView):
        def fragmentation(self) -> bytes:
            raise _native.EngineError("snapshot: node n1: annotation hami.io/node-nvidia-register: bad")

    status, page, content_type = gpumap.GpuMap(Source(view=Broken()), lambda: False).page(b"")
    assert status == 200 and content_type == gpumap.HTML
    data = orjson.loads(page.decode().split('type="application/json">')[1].split("</script>")[0])
    assert data["error"] and "nodes" not in data


# -- served over HTTP --------------------------------------------------------------------------------


@contextmanager
def serving(source: Source) -> Iterator[str]:
    """The descheduler's API app (the GPU map included) on a free port, as `hami-fast descheduler` serves it."""
    from granian.constants import Interfaces
    from granian.server.embed import Server
    from hami_fast.server.listen import start_listening

    executor = ThreadPoolExecutor(max_workers=4)
    port = free_port()
    server = Server(
        ApiApp(source, None, lambda: True, executor),
        address="127.0.0.1",
        port=port,
        interface=Interfaces.RSGI,
        log_enabled=False,
    )
    ready, stop = threading.Event(), threading.Event()

    async def run() -> None:
        task = await start_listening(server, f"127.0.0.1:{port}")
        ready.set()
        while not stop.is_set() and not task.done():
            await asyncio.sleep(0.05)
        server.stop()
        await task

    thread = threading.Thread(target=lambda: asyncio.run(run()), daemon=True)
    thread.start()
    assert ready.wait(15), "the API did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join(15)
        executor.shutdown()


def get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=20) as r:
        return r.status, r.headers.get("content-type", ""), r.read()


def test_routes_serve_html_and_json():
    with serving(Source(snapshot=as_list(cluster()))) as base:
        status, ctype, body = get(f"{base}/")
        assert status == 200 and ctype.startswith("text/html")
        assert b"<!doctype html>" in body
        assert not any(ref in body for ref in (b'src="http', b'href="http', b"url(http", b"@import")), "offline"
        status, ctype, body = get(f"{base}/api/v1/map")
        data = orjson.loads(body)
        assert ctype == "application/json" and data["source"] == "snapshot" and data["leader"] is True
        assert len(data["nodes"]) == 6 and data["plan"]["moves"]
        status, _, body = get(f"{base}/api/v1/cluster-info")
        assert orjson.loads(body)["summary"]["gpus"] == 7, "the existing routes are still there"


# -- in a real browser ---------------------------------------------------------------------------------

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str:
    path = os.environ.get("HAMI_FAST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        why = f"Chromium not found at {path} (apt-get install chromium chromium-driver, or set HAMI_FAST_CHROMIUM)"
        if os.environ.get("HAMI_FAST_REQUIRE_BROWSER") == "1":
            pytest.fail(why + "; HAMI_FAST_REQUIRE_BROWSER=1 asks for the browser tests to run")
        pytest.skip(why)
    return path


def artifact(tmp_path: Path, name: str) -> Path:
    root = os.environ.get("HAMI_FAST_ARTIFACTS")
    folder = Path(root) / "gpumap" if root else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def load(url: str, tmp_path: Path, shot: str, budget_ms: int = 8000, size: str = "1440,1000") -> Element:
    """Loads `url` in headless Chromium, lets its script run for `budget_ms` of virtual time (the
    page's refresh included), saves a screenshot and returns the DOM as it is then."""
    png = artifact(tmp_path, shot)
    png.unlink(missing_ok=True)
    cmd = [
        chromium(),
        *CHROMIUM_FLAGS,
        f"--user-data-dir={tmp_path / ('profile-' + shot)}",
        f"--window-size={size}",
        f"--virtual-time-budget={budget_ms}",
        f"--screenshot={png}",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert png.exists() and png.stat().st_size > 1000, "no screenshot"
    print(f"\nscreenshot: {png}")
    return parse(done.stdout.decode())


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent, self.children, self.texts = tag, attrs, parent, [], []

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        return "".join(self.texts) + "".join(c.text() for c in self.children)

    def all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        found = []
        for c in self.children:
            if (tag is None or c.tag == tag) and (cls is None or cls in c.classes):
                if all(c.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items()):
                    found.append(c)
            found.extend(c.all(tag, cls, **attrs))
        return found

    def one(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element:
        found = self.all(tag, cls, **attrs)
        assert len(found) == 1, f"{len(found)} <{tag} class={cls} {attrs}>"
        return found[0]


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def parse(markup: str) -> Element:
    root = Element("#root", {}, None)

    class Builder(HTMLParser):
        at = root

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            e = Element(tag, {k: v or "" for k, v in attrs}, self.at)
            self.at.children.append(e)
            if tag not in VOID:
                self.at = e

        def handle_endtag(self, tag: str) -> None:
            e: Element | None = self.at
            while e is not None and e.tag != tag:
                e = e.parent
            if e is not None and e.parent is not None:
                self.at = e.parent

        def handle_data(self, data: str) -> None:
            self.at.texts.append(data)

    Builder().feed(markup)
    return root


def cell(dom: Element, node_name: str, gpu: str) -> Element:
    """The GPU's cell by `gpu-N` or UUID (the plan names GPUs by UUID)."""
    if gpu.startswith("gpu-"):
        return dom.one("div", "gpu", data_node=node_name, data_gpu=gpu)
    return dom.one("div", "gpu", data_node=node_name, data_uuid=gpu)


def test_page_in_chromium_shows_the_grid_the_pending_pod_and_the_move(tmp_path):
    data = map_of(cluster())
    [move] = data["plan"]["moves"]
    with serving(Source(snapshot=as_list(cluster()))) as base:
        dom = load(f"{base}/", tmp_path, "gpumap.png")
    grid = dom.one(id="grid")
    cells = grid.all("div", "gpu")
    assert len(cells) == 7
    assert sorted(c.attrs["data-uuid"] for c in cells) == sorted(
        f"GPU-{n}-{i}"
        for n, k in (("node-a", 2), ("node-b", 2), ("node-d", 1), ("node-e", 1), ("x<b>bold</b>&co", 1))
        for i in range(k)
    )
    full = cell(grid, "node-b", "gpu-1")
    assert {"used", "full"} <= full.classes and "free" not in full.classes
    assert full.attrs["data-mem-pct"] == "100" and full.attrs["data-core-pct"] == "100"
    assert full.one("div", "m").one("span").classes == {"lvl4"}
    free = cell(grid, "node-e", "gpu-0")
    assert "free" in free.classes and "used" not in free.classes and free.attrs["data-mem-pct"] == "0"
    assert free.one("div", "m").one("span").classes == {"lvl0"}
    partly = cell(grid, "node-a", "gpu-0")
    assert partly.attrs["data-mem-pct"] == "25" and partly.one("div", "m").one("span").classes == {"lvl1"}
    assert "unhealthy" in cell(grid, "node-d", "gpu-0").classes
    assert "no GPUs" in grid.one("div", "node", data_node="node-c").text()
    # The move: its source GPU and its target GPU are marked and joined by an arrow.
    source = cell(grid, move["from"]["node"], move["from"]["gpus"][0])
    target = cell(grid, move["to"]["node"], move["to"]["gpus"][0])
    assert "move-from" in source.classes and "move-to" in target.classes
    assert len(grid.all("path", "arrow")) == 1
    [listed] = dom.one(id="moves").all("li", "move")
    assert listed.attrs["data-pod"] == move["pod"]
    assert listed.attrs["data-from"] == f"{move['from']['node']}/{source.attrs['data-gpu']}"
    # The pending pod, and where the move lets it land.
    pod_item = dom.one(id="pending").one("li", "pod")
    assert pod_item.attrs["data-pod"] == "team/train-0" and "unblocked" in pod_item.classes
    assert f"unblocked by 1 move → {move['from']['node']}/{source.attrs['data-gpu']}" in pod_item.text()
    assert "1 GPU × 16000 MiB" in pod_item.text()
    # Names are text, never markup.
    assert "pwned" not in dom.one("body").attrs and not dom.all("img") and not grid.all("b")
    assert grid.one("div", "node", data_node="x<b>bold</b>&co").one("div", "name").text() == "x<b>bold</b>&co"
    # Nodes sorted by fragmentation, highest first.
    fragments = [float(n.attrs["data-frag"]) for n in grid.all("div", "node")]
    assert fragments == sorted(fragments, reverse=True)
    assert dom.one("body").attrs.get("data-refreshed") == "1", "the script polled api/v1/map once in 8 s"


def test_page_in_chromium_shows_a_held_gpu(tmp_path):
    with serving(Source(snapshot=as_list(held_cluster()))) as base:
        dom = load(f"{base}/", tmp_path, "gpumap-held.png", budget_ms=1000)
        api = orjson.loads(get(f"{base}/api/v1/map")[2])
    assert gpu_of(api, "node-e", 0)["heldFor"] == {"pod": "team/train-1", "expires": LATER}
    grid = dom.one(id="grid")
    [held_cell] = grid.all("div", "held")
    assert held_cell.attrs["data-uuid"] == "GPU-node-e-0" and held_cell.attrs["data-held-for"] == "team/train-1"
    assert held_cell.attrs["data-held-until"] == LATER
    assert f"held for team/train-1 until {LATER}" in held_cell.attrs["title"]
    assert held_cell.one("span", "hold").text() == "held"
    assert "held" not in cell(grid, "node-a", "gpu-0").classes, "the lapsed hold is not shown"
    items = dom.one(id="holds").all("li")
    assert [i.attrs["data-hold"] for i in items] == ["team/train-1", "team/train-3"]
    assert "node-e/gpu-0" in items[0].text() and f"until {LATER}" in items[0].text()
    assert "GPU not registered on the map" in items[1].text()
    assert "held GPUs 2" in dom.one(id="chips").text()
    owner = dom.one(id="pending").one("li", "pod", data_pod="team/train-1")
    assert owner.one("div", "held-by").text() == f"holds node-e/gpu-0 until {LATER}"
    assert not dom.one(id="pending").one("li", "pod", data_pod="team/train-2").all("div", "held-by")


def test_page_refreshes_from_the_api(tmp_path):
    """The page loads one cluster; by its first poll the 90 %-used GPU's pod has gone: the grid follows."""

    view = ClusterView.of_snapshot(as_list(cluster()))
    evil = next(i for i in cluster() if i["metadata"]["name"] == EVIL)

    class Changing(ClusterView):
        """The view after the first map: the watch delivers the pod's deletion then."""

        def __init__(self) -> None:
            self.objects, self.reflectors, self.config, self.reads = view.objects, [], None, 0

        def generation(self) -> int:
            self.reads += 1
            if self.reads == 2:
                self.objects.apply_watch_event(orjson.dumps({"type": "DELETED", "object": evil}))
            return super().generation()

    with serving(Source(view=Changing())) as base:
        dom = load(f"{base}/", tmp_path, "gpumap-refreshed.png", budget_ms=7000)
    assert dom.one("body").attrs.get("data-refreshed") == "1"
    gpu = cell(dom, "x<b>bold</b>&co", "gpu-0")
    assert "free" in gpu.classes and gpu.attrs["data-mem-pct"] == "0"
    assert "free whole GPUs 2" in dom.one(id="chips").text()


def test_page_on_an_empty_cluster(tmp_path):
    with serving(Source(snapshot=as_list([]))) as base:
        dom = load(f"{base}/", tmp_path, "gpumap-empty.png", size="900,500", budget_ms=1000)
    assert dom.one(id="grid").all("div", "gpu") == []
    assert "no nodes in the cluster" in dom.one(id="grid").text()
    assert "no pending vGPU pods" in dom.one(id="pending").text()
    assert "no move within the budget" in dom.one(id="moves").text()
    assert "no GPU is held" in dom.one(id="holds").text()


def test_page_with_hundreds_of_nodes(tmp_path):
    items: list[dict] = []
    for n in range(300):
        name = f"gpu-node-{n:03d}"
        items.append(node(name, gpus=8))
        items.extend(pod(f"p{n}-{g}", name, g, 1000 * (1 + (n + g) % 15), cores=5 * (1 + n % 19)) for g in range(n % 9))
    with serving(Source(snapshot=as_list(items))) as base:
        dom = load(f"{base}/", tmp_path, "gpumap-300-nodes.png", budget_ms=1000)
    grid = dom.one(id="grid")
    nodes = grid.all("div", "node")
    assert len(nodes) == 300 and len(grid.all("div", "gpu")) == 2400
    fragments = [float(n.attrs["data-frag"]) for n in nodes]
    assert fragments == sorted(fragments, reverse=True) and fragments[0] > fragments[-1]
