"""The shared Kubernetes pieces: typed API errors (kube/errors.py), RFC 3339 stamps (kube/times.py)
and the one Lease implementation (kube/lease.py), against the test API server over real HTTP."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from hami_fast.kube import errors, times
from hami_fast.kube.lease import Leadership, LeaseElector, LeaseFollower, LeaseState, is_holder, lease_path

# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (0, "MaxRetryError", errors.Unreachable),
        (400, "BadRequest", errors.BadRequest),
        (401, "Unauthorized", errors.Unauthorized),
        (403, "Forbidden", errors.Forbidden),
        (404, "NotFound", errors.NotFound),
        (405, "MethodNotAllowed", errors.MethodNotAllowed),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (410, "Expired", errors.Gone),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.TooManyRequests),
        (500, "InternalError", errors.ServerError),
        (503, "ServiceUnavailable", errors.ServerError),
        (418, "Teapot", errors.ApiError),
    ],
)
def test_one_error_class_per_status(status, reason, kind):
    exc = errors.api_error(status, reason, "the message", "GET", "/api/v1/x")
    assert type(exc) is kind
    assert isinstance(exc, errors.ApiError)
    assert (exc.status, exc.reason, exc.message) == (status, reason, "the message")
    assert str(exc) == f"GET /api/v1/x: {status} {reason}: the message"


def test_already_exists_is_a_conflict_but_not_the_reverse():
    assert isinstance(errors.api_error(409, "AlreadyExists", ""), errors.Conflict)
    assert not isinstance(errors.api_error(409, "Conflict", ""), errors.AlreadyExists)


def test_an_error_made_by_a_writer_reads_as_its_message():
    exc = errors.NotFound("pod ns/p not found")
    assert (str(exc), exc.status) == ("pod ns/p not found", 404)


def test_from_response_reads_a_status_body_and_quotes_anything_else():
    status = orjson.dumps({"kind": "Status", "reason": "Expired", "message": "too old resource version: 5 (9)"})
    exc = errors.from_response(410, status, "GET", "/api/v1/pods")
    assert isinstance(exc, errors.Gone) and exc.message == "too old resource version: 5 (9)"
    proxy = errors.from_response(502, b"<html>bad gateway</html>", "GET", "/api/v1/pods")
    assert isinstance(proxy, errors.ServerError) and proxy.message == "<html>bad gateway</html>" and proxy.reason == ""


def test_the_client_raises_typed_errors(kubeapi, client):
    with pytest.raises(errors.NotFound) as missing:
        client.get_pod("default", "nope")
    assert missing.value.status == 404 and "nope" in missing.value.message
    kubeapi.fail("GET", "/api/v1/nodes", 429, reason="TooManyRequests", message="slow down")
    with pytest.raises(errors.TooManyRequests, match="slow down"):
        client.request("GET", "/api/v1/nodes")


def test_from_api_exception_translates_the_official_client(kubeapi):
    from kubernetes.client import ApiException

    with pytest.raises(ApiException) as raised:
        kubeapi.core_v1.read_namespaced_pod("nope", "default")
    exc = errors.from_api_exception(raised.value, "GET", "pods/nope")
    assert isinstance(exc, errors.NotFound) and exc.reason == "NotFound" and "nope" in exc.message
    kubeapi.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dup"}})
    with pytest.raises(ApiException) as again:
        kubeapi.core_v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dup"}})
    assert isinstance(errors.from_api_exception(again.value), errors.AlreadyExists)
    bare = ApiException(status=503, reason="Service Unavailable")
    assert isinstance(errors.from_api_exception(bare), errors.ServerError)


# -- times ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T11:00:00Z", datetime(2026, 12, 1, 11, 0, 0, tzinfo=UTC)),
        ("2026-12-01T11:00:00.123456Z", datetime(2026, 12, 1, 11, 0, 0, 123456, tzinfo=UTC)),
        ("2026-12-01T11:00:00.123456789Z", datetime(2026, 12, 1, 11, 0, 0, 123456, tzinfo=UTC)),  # RFC3339Nano
        ("2026-12-01T13:00:00+02:00", datetime(2026, 12, 1, 11, 0, 0, tzinfo=UTC)),
        ("2026-12-01t11:00:00z", datetime(2026, 12, 1, 11, 0, 0, tzinfo=UTC)),
        ("2026-12-01T11:00:00", datetime(2026, 12, 1, 11, 0, 0, tzinfo=UTC)),  # no offset: UTC
    ],
)
def test_parse_reads_what_kubernetes_and_go_write(text, expected):
    assert times.parse(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z", "1700000000"])
def test_parse_rejects_what_is_not_a_stamp(text):
    with pytest.raises(ValueError):
        times.parse(text)
    assert times.age_seconds(text) is None


def test_formats_and_age():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", times.now())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", times.now_micro())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", times.now_local())
    for stamp in (times.now(), times.now_micro(), times.now_local()):
        assert -1.0 < (times.age_seconds(stamp) or 0.0) < 2.0
    at = datetime(2026, 12, 1, 11, 1, 30, tzinfo=UTC)
    assert times.age_seconds("2026-12-01T11:00:00Z", at) == 90.0


# -- lease ----------------------------------------------------------------------------------------


def lease(holder: str, renewed: datetime | str | None, duration: int | None = 15) -> dict:
    spec: dict = {"holderIdentity": holder}
    if renewed is not None:
        spec["renewTime"] = renewed if isinstance(renewed, str) else renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "sched", "namespace": "kube-system"},
        "spec": spec,
    }


def test_lease_validity_is_client_go_s_rule():
    now = datetime(2026, 12, 1, 11, 0, 0, tzinfo=UTC)
    state = LeaseState.of(lease("a", now - timedelta(seconds=10), 15))
    assert state.valid(now) and not state.valid(now + timedelta(seconds=5))
    assert not LeaseState.of(lease("a", None)).valid(now), "never renewed"
    no_duration = LeaseState.of(lease("a", now - timedelta(seconds=10), None))
    assert not no_duration.valid(now) and no_duration.valid(now, duration=15), "our duration stands in"


def test_is_holder_is_hami_s_prefix_rule():
    now = datetime.now(UTC)
    held = lease("sched-0_4b1f", now)
    assert is_holder(held, "sched-0", now)
    assert not is_holder(held, "sched-1", now)
    assert not is_holder(held, "", now), "an empty identity never leads"
    assert not is_holder(lease("sched-0_4b1f", now - timedelta(seconds=20)), "sched-0", now), "expired"


def test_follower_and_elector_share_one_view_of_a_lease(kubeapi, client):
    """The elector's Lease, read by followers: the one whose identity prefixes the holder leads."""
    stop = threading.Event()
    elector = LeaseElector(client, "kube-system", "sched", stop, identity="sched-0_4b1f", duration=15)
    mine = LeaseFollower(client, "kube-system", "sched", stop, identity="sched-0")
    other = LeaseFollower(client, "kube-system", "sched", stop, identity="sched-1")
    assert not mine.step(), "no Lease yet: nobody leads"
    assert elector.step() and elector.leading.is_set()
    assert mine.step() and mine.leading.is_set()
    assert not other.step() and not other.leading.is_set()
    stored = kubeapi.get("leases", "sched", "kube-system")
    assert stored["spec"]["holderIdentity"] == "sched-0_4b1f" and stored["spec"]["leaseDurationSeconds"] == 15
    assert times.parse(stored["spec"]["renewTime"]) == times.parse(stored["spec"]["acquireTime"])


def test_leadership_ends_at_its_deadline_without_a_poll():
    """A replica paused past its term (SIGSTOP, a frozen VM) reads "not leading" before its next poll."""
    clock = [100.0]
    leading = Leadership(clock=lambda: clock[0])
    assert not leading.is_set() and leading.expires_in() == 0
    leading.set(until=115.0)
    assert leading.is_set() and leading.expires_in() == 15
    clock[0] = 114.9
    assert leading.is_set()
    clock[0] = 115.0
    assert not leading.is_set(), "the deadline passed: no longer leading"
    assert not leading.wait(0), "wait() answers as is_set() does"
    leading.set()
    clock[0] = 1e9
    assert leading.is_set(), "set() without a deadline leads until clear()"
    leading.clear()
    assert not leading.is_set()


def test_a_follower_leads_only_until_the_lease_it_read_expires(kubeapi, client):
    """The term a follower reads ends when kube-scheduler's Lease would expire, not at the next poll."""
    renewed = datetime.now(UTC) - timedelta(seconds=12)
    kubeapi.create(lease("sched-0_4b1f", renewed))  # 15 s Lease renewed 12 s ago: about 3 s left
    follower = LeaseFollower(client, "kube-system", "sched", threading.Event(), identity="sched-0")
    assert follower.step() and follower.leading.is_set()
    assert 1.5 < follower.leading.expires_in() <= 3.0


def test_an_api_server_that_stops_answering_leaves_the_term_to_its_deadline(kubeapi, client):
    """Lease reads failing (a restarting API server) neither end the term at once nor extend it:
    this replica leads until the Lease it last read expires, as no other replica can take it before."""
    renewed = datetime.now(UTC) - timedelta(seconds=13)
    kubeapi.create(lease("sched-0_4b1f", renewed))  # about 2 s left
    follower = LeaseFollower(client, "kube-system", "sched", threading.Event(), identity="sched-0")
    assert follower.step()
    kubeapi.fail("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/sched", 503, times=None)
    assert follower.step() and follower.leading.is_set(), "one failed read does not end the term"
    assert follower.leading.expires_in() <= 2.0, "nor does it lengthen it"
    time.sleep(follower.leading.expires_in() + 0.05)
    assert not follower.step() and not follower.leading.is_set(), "the term ended at the Lease's expiry"


def test_an_elector_leads_no_longer_than_the_duration_it_wrote(kubeapi, client):
    elector = LeaseElector(client, "kube-system", "sched", threading.Event(), identity="a", duration=15)
    assert elector.step()
    assert 14 < elector.leading.expires_in() <= 15, "another replica may take over once the Lease expires"


def test_a_malformed_lease_means_not_leading_and_the_thread_lives(kubeapi, client):
    kubeapi.create(lease("sched-0", "not a time"))
    stop = threading.Event()
    follower = LeaseFollower(client, "kube-system", "sched", stop, identity="sched-0", period=0.05)
    elector = LeaseElector(client, "kube-system", "sched", stop, identity="sched-0", period=0.05)
    follower.leading.set()
    assert not follower.step() and not follower.leading.is_set()
    assert not elector.step()
    elector.start()
    threading.Event().wait(0.2)
    assert elector.is_alive()
    stop.set()
    elector.join(2)


def test_two_electors_racing_for_an_expired_lease_one_wins(kubeapi, client):
    kubeapi.create(lease("gone", datetime.now(UTC) - timedelta(minutes=5)))
    stop = threading.Event()
    a = LeaseElector(client, "kube-system", "sched", stop, identity="a")
    b = LeaseElector(client, "kube-system", "sched", stop, identity="b")
    stale = client.request("GET", lease_path("kube-system", "sched")).json()
    assert a.try_acquire()
    # b decides on the read it made before a's write: its PUT carries the old resourceVersion -> 409.
    stale["spec"].update(holderIdentity="b", renewTime=times.now_micro())
    with pytest.raises(errors.Conflict):
        client.request("PUT", lease_path("kube-system", "sched"), body=orjson.dumps(stale))
    assert not b.try_acquire(), "a holds a valid Lease now"
    spec = kubeapi.get("leases", "sched", "kube-system")["spec"]
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 1
