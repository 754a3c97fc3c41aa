"""Apply mode of `hami-fast plan`: one HamiPodPlacement per move, in order, rate limited, each
waited on until Completed (a Failed move stops the run: later moves assumed it had happened)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from hami_fast import annotations as keys
from hami_fast.descheduler import kube as k
from hami_fast.descheduler import status as s
from hami_fast.descheduler.placement import Placement, Status, new_placement
from hami_fast.kube.client import MERGE_PATCH, KubeClient, path_of
from hami_fast.kube.errors import ApiError, NotFound
from hami_fast.kube.retry import RETRIED_STATUSES

log = logging.getLogger("hami_fast.descheduler.apply")

# Labels a controller sets per pod (a replacement gets new values), and the one the scheduler's
# Filter adds (as HAMi does): a replacement has none of them at admission, so they are not selected on.
VOLATILE_LABELS = (
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "batch.kubernetes.io/job-completion-index",
    keys.VGPU_NODE,
)


# The reservation of GPUs for a pending pod, on the pod itself (read by the scheduler engine; HAMi ignores it).
RESERVATION = keys.RESERVATION
RESERVATION_EXPIRES = keys.RESERVATION_EXPIRES
# `app.kubernetes.io/managed-by` of the placements a run creates: who planned the move.
MANAGED_BY = "app.kubernetes.io/managed-by"
BY_PLAN = "hami-fast-plan"


def reservation_value(reservation: dict[str, Any]) -> str:
    """`<node>/<GPU-uuid>[,<GPU-uuid>...]`, the wire format of `hami-fast.io/reservation`."""
    return f"{reservation['node']}/{','.join(reservation['gpus'])}"


def _expiry(ttl: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ttl))


def write_reservation(client: KubeClient, reservation: dict[str, Any], ttl: float) -> None:
    """Holds the reservation's GPUs for its pod until `ttl` seconds from now. The patch names the
    pod's UID, so a pod recreated under the same name is never given another's hold."""
    namespace, name = reservation["pod"].split("/", 1)
    metadata: dict[str, Any] = {
        "annotations": {RESERVATION: reservation_value(reservation), RESERVATION_EXPIRES: _expiry(ttl)}
    }
    if reservation.get("uid"):
        metadata["uid"] = reservation["uid"]
    path = path_of("api", "v1", "namespaces", namespace, "pods", name)
    client.request("PATCH", path, body=orjson.dumps({"metadata": metadata}), content_type=MERGE_PATCH)


def clear_reservation(client: KubeClient, pod: str) -> None:
    """Drops the hold (the pod stays pending; its GPUs are free for anyone again)."""
    namespace, name = pod.split("/", 1)
    body = orjson.dumps({"metadata": {"annotations": {RESERVATION: None, RESERVATION_EXPIRES: None}}})
    path = path_of("api", "v1", "namespaces", namespace, "pods", name)
    try:
        client.request("PATCH", path, body=body, content_type=MERGE_PATCH)
    except NotFound:
        pass


def apply_for(
    client: KubeClient,
    result: dict[str, Any],
    ttl: float,
    interval: float = 5.0,
    timeout: float = 900.0,
    say: Callable[[str], None] = print,
    run_id: str | None = None,
    manager: str = BY_PLAN,
    starting: Starting | None = None,
    stop: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """`plan --for POD --apply`: the reservation first (so nothing else takes the GPUs the moves
    free), then the moves; the hold is renewed after each completed move and dropped when a move
    fails (the pod would not fit anyway). Nothing is written when the pod cannot be unblocked.
    `starting` and `stop`: as for `apply_moves`."""
    reservation = result.get("reservation")
    if not result.get("unblocked") or not reservation:
        return []
    write_reservation(client, reservation, ttl)
    say(f"reserved {reservation_value(reservation)} for {reservation['pod']} ({ttl:.0f} s, renewed per move)")

    def renew(_: dict[str, Any]) -> None:
        write_reservation(client, reservation, ttl)

    done = apply_moves(
        client,
        result["moves"],
        interval,
        timeout,
        say=say,
        run_id=run_id,
        after_move=renew,
        manager=manager,
        starting=starting,
        stop=stop,
    )
    if len(done) != len(result["moves"]) or any(r["phase"] != s.COMPLETED for r in done):
        clear_reservation(client, reservation["pod"])
        say(f"reservation for {reservation['pod']} dropped: not every move completed")
    return done


# Called with a move and its placement's reqID right before the placement is created: '' lets it
# start, anything else is why it may not (the run stops there).
Starting = Callable[[dict[str, Any], str], str]


def placement_for(move: dict[str, Any], pod: dict[str, Any], req_id: str, manager: str = BY_PLAN) -> dict[str, Any]:
    namespace, name = move["pod"].split("/", 1)
    labels = {
        key: value
        for key, value in ((pod.get("metadata") or {}).get("labels") or {}).items()
        if key not in VOLATILE_LABELS
    }
    if not labels:
        raise ValueError(f"pod {move['pod']} has no labels: a placement needs a podSelector")
    return new_placement(
        namespace,
        {MANAGED_BY: manager},
        req_id=req_id,
        match_labels=labels,
        node_name=move["to"]["node"],
        gpu_devices=move["to"]["gpus"],
        evict_pod=name,
    )


def apply_moves(
    client: KubeClient,
    moves: list[dict[str, Any]],
    interval: float = 5.0,
    timeout: float = 900.0,
    say: Callable[[str], None] = print,
    run_id: str | None = None,
    after_move: Callable[[dict[str, Any]], None] | None = None,
    manager: str = BY_PLAN,
    starting: Starting | None = None,
    stop: threading.Event | None = None,
) -> list[dict[str, Any]]:
    """`starting(move, reqID)`: asked right before each placement is created ('' to go on; else the
    run stops with the move Skipped). `stop`: set to end the run early (the move waited on is
    reported `Stopped`; its placement goes on under the controller)."""
    run_id = run_id or time.strftime("%Y%m%d%H%M%S")
    stop = stop or threading.Event()
    results: list[dict[str, Any]] = []
    for i, move in enumerate(moves):
        if i and stop.wait(interval):
            break
        namespace, name = move["pod"].split("/", 1)
        pod = k.get_pod(client, namespace, name)
        if pod is None:
            say(f"move {i + 1}: pod {move['pod']} is gone; stopping")
            results.append({"move": move, "phase": "Skipped", "message": "pod gone"})
            break
        req_id = f"plan-{run_id}-{i:04d}"
        refused = starting(move, req_id) if starting is not None else ""
        if refused:
            say(f"move {i + 1}: {move['pod']} not started: {refused}")
            results.append({"move": move, "reqID": req_id, "phase": "Skipped", "message": refused})
            break
        body = placement_for(move, pod, req_id, manager)
        created = client.request("POST", k.placements_path(namespace), body=orjson.dumps(body)).json()
        placement_name = created["metadata"]["name"]
        say(
            f"move {i + 1}/{len(moves)}: {move['pod']} -> {move['to']['node']} {move['to']['gpus']} (placement {namespace}/{placement_name})"
        )
        status, stopped = wait_for_placement(client, namespace, placement_name, timeout, stop, say)
        phase = "Stopped" if stopped else status.phase or "Timeout"
        results.append(
            {
                "move": move,
                "reqID": req_id,
                "placement": f"{namespace}/{placement_name}",
                "phase": phase,
                "message": status.message,
                "evictedAt": status.evicted_at or "",
            }
        )
        say(f"  {phase}: {status.message}")
        if phase == s.COMPLETED and after_move is not None:
            after_move(results[-1])
        if phase != s.COMPLETED:
            say("stopping: later moves assumed this one had happened")
            break
    return results


WAITED_OUT = RETRIED_STATUSES | {401, 403}


def wait_for_placement(
    client: KubeClient,
    namespace: str,
    name: str,
    timeout: float,
    stop: threading.Event,
    say: Callable[[str], None],
) -> tuple[Status, bool]:
    """Poll the placement until its phase is final, `timeout` passes or `stop` is set: its last status
    and whether it was stopped. The API server briefly unable to answer (a restart, a 429 or 5xx) is
    waited out: the controller moves the placement on meanwhile, and giving up would report a move
    that completes as failed. So is a 401 or 403 for a placement this run created and read: a
    restarted kube-apiserver refuses requests until its authorizer has caught up."""
    deadline = time.monotonic() + timeout
    status = Placement({}).status
    unreachable_since: float | None = None
    while time.monotonic() < deadline:
        try:
            status = Placement(k.get_placement(client, namespace, name) or {}).status
            unreachable_since = None
        except ApiError as exc:
            if exc.status not in WAITED_OUT:
                raise
            if unreachable_since is None:
                unreachable_since = time.monotonic()
                say(
                    f"  the API server did not answer ({exc.status or 'no answer'}); still waiting for {namespace}/{name}"
                )
        if status.finished:
            return status, False
        if stop.wait(1.0):
            return status, True
    return status, False
