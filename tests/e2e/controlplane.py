"""A real Kubernetes control plane on loopback for end-to-end tests.

etcd, kube-apiserver and kube-scheduler (built by scripts/build-control-plane.sh into
~/.cache/hami-fast/bin/k8s-<version>/) plus `hami-fast serve` over TLS, wired together the way the
Helm chart wires them: the chart is rendered with helm, and its KubeSchedulerConfiguration,
MutatingWebhookConfiguration, RBAC and the extender's flags are used with only the addresses
changed. kube-scheduler and hami-fast authenticate as the chart's ServiceAccount (a static token
whose user name is `system:serviceaccount:<ns>:<sa>`), so the chart's RBAC is what authorises them.

No kubelet: Node objects are created through the API with HAMi's register annotation and
`nvidia.com/gpu` allocatable, as the device plugin leaves them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "hami-fast"
K8S_VERSION = os.environ.get("K8S_VERSION", "v1.37.2")
NAMESPACE = "hami-system"
RELEASE = "e2e"
SA = f"{RELEASE}-hami-fast-scheduler"
SA_USER = f"system:serviceaccount:{NAMESPACE}:{SA}"
DESCHEDULER_SA = f"{RELEASE}-hami-fast-descheduler"
DESCHEDULER_USER = f"system:serviceaccount:{NAMESPACE}:{DESCHEDULER_SA}"
# Users of the descheduler's API: one bound to the chart's `-descheduler-api` ClusterRole (through
# `descheduler.api.auth.subjects`), one with no grant at all.
API_VIEWER = "e2e-gpu-viewer"
API_NOBODY = "e2e-nobody"
API_USERS = {API_VIEWER: "system:authenticated", API_NOBODY: "system:authenticated"}
DESCHEDULER_VALUES = {
    "descheduler.enabled": True,
    "descheduler.api.auth.subjects": [{"kind": "User", "name": API_VIEWER, "apiGroup": "rbac.authorization.k8s.io"}],
}


def cache_dir() -> Path:
    return Path(os.environ.get("HAMI_FAST_CACHE", Path.home() / ".cache" / "hami-fast"))


def binaries_dir() -> Path:
    return Path(os.environ.get("KUBE_BIN_DIR", cache_dir() / "bin" / f"k8s-{K8S_VERSION}"))


def missing_binaries() -> list[str]:
    return [b for b in ("etcd", "kube-apiserver", "kube-scheduler") if not os.access(binaries_dir() / b, os.X_OK)]


def find_helm() -> str | None:
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    for p in sorted((cache_dir() / "bin").glob("helm-*/helm"), reverse=True):
        return str(p)
    return shutil.which("helm")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProcessDied(RuntimeError):
    """A component exited: waiting longer cannot help."""


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
            last = result
        except ProcessDied:
            raise
        except Exception as exc:  # noqa: BLE001 - report the last failure on timeout
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def wait_drained(what: str, remaining: Callable[[], float], stall: float = 90, interval: float = 1) -> None:
    """Until `remaining()` is 0, as long as it keeps falling: a queue drained at a fixed rate (events
    at their own QPS) takes as long as what was queued, which a test may not know, but a stuck one
    stops falling. TimeoutError after `stall` seconds without a new low."""
    low, low_at = float("inf"), time.monotonic()
    while True:
        left = remaining()
        if left == 0:
            return
        if left < low:
            low, low_at = left, time.monotonic()
        elif time.monotonic() - low_at > stall:
            raise TimeoutError(f"{what}: stuck at {left:g} for {stall:.0f}s (lowest {low:g})")
        time.sleep(interval)


def render_chart(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    helm = find_helm()
    if not helm:
        raise RuntimeError("helm not found (scripts/install-helm.sh)")
    args = [helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--kube-version", K8S_VERSION]
    for k, v in (values or {}).items():
        args += ["--set-json", f"{k}={json.dumps(v)}"]
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def with_local_device_config(args: list[str], objs: list[dict[str, Any]], workdir: Path) -> list[str]:
    """A chart pod's flags with --device-config-file at a copy of the chart's device ConfigMap (the
    pod mounts it; here it is a file in the work directory)."""
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-scheduler-device")]
    path = workdir / "device-config.yaml"
    path.write_text(cm["data"]["device-config.yaml"])
    return [f"--device-config-file={path}" if a.startswith("--device-config-file=") else a for a in args]


@dataclass
class Proc:
    name: str
    args: list[str]
    log: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen | None = None

    def start(self) -> Proc:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.log, "ab")
        fh.write(f"\n=== start {time.strftime('%H:%M:%S')}: {' '.join(self.args)}\n".encode())
        fh.flush()
        self.popen = subprocess.Popen(
            self.args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env
        )
        fh.close()
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        if not self.popen or self.popen.poll() is not None:
            return
        self.popen.send_signal(sig)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@dataclass
class ControlPlane:
    workdir: Path
    timings: dict[str, float] = field(default_factory=dict)
    procs: dict[str, Proc] = field(default_factory=dict)
    # More static-token users, {user name: comma-separated groups}; their tokens end up in `tokens`.
    extra_users: dict[str, str] = field(default_factory=dict)
    # Write an audit log (one JSON line per request of these users, level Metadata) to count API calls.
    audit_users: list[str] = field(default_factory=list)
    apiserver_args: list[str] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)
    # Tokens of the scheduler's ServiceAccount, one per replica, each with a uid of its own
    # (`<user>-uid-<i>`), so the audit log tells the replicas apart while the chart's RBAC applies to all.
    sa_replicas: int = 0
    replica_tokens: list[str] = field(default_factory=list)

    # -- certificates and credentials ---------------------------------------------------------
    def _credentials(self) -> None:
        import trustme
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        d = self.workdir / "pki"
        d.mkdir(parents=True, exist_ok=True)
        self.ca = trustme.CA()
        self.ca_file = d / "ca.crt"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        for name in ("apiserver", "hami-fast"):
            cert = self.ca.issue_cert("127.0.0.1", "localhost")
            cert.private_key_pem.write_to_path(str(d / f"{name}.key"))
            cert.cert_chain_pems[0].write_to_path(str(d / f"{name}.crt"))
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (d / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        (d / "sa.pub").write_bytes(
            key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )
        self.admin_token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        self.sa_token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        self.descheduler_token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        lines = (
            f'{self.admin_token},e2e-admin,e2e-admin,"system:masters"\n'
            f'{self.sa_token},{SA_USER},{SA_USER}-uid,"system:serviceaccounts,system:serviceaccounts:{NAMESPACE},system:authenticated"\n'
            f'{self.descheduler_token},{DESCHEDULER_USER},{DESCHEDULER_USER}-uid,"system:serviceaccounts,system:serviceaccounts:{NAMESPACE},system:authenticated"\n'
        )
        self.tokens = {"e2e-admin": self.admin_token, SA_USER: self.sa_token, DESCHEDULER_USER: self.descheduler_token}
        sa_groups = f"system:serviceaccounts,system:serviceaccounts:{NAMESPACE},system:authenticated"
        for i in range(self.sa_replicas):
            self.replica_tokens.append(base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("="))
            lines += f'{self.replica_tokens[i]},{SA_USER},{SA_USER}-uid-{i},"{sa_groups}"\n'
        for user, groups in self.extra_users.items():
            self.tokens[user] = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
            lines += f'{self.tokens[user]},{user},{user}-uid,"{groups}"\n'
        (d / "tokens.csv").write_text(lines)
        self.pki = d

    def kubeconfig(self, name: str, token: str, server: str = "") -> Path:
        """`server`: another address for the API server (a proxy in front of it)."""
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "e2e",
                    "clusters": [
                        {
                            "name": "e2e",
                            "cluster": {"server": server or self.server, "certificate-authority": str(self.ca_file)},
                        }
                    ],
                    "users": [{"name": name, "user": {"token": token}}],
                    "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": name}}],
                }
            )
        )
        return path

    # -- processes -------------------------------------------------------------------------------
    def start(self) -> ControlPlane:
        t0 = time.monotonic()
        bins = binaries_dir()
        self._credentials()
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        logs = self.workdir / "logs"
        self.procs["etcd"] = Proc(
            "etcd",
            [
                str(bins / "etcd"),
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{etcd_peer}",
                "--log-level=warn",
                "--quota-backend-bytes=1073741824",
            ],
            logs / "etcd.log",
        ).start()
        self.procs["kube-apiserver"] = Proc(
            "kube-apiserver",
            [
                str(bins / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                # The `kubernetes` Service endpoint may not be a loopback address; nothing here needs it.
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={self.pki / 'apiserver.crt'}",
                f"--tls-private-key-file={self.pki / 'apiserver.key'}",
                f"--token-auth-file={self.pki / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={self.pki / 'sa.pub'}",
                f"--service-account-signing-key-file={self.pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                # No controller-manager creates `default` ServiceAccounts, so the ServiceAccount admission
                # plugin is off; everything else (MutatingAdmissionWebhook included) stays on.
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--v=1",
                *self._audit_args(),
                *self.apiserver_args,
            ],
            logs / "kube-apiserver.log",
        ).start()
        self.api = KubeApi(self.server, self.admin_token, str(self.ca_file))
        wait_for(
            "kube-apiserver /readyz",
            lambda: self._check_alive("kube-apiserver") and self.api.get_raw("/readyz") == "ok",
            timeout=180,
        )
        self.timings["apiserver_ready_s"] = time.monotonic() - t0
        return self

    @property
    def audit_log(self) -> Path:
        return self.workdir / "logs" / "audit.log"

    def _audit_args(self) -> list[str]:
        if not self.audit_users:
            return []
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived", "ResponseStarted"],
                    "rules": [{"level": "Metadata", "users": self.audit_users}, {"level": "None"}],
                }
            )
        )
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-maxsize=0",
            "--audit-log-mode=batch",
            "--audit-log-batch-max-wait=1s",
        ]

    def restart(self, name: str) -> float:
        """Stop etcd or kube-apiserver (SIGTERM) and start it again with the same flags; the seconds
        until the API server answers /readyz again."""
        t0 = time.monotonic()
        self.procs[name].stop()
        self.procs[name].start()
        wait_for(
            "kube-apiserver /readyz after a restart",
            lambda: self._check_alive("kube-apiserver") and self.api.get_raw("/readyz") == "ok",
            timeout=180,
        )
        return time.monotonic() - t0

    def _check_alive(self, name: str) -> bool:
        proc = self.procs[name]
        if not proc.alive():
            raise ProcessDied(f"{name} exited ({proc.popen.returncode}):\n{proc.tail()}")
        return True

    def install_chart_objects(self, objs: list[dict[str, Any]], namespace: str = NAMESPACE) -> None:
        """The chart's ServiceAccount and RBAC, as helm would create them."""
        self.api.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            exist_ok=True,
        )
        paths = {
            "ServiceAccount": f"/api/v1/namespaces/{namespace}/serviceaccounts",
            "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
            "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
            "CustomResourceDefinition": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        }
        for o in objs:
            if o["kind"] in paths and "helm.sh/hook" not in o["metadata"].get("annotations", {}):
                self.api.create(paths[o["kind"]], o, exist_ok=True)

    def start_hami_fast(
        self,
        serve_args: list[str],
        port: int,
        metrics_port: int,
        name: str = "hami-fast",
        pod_name: str = "",
        token: str = "",
        server: str = "",
    ) -> Proc:
        """`hami-fast serve` with the chart's flags; only addresses, TLS files and the kubeconfig change.
        `name` keys the process and its log; `pod_name` is its POD_NAME (default: this host's name)."""
        args = [
            a
            for a in serve_args
            if not a.startswith(("--http_bind", "--cert_file", "--key_file", "--metrics-bind-address"))
        ]
        kubeconfig = self.kubeconfig(name, token or self.sa_token, server)
        exe = shutil.which("hami-fast", path=str(Path(sys.executable).parent)) or shutil.which("hami-fast")
        cmd = [exe] if exe else [sys.executable, "-m", "hami_fast.cli"]
        # As in the chart's pod: POD_NAME is the hostname kube-scheduler puts first in its Lease identity.
        env = {**os.environ, "POD_NAME": pod_name or socket.gethostname(), "POD_NAMESPACE": NAMESPACE}
        proc = Proc(
            name,
            [
                *cmd,
                "serve",
                f"--http_bind=127.0.0.1:{port}",
                f"--cert_file={self.pki / 'hami-fast.crt'}",
                f"--key_file={self.pki / 'hami-fast.key'}",
                f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                f"--kubeconfig={kubeconfig}",
                *args,
            ],
            self.workdir / "logs" / f"{name}.log",
            env=env,
        ).start()
        self.procs[name] = proc
        self.wait_hami_fast(port, "/healthz", name=name)
        return proc

    def wait_hami_fast(self, port: int, path: str, timeout: float = 60, name: str = "hami-fast") -> None:
        """/healthz: serving; /readyz: caches synced and following the leader's Lease."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))

        def ok() -> bool:
            self._check_alive(name)
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=2) as resp:
                    return resp.status == 200
            except urllib.error.HTTPError as exc:
                exc.close()
                raise

        wait_for(f"hami-fast {path}", ok, timeout=timeout)

    def start_kube_scheduler(self, config_text: str, token: str | None = None, qps: int = 0, burst: int = 0) -> Proc:
        """kube-scheduler with this config; as the chart's ServiceAccount unless another token is given."""
        cfg = yaml.safe_load(config_text)
        cfg["clientConnection"] = {"kubeconfig": str(self.kubeconfig("kube-scheduler", token or self.sa_token))}
        if qps:
            cfg["clientConnection"].update(qps=qps, burst=burst or 2 * qps)
        path = self.workdir / "kube-scheduler-config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        proc = Proc(
            "kube-scheduler",
            [str(binaries_dir() / "kube-scheduler"), f"--config={path}", "--secure-port=0", "-v=4"],
            self.workdir / "logs" / "kube-scheduler.log",
        ).start()
        self.procs["kube-scheduler"] = proc
        return proc

    def start_controller_manager(self, controllers: str = "deployment,replicaset,disruption") -> Proc:
        """The Deployment and ReplicaSet controllers (workloads whose pods get replaced) and the
        disruption controller (a PodDisruptionBudget's status, which the eviction API reads)."""
        proc = Proc(
            "kube-controller-manager",
            [
                str(binaries_dir() / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig('admin', self.admin_token)}",
                f"--controllers={controllers}",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "-v=2",
            ],
            self.workdir / "logs" / "kube-controller-manager.log",
        ).start()
        self.procs["kube-controller-manager"] = proc
        return proc

    def start_descheduler(self, args: list[str], port: int, webhook_port: int, local_port: int) -> Proc:
        """`hami-fast descheduler` with the chart's flags; addresses, TLS files and kubeconfig changed."""
        changed = ("--http_bind", "--webhook-bind", "--cert_file", "--key_file", "--local-bind")
        keep = [a for a in args if not a.startswith(changed)]
        local = [f"--local-bind=127.0.0.1:{local_port}"] if any(a.startswith("--local-bind=") for a in args) else []
        exe = shutil.which("hami-fast", path=str(Path(sys.executable).parent)) or shutil.which("hami-fast")
        env = {**os.environ, "POD_NAME": "descheduler-e2e", "POD_NAMESPACE": NAMESPACE}
        proc = Proc(
            "hami-fast-descheduler",
            [
                exe or "hami-fast",
                "descheduler",
                f"--http_bind=127.0.0.1:{port}",
                f"--webhook-bind=127.0.0.1:{webhook_port}",
                f"--cert_file={self.pki / 'hami-fast.crt'}",
                f"--key_file={self.pki / 'hami-fast.key'}",
                f"--kubeconfig={self.kubeconfig('descheduler', self.descheduler_token)}",
                *local,
                *keep,
            ],
            self.workdir / "logs" / "descheduler.log",
            env=env,
        ).start()
        self.procs["hami-fast-descheduler"] = proc
        return proc

    def stop(self) -> None:
        """Every process this control plane started (replicas' too), the API server and etcd last."""
        first = ("kwok", "hami-scheduler", "hami-fast-descheduler", "kube-controller-manager", "kube-scheduler")
        last = ("kube-apiserver", "etcd")
        named = [n for n in first if n in self.procs]
        others = [n for n in self.procs if n not in first and n not in last]
        for name in [*named, *others, *(n for n in last if n in self.procs)]:
            self.procs[name].stop()


class ApiError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"{status}: {body[:2000]}")
        self.status = status
        self.body = body


class KubeApi:
    """A tiny JSON client for the test's own calls (admin token)."""

    def __init__(self, server: str, token: str, ca_file: str):
        self.server = server
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca_file)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": content_type,
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=30) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            with exc:
                raise ApiError(exc.code, exc.read().decode(errors="replace")) from None
        return json.loads(text) if text and text[0] in "{[" else text

    def get_raw(self, path: str) -> str:
        return self.request("GET", path)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def create(self, path: str, obj: dict[str, Any], exist_ok: bool = False) -> Any:
        try:
            return self.request("POST", path, obj)
        except ApiError as exc:
            if exist_ok and exc.status == 409:
                return None
            raise

    def patch(self, path: str, patch: dict[str, Any], kind: str = "merge") -> Any:
        ct = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json"}[kind]
        return self.request("PATCH", path, patch, content_type=ct)

    def delete(self, path: str) -> Any:
        try:
            return self.request("DELETE", path)
        except ApiError as exc:
            if exc.status != 404:
                raise


class Cluster:
    """The running control plane plus hami-fast, set up from the chart's rendered objects."""

    def __init__(self, cp: ControlPlane, objs):
        self.cp = cp
        self.api = cp.api
        self.objs = objs
        self.port = free_port()
        self.metrics_port = free_port()

    def chart(self, kind: str, name_suffix: str = ""):
        found = [o for o in self.objs if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)]
        assert len(found) == 1, (kind, name_suffix, [o["metadata"]["name"] for o in found])
        return found[0]

    def serve_args(self):
        dep = self.chart("Deployment", "-scheduler")
        (c,) = [c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == "vgpu-scheduler-extender"]
        return with_local_device_config(c["args"], self.objs, self.cp.workdir)

    def start_hami_fast(self, ready: bool = True):
        proc = self.cp.start_hami_fast(self.serve_args(), self.port, self.metrics_port)
        if ready:
            self.cp.wait_hami_fast(self.port, "/readyz")
        return proc

    def restart_hami_fast(self):
        self.cp.procs["hami-fast"].stop()
        return self.start_hami_fast()

    def ensure_controllers(self) -> None:
        """kube-controller-manager (Deployments, ReplicaSets, disruption budgets), started once."""
        if "kube-controller-manager" not in self.cp.procs:
            self.cp.start_controller_manager()

    # The descheduler.
    descheduler_port: int = 0  # the loopback listener (api.localPort): what kubectl port-forward reaches, no token
    descheduler_api_port: int = 0  # the API as the chart serves it: HTTPS, bearer tokens, TokenReview + SAR

    def ensure_descheduler(self) -> int:
        """The chart's descheduler (CRD, RBAC, pinning webhook registration, `hami-fast descheduler`)
        and kube-controller-manager for Deployments, started once per control plane; the port of its
        loopback listener (plain HTTP, no token: the tests read the map and /metrics there)."""
        if self.descheduler_port:
            return self.descheduler_port
        api, cp = self.api, self.cp
        objs = render_chart(DESCHEDULER_VALUES)
        cp.install_chart_objects(
            [o for o in objs if "descheduler" in o["metadata"]["name"] or o["kind"] == "CustomResourceDefinition"]
        )
        crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/hamipodplacements.scheduling.hami.placement.com"
        wait_for(
            "HamiPodPlacement CRD established",
            lambda: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in api.get(crd)["status"].get("conditions", [])
            ),
            timeout=30,
        )
        port, webhook_port, local_port = free_port(), free_port(), free_port()
        (mwc,) = [
            o for o in objs if o["kind"] == "MutatingWebhookConfiguration" and "descheduler" in o["metadata"]["name"]
        ]
        for wh in mwc["webhooks"]:
            wh["clientConfig"] = {
                "url": f"https://127.0.0.1:{webhook_port}/webhook",
                "caBundle": base64.b64encode(cp.ca_file.read_bytes()).decode(),
            }
        api.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", mwc)
        self._descheduler_ports = (port, webhook_port, local_port)
        self._start_descheduler_from(objs)
        self.ensure_controllers()
        self.descheduler_port, self.descheduler_api_port = local_port, port
        return local_port

    def _start_descheduler_from(self, objs: list[dict[str, Any]]) -> None:
        port, webhook_port, local_port = self._descheduler_ports
        (dep,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-descheduler")]
        (container,) = dep["spec"]["template"]["spec"]["containers"]
        args = with_local_device_config(container["args"], objs, self.cp.workdir)
        proc = self.cp.start_descheduler(args, port, webhook_port, local_port)

        def api_up():
            if not proc.alive():
                raise ProcessDied(f"descheduler died:\n{proc.tail(60)}")
            # As the chart serves it: HTTPS, and the admin's token reviewed by the real API server.
            status, body = self.descheduler_api("GET", "/api/v1/cluster-info", self.cp.admin_token, port=port)
            assert status == 200, (status, body)
            with urllib.request.urlopen(f"http://127.0.0.1:{local_port}/api/v1/cluster-info", timeout=5) as resp:
                return json.loads(resp.read())

        wait_for("descheduler API", api_up, timeout=60)

    def descheduler_api(
        self, method: str, path: str, token: str | None, body: bytes | None = None, port: int = 0
    ) -> tuple[int, dict[str, Any]]:
        """A call to the descheduler's authenticated HTTPS API: (status, JSON body)."""
        ctx = ssl.create_default_context(cafile=str(self.cp.ca_file))
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        url = f"https://127.0.0.1:{port or self.descheduler_api_port}{path}"
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, json.loads(exc.read() or b"{}")

    def restart_descheduler(self, values: dict[str, Any] | None = None) -> int:
        """The chart's descheduler again, rendered with these values (`{"descheduler.auto": {...}}`),
        on the same ports."""
        self.ensure_descheduler()
        self.cp.procs["hami-fast-descheduler"].stop()
        objs = render_chart({**DESCHEDULER_VALUES, **(values or {})})
        rbac = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
        # RBAC these values add (`descheduler.auto`'s record of moves); what exists already stays.
        self.cp.install_chart_objects([o for o in objs if o["kind"] in rbac and "descheduler" in o["metadata"]["name"]])
        self._start_descheduler_from(objs)
        return self.descheduler_port


def require_descheduler() -> None:
    """Skip where the descheduler's end-to-end tests cannot run (fail instead with HAMI_FAST_E2E_REQUIRE=1)."""
    import pytest

    why = descheduler_missing()
    if why and os.environ.get("HAMI_FAST_E2E_REQUIRE") == "1":
        pytest.fail(why)
    if why:
        pytest.skip(why)


def descheduler_missing() -> str | None:
    """Why the descheduler's end-to-end tests cannot run here, or None."""
    exe = shutil.which("hami-fast", path=str(Path(sys.executable).parent)) or shutil.which("hami-fast")
    if not exe:
        return "hami-fast is not installed"
    if subprocess.run([exe, "descheduler", "--help"], capture_output=True, text=True).returncode != 0:
        return "`hami-fast descheduler` does not exist"
    if not (binaries_dir() / "kube-controller-manager").exists():
        return "kube-controller-manager not built (BUILD_CONTROLLER_MANAGER=1 scripts/build-control-plane.sh): Deployments need it"
    return None


@contextlib.contextmanager
def running_cluster(workdir: Path):
    """The whole setup: control plane, chart RBAC and webhook, hami-fast, kube-scheduler."""
    t0 = time.monotonic()
    objs = render_chart()
    cp = ControlPlane(workdir, extra_users=dict(API_USERS))
    try:
        cp.start()
        c = Cluster(cp, objs)
        cp.install_chart_objects(objs)
        # The chart's webhook registration, pointed at this hami-fast over loopback TLS.
        mwc = c.chart("MutatingWebhookConfiguration")
        for wh in mwc["webhooks"]:
            wh["clientConfig"] = {
                "url": f"https://127.0.0.1:{c.port}/webhook",
                "caBundle": base64.b64encode(cp.ca_file.read_bytes()).decode(),
            }
        cp.api.create("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", mwc)
        c.start_hami_fast(ready=False)  # ready once kube-scheduler holds the Lease it follows
        # The chart's KubeSchedulerConfiguration, with the extender at this hami-fast's port.
        text = c.chart("ConfigMap", "-scheduler")["data"]["config.yaml"]
        cfg_url = f"https://127.0.0.1:{c.port}"
        assert "https://127.0.0.1:9443" in text
        cp.start_kube_scheduler(text.replace("https://127.0.0.1:9443", cfg_url))
        # kube-scheduler holds the chart's Lease (leaderElect: true) once it runs.
        wait_for(
            "kube-scheduler's Lease",
            lambda: (
                cp._check_alive("kube-scheduler")
                and cp.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/hami-scheduler")[
                    "spec"
                ].get("holderIdentity")
            ),
            timeout=90,
        )
        cp.wait_hami_fast(c.port, "/readyz")
        cp.timings["setup_s"] = time.monotonic() - t0
        yield c
    finally:
        cp.stop()
        timings = ", ".join(f"{k}={v:.1f}" for k, v in cp.timings.items())
        print(f"\n[e2e] control plane timings: {timings}; logs in {workdir / 'logs'}")
