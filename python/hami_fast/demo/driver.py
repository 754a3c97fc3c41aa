"""Plays kube-apiserver and kube-scheduler against a running hami-fast over HTTP: /webhook, /filter, /bind."""

from __future__ import annotations

import base64
import http.client
import time
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass
class Outcome:
    """What happened to one demo pod: `bound`, `pending` or `denied`, with the node or the reason."""

    pod: dict[str, Any]
    status: str
    node: str | None = None
    detail: str = ""


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Just enough RFC 6902 (add/replace) to play kube-apiserver's part for the webhook's patch."""
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
        else:
            target[last] = op["value"]
    return doc


class Driver:
    """One keep-alive HTTP connection to hami-fast; every call's latency is kept per route."""

    def __init__(self, host: str, port: int) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=30)
        self.latency: dict[str, list[float]] = {"webhook": [], "filter": [], "bind": []}

    def close(self) -> None:
        self.conn.close()

    def post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        data = orjson.dumps(body)
        start = time.perf_counter()
        self.conn.request("POST", f"/{route}", body=data, headers={"Content-Type": "application/json"})
        answer = self.conn.getresponse().read()
        self.latency[route].append(time.perf_counter() - start)
        return orjson.loads(answer)

    def schedule(self, pod: dict[str, Any], node_names: list[str]) -> Outcome:
        """Admit (the webhook's patch applied to `pod` in place), filter, bind."""
        review = self.post(
            "webhook",
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": pod["metadata"]["uid"], "namespace": "demo", "object": pod},
            },
        )
        response = review["response"]
        if not response["allowed"]:
            return Outcome(pod, "denied", detail=response["status"]["message"])
        if response.get("patch"):
            apply_json_patch(pod, orjson.loads(base64.b64decode(response["patch"])))
        result = self.post("filter", {"Pod": pod, "Nodes": None, "NodeNames": node_names})
        if result["Error"] or not result["NodeNames"]:
            # Why no node fits is told from the engine's verdicts afterwards (story.raw_lines).
            return Outcome(pod, "pending", detail=result["Error"])
        node = result["NodeNames"][0]
        meta = pod["metadata"]
        bound = self.post(
            "bind", {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
        )
        if bound["Error"]:
            return Outcome(pod, "pending", detail=f"bind failed: {bound['Error']}")
        return Outcome(pod, "bound", node=node)
