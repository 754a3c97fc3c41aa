"""HAMi's side of the node handshake: what hami-fast writes into `hami.io/node-handshake*`."""

from __future__ import annotations

import threading
import time

import orjson
from hami_fast._native import Cluster
from hami_fast.kube.client import KubeClient, load_api_client
from hami_fast.kube.handshake import Handshaker, kube_node_patcher, memory_node_patcher, patches, run_pass
from k8s_objects import gpu_node

ASKED = 1_767_225_600  # 2026-01-01 00:00:00 UTC
VENDOR_KEYS = [
    "hami.io/node-handshake",
    "hami.io/node-handshake-dcu",
    "hami.io/node-handshake-xpu",
    "hami.io/node-handshake-va",
    "hami.io/node-handshake-biren",
]


def test_every_handshake_key_without_a_request_is_asked_once_per_node():
    cluster = Cluster()
    node = gpu_node("n1")
    node["metadata"]["annotations"]["hami.io/node-handshake-dcu"] = "Requesting_2026-01-01 00:00:00"
    cluster.apply(orjson.dumps(node))
    body = patches(orjson.loads(cluster.registration_pass(ASKED)))
    written = orjson.loads(body["n1"])["metadata"]["annotations"]
    assert written == {k: "Requesting_2026-01-01 00:00:00" for k in VENDOR_KEYS if not k.endswith("-dcu")}


def test_a_node_whose_plugin_never_answers_is_cleaned_up():
    cluster = Cluster()
    node = gpu_node("n1")
    node["status"] = {"allocatable": {"cpu": "8"}}
    cluster.apply(orjson.dumps(node))
    cluster.registration_pass(ASKED)  # no request yet: asked, and taken into HAMi's cache
    node["metadata"]["annotations"].update({k: "Requesting_2026-01-01 00:00:00" for k in VENDOR_KEYS})
    cluster.apply(orjson.dumps(node))
    assert patches(orjson.loads(cluster.registration_pass(ASKED + 15))) == {}
    assert orjson.loads(cluster.usage())[0]["registered"]
    body = patches(orjson.loads(cluster.registration_pass(ASKED + 60)))
    assert orjson.loads(body["n1"]) == {"metadata": {"annotations": {"hami.io/node-handshake": None}}}
    assert patches(orjson.loads(cluster.registration_pass(ASKED + 75))) == {}, "only a member is cleaned up"


def test_the_kube_writer_patches_the_node_on_the_api_server(kubeapi):
    kubeapi.create(gpu_node("n1"))
    cluster = Cluster()
    cluster.apply(orjson.dumps(kubeapi.get("Node", "n1")))
    client = KubeClient(load_api_client(kubeapi.kubeconfig), qps=0, burst=100, timeout=10)
    assert run_pass(cluster, kube_node_patcher(client), ASKED) == 1
    annotations = kubeapi.get("Node", "n1")["metadata"]["annotations"]
    assert {k: annotations[k] for k in VENDOR_KEYS} == {k: "Requesting_2026-01-01 00:00:00" for k in VENDOR_KEYS}
    assert "hami.io/node-nvidia-register" in annotations, "a merge patch keeps the plugin's annotations"


def test_in_memory_nodes_answer_like_a_device_plugin_and_stay_registered():
    cluster = Cluster()
    node = gpu_node("n1")
    node["status"] = {"allocatable": {"cpu": "8"}}
    cluster.apply(orjson.dumps(node))
    nodes = {"n1": node}
    stop, leading, synced = threading.Event(), threading.Event(), threading.Event()
    leading.set()
    synced.set()
    clock = iter(range(ASKED, ASKED + 10_000, 100))
    shaker = Handshaker(cluster, memory_node_patcher(cluster, nodes, threading.RLock()), leading, synced, stop, 0.01)
    shaker.clock = lambda: next(clock)
    shaker.start()
    deadline = time.time() + 5
    while shaker.passes < 5 and time.time() < deadline:
        time.sleep(0.01)
    stop.set()
    shaker.join(5)
    assert shaker.passes >= 5
    assert node["metadata"]["annotations"]["hami.io/node-handshake"].startswith("Reported_2026-01-01 00:")
    registered = orjson.loads(cluster.usage())[0]["registered"]
    assert registered
