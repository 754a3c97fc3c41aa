"""The floor for the HTTP ratio: Granian embedded with the product's settings (RSGI, auto HTTP, one runtime
thread, logging off) and an app that reads the whole body and answers fixed bytes.

`python bench/trivial_server.py PORT ANSWER_FILE`: every request gets ANSWER_FILE's bytes as JSON.
"""

import asyncio
import sys
from pathlib import Path
from typing import Any

from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server
from hami_fast.config import Config

HEADERS = [("content-type", "application/json")]


class Trivial:
    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def __rsgi_init__(self, loop: Any) -> None:
        pass

    def __rsgi_del__(self, loop: Any) -> None:
        pass

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        await protocol()
        protocol.response_bytes(200, HEADERS, self.answer)


async def serve(app: Any, port: int) -> None:
    """Serve `app` on 127.0.0.1:`port` with the product's Granian settings (also `tools/variant_server.py`)."""
    defaults = Config()
    server = Server(
        app,
        address="127.0.0.1",
        port=port,
        interface=Interfaces.RSGI,
        http=HTTPModes(defaults.http_mode),
        runtime_threads=defaults.runtime_threads,
        log_enabled=False,
    )
    await server.serve()


async def main(port: int, answer: bytes) -> None:
    await serve(Trivial(answer), port)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), Path(sys.argv[2]).read_bytes()))
