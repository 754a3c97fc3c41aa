"""One process per port: a second listener on a busy port is one line naming the flag and the address,
exit 2, and the port keeps exactly one LISTEN socket (Granian binds with SO_REUSEPORT, which
would otherwise let both processes listen and split the requests). Real processes, real ports."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HAMI_FAST = str(Path(sys.executable).parent / "hami-fast")
SNAPSHOT = str(ROOT / "examples" / "snapshot.yaml")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listeners(port: int) -> int:
    """LISTEN sockets on `port` in this network namespace, any address (what `ss -ltn` lists)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            count += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port
    return count


def serve_argv(port: int) -> list[str]:
    return ["serve", "--demo", "--http_bind", f"127.0.0.1:{port}", "--metrics-bind-address", ""]


def deschedule_argv(*extra: str) -> list[str]:
    return ["descheduler", "--snapshot", SNAPSHOT, *extra]


class Running:
    """A hami-fast command that serves until stopped."""

    def __init__(self, argv: list[str], ready: str) -> None:
        self.proc = subprocess.Popen([HAMI_FAST, *argv], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if ready in line:
                return
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"{argv} exited {self.proc.returncode} before serving")
        raise AssertionError(f"{argv} did not serve within 60 s")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.proc.stderr.close()


@pytest.fixture
def running():
    started: list[Running] = []

    def start(argv: list[str], ready: str = "serving") -> Running:
        started.append(Running(argv, ready))
        return started[-1]

    yield start
    for r in started:
        r.stop()


def refused(argv: list[str]) -> str:
    """The one line a refused command prints (it must exit 2)."""
    proc = subprocess.run([HAMI_FAST, *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def answers(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return s.recv(64).startswith(b"HTTP/1.1 200")


def test_a_second_serve_on_the_same_http_bind_exits_2_and_the_first_keeps_the_port(running):
    port = free_port()
    running(serve_argv(port))
    assert listeners(port) == 1
    assert refused(serve_argv(port)) == (
        f"hami-fast serve: cannot listen on 127.0.0.1:{port} (--http_bind): address already in use"
    )
    assert listeners(port) == 1 and answers(port)


def test_two_serves_started_at_once_leave_one_listener():
    """Both pass the probe before either binds; the port's claim lets exactly one through."""
    port = free_port()
    procs = [
        subprocess.Popen([HAMI_FAST, *serve_argv(port)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and all(p.poll() is None for p in procs):
            time.sleep(0.05)
        (loser,) = [p for p in procs if p.poll() is not None]
        (winner,) = [p for p in procs if p is not loser]
        assert loser.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port} (--http_bind)" in loser.stderr.read()
        while time.monotonic() < deadline and listeners(port) == 0 and winner.poll() is None:
            time.sleep(0.05)
        assert winner.poll() is None and listeners(port) == 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
            p.wait(30)
            p.stderr.close()


def test_the_ports_claim_is_what_stops_a_racing_second_process():
    """The window both racing processes pass the probe in is too short to hit at will; hold the claim
    a listener takes first (here in the test process) and the port itself free: serve is refused."""
    from hami_fast.server.listen import claim

    port = free_port()
    holder = claim(f"127.0.0.1:{port}")
    try:
        assert refused(serve_argv(port)).endswith(f"127.0.0.1:{port} (--http_bind): address already in use")
        assert listeners(port) == 0
    finally:
        holder.close()
    running = Running(serve_argv(port), "serving")  # the claim gone, the port is usable again
    try:
        assert listeners(port) == 1
    finally:
        running.stop()


def test_a_foreign_reuseport_listener_is_refused_too():
    """Another program listening with SO_REUSEPORT (as Granian does) has no claim; the plain probe finds it."""
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert refused(serve_argv(port)).endswith(f"127.0.0.1:{port} (--http_bind): address already in use")
        assert listeners(port) == 1


@pytest.mark.parametrize("flag", ["--bind", "--webhook-bind", "--local-bind"])
def test_every_descheduler_listener_refuses_a_busy_port(running, flag):
    busy = free_port()
    running(serve_argv(busy))
    ports = {f: free_port() for f in ("--bind", "--webhook-bind", "--local-bind")} | {flag: busy}
    argv = deschedule_argv(*(f"{f}=127.0.0.1:{p}" for f, p in ports.items()))
    assert refused(argv) == f"hami-fast descheduler: cannot listen on 127.0.0.1:{busy} ({flag}): address already in use"
    assert listeners(busy) == 1
    assert all(listeners(p) == 0 for f, p in ports.items() if f != flag), "nothing else was left listening"


def test_a_second_descheduler_on_the_same_port_exits_2(running):
    port = free_port()
    running(deschedule_argv("--bind", f"127.0.0.1:{port}"), ready="descheduler API on")
    assert refused(deschedule_argv("--bind", f"127.0.0.1:{port}")).endswith(
        f"127.0.0.1:{port} (--bind): address already in use"
    )
    assert listeners(port) == 1 and answers(port)


def test_serve_refuses_the_descheduler_port_and_a_busy_metrics_port(running):
    port = free_port()
    running(deschedule_argv("--bind", f"127.0.0.1:{port}"), ready="descheduler API on")
    assert refused(serve_argv(port)).endswith(f"127.0.0.1:{port} (--http_bind): address already in use")
    metrics = ["serve", "--demo", "--http_bind", "127.0.0.1:0", "--metrics-bind-address", f"127.0.0.1:{port}"]
    assert f"cannot listen on 127.0.0.1:{port} (--metrics-bind-address)" in refused(metrics)
    assert listeners(port) == 1


def test_one_descheduler_cannot_use_one_port_twice():
    port = free_port()
    line = refused(deschedule_argv("--bind", f"127.0.0.1:{port}", "--webhook-bind", f"127.0.0.1:{port}"))
    assert line.endswith(
        f"--webhook-bind 127.0.0.1:{port}: port {port} is --bind's already; each listener needs its own"
    )
