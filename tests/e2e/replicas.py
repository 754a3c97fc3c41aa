"""Several replicas of the chart's scheduler pod on one real control plane, with leader election on.

A replica is what the chart's Deployment runs per pod with `scheduler.leaderElect: true` and
`scheduler.replicas > 1`: kube-scheduler (the chart's KubeSchedulerConfiguration, extender at this
replica's hami-fast) and `hami-fast serve` (the chart's flags). kube-scheduler elects through the
chart's Lease under the identity `<hostname>_<uuid>`; hami-fast leads while that holder starts with
its POD_NAME (HAMi's rule). Here every replica's kube-scheduler runs in a UTS namespace of its own
(`unshare --uts`) whose hostname is the replica's name, as a pod's hostname is its name.

The webhook is reached through `Balancer`, a TCP pass-through standing in for the chart's Service:
each connection goes to a live replica. Each replica's hami-fast authenticates with a token of its
own for the chart's ServiceAccount, and its kube-scheduler another (`ControlPlane.sa_replicas` is twice
the replicas): the audit log tells every process apart by uid.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from controlplane import (
    NAMESPACE,
    SA_USER,
    ControlPlane,
    Proc,
    binaries_dir,
    free_port,
    render_chart,
    wait_for,
    with_local_device_config,
)
from sidebyside import log

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/hami-scheduler"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def uts_namespaces_missing() -> str | None:
    """Why kube-scheduler cannot get a hostname of its own here (unshare --uts needs CAP_SYS_ADMIN)."""
    try:
        done = subprocess.run(
            ["unshare", "--uts", "sh", "-c", "hostname replica-probe && hostname"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --uts cannot run here: {exc}"
    if done.returncode != 0 or done.stdout.strip() != "replica-probe":
        return f"unshare --uts cannot set a hostname here (needs CAP_SYS_ADMIN): {done.stderr.strip()}"
    return None


class Balancer(threading.Thread):
    """A TCP pass-through on one port to whichever backend port accepts, tried in turn from the next
    one each connection (a Service's endpoints; a dead replica's port refuses and is skipped)."""

    def __init__(self, backends: list[int]) -> None:
        super().__init__(name="balancer", daemon=True)
        self.backends = backends
        self.unready: set[int] = set()  # out of the endpoints, as after a failed readiness probe
        self.port = free_port()
        self._turn = 0
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._stopped = False

    def run(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _connect(self) -> socket.socket | None:
        self._turn += 1
        for i in range(len(self.backends)):
            port = self.backends[(self._turn + i) % len(self.backends)]
            if port in self.unready:
                continue
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue
        return None

    def _serve(self, client: socket.socket) -> None:
        upstream = self._connect()
        if upstream is None:
            client.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def stop(self) -> None:
        self._stopped = True
        self._server.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@dataclass
class Replica:
    index: int
    name: str
    port: int
    metrics_port: int
    uid: str

    @property
    def fast_key(self) -> str:
        return f"hami-fast-{self.name}"

    @property
    def scheduler_key(self) -> str:
        return f"kube-scheduler-{self.name}"


class Replicas:
    """`count` scheduler replicas from the chart rendered with `scheduler.replicas: count`."""

    def __init__(self, cp: ControlPlane, count: int = 2, extra_args: list[str] | None = None) -> None:
        self.cp, self.api = cp, cp.api
        self.objs = render_chart({"scheduler.replicas": count})
        self.extra_args = list(extra_args or [])
        self.replicas = [
            Replica(i, f"hami-fast-scheduler-{chr(97 + i)}", free_port(), free_port(), f"{SA_USER}-uid-{i}")
            for i in range(count)
        ]
        self.balancer = Balancer([r.port for r in self.replicas])
        self.starts: dict[str, list[float]] = {r.name: [] for r in self.replicas}
        self.down: set[str] = set()  # replicas killed on purpose: the kubelet stand-in leaves them be
        self.restarts: list[tuple[float, str]] = []  # (when, process) restarted after it exited
        self._kubelet = threading.Thread(target=self._restart_exited, name="kubelet", daemon=True)
        self._stopped = threading.Event()
        self.api_server = ""  # hami-fast's API server address when not the control plane's own (a proxy)

    def chart(self, kind: str, suffix: str = "") -> dict[str, Any]:
        (found,) = [o for o in self.objs if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
        return found

    def setup(self) -> Replicas:
        self.cp.install_chart_objects(self.objs)
        self.balancer.start()
        mwc = json.loads(json.dumps(self.chart("MutatingWebhookConfiguration")))
        for wh in mwc["webhooks"]:
            wh["failurePolicy"] = "Fail"  # a pod admitted while a replica dies is retried, not left unmutated
            wh["clientConfig"] = {
                "url": f"https://127.0.0.1:{self.balancer.port}/webhook",
                "caBundle": base64.b64encode(self.cp.ca_file.read_bytes()).decode(),
            }
        self.api.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", mwc)
        for r in self.replicas:
            self.start(r)
        wait_for("a leader", self.leader, timeout=90)
        self._kubelet.start()
        return self

    def _restart_exited(self) -> None:
        """The kubelet's part: a container that exited (kube-scheduler does when it loses its Lease or
        cannot renew it) is started again, unless the test took the whole replica down."""
        while not self._stopped.wait(1.0):
            for r in self.replicas:
                if r.name in self.down:
                    continue
                for key in (r.fast_key, r.scheduler_key):
                    proc = self.cp.procs.get(key)
                    if proc is None or proc.alive() or r.name in self.down:
                        continue
                    log(f"kubelet: {key} exited ({proc.popen.returncode if proc.popen else '?'}); restarting it")
                    self.restarts.append((time.time(), key))
                    if key == r.fast_key:
                        self._start_fast(r)
                    else:
                        self._start_kube_scheduler(r, self.cp.replica_tokens[len(self.replicas) + r.index])

    # -- processes ---------------------------------------------------------------------------
    def serve_args(self) -> list[str]:
        dep = self.chart("Deployment", "-scheduler")
        (c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "vgpu-scheduler-extender"]
        return [*with_local_device_config(c["args"], self.objs, self.cp.workdir), *self.extra_args]

    def start(self, r: Replica) -> None:
        """Both containers of the replica's pod, as the kubelet (re)starts them."""
        tokens = self.cp.replica_tokens
        assert len(tokens) >= 2 * len(self.replicas), "ControlPlane(sa_replicas=2 * replicas)"
        self._start_fast(r)
        self._start_kube_scheduler(r, tokens[len(self.replicas) + r.index])
        self.starts[r.name].append(time.time())
        self.down.discard(r.name)

    def _start_fast(self, r: Replica) -> None:
        token = self.cp.replica_tokens[r.index]
        self.cp.start_hami_fast(
            self.serve_args(),
            r.port,
            r.metrics_port,
            name=r.fast_key,
            pod_name=r.name,
            token=token,
            server=self.api_server,
        )

    def _start_kube_scheduler(self, r: Replica, token: str) -> None:
        text = self.chart("ConfigMap", "-scheduler")["data"]["config.yaml"]
        cfg = yaml.safe_load(text.replace("https://127.0.0.1:9443", f"https://127.0.0.1:{r.port}"))
        cfg["clientConnection"] = {"kubeconfig": str(self.cp.kubeconfig(r.scheduler_key, token)), "qps": 500}
        cfg["clientConnection"]["burst"] = 1000
        path = self.cp.workdir / f"{r.scheduler_key}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        binary = str(binaries_dir() / "kube-scheduler")
        # unshare execs kube-scheduler in place: the Popen's pid is kube-scheduler's, for kill and stop.
        args = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', r.name]
        args += [binary, f"--config={path}", "--secure-port=0", "-v=2"]
        proc = Proc(r.scheduler_key, args, self.cp.workdir / "logs" / f"{r.scheduler_key}.log").start()
        self.cp.procs[r.scheduler_key] = proc

    def restart_fast(self) -> None:
        """Every live replica's hami-fast stopped and started again (e.g. with another `api_server`);
        kube-scheduler keeps running, as when the kubelet restarts one container of the pod."""
        for r in self.replicas:
            if r.name in self.down:
                continue
            self.down.add(r.name)  # the kubelet stand-in leaves it be meanwhile
            self.cp.procs[r.fast_key].stop()
            self._start_fast(r)
            self.down.discard(r.name)

    def procs(self, r: Replica) -> list[Proc]:
        return [self.cp.procs[k] for k in (r.scheduler_key, r.fast_key) if k in self.cp.procs]

    def kill(self, r: Replica) -> float:
        """SIGKILL both containers (the pod crashed, or its node went away); returns when."""
        self.down.add(r.name)
        when = time.time()
        for p in self.procs(r):
            if p.popen and p.popen.poll() is None:
                p.popen.send_signal(signal.SIGKILL)
                p.popen.wait(10)
        log(f"killed {r.name} (SIGKILL)")
        return when

    def pause(self, r: Replica) -> float:
        """SIGSTOP both containers; its readiness probe would fail, so the Service stops sending to it."""
        self.balancer.unready.add(r.port)
        when = time.time()
        for p in self.procs(r):
            if p.popen:
                p.popen.send_signal(signal.SIGSTOP)
        log(f"paused {r.name} (SIGSTOP)")
        return when

    def resume(self, r: Replica) -> float:
        when = time.time()
        for p in self.procs(r):
            if p.popen:
                p.popen.send_signal(signal.SIGCONT)
        self.balancer.unready.discard(r.port)
        log(f"resumed {r.name} (SIGCONT)")
        return when

    def stop(self) -> None:
        """Stops the kubelet stand-in before the control plane stops its processes: else it may
        start a container again in between, which then outlives the test."""
        self._stopped.set()
        if self._kubelet.is_alive():
            self._kubelet.join(30)
        self.balancer.stop()

    # -- reading ------------------------------------------------------------------------------
    def lease(self) -> dict[str, Any]:
        return self.api.get(LEASE)["spec"]

    def leader(self) -> Replica | None:
        """The replica whose name prefixes the Lease's holder while the Lease is valid (HAMi's rule)."""
        spec = self.lease()
        renewed = spec.get("renewTime")
        if not renewed:
            return None
        age = time.time() - datetime.fromisoformat(renewed.replace("Z", "+00:00")).timestamp()
        if age >= int(spec.get("leaseDurationSeconds") or 0):
            return None
        holder = spec.get("holderIdentity") or ""
        return next((r for r in self.replicas if holder.startswith(f"{r.name}_")), None)

    def other(self, r: Replica) -> Replica:
        return next(x for x in self.replicas if x is not r)


def audit_writes(path: Path, uid: str, since: float = 0.0) -> list[tuple[float, str]]:
    """(time, "verb resource name") of every write the user with this uid made after `since`."""
    out = []
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (event.get("user") or {}).get("uid") != uid or event.get("verb") not in WRITE_VERBS:
            continue
        when = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()
        if when >= since:
            ref = event.get("objectRef") or {}
            out.append(
                (when, f"{event['verb']} {ref.get('resource', '')}/{ref.get('subresource', '')} {ref.get('name', '')}")
            )
    return out
