"""The floor for the HTTP ratio: Granian embedded with the product's settings (RSGI, auto HTTP, one runtime
thread, logging off) and an app that reads the whole body and answers bytes fixed in advance.

`python bench/trivial_server.py PORT ANSWERS_FILE`: ANSWERS_FILE is a JSON list of answers; the i-th
POST gets the i-th answer (in turn, from the first again after the last), any other request the first.
"""

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server
from hami_fast.config import Config

HEADERS = [("content-type", "application/json")]


class Trivial:
    def __init__(self, answers: list[bytes]) -> None:
        self.answers = answers
        self.posts = 0

    def __rsgi_init__(self, loop: Any) -> None:
        pass

    def __rsgi_del__(self, loop: Any) -> None:
        pass

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        await protocol()
        answer = self.answers[0]
        if scope.method == "POST":
            answer = self.answers[self.posts % len(self.answers)]
            self.posts += 1
        protocol.response_bytes(200, HEADERS, answer)


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


async def main(port: int, answers: list[bytes]) -> None:
    await serve(Trivial(answers), port)


if __name__ == "__main__":
    answers = [a.encode() for a in orjson.loads(Path(sys.argv[2]).read_bytes())]
    asyncio.run(main(int(sys.argv[1]), answers))
