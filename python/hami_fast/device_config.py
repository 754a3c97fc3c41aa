"""HAMi's device config file and vendor switches, as every command takes them.

`--device-config-file` is the file HAMi's scheduler binary reads (its chart mounts the
`hami-scheduler-device` ConfigMap); `--enable-ascend` and `--enable-iluvatar` are HAMi's switches.
The engine parses and checks the file; this module only reads it and carries the result.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from hami_fast import _native
from hami_fast.argtypes import parse_bool

FILE_HELP = (
    "HAMi's device config file (the hami-scheduler-device ConfigMap's device-config.yaml): resource "
    "names, memoryFactor, defaults and every vendor's section. Without it, HAMi's chart default"
)


@dataclass(frozen=True)
class DeviceSettings:
    """The checked device config (None: HAMi's chart default) and HAMi's vendor switches."""

    config: dict[str, Any] | None = None
    enable_ascend: bool = False
    enable_iluvatar: bool = False

    def engine_fields(self) -> dict[str, Any]:
        """The engine config's share of these settings."""
        fields: dict[str, Any] = {
            "vendors": {"enable_ascend": self.enable_ascend, "enable_iluvatar": self.enable_iluvatar}
        }
        if self.config is not None:
            fields["device_config"] = self.config
        return fields

    def engine_config(self) -> bytes:
        """An engine config with only these settings (the rest at their defaults)."""
        return orjson.dumps(self.engine_fields())


def read(path: str) -> dict[str, Any]:
    """The file, checked by the engine. ValueError names the file (and the field) otherwise."""
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"device config file {path}: {exc.strerror or exc}") from exc
    return parse(text, path)


def parse(text: bytes, source: str) -> dict[str, Any]:
    """The file's text, checked by the engine; `source` names it in the one-line error."""
    try:
        return orjson.loads(_native.load_device_config(text, source))
    except _native.EngineError as exc:
        raise ValueError(f"device config {exc}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The three flags, for commands that do not take serve's whole configuration."""
    parser.add_argument("--device-config-file", default="", metavar="FILE", help=FILE_HELP)
    for vendor in ("ascend", "iluvatar"):
        parser.add_argument(
            f"--enable-{vendor}",
            nargs="?",
            const="true",
            default="false",
            metavar="BOOL",
            help=f"schedule {vendor.capitalize()} devices, as HAMi's --enable-{vendor} (default false)",
        )


def settings(path: str, enable_ascend: bool, enable_iluvatar: bool) -> DeviceSettings:
    """The file at `path` (none: HAMi's chart default) read and checked, with the switches."""
    return DeviceSettings(
        config=read(path) if path else None, enable_ascend=enable_ascend, enable_iluvatar=enable_iluvatar
    )


def from_args(args: argparse.Namespace) -> DeviceSettings:
    """The settings the flags of :func:`add_arguments` name."""
    return settings(
        getattr(args, "device_config_file", "") or "",
        parse_bool(str(getattr(args, "enable_ascend", "false")), "--enable-ascend"),
        parse_bool(str(getattr(args, "enable_iluvatar", "false")), "--enable-iluvatar"),
    )
