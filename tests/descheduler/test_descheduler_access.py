"""The descheduler's API behind Kubernetes authentication and authorisation, against the test API
server's TokenReview and SubjectAccessReview: no token or a bad one 401, a user without the
permission 403, with it 200; health checks and the webhook open; answers cached; the loopback
listener open; flags that cannot work refused in one line."""

# ruff: noqa: F811  (the world's fixtures are imported, then named as parameters)
from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from descheduler_world import (
    admission,
    free_port,
    replacement,
)

NS = "hami-system"
GROUP = "hami-fast.io"
TOKENS = {"alice": "alice-token", "bob": "bob-token", "carol": "carol-token"}
HAMI_FAST = str(Path(sys.executable).parent / "hami-fast")
SNAPSHOT = str(Path(__file__).resolve().parents[2] / "examples" / "snapshot.yaml")
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def descheduler(cluster, *flags: str):
    """`hami-fast descheduler` in this process on free ports; yields (base URLs by flag, runtime)."""
    from hami_fast.descheduler.cli import Runtime, add_arguments
    from hami_fast.descheduler.config import load

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    api = free_port()
    args = parser.parse_args(
        ["--bind", f"127.0.0.1:{api}", "--kubeconfig", cluster.kubeconfig, "--lease-namespace", NS, *flags]
    )
    runtime = Runtime(load(args, environ={}))
    runtime.start()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(runtime.serve(ready)), daemon=True)
    thread.start()
    assert ready.wait(10)
    return runtime, thread, api


@pytest.fixture
def served(cluster):
    for user, token in TOKENS.items():
        cluster.access.add_user(token, user, groups=("team",))
    started = []

    def start(*flags: str) -> int:
        """Nothing cached unless the test asks: its grants change between requests."""
        runtime, thread, port = descheduler(cluster, "--api-auth=kubernetes", "--api-auth-cache-ttl=0s", *flags)
        started.append((runtime, thread))
        return port

    yield start
    for runtime, thread in started:
        runtime.stop.set()
        thread.join(10)


def grant_reads(cluster, subject: str, namespace: str = NS) -> None:
    cluster.access.grant(
        subject, verbs=("get",), api_groups=(GROUP,), resources=("descheduler/api",), namespace=namespace
    )


def grant_plans(cluster, subject: str) -> None:
    cluster.access.grant(subject, verbs=("create",), api_groups=(GROUP,), resources=("descheduler/plan",))


def call(
    url: str, token: str | None = None, body: bytes | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, dict, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        with e:
            return e.code, dict(e.headers), json.loads(e.read() or b"{}")


def test_no_token_401_a_token_without_the_verb_403_with_it_200(served, cluster):
    base = f"http://127.0.0.1:{served()}"
    grant_reads(cluster, "user:alice")
    status, headers, body = call(f"{base}/api/v1/cluster-info")
    assert status == 401 and "bearer token" in body["error"]
    assert headers["www-authenticate"] == 'Bearer realm="hami-fast-descheduler"'
    assert call(f"{base}/api/v1/cluster-info", "not-a-token")[0] == 401
    status, _, body = call(f"{base}/api/v1/cluster-info", TOKENS["bob"])
    assert status == 403
    assert body["error"] == (
        'Forbidden: user "bob" cannot get on "descheduler/api" in the API group "hami-fast.io"'
        ' in the namespace "hami-system"'
    )
    status, _, info = call(f"{base}/api/v1/cluster-info", TOKENS["alice"])
    assert status == 200 and info["summary"]["gpus"] == 4
    for path in ("/api/v1/placements", "/api/v1/fragmentation", "/api/v1/map", "/"):
        assert call(f"{base}{path}", TOKENS["bob"])[0] == 403, path
    assert call(f"{base}/api/v1/placements", TOKENS["alice"])[0] == 200


def test_posting_a_plan_needs_create_on_the_plan_resource(served, cluster):
    base = f"http://127.0.0.1:{served()}"
    grant_reads(cluster, "user:alice")
    status, _, body = call(f"{base}/api/v1/plan", TOKENS["alice"], b'{"max_moves": 2}')
    assert status == 403 and 'cannot create on "descheduler/plan"' in body["error"]
    assert call(f"{base}/api/v1/placements/validate", TOKENS["alice"], b"{}")[0] == 403
    grant_plans(cluster, "group:team")
    status, _, plan = call(f"{base}/api/v1/plan", TOKENS["alice"], b'{"max_moves": 2}')
    assert status == 200 and "moves" in plan


def test_the_permission_must_be_in_the_descheduler_namespace_and_discovery_grants_nothing(served, cluster):
    """`system:discovery` gives every authenticated user `get` on `/api/*`: a non-resource URL per
    path would have let everyone in. A RoleBinding in another namespace does not count either."""
    base = f"http://127.0.0.1:{served()}"
    cluster.access.grant("group:system:authenticated", verbs=("get",), non_resource_urls=("/api", "/api/*", "/"))
    grant_reads(cluster, "user:carol", namespace="elsewhere")
    assert call(f"{base}/api/v1/cluster-info", TOKENS["bob"])[0] == 403
    assert call(f"{base}/api/v1/cluster-info", TOKENS["carol"])[0] == 403
    grant_reads(cluster, "user:carol")
    assert call(f"{base}/api/v1/cluster-info", TOKENS["carol"])[0] == 200


def test_metrics_need_get_on_the_metrics_url(served, cluster):
    base = f"http://127.0.0.1:{served()}"
    grant_reads(cluster, "user:alice")
    assert call(f"{base}/metrics", TOKENS["alice"])[0] == 403
    cluster.access.grant("user:alice", verbs=("get",), non_resource_urls=("/metrics",))
    req = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKENS['alice']}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200 and b"hami_fast_descheduler_placements" in r.read()


def test_health_checks_and_the_webhook_need_no_token(served, cluster):
    base = f"http://127.0.0.1:{served()}"
    assert call(f"{base}/healthz")[:3:2] == (200, {"status": "ok"})
    assert call(f"{base}/readyz")[0] == 200
    status, _, review = call(f"{base}/webhook", body=admission(replacement()))
    assert status == 200 and review["response"]["allowed"] is True
    assert cluster.count("POST", TOKEN_REVIEWS) == 0


def test_answers_are_cached_then_asked_again(served, cluster):
    base = f"http://127.0.0.1:{served('--api-auth-cache-ttl=1h')}"
    grant_reads(cluster, "user:alice")
    for _ in range(5):
        assert call(f"{base}/api/v1/placements", TOKENS["alice"])[0] == 200
        assert call(f"{base}/api/v1/placements", "not-a-token")[0] == 401
    assert cluster.count("POST", TOKEN_REVIEWS) == 2 and cluster.count("POST", ACCESS_REVIEWS) == 1
    uncached = f"http://127.0.0.1:{served()}"
    assert call(f"{uncached}/api/v1/placements", TOKENS["alice"])[0] == 200
    cluster.access.revoke("user:alice")
    assert call(f"{uncached}/api/v1/placements", TOKENS["alice"])[0] == 403, "no cache: the revocation counts"
    cluster.access.remove_user(TOKENS["alice"])
    assert call(f"{uncached}/api/v1/placements", TOKENS["alice"])[0] == 401


def test_an_api_server_that_cannot_review_is_503_not_a_yes(served, cluster):
    base = f"http://127.0.0.1:{served()}"
    grant_reads(cluster, "user:alice")
    cluster.fail("POST", TOKEN_REVIEWS, status=500, times=None)
    status, _, body = call(f"{base}/api/v1/cluster-info", TOKENS["alice"])
    assert status == 503 and body["error"].startswith("cannot check access now: TokenReview failed")


def test_the_loopback_listener_needs_no_token(served, cluster):
    local = free_port()
    api = served(f"--local-bind=127.0.0.1:{local}")
    status, _, body = call(f"http://127.0.0.1:{api}/api/v1/cluster-info")
    assert status == 401 and body["error"].endswith(f"without one (a browser): the loopback listener 127.0.0.1:{local}")
    status, _, info = call(f"http://127.0.0.1:{local}/api/v1/cluster-info")
    assert status == 200 and info["summary"]["gpus"] == 4


def test_tls_api_and_a_webhook_listener_that_serves_the_webhook_alone(served, cluster, tmp_path):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    hook = free_port()
    api = served(
        "--api-tls", f"--webhook-bind=127.0.0.1:{hook}", f"--cert-file={tmp_path / 'tls.crt'}",
        f"--key-file={tmp_path / 'tls.key'}",
    )  # fmt: skip
    context = ssl.create_default_context()
    ca.configure_trust(context)
    grant_reads(cluster, "user:alice")
    assert call(f"https://127.0.0.1:{api}/api/v1/cluster-info", context=context)[0] == 401
    assert call(f"https://127.0.0.1:{api}/api/v1/cluster-info", TOKENS["alice"], context=context)[0] == 200
    assert call(f"https://127.0.0.1:{hook}/api/v1/cluster-info", TOKENS["alice"], context=context)[0] == 404
    status, _, review = call(f"https://127.0.0.1:{hook}/webhook", body=admission(replacement()), context=context)
    assert status == 200 and review["response"]["allowed"] is True
    assert call(f"https://127.0.0.1:{api}/webhook", body=admission(replacement()), context=context)[0] == 404


def test_auto_means_open_on_loopback_and_kubernetes_elsewhere():
    from hami_fast.descheduler.access import auth_mode

    assert auth_mode("auto", "127.0.0.1:8083", snapshot=False) == "none"
    assert auth_mode("auto", "[::1]:8083", snapshot=True) == "none"
    assert auth_mode("auto", "0.0.0.0:8083", snapshot=False) == "kubernetes"
    assert auth_mode("auto", "10.1.2.3:8083", snapshot=False) == "kubernetes"
    assert auth_mode("kubernetes", "127.0.0.1:8083", snapshot=False) == "kubernetes"
    assert auth_mode("none", "0.0.0.0:8083", snapshot=False) == "none"


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["--snapshot", SNAPSHOT, "--bind", "0.0.0.0:0"],
            "--api-auth=kubernetes: with --snapshot there is no API server to check tokens with; serve the snapshot"
            " on a loopback address (--bind 127.0.0.1:0) or pass --api-auth=none",
        ),
        (
            ["--snapshot", SNAPSHOT, "--bind", "127.0.0.1:0", "--local-bind", "0.0.0.0:0"],
            "--local-bind 0.0.0.0:0: not a loopback address; this listener answers without authentication, so it"
            " listens on 127.0.0.1 (or ::1) only",
        ),
        (["--snapshot", SNAPSHOT, "--bind", "127.0.0.1:0", "--api-tls"], "--api-tls needs --cert-file and --key-file"),
    ],
    ids=["snapshot-needs-no-auth", "local-bind-loopback-only", "api-tls-needs-certificates"],
)
def test_flags_that_cannot_work_are_one_line(argv, line):
    proc = subprocess.run([HAMI_FAST, "descheduler", *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"hami-fast descheduler: {line}"]
