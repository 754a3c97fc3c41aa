"""The event sink (kube/events.py) against the test API server over real HTTP, through the real
kubernetes client: nothing dropped under a burst or behind a slow, throttling or restarting API
server; identical events counted and similar ones combined as client-go's EventCorrelator does;
every unavoidable drop counted in a metric and logged in one line."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from hami_fast.kube.client import KubeClient, load_api_client
from hami_fast.kube.errors import ServerError, TooManyRequests
from hami_fast.kube.events import COMBINED, EventSink, KubeEventApi, MemoryEvents, SpamFilter
from hami_fast.server.metrics import EventSinkCollector
from k8s_objects import bind_args, filter_args, gpu_node, gpu_pod
from kubeapi.fixtures import wait_for
from prometheus_client import CollectorRegistry, generate_latest
from serving import Service

NS = "default"
EVENTS = f"/api/v1/namespaces/{NS}/events"
LOCK = "hami.io/mutex.lock"
FAST = (0.01, 0.05)  # the posters' backoff, short for tests


def pod(i: int | str) -> dict[str, str]:
    return {"namespace": NS, "name": f"p-{i}", "uid": f"uid-{i}"}


@pytest.fixture
def sinks(kubeapi):
    """EventSink(**options) posting to the test API server; each closed (posters stopped) at the end."""
    made: list[EventSink] = []

    def make(**options) -> EventSink:
        client = KubeClient(load_api_client(kubeapi.kubeconfig), qps=0, burst=1)
        options.setdefault("backoff", FAST)
        made.append(EventSink(KubeEventApi(client), **options))
        return made[-1]

    yield make
    for sink in made:
        sink.close(5)


def emit(sink: EventSink, who: dict[str, str], event_type: str, reason: str, message: str) -> None:
    sink.emit(who, event_type, reason, message, "hami-scheduler")


def stored(kubeapi) -> list[dict]:
    return kubeapi.list("events", NS)


def drop_lines(caplog) -> list[str]:
    # (a sink another test left closing may log its own shutdown drops meanwhile: not this sink's)
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "hami_fast.events" and "retries_exhausted" in r.getMessage() and "BindingSucceed" in r.getMessage()
    ]


def metrics_text(sink: EventSink) -> str:
    registry = CollectorRegistry()
    registry.register(EventSinkCollector(sink))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def test_a_burst_behind_a_slow_api_server_posts_every_event(kubeapi, sinks) -> None:
    """2,400 events emitted at once (more than the old 1,000-event queue held) while each POST takes
    2 ms: every pod gets its FilteringSucceed and BindingSucceed, once each, and nothing is dropped."""
    kubeapi.delay("POST", EVENTS, 0.002)
    sink = sinks()
    pods = 1200
    for i in range(pods):
        emit(sink, pod(i), "Normal", "FilteringSucceed", f"find fit node(node-{i % 7}), 0 nodes not fit, 7 nodes fit(")
        emit(sink, pod(i), "Normal", "BindingSucceed", f"Successfully binding node [node-{i % 7}] to {NS}/p-{i}")
    assert sink.queued > 1000, "the burst outran the posters (the case the old queue dropped)"
    assert sink.flush(60), f"{sink.queued} events still queued"
    events = stored(kubeapi)
    per_pod = Counter((e["involvedObject"]["name"], e["reason"]) for e in events)
    assert len(events) == 2 * pods
    assert set(per_pod.values()) == {1}
    assert {e["count"] for e in events} == {1}
    assert sink.dropped == dict.fromkeys(sink.dropped, 0)
    assert sink.counts["created"] == 2 * pods


def test_429_and_5xx_are_retried_with_backoff_until_posted(kubeapi, sinks) -> None:
    kubeapi.fail("POST", EVENTS, 429, times=3, reason="TooManyRequests")
    kubeapi.fail("POST", EVENTS, 503, times=5, reason="ServiceUnavailable")  # rules count down together
    sink = sinks()
    for i in range(5):
        emit(sink, pod(i), "Normal", "BindingSucceed", f"Successfully binding node [n] to {NS}/p-{i}")
    assert sink.flush(10)
    assert sorted(e["involvedObject"]["name"] for e in stored(kubeapi)) == [f"p-{i}" for i in range(5)]
    assert sum(sink.dropped.values()) == 0
    statuses = Counter(r.status for r in kubeapi.requests("POST", EVENTS))
    assert statuses == {429: 3, 503: 2, 201: 5}
    assert sink.counts["retried"] == 5


def test_events_wait_out_an_api_server_restart(kubeapi, sinks) -> None:
    """No answer at all (connections cut, nothing listening for a second): held and retried."""
    sink = sinks(backoff=(0.05, 0.5))
    restart = threading.Thread(target=kubeapi.restart_server, kwargs={"downtime": 1.0})
    restart.start()
    time.sleep(0.1)
    for i in range(20):
        emit(sink, pod(i), "Warning", "FilteringFailed", "no available node, 2 nodes do not meet")
    restart.join()
    assert sink.flush(15)
    assert len(stored(kubeapi)) == 20
    assert sum(sink.dropped.values()) == 0


def test_an_api_server_failing_for_long_drops_after_the_tries_counts_and_logs_once(kubeapi, sinks, caplog) -> None:
    kubeapi.fail("POST", EVENTS, 500, times=None)
    sink = sinks(max_tries=3)
    with caplog.at_level(logging.WARNING, logger="hami_fast.events"):
        for i in range(4):
            emit(sink, pod(i), "Normal", "BindingSucceed", "Successfully binding node [n] to default/p")
        wait_for(lambda: sink.dropped["retries_exhausted"] == 4, 10, "four events given up")
        # four posters: the one that counted the first drop may log it after another counted the rest
        wait_for(lambda: drop_lines(caplog), 10, "the drop logged")
        assert sink.flush(5)
    assert len(kubeapi.requests("POST", EVENTS)) == 12, "3 tries each"
    lines = drop_lines(caplog)
    assert len(lines) == 1, lines
    assert "after 3 tries" in lines[0]
    assert 'hami_fast_events_dropped_total{reason="retries_exhausted"} 4.0' in metrics_text(sink)


def test_a_rejected_event_is_dropped_at_once_and_counted(kubeapi, sinks) -> None:
    kubeapi.fail("POST", EVENTS, 403, times=1, reason="Forbidden", message="namespace is terminating")
    sink = sinks(posters=1)
    emit(sink, pod(1), "Normal", "BindingSucceed", "a")
    emit(sink, pod(2), "Normal", "BindingSucceed", "b")
    assert sink.flush(5)
    assert [e["involvedObject"]["name"] for e in stored(kubeapi)] == ["p-2"]
    assert sink.dropped["rejected"] == 1 and len(kubeapi.requests("POST", EVENTS)) == 2


class GatedApi(MemoryEvents):
    """Memory events whose writes wait for `gate`."""

    def __init__(self) -> None:
        super().__init__(capacity=100)
        self.gate = threading.Event()

    def create(self, namespace: str, body: bytes) -> None:
        self.gate.wait(10)
        super().create(namespace, body)


def test_a_full_queue_drops_new_events_counts_them_and_logs_one_line(caplog) -> None:
    api = GatedApi()
    sink = EventSink(api, capacity=5, posters=1, interval=0.01)
    with caplog.at_level(logging.WARNING, logger="hami_fast.events"):
        emit(sink, pod("first"), "Normal", "BindingSucceed", "x")
        wait_for(lambda: sink.queued == 0, 5, "the poster to take the first event")
        for i in range(8):
            emit(sink, pod(i), "Normal", "BindingSucceed", "x")
        for _ in range(3):  # identical to a queued one: counted into it, not dropped
            emit(sink, pod(0), "Normal", "BindingSucceed", "x")
    assert sink.dropped["queue_full"] == 3 and sink.counts["coalesced"] == 3
    assert len([r for r in caplog.records if r.name == "hami_fast.events"]) == 1
    api.gate.set()
    assert sink.flush(5)
    assert sorted(e["involvedObject"]["name"] for e in api.items) == ["p-0", "p-1", "p-2", "p-3", "p-4", "p-first"]
    assert next(e["count"] for e in api.items if e["involvedObject"]["name"] == "p-0") == 4
    sink.close()
    text = metrics_text(sink)
    assert 'hami_fast_events_dropped_total{reason="queue_full"} 3.0' in text
    assert 'hami_fast_events_total{result="coalesced"} 3.0' in text


def test_identical_events_are_one_event_whose_count_grows(kubeapi, sinks) -> None:
    """client-go's eventLogger: the same pod, type, reason and message again PATCHes count and
    lastTimestamp of the Event already posted; an Event gone meanwhile is created again."""
    sink = sinks(posters=1)
    message = "no available node, 3 nodes do not meet"
    for _ in range(3):
        emit(sink, pod(1), "Warning", "FilteringFailed", message)
    assert sink.flush(5)
    [event] = stored(kubeapi)
    assert event["count"] == 3 and event["message"] == message
    emit(sink, pod(1), "Warning", "FilteringFailed", message)
    assert sink.flush(5)
    [event] = stored(kubeapi)
    assert event["count"] == 4
    [patch] = kubeapi.requests("PATCH", f"{EVENTS}/*")
    assert patch.content_type == "application/merge-patch+json"
    assert set(patch.json) == {"count", "lastTimestamp", "message"}
    assert len(kubeapi.requests("POST", EVENTS)) == 1

    kubeapi.delete("events", event["metadata"]["name"], NS)  # kube-apiserver's --event-ttl passed
    emit(sink, pod(1), "Warning", "FilteringFailed", message)
    assert sink.flush(5)
    [again] = stored(kubeapi)
    assert again["count"] == 5 and again["metadata"]["name"] == event["metadata"]["name"]
    assert again["firstTimestamp"] == event["firstTimestamp"]


def test_a_pods_tenth_distinct_message_is_combined_as_client_go_aggregates(kubeapi, sinks) -> None:
    sink = sinks(posters=1)
    for i in range(13):
        emit(sink, pod(1), "Warning", "FilteringFailed", f"no available node, {i} nodes do not meet")
        assert sink.flush(5)
    events = stored(kubeapi)
    combined = [e for e in events if e["message"].startswith(COMBINED)]
    assert len(events) == 10 and len(combined) == 1
    assert combined[0]["message"] == COMBINED + "no available node, 12 nodes do not meet"
    assert combined[0]["count"] == 4 and combined[0]["reason"] == "FilteringFailed"
    assert sink.counts["aggregated"] == 4
    other = pod(2)  # another pod is not affected
    emit(sink, other, "Warning", "FilteringFailed", "no available node, 1 nodes do not meet")
    assert sink.flush(5)
    assert stored(kubeapi)[-1]["message"] == "no available node, 1 nodes do not meet"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def writes(kubeapi) -> list:
    return kubeapi.requests("POST", EVENTS) + kubeapi.requests("PATCH", f"{EVENTS}/*")


def test_a_pod_that_keeps_failing_costs_25_writes_then_one_per_5_minutes(kubeapi, sinks) -> None:
    """client-go's EventSourceObjectSpamFilter with its defaults: 40 retries of an unschedulable pod
    make 25 writes (1 POST, 24 count PATCHes); the other 15 are filtered, counted, not dropped, and
    still in the Event's count once a token has come back 5 minutes later."""
    clock = Clock()
    sink = sinks(posters=1, spam_filter=SpamFilter(clock=clock))
    message = "no available node, 3 nodes do not meet"
    for _ in range(40):
        emit(sink, pod(1), "Warning", "FilteringFailed", message)
        assert sink.flush(5)
        clock.now += 5  # kube-scheduler's retries, a few seconds apart (5 s x 40 refills no token)
    assert len(kubeapi.requests("POST", EVENTS)) == 1 and len(kubeapi.requests("PATCH", f"{EVENTS}/*")) == 24
    [event] = stored(kubeapi)
    assert event["count"] == 25
    assert sink.counts["filtered"] == 15 and sum(sink.dropped.values()) == 0
    text = metrics_text(sink)
    assert 'hami_fast_events_total{result="filtered"} 15.0' in text
    assert 'hami_fast_events_dropped_total{reason="queue_full"} 0.0' in text

    clock.now += 300  # one token back
    for _ in range(2):
        emit(sink, pod(1), "Warning", "FilteringFailed", message)
        assert sink.flush(5)
    [event] = stored(kubeapi)
    assert event["count"] == 41, "25 written + 15 filtered + the one written now (the next one filtered again)"
    assert len(writes(kubeapi)) == 26 and sink.counts["filtered"] == 16


def test_the_spam_filter_is_per_pod_and_type_and_a_filtered_new_event_is_created_later(kubeapi, sinks) -> None:
    clock = Clock()
    sink = sinks(posters=1, spam_filter=SpamFilter(burst=2, clock=clock))
    for i in range(3):  # distinct reasons share the pod's Warning bucket, as client-go's spam key has no reason
        emit(sink, pod(1), "Warning", f"Reason{i}", "m")
        assert sink.flush(5)
    assert sorted(e["reason"] for e in stored(kubeapi)) == ["Reason0", "Reason1"]
    emit(sink, pod(1), "Normal", "BindingSucceed", "bound")  # another type: its own bucket
    emit(sink, pod(2), "Warning", "Reason2", "m")  # another pod: its own bucket
    assert sink.flush(5)
    assert Counter((e["involvedObject"]["name"], e["reason"]) for e in stored(kubeapi)) == {
        ("p-1", "Reason0"): 1,
        ("p-1", "Reason1"): 1,
        ("p-1", "BindingSucceed"): 1,
        ("p-2", "Reason2"): 1,
    }
    clock.now += 300
    emit(sink, pod(1), "Warning", "Reason2", "m")
    assert sink.flush(5)
    [late] = [e for e in stored(kubeapi) if e["involvedObject"]["name"] == "p-1" and e["reason"] == "Reason2"]
    assert late["count"] == 2, "the filtered occurrence counts into the Event created later"
    assert len(kubeapi.requests("PATCH", f"{EVENTS}/*")) == 0, "created, not patched: it was never written"


def test_a_coalesced_burst_spends_a_token_per_occurrence() -> None:
    """30 identical events queued before a poster runs are one write (count 30) and spend the
    pod's 25 tokens, as client-go's filter sees each of them: the next one is filtered."""
    gate = GatedApi()
    sink = EventSink(gate, posters=1, interval=0.01, spam_filter=SpamFilter(clock=Clock()))
    emit(sink, pod("first"), "Normal", "BindingSucceed", "x")
    wait_for(lambda: sink.queued == 0, 5, "the poster to take the first event")
    for _ in range(30):
        emit(sink, pod(1), "Warning", "FilteringFailed", "m")
    gate.gate.set()
    assert sink.flush(5)
    emit(sink, pod(1), "Warning", "FilteringFailed", "m")
    assert sink.flush(5)
    sink.close()
    [event] = [e for e in gate.items if e["involvedObject"]["name"] == "p-1"]
    assert event["count"] == 30 and sink.counts["filtered"] == 1


def test_retry_after_is_read_into_the_error(kubeapi) -> None:
    client = KubeClient(load_api_client(kubeapi.kubeconfig), qps=0, burst=1)
    kubeapi.fail("GET", "/api/v1/namespaces/default/pods/x", 429, retry_after=7)
    with pytest.raises(TooManyRequests) as throttled:
        client.request("GET", "/api/v1/namespaces/default/pods/x")
    assert throttled.value.retry_after == 7.0
    kubeapi.fail("GET", "/api/v1/namespaces/default/pods/x", 503)
    with pytest.raises(ServerError) as failed:
        client.request("GET", "/api/v1/namespaces/default/pods/x")
    assert failed.value.retry_after is None


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_waited_before_the_next_try(kubeapi, sinks, status) -> None:
    """The backoff is 10-50 ms; the answer's Retry-After (1 s) is what the posters wait."""
    kubeapi.fail("POST", EVENTS, status, times=1, retry_after=1)
    sink = sinks()
    emit(sink, pod(1), "Normal", "BindingSucceed", "x")
    assert sink.flush(10)
    refused, posted = kubeapi.requests("POST", EVENTS)
    assert (refused.status, posted.status) == (status, 201)
    assert posted.time - refused.time >= 0.95


def test_a_long_retry_after_is_bounded(kubeapi, sinks) -> None:
    kubeapi.fail("POST", EVENTS, 429, times=1, retry_after=3600)
    sink = sinks(max_retry_after=0.3)
    emit(sink, pod(1), "Normal", "BindingSucceed", "x")
    assert sink.flush(10), "posted after 0.3 s, not an hour"
    refused, posted = kubeapi.requests("POST", EVENTS)
    assert 0.25 <= posted.time - refused.time < 5


def test_involved_object_carries_the_pods_resource_version(kubeapi, sinks) -> None:
    """As client-go's GetReference makes it: the pod's resourceVersion when it has one, else none;
    an identical event of a newer version is the same Event (the version is in no key)."""
    sink = sinks(posters=1)
    emit(sink, {**pod(1), "resourceVersion": "4711"}, "Normal", "FilteringSucceed", "fit")
    emit(sink, pod(2), "Normal", "FilteringSucceed", "fit")
    assert sink.flush(5)
    emit(sink, {**pod(1), "resourceVersion": "4712"}, "Normal", "FilteringSucceed", "fit")
    assert sink.flush(5)
    by_pod = {e["involvedObject"]["name"]: e for e in stored(kubeapi)}
    assert by_pod["p-1"]["involvedObject"]["resourceVersion"] == "4711" and by_pod["p-1"]["count"] == 2
    assert "resourceVersion" not in by_pod["p-2"]["involvedObject"]


def test_shutdown_posts_what_is_queued_and_counts_what_it_cannot(kubeapi, sinks) -> None:
    kubeapi.fail("POST", EVENTS, 500, times=None)
    sink = sinks(backoff=(5.0, 5.0))
    emit(sink, pod(1), "Normal", "BindingSucceed", "x")
    sink.close(timeout=0.5)
    assert sink.dropped["shutdown"] == 1 and sink.queued == 0
    for thread in sink._threads:
        thread.join(1)
    assert not any(t.is_alive() for t in sink._threads), "the posters stopped"


def test_every_pod_of_a_burst_gets_hamis_success_events_through_serve(kubeapi) -> None:
    """The scheduler's wiring: 40 pods filtered and bound at once, with each event POST slowed down;
    every pod gets one FilteringSucceed and one BindingSucceed (HAMi's reasons, type and message
    shapes) and /metrics shows them created, none dropped."""
    for i in range(2):
        kubeapi.create(gpu_node(f"node-{i}", gpus=4))
    pods = [kubeapi.create(gpu_pod(f"p{i}", gpu=1, mem=100, cores=1)) for i in range(40)]
    kubeapi.delay("POST", EVENTS, 0.02)
    with Service(kubeconfig=kubeapi.kubeconfig, kube_qps=1000, kube_burst=1000) as svc:
        wait_for(lambda: svc.runtime.scheduler.ready(), 10, "sync")

        def schedule(p: dict) -> None:
            [node] = svc.post("/filter", filter_args(p, ["node-0", "node-1"]))["NodeNames"]
            assert svc.post("/bind", bind_args(p, node)) == {"Error": ""}
            kubeapi.patch("nodes", node, {"metadata": {"annotations": {LOCK: None}}})  # the device plugin's part

        threads = [threading.Thread(target=schedule, args=(p,)) for p in pods]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        sink = svc.runtime.event_sink
        assert sink is not None and sink.flush(20)
        events = stored(kubeapi)
        text = generate_latest(svc.runtime.metrics.registry).decode()  # what /metrics serves
    seen = Counter((e["involvedObject"]["name"], e["reason"], e["type"]) for e in events)
    assert seen == {(f"p{i}", r, "Normal"): 1 for i in range(40) for r in ("FilteringSucceed", "BindingSucceed")}
    binding = next(e for e in events if e["reason"] == "BindingSucceed" and e["involvedObject"]["name"] == "p7")
    assert binding["message"] in {f"Successfully binding node [node-{n}] to {NS}/p7" for n in (0, 1)}
    assert binding["source"] == {"component": "hami-scheduler"}
    sent = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in pods}
    # both name the pod as kube-scheduler sent it (HAMi's Bind records on its lister's pod, unchanged since)
    for reason in ("FilteringSucceed", "BindingSucceed"):
        named = {
            e["involvedObject"]["name"]: e["involvedObject"].get("resourceVersion")
            for e in events
            if e["reason"] == reason
        }
        assert named == sent, reason
    assert 'hami_fast_events_total{result="created"} 80.0' in text
    assert 'hami_fast_events_dropped_total{reason="queue_full"} 0.0' in text
