"""Starting a Granian listener: return only once it accepts connections, or fail with one clear line.

One process per port. Granian binds with SO_REUSEPORT (each worker has its own socket), so the
kernel would let a second hami-fast listen on a port the first one serves and split the requests
between two schedulers with separate caches. Before each start this process therefore

1. claims the port: binds an abstract unix socket named after the port number (atomic, private to
   the network namespace like the port, gone when the process dies), so of two hami-fast processes
   starting at once exactly one gets it;
2. probes the address with a plain bind, without SO_REUSEPORT, which fails while any other socket
   (another program, an older hami-fast) holds it.

The claim is held for as long as the listener runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import sys
import time

from granian.server.embed import Server

from hami_fast.config import split_address


class ListenError(ValueError):
    """The address cannot be listened on (in use, not local, no permission)."""


_started = False


def granian_started() -> bool:
    """Whether this process has run a Granian listener (see `hami_fast.cli.main`)."""
    return _started


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return re.sub(r" \(os error \d+\)", "", text[0] if text else type(exc).__name__).lower()


def _where(address: str, flag: str) -> str:
    return f"{address} ({flag})" if flag else address


def _os_reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def probe(address: str, flag: str = "") -> None:
    """Raise ListenError unless a socket without SO_REUSEPORT could bind `address` now."""
    host, port = split_address(address, "0.0.0.0")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed listener's TIME_WAITs are no owner
            s.bind((host, port))
    except socket.gaierror as exc:
        raise ListenError(f"cannot listen on {_where(address, flag)}: {str(exc.strerror).lower()}") from None
    except OSError as exc:
        raise ListenError(f"cannot listen on {_where(address, flag)}: {_os_reason(exc)}") from None


def claim(address: str, flag: str = "") -> socket.socket | None:
    """This process's claim on the port of `address` (None: port 0, or not Linux); ListenError if taken."""
    _, port = split_address(address, "0.0.0.0")
    if port == 0 or not sys.platform.startswith("linux"):
        return None
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        holder.bind(f"\0hami-fast/tcp-port/{port}")
    except OSError as exc:
        holder.close()
        raise ListenError(f"cannot listen on {_where(address, flag)}: {_os_reason(exc)}") from None
    return holder


async def _accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1" if host in ("0.0.0.0", "::", "") else host, port)
    except OSError:
        return False
    writer.close()
    return True


async def start_listening(server: Server, address: str, timeout: float = 15.0, flag: str = "") -> asyncio.Task[None]:
    """Start `server` on `address` (named by `flag` in errors) and wait until it accepts connections.

    Granian binds in its startup step, runs the startup hooks, then spawns the worker that accepts;
    a bind failure ends `serve()` with a RuntimeError whose first line is the OS error. The port's
    claim is released when the returned task ends.
    """
    global _started
    holder = claim(address, flag)
    try:
        probe(address, flag)
        _started = True
        task = await _start(server, address, timeout, flag)
    except BaseException:
        if holder is not None:
            holder.close()
        raise
    if holder is not None:
        task.add_done_callback(lambda _: holder.close())
    return task


async def _start(server: Server, address: str, timeout: float, flag: str) -> asyncio.Task[None]:
    host, port = split_address(address, "0.0.0.0")
    bound = asyncio.Event()
    server.on_startup(bound.set)
    task = asyncio.create_task(server.serve())
    waiter = asyncio.create_task(bound.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED, timeout=timeout)
    waiter.cancel()
    deadline = time.monotonic() + timeout
    while not task.done() and bound.is_set() and time.monotonic() < deadline:
        if await _accepts(host, port):
            return task
        await asyncio.sleep(0.01)
    error = task.exception() if task.done() else None
    if error is not None:
        raise ListenError(f"cannot listen on {_where(address, flag)}: {_first_line(error)}") from None
    server.stop()
    with contextlib.suppress(Exception):
        await asyncio.gather(task, return_exceptions=True)
    raise ListenError(f"cannot listen on {_where(address, flag)}: the listener did not start within {timeout:.0f} s")
