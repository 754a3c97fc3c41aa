"""Starting a Granian listener: return only once it accepts connections, or fail with one clear line."""

from __future__ import annotations

import asyncio
import re
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


async def _accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1" if host in ("0.0.0.0", "::", "") else host, port)
    except OSError:
        return False
    writer.close()
    return True


async def start_listening(server: Server, address: str, timeout: float = 15.0) -> asyncio.Task[None]:
    """Start `server` and wait until `address` accepts connections.

    Granian binds in its startup step, runs the startup hooks, then spawns the worker that accepts;
    a bind failure ends `serve()` with a RuntimeError whose first line is the OS error.
    """
    global _started
    _started = True
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
        raise ListenError(f"cannot listen on {address}: {_first_line(error)}") from None
    server.stop()
    await asyncio.gather(task, return_exceptions=True)
    raise ListenError(f"cannot listen on {address}: the listener did not start within {timeout:.0f} s")
