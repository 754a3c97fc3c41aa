"""Contract tests of the test Kubernetes API server (tests/kubeapi), driven through the official
`kubernetes` client over real HTTP: what the product's Kubernetes layer will rely on."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
import urllib3
from kubeapi.fixtures import wait_for
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

SHARED = Path(os.environ.get("HAMI_FAST_SHARED") or Path(__file__).resolve().parents[2].parent / "shared")
FIXTURES = SHARED / "fixtures" / "k8s-api"
MERGE = "application/merge-patch+json"
NS = "default"
PLACEMENTS = ("scheduling.hami.placement.com", "v1", "hamipodplacements")


# -- helpers ----------------------------------------------------------------------------------


def node(name: str, labels: dict | None = None, annotations: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}},
    }


def pod(
    name: str,
    ns: str = NS,
    labels: dict | None = None,
    node_name: str | None = None,
    phase: str = "Pending",
    owner: bool = False,
) -> dict:
    meta: dict = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "rs",
                "uid": "11111111-2222-3333-4444-555555555555",
                "controller": True,
            }
        ]
    spec: dict = {"containers": [{"name": "c", "image": "busybox"}], "schedulerName": "hami-scheduler"}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def raw(api, method: str, path: str, body=None, content_type: str = "application/json"):
    """(status, parsed JSON) of a request sent through the official client's ApiClient."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    req = api.api_client.param_serialize(
        method=method, resource_path=path, header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    resp = api.api_client.call_api(*req, _request_timeout=10)
    resp.read()
    return resp.status, json.loads(resp.data) if resp.data else None


def consume(resp) -> tuple[int, dict]:
    """Status and JSON body of a `_preload_content=False` response, connection released."""
    try:
        return resp.status, json.loads(resp.data)
    finally:
        resp.release_conn()


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def read_lines(resp, limit: int, deadline_s: float = 10.0) -> list[dict]:
    """Up to `limit` watch events from a raw (_preload_content=False) watch response."""
    out, end = [], time.monotonic() + deadline_s
    for line in watch.watch.iter_resp_lines(resp):
        if line:
            out.append(json.loads(line))
        if len(out) >= limit or time.monotonic() > end:
            break
    return out


def later(delay: float, fn, *args, **kwargs) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(delay), fn(*args, **kwargs)), daemon=True)
    t.start()
    return t


# -- CRUD -------------------------------------------------------------------------------------


def test_create_get_and_errors_are_status_objects(kubeapi):
    v1 = kubeapi.core_v1
    created = v1.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1", labels={"gpu": "yes"})))
    assert created.metadata.uid and created.metadata.creation_timestamp
    rv1 = int(created.metadata.resource_version)
    p = v1.create_namespaced_pod(NS, pod("p1"))
    assert int(p.metadata.resource_version) > rv1 and p.metadata.namespace == NS

    got = v1.read_node("n1")
    assert got.metadata.labels == {"gpu": "yes"} and got.metadata.uid == created.metadata.uid

    with pytest.raises(ApiException) as e:
        v1.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1")))
    st = status_of(e.value)
    assert e.value.status == 409 and st["kind"] == "Status" and st["reason"] == "AlreadyExists"
    assert st["message"] == 'nodes "n1" already exists' and st["details"] == {"name": "n1", "kind": "nodes"}

    with pytest.raises(ApiException) as e:
        v1.read_namespaced_pod("nope", NS)
    assert e.value.status == 404 and status_of(e.value)["reason"] == "NotFound"
    with pytest.raises(ApiException) as e:
        kubeapi.coordination_v1.read_namespaced_lease("nope", "kube-system")
    assert status_of(e.value)["message"] == 'leases.coordination.k8s.io "nope" not found'

    # generateName, and a namespace in the body that contradicts the URL
    g = v1.create_namespaced_pod(NS, {**pod(""), "metadata": {"generateName": "gen-"}})
    assert g.metadata.name.startswith("gen-") and len(g.metadata.name) == 9
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod("other", pod("p2", ns=NS))
    assert e.value.status == 400


def test_list_paging_with_continue_is_a_consistent_snapshot(kubeapi):
    v1 = kubeapi.core_v1
    for i in range(25):
        kubeapi.create(pod(f"p{i:02d}", ns="a" if i % 2 else "b"))
    page1 = v1.list_pod_for_all_namespaces(limit=10)
    assert len(page1.items) == 10 and page1.metadata._continue and page1.metadata.remaining_item_count == 15
    list_rv = page1.metadata.resource_version
    kubeapi.create(pod("zz-late", ns="b"))  # created after the first page: not in this list
    page2 = v1.list_pod_for_all_namespaces(limit=10, _continue=page1.metadata._continue)
    page3 = v1.list_pod_for_all_namespaces(limit=10, _continue=page2.metadata._continue)
    assert len(page2.items) == 10 and len(page3.items) == 5
    assert page3.metadata._continue is None and page3.metadata.remaining_item_count is None
    assert page2.metadata.resource_version == page3.metadata.resource_version == list_rv
    names = [p.metadata.name for pg in (page1, page2, page3) for p in pg.items]
    assert len(set(names)) == 25 and "zz-late" not in names

    # namespaced list, raw bytes: items carry no kind/apiVersion, as from kube-apiserver
    _, body = consume(v1.list_namespaced_pod("a", limit=100, _preload_content=False))
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1" and len(body["items"]) == 12
    assert "kind" not in body["items"][0] and body["items"][0]["metadata"]["namespace"] == "a"

    # a continue token from before a compaction is expired
    page = v1.list_pod_for_all_namespaces(limit=5)
    kubeapi.compact()
    with pytest.raises(ApiException) as e:
        v1.list_pod_for_all_namespaces(limit=5, _continue=page.metadata._continue)
    assert e.value.status == 410 and status_of(e.value)["reason"] == "Expired"


def test_label_and_field_selectors(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(pod("a", labels={"app": "x", "tier": "1"}, node_name="n1", phase="Running"))
    kubeapi.create(pod("b", labels={"app": "x"}, node_name="n2", phase="Succeeded"))
    kubeapi.create(pod("c", labels={"app": "y"}))

    def names(**kw):
        return sorted(p.metadata.name for p in v1.list_namespaced_pod(NS, **kw).items)

    assert names(label_selector="app=x") == ["a", "b"]
    assert names(label_selector="app==x,tier=1") == ["a"]
    assert names(label_selector="app!=x") == ["c"]
    assert names(label_selector="app in (x,y),!tier") == ["b", "c"]
    assert names(field_selector="spec.nodeName=n1") == ["a"]
    assert names(field_selector="spec.nodeName=") == ["c"]
    assert names(field_selector="metadata.name=b") == ["b"]
    assert names(field_selector="status.phase!=Succeeded,status.phase!=Failed") == ["a", "c"]
    assert [n.metadata.name for n in v1.list_node(field_selector="metadata.name=none").items] == []


# -- watch ------------------------------------------------------------------------------------


def test_watch_stream_deserialized_from_resource_version(kubeapi):
    v1 = kubeapi.core_v1
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    v1.create_namespaced_pod(NS, pod("w1"))
    v1.patch_namespaced_pod("w1", NS, {"metadata": {"labels": {"k": "v"}}}, _content_type=MERGE)
    v1.delete_namespaced_pod("w1", NS)
    later(0.3, kubeapi.create, pod("w2"))  # a live event after the stream has started

    w = watch.Watch()
    events = []
    for ev in w.stream(v1.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=10, _request_timeout=(5, 15)):
        events.append(ev)
        if len(events) == 4:
            w.stop()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED", "ADDED"]
    assert isinstance(events[0]["object"], client.V1Pod)
    assert events[1]["object"].metadata.labels == {"k": "v"}
    assert [e["object"].metadata.name for e in events] == ["w1", "w1", "w1", "w2"]
    rvs = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 4
    assert w.resource_version == str(rvs[-1])


def test_watch_without_resource_version_starts_with_current_state(kubeapi):
    kubeapi.create(node("n1"))
    kubeapi.create(node("n2"))
    resp = kubeapi.core_v1.list_node(watch=True, timeout_seconds=5, _preload_content=False, _request_timeout=(5, 10))
    try:
        evs = read_lines(resp, 2)
    finally:
        resp.close()
        resp.release_conn()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "n1"), ("ADDED", "n2")]
    assert evs[0]["object"]["kind"] == "Node" and evs[0]["object"]["apiVersion"] == "v1"


def test_watch_raw_lines_bookmarks_and_server_timeout(kubeapi):
    v1 = kubeapi.core_v1
    rv = v1.list_node().metadata.resource_version
    resp = v1.list_node(
        watch=True,
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=3,
        _preload_content=False,
        _request_timeout=(5, 10),
    )
    assert resp.status == 200 and resp.headers["Content-Type"] == "application/json"
    later(0.2, kubeapi.create, node("n1"))
    later(0.5, kubeapi.send_bookmarks)
    start = time.monotonic()
    try:
        evs = [json.loads(line) for line in watch.watch.iter_resp_lines(resp) if line]  # ends at timeoutSeconds
    finally:
        resp.release_conn()
    assert 2.5 < time.monotonic() - start < 8
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "n1"
    bookmarks = [e for e in evs if e["type"] == "BOOKMARK"]
    assert bookmarks, evs
    bm = bookmarks[0]["object"]
    assert bm["kind"] == "Node" and bm["apiVersion"] == "v1"
    assert int(bm["metadata"]["resourceVersion"]) >= int(evs[0]["object"]["metadata"]["resourceVersion"])


def test_watch_bookmarks_through_watch_stream_update_resource_version(kubeapi_factory):
    api = kubeapi_factory(bookmark_interval=0.2)
    v1 = api.core_v1
    rv = v1.list_node().metadata.resource_version
    api.create(node("quiet"))  # an event of another kind moves the global revision
    api.create(pod("p"))
    w = watch.Watch()
    seen = []
    for ev in w.stream(
        v1.list_namespaced_pod,
        "other-ns",
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=5,
        _request_timeout=(5, 10),
    ):
        seen.append(ev["type"])
        if ev["type"] == "BOOKMARK":
            w.stop()
    assert seen == ["BOOKMARK"]
    assert int(w.resource_version) == api.store.rv


def test_send_initial_events_ends_with_marked_bookmark(kubeapi):
    kubeapi.create(node("n1"))
    rv = kubeapi.core_v1.list_node().metadata.resource_version
    resp = kubeapi.core_v1.list_node(
        watch=True,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        resource_version=rv,
        allow_watch_bookmarks=True,
        timeout_seconds=5,
        _preload_content=False,
        _request_timeout=(5, 10),
    )
    try:
        evs = read_lines(resp, 2)
    finally:
        resp.close()
        resp.release_conn()
    assert evs[0]["type"] == "ADDED" and evs[1]["type"] == "BOOKMARK"
    assert evs[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_watch_410_when_resource_version_too_old(kubeapi):
    v1 = kubeapi.core_v1
    old_rv = v1.list_node().metadata.resource_version
    kubeapi.create(node("n1"))
    kubeapi.compact()
    # raw: HTTP 200 with one ERROR event carrying a 410 Status, then the stream ends
    resp = v1.list_node(
        watch=True, resource_version=old_rv, timeout_seconds=5, _preload_content=False, _request_timeout=(5, 10)
    )
    try:
        evs = read_lines(resp, 5)
    finally:
        resp.release_conn()
    assert resp.status == 200 and len(evs) == 1 and evs[0]["type"] == "ERROR"
    st = evs[0]["object"]
    assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired"
    assert st["message"].startswith(f"too old resource version: {old_rv}")
    # the client's Watch turns it into ApiException(410) (no retry when timeout_seconds is set)
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(
            v1.list_node, resource_version=old_rv, timeout_seconds=5, _request_timeout=(5, 10)
        ):
            pass
    assert e.value.status == 410
    # the current revision is still fine
    cur = v1.list_node().metadata.resource_version
    resp = v1.list_node(
        watch=True, resource_version=cur, timeout_seconds=1, _preload_content=False, _request_timeout=(5, 10)
    )
    assert read_lines(resp, 1) == []
    resp.release_conn()


def test_forced_410_and_bounded_history(kubeapi_factory):
    api = kubeapi_factory(history_size=3)
    v1 = api.core_v1
    rv = v1.list_node().metadata.resource_version
    api.expire_next_watch("/api/v1/nodes")
    resp = v1.list_node(
        watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False, _request_timeout=(5, 10)
    )
    assert [e["type"] for e in read_lines(resp, 5)] == ["ERROR"]
    resp.release_conn()
    api.expire_next_watch(as_response=True)
    with pytest.raises(ApiException) as e:
        v1.list_node(watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False, _request_timeout=10)
    assert e.value.status == 410 and status_of(e.value)["reason"] == "Expired"
    # fault consumed: the same watch works again
    resp = v1.list_node(
        watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False, _request_timeout=(5, 10)
    )
    assert read_lines(resp, 1) == []
    resp.release_conn()
    api.server.watch_gone_as_response = True  # a plain HTTP 410 instead of an ERROR event
    api.create(node("before-compaction"))
    api.compact()
    with pytest.raises(ApiException) as e:
        v1.list_node(watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False, _request_timeout=10)
    assert e.value.status == 410 and status_of(e.value)["message"].startswith(f"too old resource version: {rv}")
    api.server.watch_gone_as_response = False
    rv = v1.list_node().metadata.resource_version
    for i in range(5):  # 5 events > history of 3: rv is now too old
        api.create(node(f"n{i}"))
    resp = v1.list_node(
        watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False, _request_timeout=(5, 10)
    )
    evs = read_lines(resp, 5)
    resp.release_conn()
    assert len(evs) == 1 and evs[0]["object"]["code"] == 410


def test_watch_field_selector_sees_objects_enter_and_leave(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(pod("p"))
    rv = v1.list_namespaced_pod(NS).metadata.resource_version
    resp = v1.list_pod_for_all_namespaces(
        watch=True,
        field_selector="spec.nodeName=n1",
        resource_version=rv,
        timeout_seconds=5,
        _preload_content=False,
        _request_timeout=(5, 10),
    )
    later(
        0.2,
        lambda: consume(
            v1.create_namespaced_pod_binding(
                "p",
                NS,
                client.V1Binding(metadata=client.V1ObjectMeta(name="p"), target=client.V1ObjectReference(name="n1")),
                _preload_content=False,
            )
        ),
    )
    later(0.4, kubeapi.patch, "pods", "p", {"spec": {"nodeName": "n2"}}, NS)
    try:
        evs = read_lines(resp, 2)
    finally:
        resp.close()
        resp.release_conn()
    assert [e["type"] for e in evs] == ["ADDED", "DELETED"]
    assert evs[1]["object"]["spec"]["nodeName"] == "n2"


def test_dropped_watch_is_a_protocol_error_for_the_client(kubeapi):
    v1 = kubeapi.core_v1
    resp = v1.list_node(watch=True, timeout_seconds=30, _preload_content=False, _request_timeout=(5, 10))
    kubeapi.wait_for_watches(1, "/api/v1/nodes")
    later(0.2, kubeapi.drop_watches, "/api/v1/nodes")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        read_lines(resp, 10)
    resp.release_conn()
    wait_for(lambda: not kubeapi.watches(), 5, "the dropped watch to unregister")
    # a graceful drop just ends the stream
    resp = v1.list_node(watch=True, timeout_seconds=30, _preload_content=False, _request_timeout=(5, 10))
    kubeapi.wait_for_watches(1)
    later(0.2, kubeapi.drop_watches, graceful=True)
    assert read_lines(resp, 10) == []
    resp.release_conn()


def test_stalled_watch_triggers_the_client_read_timeout(kubeapi_factory):
    api = kubeapi_factory(bookmark_interval=0.1)
    v1 = api.core_v1
    api.stall_watches("/api/v1/pods")
    resp = v1.list_pod_for_all_namespaces(
        watch=True, allow_watch_bookmarks=True, timeout_seconds=30, _preload_content=False, _request_timeout=(5, 0.8)
    )
    api.create(pod("p"))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        read_lines(resp, 1)
    resp.release_conn()
    api.unstall_watches()


# -- patches and updates ----------------------------------------------------------------------


def test_merge_patch_with_null_deletion_and_exact_request_log(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(pod("p", labels={"keep": "1", "drop": "1"}))
    body = {
        "metadata": {
            "annotations": {"hami.io/vgpu-node": "n1", "hami.io/vgpu-time": "1705054796"},
            "labels": {"hami.io/vgpu-node": "n1", "drop": None},
        }
    }
    out = v1.patch_namespaced_pod("p", NS, body, _content_type=MERGE)
    assert out.metadata.labels == {"keep": "1", "hami.io/vgpu-node": "n1"}
    assert out.metadata.annotations["hami.io/vgpu-time"] == "1705054796"
    out = v1.patch_namespaced_pod(
        "p", NS, {"metadata": {"annotations": {"hami.io/vgpu-time": None}}}, _content_type=MERGE
    )
    assert out.metadata.annotations == {"hami.io/vgpu-node": "n1"}

    [first, second] = kubeapi.requests("PATCH", "/api/v1/namespaces/default/pods/p")
    assert first.content_type == MERGE and first.json == body and first.verb == "patch" and first.status == 200
    assert first.resource == "pods" and first.namespace == NS and first.name == "p"
    assert second.body == b'{"metadata": {"annotations": {"hami.io/vgpu-time": null}}}'
    assert first.headers["authorization"] == "Bearer test-token"
    assert kubeapi.count("patch", "/api/v1/namespaces/*/pods/*") == 2
    assert kubeapi.faults.counts[("PATCH", "/api/v1/namespaces/default/pods/p")] == 2


def test_node_lock_merge_patch_resource_version_precondition(kubeapi):
    """HAMi's node lock (spec 5): merge patch carrying metadata.resourceVersion is an
    optimistic-concurrency update; a stale one is a 409 Conflict."""
    v1 = kubeapi.core_v1
    kubeapi.create(node("n1"))
    rv = v1.read_node("n1").metadata.resource_version
    lock = "2025-06-01T12:00:05Z,default,gpu-pod"
    patched = v1.patch_node(
        "n1", {"metadata": {"annotations": {"hami.io/mutex.lock": lock}, "resourceVersion": rv}}, _content_type=MERGE
    )
    assert patched.metadata.annotations["hami.io/mutex.lock"] == lock
    assert int(patched.metadata.resource_version) > int(rv)

    with pytest.raises(ApiException) as e:  # a second locker with the stale revision loses
        v1.patch_node(
            "n1",
            {"metadata": {"annotations": {"hami.io/mutex.lock": "other"}, "resourceVersion": rv}},
            _content_type=MERGE,
        )
    st = status_of(e.value)
    assert e.value.status == 409 and st["reason"] == "Conflict"
    assert st["message"] == (
        'Operation cannot be fulfilled on nodes "n1": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert v1.read_node("n1").metadata.annotations["hami.io/mutex.lock"] == lock

    release = {
        "metadata": {"annotations": {"hami.io/mutex.lock": None}, "resourceVersion": patched.metadata.resource_version}
    }
    out = v1.patch_node("n1", release, _content_type=MERGE)
    assert out.metadata.annotations is None  # emptied maps disappear, as Go's omitempty does
    # a no-op patch does not bump the revision
    again = v1.patch_node("n1", {"metadata": {"annotations": {"hami.io/mutex.lock": None}}}, _content_type=MERGE)
    assert again.metadata.resource_version == out.metadata.resource_version


def test_strategic_merge_and_json_patch(kubeapi):
    v1 = kubeapi.core_v1
    p = pod("p")
    p["spec"]["containers"].append({"name": "side", "image": "a"})
    kubeapi.create(p)
    # the client's default for a dict body is strategic merge: containers merge by name
    out = v1.patch_namespaced_pod("p", NS, {"spec": {"containers": [{"name": "side", "image": "b"}]}})
    assert [(c.name, c.image) for c in out.spec.containers] == [("c", "busybox"), ("side", "b")]
    assert kubeapi.requests("PATCH")[-1].content_type == "application/strategic-merge-patch+json"
    # JSON patch (a list body)
    out = v1.patch_namespaced_pod(
        "p",
        NS,
        [
            {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}},
            {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "2"},
            {"op": "test", "path": "/spec/containers/0/name", "value": "c"},
            {"op": "remove", "path": "/spec/containers/1"},
        ],
    )
    assert out.metadata.annotations == {"a/b": "2"} and len(out.spec.containers) == 1
    assert kubeapi.requests("PATCH")[-1].content_type == "application/json-patch+json"
    with pytest.raises(ApiException) as e:
        v1.patch_namespaced_pod("p", NS, [{"op": "test", "path": "/metadata/name", "value": "x"}])
    assert e.value.status == 422
    with pytest.raises(ApiException) as e:
        v1.patch_namespaced_pod("missing", NS, {"metadata": {}}, _content_type=MERGE)
    assert e.value.status == 404
    # a uid in the patch is a precondition too
    with pytest.raises(ApiException) as e:
        v1.patch_namespaced_pod("p", NS, {"metadata": {"uid": "not-the-uid"}}, _content_type=MERGE)
    assert e.value.status == 409


def test_put_update_conflict_and_status_subresources(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(node("n1"))
    n = v1.read_node("n1")
    n.metadata.labels = {"x": "1"}
    n.status.allocatable = {"cpu": "1"}  # ignored: status only changes through nodes/status
    updated = v1.replace_node("n1", n)
    assert updated.metadata.labels == {"x": "1"} and updated.status.allocatable["cpu"] == "8"
    with pytest.raises(ApiException) as e:  # n still carries the old revision
        v1.replace_node("n1", n)
    assert e.value.status == 409 and status_of(e.value)["reason"] == "Conflict"
    # status subresource: status changes, labels do not
    st = v1.patch_node_status(
        "n1", {"metadata": {"labels": {"y": "2"}}, "status": {"allocatable": {"cpu": "4"}}}, _content_type=MERGE
    )
    assert st.status.allocatable == {"cpu": "4", "nvidia.com/gpu": "4"} and st.metadata.labels == {"x": "1"}
    kubeapi.create(pod("p"))
    p = v1.read_namespaced_pod_status("p", NS)
    p.status.phase = "Running"
    assert v1.replace_namespaced_pod_status("p", NS, p).status.phase == "Running"
    assert kubeapi.get("pods", "p", NS)["status"]["phase"] == "Running"
    assert v1.read_namespaced_pod("p", NS).metadata.generation == 1


def test_delete_sends_deleted_event_and_honours_finalizers(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(pod("p"))
    kubeapi.create(node("n1"))
    n = kubeapi.create({**node("fin"), "metadata": {"name": "fin", "finalizers": ["x/y"]}})
    rv = v1.list_node().metadata.resource_version
    gone = v1.delete_namespaced_pod("p", NS)  # pods answer with the object
    assert gone.metadata.name == "p"
    _, st = consume(v1.delete_node("n1", _preload_content=False))  # nodes answer with a Status
    assert st["kind"] == "Status" and st["status"] == "Success" and st["details"]["name"] == "n1"
    v1.delete_node("fin")  # only marked for deletion while a finalizer remains
    assert kubeapi.get("nodes", "fin")["metadata"]["deletionTimestamp"]
    v1.patch_node("fin", {"metadata": {"finalizers": None}}, _content_type=MERGE)
    assert kubeapi.get("nodes", "fin") is None
    with pytest.raises(ApiException) as e:
        v1.delete_node("n1")
    assert e.value.status == 404
    resp = v1.list_node(
        watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False, _request_timeout=(5, 10)
    )
    evs = read_lines(resp, 3)
    resp.close()
    resp.release_conn()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("DELETED", "n1"),
        ("MODIFIED", "fin"),
        ("DELETED", "fin"),
    ]
    assert int(evs[0]["object"]["metadata"]["resourceVersion"]) > int(rv)
    assert n["metadata"]["uid"] == evs[2]["object"]["metadata"]["uid"]


# -- scheduler subresources and objects --------------------------------------------------------


def test_pod_binding(kubeapi):
    v1 = kubeapi.core_v1
    created = v1.create_namespaced_pod(NS, pod("p"))
    body = {"metadata": {"name": "p", "uid": created.metadata.uid}, "target": {"kind": "Node", "name": "n1"}}
    code, st = consume(v1.create_namespaced_pod_binding("p", NS, body, _preload_content=False))
    assert code == 201
    assert st == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    bound = v1.read_namespaced_pod("p", NS)
    assert bound.spec.node_name == "n1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_binding("p", NS, body, _preload_content=False)
    st = status_of(e.value)
    assert e.value.status == 409 and st["reason"] == "Conflict"
    assert st["message"] == 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"'
    # a stale uid precondition, and the legacy namespaced bindings collection
    v1.create_namespaced_pod(NS, pod("q"))
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_binding(
            "q", NS, {**body, "metadata": {"name": "q", "uid": "stale"}}, _preload_content=False
        )
    assert e.value.status == 409
    code, _ = consume(
        v1.create_namespaced_binding(NS, {"metadata": {"name": "q"}, "target": {"name": "n2"}}, _preload_content=False)
    )
    assert code == 201 and kubeapi.get("pods", "q", NS)["spec"]["nodeName"] == "n2"
    assert [r.resource for r in kubeapi.requests("create") if "binding" in r.resource] == [
        "pods/binding",
        "pods/binding",
        "pods/binding",
        "bindings",
    ]


def test_eviction_honours_pod_disruption_budget(kubeapi):
    v1 = kubeapi.core_v1
    for name in ("a", "b", "free"):
        kubeapi.create(
            pod(name, labels={"app": "gpu"} if name != "free" else {}, node_name="n1", phase="Running", owner=True)
        )
    pdb = kubeapi.policy_v1.create_namespaced_pod_disruption_budget(
        NS,
        {
            "metadata": {"name": "gpu-pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "gpu"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 2},
        },
    )
    assert pdb.status.disruptions_allowed == 0
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": NS}}
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_eviction("a", NS, eviction, _preload_content=False)
    st = status_of(e.value)
    assert e.value.status == 429 and st["reason"] == "TooManyRequests"
    assert st["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert st["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert kubeapi.get("pods", "a", NS) is not None

    # the budget allows one disruption: the first eviction is 201, the second 429
    kubeapi.patch("poddisruptionbudgets", "gpu-pdb", {"status": {"disruptionsAllowed": 1}}, NS)
    code, st = consume(v1.create_namespaced_pod_eviction("a", NS, eviction, _preload_content=False))
    assert code == 201 and st["status"] == "Success"
    assert kubeapi.get("pods", "a", NS) is None
    pdb = kubeapi.get("poddisruptionbudgets", "gpu-pdb", NS)
    assert pdb["status"]["disruptionsAllowed"] == 0 and "a" in pdb["status"]["disruptedPods"]
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_eviction("b", NS, {**eviction, "metadata": {"name": "b"}}, _preload_content=False)
    assert e.value.status == 429
    # a pod no budget covers is evicted at once; a missing pod is 404
    code, _ = consume(
        v1.create_namespaced_pod_eviction(
            "free", NS, {**eviction, "metadata": {"name": "free"}}, _preload_content=False
        )
    )
    assert code == 201 and kubeapi.get("pods", "free", NS) is None
    with pytest.raises(ApiException) as e:
        v1.create_namespaced_pod_eviction("free", NS, eviction, _preload_content=False)
    assert e.value.status == 404
    assert kubeapi.count("create", "/api/v1/namespaces/default/pods/*/eviction") == 5


def test_events_core_and_events_k8s_io(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(pod("p"))
    ev = v1.create_namespaced_event(
        NS,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(generate_name="p."),
            involved_object=client.V1ObjectReference(kind="Pod", namespace=NS, name="p"),
            reason="BindingSucceed",
            message="Successfully binding node [n1] to default/p",
            type="Normal",
            source=client.V1EventSource(component="hami-scheduler"),
        ),
    )
    assert ev.metadata.name.startswith("p.")
    kubeapi.events_v1.create_namespaced_event(
        NS,
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="p.2"),
            event_time=client.V1MicroTime("2026-01-01T00:00:00.000000Z")
            if hasattr(client, "V1MicroTime")
            else "2026-01-01T00:00:00.000000Z",
            reason="BindingFailed",
            note="node lock contention",
            type="Warning",
            action="Binding",
            reporting_controller="hami-scheduler",
            reporting_instance="hami-scheduler-0",
            regarding=client.V1ObjectReference(kind="Pod", namespace=NS, name="p"),
        ),
    )
    assert [(e["reason"], e["type"], e["object"], e["source"]) for e in kubeapi.events(NS)] == [
        ("BindingSucceed", "Normal", "Pod/default/p", "hami-scheduler"),
        ("BindingFailed", "Warning", "Pod/default/p", "hami-scheduler"),
    ]
    listed = v1.list_namespaced_event(NS, field_selector="involvedObject.name=p,reason=BindingSucceed")
    assert [e.message for e in listed.items] == ["Successfully binding node [n1] to default/p"]


def test_lease_create_update_conflict_and_leader_election(kubeapi):
    coord = kubeapi.coordination_v1
    lease = coord.create_namespaced_lease(
        "kube-system",
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="hami-scheduler"),
            spec=client.V1LeaseSpec(holder_identity="hami-scheduler-0_abc", lease_duration_seconds=15),
        ),
    )
    lease.spec.holder_identity = "hami-scheduler-1_def"
    updated = coord.replace_namespaced_lease("hami-scheduler", "kube-system", lease)
    assert updated.spec.holder_identity == "hami-scheduler-1_def"
    with pytest.raises(ApiException) as e:
        coord.replace_namespaced_lease("hami-scheduler", "kube-system", lease)  # stale revision
    assert e.value.status == 409
    assert kubeapi.get("leases", "hami-scheduler", "kube-system")["spec"]["holderIdentity"] == "hami-scheduler-1_def"

    # the official client's LeaseLock elects a leader against this server
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    led, stopped = threading.Event(), threading.Event()
    lock = LeaseLock("descheduler", "kube-system", "me")
    lock.api_instance = client.CoordinationV1Api(kubeapi.api_client)  # not the global default client
    cfg = electionconfig.Config(
        lock,
        lease_duration=2,
        renew_deadline=1.5,
        retry_period=1,
        onstarted_leading=led.set,
        onstopped_leading=stopped.set,
    )
    elector = threading.Thread(target=leaderelection.LeaderElection(cfg).run, daemon=True)
    elector.start()
    assert led.wait(5)
    assert kubeapi.get("leases", "descheduler", "kube-system")["spec"]["holderIdentity"] == "me"
    wait_for(
        lambda: kubeapi.count("update", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/descheduler"),
        5,
        "a lease renewal",
    )
    # renewals start failing: the leader steps down within the renew deadline
    kubeapi.fail("update", "*/leases/descheduler", 500, times=None)
    assert stopped.wait(5)
    elector.join(5)
    assert not elector.is_alive()


def test_hamipodplacement_custom_resource_and_status(kubeapi):
    custom = kubeapi.custom
    group, version, plural = PLACEMENTS
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "HamiPodPlacement",
        "metadata": {"name": "move-1"},
        "spec": {
            "reqID": "r1",
            "podSelector": {"matchLabels": {"app": "x"}},
            "nodeName": "n2",
            "gpuDevices": ["gpu-0"],
        },
        "status": {"phase": "Completed"},
    }  # dropped on create: status has its own subresource
    created = custom.create_namespaced_custom_object(group, version, NS, plural, body)
    assert "status" not in created and created["metadata"]["generation"] == 1
    st = custom.patch_namespaced_custom_object_status(
        group, version, NS, plural, "move-1", {"status": {"phase": "Pending"}}
    )
    assert st["status"] == {"phase": "Pending"} and st["metadata"]["generation"] == 1
    assert kubeapi.requests("PATCH")[-1].content_type == MERGE
    # the main resource ignores status; a spec change bumps the generation
    out = custom.patch_namespaced_custom_object(
        group, version, NS, plural, "move-1", {"spec": {"nodeName": "n3"}, "status": {"phase": "Failed"}}
    )
    assert out["status"] == {"phase": "Pending"} and out["spec"]["nodeName"] == "n3"
    assert out["metadata"]["generation"] == 2
    # strategic merge patch is not for custom resources
    with pytest.raises(ApiException) as e:
        raw_status, _ = raw(
            kubeapi,
            "PATCH",
            f"/apis/{group}/{version}/namespaces/{NS}/{plural}/move-1",
            {"spec": {}},
            "application/strategic-merge-patch+json",
        )
        raise ApiException(status=raw_status)
    assert e.value.status == 415
    listed = custom.list_cluster_custom_object(group, version, plural)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["move-1"]
    assert listed["items"][0]["kind"] == "HamiPodPlacement"  # custom resource items keep their kind
    with pytest.raises(ApiException) as e:  # PUT without resourceVersion is refused for custom resources
        custom.replace_namespaced_custom_object(
            group, version, NS, plural, "move-1", {**body, "metadata": {"name": "move-1"}}
        )
    assert e.value.status == 422
    deleted = custom.delete_namespaced_custom_object(group, version, NS, plural, "move-1")
    assert deleted["metadata"]["name"] == "move-1"


def test_hamipodplacement_watch_and_status_precondition(kubeapi):
    custom = kubeapi.custom
    group, version, plural = PLACEMENTS
    rv = custom.list_namespaced_custom_object(group, version, NS, plural)["metadata"]["resourceVersion"]
    body = {
        "apiVersion": f"{group}/{version}",
        "kind": "HamiPodPlacement",
        "metadata": {"name": "m"},
        "spec": {"reqID": "r", "podSelector": {"matchLabels": {"app": "x"}}, "nodeName": "n1"},
    }
    created = custom.create_namespaced_custom_object(group, version, NS, plural, body)
    # two consumers race to claim the placement with the same revision: one wins
    claim = {"status": {"phase": "Completed"}, "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    custom.patch_namespaced_custom_object_status(group, version, NS, plural, "m", claim)
    with pytest.raises(ApiException) as e:
        custom.patch_namespaced_custom_object_status(group, version, NS, plural, "m", claim)
    assert e.value.status == 409
    w = watch.Watch()
    events = []
    for ev in w.stream(
        custom.list_namespaced_custom_object,
        group,
        version,
        NS,
        plural,
        resource_version=rv,
        timeout_seconds=5,
        _request_timeout=(5, 10),
    ):
        events.append(ev)
        if len(events) == 2:
            w.stop()
    assert [(e["type"], (e["object"].get("status") or {}).get("phase")) for e in events] == [
        ("ADDED", None),
        ("MODIFIED", "Completed"),
    ]
    assert events[0]["object"]["kind"] == "HamiPodPlacement"


# -- faults -----------------------------------------------------------------------------------


def test_injected_failures_delays_and_counts(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(node("n1"))
    kubeapi.fail("PATCH", "/api/v1/nodes/*", 500, times=2)
    kubeapi.fail("get", "/api/v1/nodes/n1", 409, times=1, message="boom")
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            v1.patch_node("n1", {"metadata": {"labels": {"a": "1"}}}, _content_type=MERGE)
        assert e.value.status == 500 and status_of(e.value)["reason"] == "InternalError"
    assert "labels" not in kubeapi.get("nodes", "n1")["metadata"]  # nothing applied
    v1.patch_node("n1", {"metadata": {"labels": {"a": "1"}}}, _content_type=MERGE)
    with pytest.raises(ApiException) as e:
        v1.read_node("n1")
    assert e.value.status == 409 and status_of(e.value)["message"] == "boom"
    assert v1.read_node("n1").metadata.labels == {"a": "1"}
    assert v1.list_node().items  # LIST is not the "get" verb: never failed

    # after=True: the write happens, the answer is lost
    kubeapi.fail("patch", "/api/v1/nodes/n1", 500, after=True)
    with pytest.raises(ApiException):
        v1.patch_node("n1", {"metadata": {"labels": {"b": "2"}}}, _content_type=MERGE)
    assert kubeapi.get("nodes", "n1")["metadata"]["labels"] == {"a": "1", "b": "2"}

    slow = kubeapi.delay("GET", "/api/v1/nodes", 0.3, times=1)
    t0 = time.monotonic()
    v1.list_node()
    assert time.monotonic() - t0 >= 0.3
    v1.list_node()
    assert slow.hits == 1 and slow.times == 0  # used up
    delayed, plain = (r.duration for r in kubeapi.requests("list", "/api/v1/nodes")[-2:])
    assert delayed >= 0.3 and plain < delayed  # the second is not delayed (and may be slow on a loaded machine)

    # 429 without Retry-After reaches the caller; with Retry-After, urllib3 retries by itself
    kubeapi.fail(None, "/api/v1/namespaces/*/pods", 429, times=1)
    with pytest.raises(ApiException) as e:
        v1.list_namespaced_pod(NS)
    assert e.value.status == 429 and "Retry-After" not in e.value.headers
    kubeapi.fail(None, "/api/v1/namespaces/*/pods", 429, times=1, retry_after=0)
    assert v1.list_namespaced_pod(NS).items == []
    assert [r.status for r in kubeapi.requests("list", "/api/v1/namespaces/*/pods")] == [429, 429, 200]

    assert kubeapi.count("PATCH", "/api/v1/nodes/n1") == 4
    assert kubeapi.count("get") == 2 and kubeapi.count("list") == 6
    assert [r.status for r in kubeapi.requests("PATCH")] == [500, 500, 200, 500]
    # a failed watch request is an HTTP error for the client's Watch
    kubeapi.fail("watch", "/api/v1/nodes", 503, times=1)
    with pytest.raises(ApiException) as e:
        for _ in watch.Watch().stream(v1.list_node, timeout_seconds=1, _request_timeout=(5, 10)):
            pass
    assert e.value.status == 503
    assert all(r.duration is not None for r in kubeapi.requests())
    assert kubeapi.wait_for_requests("watch", "/api/v1/nodes")[0].status == 503
    kubeapi.clear_log()
    assert kubeapi.count() == 0


def test_concurrent_lockers_only_one_wins(kubeapi):
    """20 threads race the node-lock patch with the same revision: exactly one succeeds."""
    v1 = kubeapi.core_v1
    kubeapi.create(node("n1"))
    rv = v1.read_node("n1").metadata.resource_version
    results: list[int] = []
    lock = threading.Lock()

    def attempt(i: int) -> None:
        try:
            v1.patch_node(
                "n1",
                {"metadata": {"annotations": {"hami.io/mutex.lock": f"t,default,p{i}"}, "resourceVersion": rv}},
                _content_type=MERGE,
                _request_timeout=10,
            )
            code = 200
        except ApiException as e:
            code = e.status
        with lock:
            results.append(code)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert sorted(results) == [200] + [409] * 19


def test_concurrent_writers_every_watcher_sees_every_event_in_order(kubeapi):
    v1 = kubeapi.core_v1
    rv = v1.list_pod_for_all_namespaces().metadata.resource_version
    writers, per_writer = 4, 30
    expected = writers * per_writer * 2  # a create and a patch each
    seen: dict[int, list[dict]] = {}

    def watcher(i: int) -> None:
        resp = v1.list_pod_for_all_namespaces(
            watch=True, resource_version=rv, timeout_seconds=20, _preload_content=False, _request_timeout=(5, 25)
        )
        try:
            seen[i] = read_lines(resp, expected, deadline_s=20)
        finally:
            resp.close()
            resp.release_conn()

    def writer(w: int) -> None:
        for j in range(per_writer):
            v1.create_namespaced_pod(f"ns{w}", pod(f"p{j}", ns=f"ns{w}"), _request_timeout=10)
            v1.patch_namespaced_pod(
                f"p{j}", f"ns{w}", {"metadata": {"labels": {"j": str(j)}}}, _content_type=MERGE, _request_timeout=10
            )

    watchers = [threading.Thread(target=watcher, args=(i,)) for i in range(3)]
    for t in watchers:
        t.start()
    kubeapi.wait_for_watches(3, "/api/v1/pods")
    ws = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in ws:
        t.start()
    for t in ws + watchers:
        t.join(30)
    assert not any(t.is_alive() for t in ws + watchers)
    store_rvs = [int(p["metadata"]["resourceVersion"]) for p in kubeapi.list("pods")]
    for evs in seen.values():
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        assert len(evs) == expected and rvs == sorted(rvs) and len(set(rvs)) == expected
        assert [e["type"] for e in evs].count("ADDED") == expected // 2
        assert set(store_rvs) <= set(rvs)
    assert len(seen) == 3


def test_graceful_pod_deletion_and_eviction_of_terminating_pods(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.store.pod_graceful_delete = True  # a bound pod waits for its (absent) kubelet
    kubeapi.create(pod("bound", node_name="n1", phase="Running", owner=True))
    kubeapi.create(pod("pending"))
    v1.delete_namespaced_pod("pending", NS)
    assert kubeapi.get("pods", "pending", NS) is None  # never scheduled: deleted at once
    code, _ = consume(
        v1.create_namespaced_pod_eviction("bound", NS, {"metadata": {"name": "bound"}}, _preload_content=False)
    )
    assert code == 201
    terminating = kubeapi.get("pods", "bound", NS)
    assert terminating["metadata"]["deletionTimestamp"] and terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    v1.delete_namespaced_pod("bound", NS, grace_period_seconds=0)  # what the kubelet would do
    assert kubeapi.get("pods", "bound", NS) is None


def test_api_server_restart_keeps_state_and_cuts_watches(kubeapi):
    v1 = kubeapi.core_v1
    kubeapi.create(node("n1"))
    rv = v1.list_node().metadata.resource_version
    resp = v1.list_node(
        watch=True, resource_version=rv, timeout_seconds=30, _preload_content=False, _request_timeout=(5, 10)
    )
    kubeapi.wait_for_watches(1)
    restarting = later(0.2, kubeapi.restart_server, 0.2)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        read_lines(resp, 10)
    resp.release_conn()
    restarting.join(10)
    assert [n.metadata.name for n in v1.list_node().items] == ["n1"]  # pooled connection re-established
    kubeapi.create(node("n2"))
    resp = v1.list_node(
        watch=True, resource_version=rv, timeout_seconds=5, _preload_content=False, _request_timeout=(5, 10)
    )
    evs = read_lines(resp, 1)
    resp.close()
    resp.release_conn()
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "n2"


def test_watch_on_an_object_path(kubeapi):
    kubeapi.create(node("n1"))
    kubeapi.create(node("n2"))
    rv = kubeapi.core_v1.list_node().metadata.resource_version
    kubeapi.patch("nodes", "n2", {"metadata": {"labels": {"x": "1"}}})
    kubeapi.patch("nodes", "n1", {"metadata": {"labels": {"x": "1"}}})
    for path in ("/api/v1/nodes/n1", "/api/v1/watch/nodes/n1"):
        req = kubeapi.api_client.param_serialize(
            method="GET",
            resource_path=path,
            query_params=[("watch", "1"), ("resourceVersion", rv), ("timeoutSeconds", "1")],
            auth_settings=["BearerToken"],
        )
        resp = kubeapi.api_client.call_api(*req, _request_timeout=(5, 10)).response
        evs = read_lines(resp, 5)
        resp.release_conn()
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("MODIFIED", "n1")]


def test_delete_collection_dry_run_and_loopback_only(kubeapi):
    from kubeapi import KubeAPIServer

    v1 = kubeapi.core_v1
    for name, app in (("a", "x"), ("b", "x"), ("c", "y")):
        kubeapi.create(pod(name, labels={"app": app}))
    dry = v1.create_namespaced_pod(NS, pod("d"), dry_run="All")
    assert dry.metadata.name == "d" and kubeapi.get("pods", "d", NS) is None
    v1.delete_collection_namespaced_pod(NS, label_selector="app=x")
    assert [p["metadata"]["name"] for p in kubeapi.list("pods", NS)] == ["c"]
    with pytest.raises(ValueError):
        KubeAPIServer("0.0.0.0")


# -- transport --------------------------------------------------------------------------------


def test_tls_with_test_ca_and_kubeconfig(kubeapi_tls):
    assert kubeapi_tls.url.startswith("https://127.0.0.1:")
    kubeapi_tls.create(node("n1"))
    assert [n.metadata.name for n in kubeapi_tls.core_v1.list_node().items] == ["n1"]
    resp = kubeapi_tls.core_v1.list_node(
        watch=True, timeout_seconds=1, _preload_content=False, _request_timeout=(5, 10)
    )
    assert [e["type"] for e in read_lines(resp, 5)] == ["ADDED"]
    resp.release_conn()
    cfg = json.loads(Path(kubeapi_tls.kubeconfig).read_text())
    assert cfg["clusters"][0]["cluster"]["certificate-authority-data"]


def test_required_token_and_discovery(kubeapi_factory):
    api = kubeapi_factory(token="s3cret")
    assert api.core_v1.list_node().items == []  # the kubeconfig carries the token
    wrong = client.Configuration(
        host=api.url, api_key={"BearerToken": "wrong"}, api_key_prefix={"BearerToken": "Bearer"}
    )
    with client.ApiClient(wrong) as other:
        with pytest.raises(ApiException) as e:
            client.CoreV1Api(other).list_node()
    assert e.value.status == 401 and status_of(e.value)["reason"] == "Unauthorized"
    assert api.requests()[-1].headers["authorization"] == "Bearer wrong"
    assert "v1" in client.CoreApi(api.api_client).get_api_versions().versions
    groups = {g.name for g in client.ApisApi(api.api_client).get_api_versions().groups}
    assert {"coordination.k8s.io", "events.k8s.io", "policy", "scheduling.hami.placement.com"} <= groups
    resources = client.CoreV1Api(api.api_client).get_api_resources()
    assert {"nodes", "pods", "pods/binding", "pods/eviction", "pods/status", "events"} <= {
        r.name for r in resources.resources
    }


def test_partial_object_metadata_list(kubeapi):
    kubeapi.create(node("n1", labels={"a": "b"}))
    req = kubeapi.api_client.param_serialize(
        method="GET",
        resource_path="/api/v1/nodes",
        header_params={"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"},
        auth_settings=["BearerToken"],
    )
    resp = kubeapi.api_client.call_api(*req, _request_timeout=10)
    resp.read()
    body = json.loads(resp.data)
    assert body["kind"] == "PartialObjectMetadataList" and body["items"][0]["metadata"]["labels"] == {"a": "b"}
    assert "status" not in body["items"][0]


# -- golden objects ---------------------------------------------------------------------------

GOLDEN = {
    "core.v1.Node.json": ("/api/v1/nodes", "nodes"),
    "core.v1.Pod.json": ("/api/v1/namespaces/{ns}/pods", "pods"),
    "coordination.k8s.io.v1.Lease.json": ("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", "leases"),
    "core.v1.Event.json": ("/api/v1/namespaces/{ns}/events", "events"),
    "events.k8s.io.v1.Event.json": ("/apis/events.k8s.io/v1/namespaces/{ns}/events", "events.events.k8s.io"),
}
# Fields the API server owns on create (it assigns them; a client cannot choose them).
SERVER_OWNED = ("uid", "resourceVersion", "creationTimestamp", "generation")


def _golden(name: str) -> dict:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"golden fixture {path} is absent (../shared/fixtures/k8s-api/ not mounted)")
    return json.loads(path.read_text())


def _without(obj: dict, fields, cluster_scoped: bool) -> dict:
    o = json.loads(json.dumps(obj))
    for f in fields:
        o["metadata"].pop(f, None)
    if cluster_scoped:
        o["metadata"].pop("namespace", None)
    return o


@pytest.mark.parametrize("fixture", sorted(GOLDEN))
def test_golden_objects_round_trip_over_http(kubeapi, fixture):
    golden = _golden(fixture)
    collection, resource = GOLDEN[fixture]
    ns = golden["metadata"].get("namespace")
    name = golden["metadata"]["name"]
    code, created = raw(kubeapi, "POST", collection.format(ns=ns), golden)
    assert code == 201, created
    code, back = raw(kubeapi, "GET", f"{collection.format(ns=ns)}/{name}")
    assert code == 200
    cluster_scoped = "{ns}" not in collection
    assert _without(back, SERVER_OWNED, cluster_scoped) == _without(golden, SERVER_OWNED, cluster_scoped)
    assert back["metadata"]["uid"] != golden["metadata"]["uid"] and int(back["metadata"]["resourceVersion"]) > 0
    # seeded directly (the way tests load a cluster), only the resourceVersion differs
    kubeapi.delete(resource, name, None if cluster_scoped else ns)
    kubeapi.create(golden)
    code, seeded = raw(kubeapi, "GET", f"{collection.format(ns=ns)}/{name}")
    assert _without(seeded, ["resourceVersion"], cluster_scoped) == _without(
        golden, ["resourceVersion"], cluster_scoped
    )


@pytest.mark.parametrize("fixture", ["core.v1.Node.json", "core.v1.Pod.json", "coordination.k8s.io.v1.Lease.json"])
def test_golden_objects_deserialize_through_client_models(kubeapi, fixture):
    golden = _golden(fixture)
    kubeapi.create(golden)
    name, ns = golden["metadata"]["name"], golden["metadata"].get("namespace")
    if fixture == "core.v1.Node.json":
        obj = kubeapi.core_v1.read_node(name)
    elif fixture == "core.v1.Pod.json":
        obj = kubeapi.core_v1.read_namespaced_pod(name, ns)
    else:
        obj = kubeapi.coordination_v1.read_namespaced_lease(name, ns)
    assert obj.metadata.name == name and obj.metadata.uid == golden["metadata"]["uid"]


def test_golden_binding_and_eviction_bodies_are_accepted(kubeapi):
    binding, eviction = _golden("core.v1.Binding.json"), _golden("policy.v1.Eviction.json")
    ns = binding["metadata"]["namespace"]
    kubeapi.create(pod(binding["metadata"]["name"], ns=ns))
    path = f"/api/v1/namespaces/{ns}/pods/{binding['metadata']['name']}/binding"
    code, st = raw(kubeapi, "POST", path, {**binding, "metadata": {**binding["metadata"], "uid": None}})
    assert code == 422 and st["reason"] == "Invalid"  # target.kind "kindValue" is not Node
    code, _ = raw(
        kubeapi,
        "POST",
        path,
        {**binding, "metadata": {**binding["metadata"], "uid": None}, "target": {**binding["target"], "kind": "Node"}},
    )
    assert code == 201
    assert kubeapi.get("pods", binding["metadata"]["name"], ns)["spec"]["nodeName"] == binding["target"]["name"]
    ens = eviction["metadata"]["namespace"]
    if kubeapi.get("pods", eviction["metadata"]["name"], ens) is None:
        kubeapi.create(pod(eviction["metadata"]["name"], ns=ens, phase="Running"))
    opts = {k: v for k, v in eviction["deleteOptions"].items() if k not in ("preconditions", "dryRun")}
    code, st = raw(
        kubeapi,
        "POST",
        f"/api/v1/namespaces/{ens}/pods/{eviction['metadata']['name']}/eviction",
        {**eviction, "deleteOptions": opts},
    )
    assert code == 201, st
