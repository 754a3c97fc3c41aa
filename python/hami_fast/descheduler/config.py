"""One typed configuration for `hami-fast descheduler`, from flags, environment or a file.

Precedence, as `hami_fast.config` for `serve`: command-line flag > environment
(`HAMI_FAST_DESCHEDULER_<OPTION>`, the option's name in capitals) > config file (`--config`, a YAML
or JSON mapping keyed by option name, dashes or underscores) > default. Each default is written
once, on its field; the flag spellings follow the Helm chart
(deploy/helm/hami-fast/templates/descheduler/deployment.yaml). A bad value, wherever it came
from, is one ValueError naming the option.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from hami_fast import _native, device_config
from hami_fast.argtypes import non_negative_float, non_negative_int, parse_bool, positive_int
from hami_fast.config import format_duration, parse_duration
from hami_fast.descheduler.access import AUTH_MODES

ENV_PREFIX = "HAMI_FAST_DESCHEDULER_"
DEFAULT_SELECTOR = "hami-fast.io/movable=true"
DEFAULT_LEASE_NAMESPACE = "kube-system"  # when POD_NAMESPACE is not set either
GIVEN = "_given_options"  # the namespace attribute naming the options given on the command line
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")


def duration(text: str) -> float:
    """Seconds, or a Go duration such as `5m`, `90s`, `1h30m` (as the Helm chart writes them)."""
    seconds = parse_duration(text)
    if seconds < 0:
        raise ValueError(f"want a duration of at least 0, got {text!r}")
    return seconds


duration.__name__ = "a duration"


def label_selector(text: str) -> str:
    try:
        return _native.check_label_selector(text)
    except _native.EngineError as exc:
        raise ValueError(str(exc)) from None


label_selector.__name__ = "a label selector"


def boolean(text: str) -> bool:
    return parse_bool(text)


boolean.__name__ = "a boolean"


def option(
    default: Any,
    help: str,
    *,
    parse: Callable[[str], Any] = str,
    flags: tuple[str, ...] = (),
    choices: tuple[str, ...] = (),
) -> Any:
    """A field of the configuration: its default, its flags (the first is the canonical one;
    none given: `--name-with-dashes`), how a text value is read, and the values it may take."""
    return field(default=default, metadata={"help": help, "parse": parse, "flags": flags, "choices": choices})


@dataclass(frozen=True)
class DeschedulerConfig:
    bind: str = option(
        "127.0.0.1:8083",
        "REST API and GPU map address (in a cluster 0.0.0.0:8083); serves /webhook too unless --webhook-bind is set",
        flags=("--bind", "--http_bind", "--http-bind"),
    )
    webhook_bind: str = option("", "separate listener for the pinning webhook alone (TLS with --cert-file/--key-file)")
    api_auth: str = option(
        "auto",
        "who may use the API: kubernetes = a bearer token checked with TokenReview and SubjectAccessReview;"
        " none = anyone who reaches it; auto = none on a loopback --bind, else kubernetes",
        choices=AUTH_MODES,
    )
    api_auth_cache_ttl: float = option(
        10.0,
        "how long a TokenReview's and a SubjectAccessReview's answer is reused (as kube-apiserver's)",
        parse=duration,
    )
    api_tls: bool = option(
        False, "serve the API over TLS with --cert-file/--key-file (always so without --webhook-bind)", parse=boolean
    )
    local_bind: str = option(
        "",
        "a second API listener without authentication, loopback only (in a pod: reached through"
        " kubectl port-forward, which the API server authorises); off when empty",
    )
    kubeconfig: str = option("", "kubeconfig path (else KUBECONFIG, ~/.kube/config, in-cluster)")
    snapshot: str = option("", "serve the read-only API on a snapshot file instead of a cluster")
    scheduler_name: str = option("hami-scheduler", "pods pinned by the webhook must use this scheduler")
    leader_elect: bool = option(
        False, "lead through the descheduler's own Lease; followers serve the API read-only", parse=boolean
    )
    lease_name: str = option(
        "hami-gpu-descheduler", "the Lease's name", flags=("--lease-name", "--leader-elect-resource-name")
    )
    lease_namespace: str = option(
        "",
        f"the Lease's namespace, also the automatic mode's ConfigMap's (empty: POD_NAMESPACE, else {DEFAULT_LEASE_NAMESPACE})",
        flags=("--lease-namespace", "--leader-elect-resource-namespace"),
    )
    eviction_mode: str = option(
        "Eviction", "only the Eviction API: pods are never deleted directly", choices=("Eviction",)
    )
    dry_run: bool = option(False, "validate placements, never evict", parse=boolean)
    eviction_timeout: float = option(
        300.0, "how long a disruption budget may block an eviction (seconds or a Go duration)", parse=duration
    )
    replacement_timeout: float = option(600.0, "how long to wait for the evicted pod's replacement", parse=duration)
    bind_timeout: float = option(900.0, "how long the replacement may take to bind", parse=duration)
    period: float = option(
        30.0,
        "resync: every placement is reconciled at least this often; watch events act at once",
        parse=duration,
        flags=("--period", "--resync-period"),
    )
    placement_ttl: float = option(
        3600.0,
        "a Pending placement no pod consumed fails as Expired this long after creation; 0: never",
        parse=duration,
    )
    max_in_flight: int = option(
        2,
        "evictions whose replacement has not completed yet, cluster-wide (one per workload always)",
        parse=non_negative_int,
    )
    cert_file: str = option(
        "", "TLS certificate (for the webhook listener, else the API)", flags=("--cert-file", "--cert_file")
    )
    key_file: str = option("", "TLS key", flags=("--key-file", "--key_file"))
    auto: bool = option(
        False,
        "unblock pods Pending for lack of vGPU resources: plan --for them (oldest first) and apply",
        parse=boolean,
    )
    max_moves_per_hour: int = option(6, "--auto: most evictions in any hour", parse=non_negative_int)
    max_moves_per_pending_pod: int = option(4, "--auto: most moves for one pod", parse=non_negative_int)
    selector: str = option(
        DEFAULT_SELECTOR, "--auto: label selector of the pods it may move ('' = none by label)", parse=label_selector
    )
    namespace_selector: str = option(
        "", "--auto: label selector of namespaces whose pods it may move", parse=label_selector
    )
    auto_period: float = option(30.0, "--auto: time between passes", parse=duration)
    max_concurrent_moves: int = option(
        2,
        "--auto: pending pods whose moves run at once, in the background (one move per pod at a time)",
        parse=positive_int,
    )
    moves_configmap: str = option(
        "hami-gpu-descheduler-auto-moves",
        "--auto: ConfigMap (in --lease-namespace) recording the hour's moves for --max-moves-per-hour",
    )
    reservation_ttl: float = option(
        600.0, "--auto: how long freed GPUs stay held for the pending pod after its last move", parse=duration
    )
    kube_qps: float = option(20.0, "API client queries per second (0: unlimited)", parse=non_negative_float)
    kube_burst: int = option(40, "API client burst", parse=non_negative_int)
    device_config_file: str = option("", device_config.FILE_HELP)
    enable_ascend: bool = option(False, "schedule Ascend devices, as HAMi's --enable-ascend", parse=boolean)
    enable_iluvatar: bool = option(False, "schedule Iluvatar devices, as HAMi's --enable-iluvatar", parse=boolean)
    log_format: str = option("json", "json (one object per line) or text", choices=LOG_FORMATS)
    log_level: str = option("info", "the lowest level logged", choices=LOG_LEVELS)
    config: str = option("", "config file (YAML/JSON) with any of these options")
    devices: device_config.DeviceSettings = field(
        default_factory=device_config.DeviceSettings, metadata={"internal": True}
    )

    def engine_config(self) -> bytes:
        """The engine's settings: the device config file's, with the vendor switches."""
        return self.devices.engine_config()


DEFAULTS = DeschedulerConfig()


def option_fields() -> list[dataclasses.Field[Any]]:
    return [f for f in fields(DeschedulerConfig) if not f.metadata.get("internal")]


def flags_of(f: dataclasses.Field[Any]) -> tuple[str, ...]:
    return f.metadata["flags"] or ("--" + f.name.replace("_", "-"),)


def flag_of(f: dataclasses.Field[Any]) -> str:
    return flags_of(f)[0]


class _Given(argparse.Action):
    """Stores the value and notes the option as given, so a flag left out yields to env and file."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, GIVEN, getattr(namespace, GIVEN, frozenset()) | {self.dest})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per option; the parsed namespace holds typed values (defaults where not given)."""
    parser.set_defaults(**{GIVEN: frozenset()})
    for f in option_fields():
        parse = _argparse_type(f)
        extra: dict[str, Any] = {"nargs": "?", "const": True} if f.type in ("bool", bool) else {}
        choices = f.metadata["choices"] or None
        parser.add_argument(
            *flags_of(f),
            dest=f.name,
            action=_Given,
            type=parse,
            choices=choices,
            default=f.default,
            help=_help(f),
            **extra,
        )


def _argparse_type(f: dataclasses.Field[Any]) -> Callable[[str], Any]:
    """The field's reader with its ValueError as argparse's one-line usage error."""
    read = f.metadata["parse"]

    def parse(text: str) -> Any:
        try:
            return read(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = getattr(read, "__name__", "value")
    return parse


def _help(f: dataclasses.Field[Any]) -> str:
    default = f.default
    if isinstance(default, float) and f.metadata["parse"] is duration:
        shown = format_duration(default)
    elif default == "":
        shown = "none"
    else:
        shown = str(default).lower() if isinstance(default, bool) else str(default)
    return f"{f.metadata['help']} (default {shown})".replace("%", "%%")


def load(args: argparse.Namespace | None = None, environ: Mapping[str, str] | None = None) -> DeschedulerConfig:
    """Defaults < config file < environment < flags given; the device config file read and checked.
    ValueError (one line, naming the option and where its value came from) on any bad value."""
    environ = os.environ if environ is None else environ
    given = _given(args)
    known = {f.name: f for f in option_fields()}
    values: dict[str, tuple[Any, str]] = {}
    config_path = str(given.get("config") or environ.get(ENV_PREFIX + "CONFIG", ""))
    if config_path:
        values.update({name: (value, f"config file {config_path}") for name, value in read_file(config_path).items()})
    for name in known:
        if ENV_PREFIX + name.upper() in environ:
            values[name] = (environ[ENV_PREFIX + name.upper()], ENV_PREFIX + name.upper())
    kwargs = {name: _read(known[name], value, source) for name, (value, source) in values.items() if name not in given}
    kwargs.update(given)
    if not kwargs.get("lease_namespace"):
        kwargs["lease_namespace"] = environ.get("POD_NAMESPACE") or DEFAULT_LEASE_NAMESPACE
    config = DeschedulerConfig(**kwargs)
    devices = device_config.settings(config.device_config_file, config.enable_ascend, config.enable_iluvatar)
    return dataclasses.replace(config, devices=devices)


def _given(args: argparse.Namespace | None) -> dict[str, Any]:
    """The options given on the command line, already typed by the parser."""
    if args is None:
        return {}
    names: frozenset[str] = getattr(args, GIVEN, frozenset())
    return {name: getattr(args, name) for name in names}


def read_file(path: str) -> dict[str, Any]:
    """The config file as {option name: value}; option names may use dashes or a flag's other spelling."""
    try:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ValueError(f"config file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"config file {path}: {' '.join(str(exc).split())}") from exc
    if not isinstance(loaded, dict):
        raise ValueError(f"config file {path}: expected a mapping of option: value")
    spellings = {flag.lstrip("-").replace("-", "_"): f.name for f in option_fields() for flag in (*flags_of(f), f.name)}
    unknown = sorted(str(key) for key in loaded if str(key).replace("-", "_") not in spellings)
    if unknown:
        raise ValueError(f"config file {path}: unknown option(s) {', '.join(unknown)}")
    return {spellings[str(key).replace("-", "_")]: value for key, value in loaded.items()}


def _read(f: dataclasses.Field[Any], value: Any, source: str) -> Any:
    """A value from the environment or the file, read as its flag's would be."""
    try:
        typed = _typed(f, value)
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise ValueError(f"option {flag_of(f)} ({source}): {exc}") from None
    choices = f.metadata["choices"]
    if choices and typed not in choices:
        raise ValueError(f"option {flag_of(f)} ({source}): {typed!r} is not one of {', '.join(choices)}")
    return typed


def _typed(f: dataclasses.Field[Any], value: Any) -> Any:
    read = f.metadata["parse"]
    if isinstance(value, bool):  # YAML's true/false
        if f.type not in ("bool", bool):
            raise ValueError(f"want {'text' if read is str else read.__name__}, got {value!r}")
        return value
    if isinstance(value, (dict, list)):
        raise ValueError(f"want a single value, got {value!r}")
    return read(str(value))
