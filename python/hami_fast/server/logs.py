"""Structured logs: one JSON object per line, pod and node fields named as HAMi names them."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """`2026-12-01T09:00:00.123Z info hami_fast.serve serving address=http://...`: the same fields as JSON."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        extra = " ".join(f"{k}={v}" for k, v in record.__dict__.items() if k not in _STANDARD)
        line = f"{ts} {record.levelname.lower()} {record.name} {record.getMessage()}" + (f" {extra}" if extra else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


FORMATS = {"json": JsonFormatter, "text": TextFormatter}


def add_arguments(parser: Any) -> None:
    """--log-format and --log-level for commands outside `serve`'s Config (the descheduler)."""
    parser.add_argument("--log-format", choices=sorted(FORMATS), default="json", help="json (default) or text")
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], default="info", help="default info"
    )


def setup(level: str = "info", fmt: str = "json") -> None:
    """One log format for every long-running command: JSON lines by default, `text` when asked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FORMATS[fmt]())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("_granian", "granian", "granian.access", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
