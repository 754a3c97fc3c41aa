"""One typed configuration for `hami-fast serve`: HAMi's flag names and defaults, from flags, environment or a file.

Precedence: command-line flag > environment (`HAMI_FAST_<FLAG>`, dashes as underscores) > config file
(YAML or JSON mapping keyed by flag name without dashes) > default.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson
import yaml

from hami_fast import device_config
from hami_fast.argtypes import parse_bool


def parse_duration(text: str) -> float:
    """Go-style durations: `5m`, `28s`, `1m30s`, `500ms`, or plain seconds."""
    text = str(text).strip()
    try:
        return float(text)
    except ValueError:
        pass
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, number = 0.0, ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            number += ch
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else ch
        if unit not in units or not number:
            raise ValueError(f"invalid duration {text!r} (use e.g. 30s, 5m, 1m30s)")
        total += float(number) * units[unit]
        number = ""
        i += len(unit)
    if number:
        raise ValueError(f"invalid duration {text!r}: number without unit")
    return total


def format_duration(seconds: float) -> str:
    """Seconds as Go prints a time.Duration: 300 -> 5m0s, 28 -> 28s, 0.5 -> 500ms, 5400 -> 1h30m0s."""
    if seconds == 0:
        return "0s"
    if 0 < abs(seconds) < 1:
        return f"{seconds * 1000:g}ms"
    sign, rest = ("-" if seconds < 0 else ""), abs(seconds)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:g}s"
    if hours or minutes:
        text = f"{int(minutes)}m{text}"
    if hours:
        text = f"{int(hours)}h{text}"
    return sign + text


@dataclass
class Config:
    http_bind: str = field(
        default="127.0.0.1:8080", metadata={"flag": "--http_bind", "help": "address of the extender and webhook"}
    )
    cert_file: str = field(
        default="", metadata={"flag": "--cert_file", "help": "TLS certificate (rotations are picked up)"}
    )
    key_file: str = field(default="", metadata={"flag": "--key_file", "help": "TLS key"})
    scheduler_name: str = field(
        default="hami-scheduler", metadata={"help": "scheduler name the webhook sets on vGPU pods"}
    )
    node_scheduler_policy: str = field(
        default="binpack", metadata={"help": "node scheduler policy (docs/policies.md)", "policy": "node"}
    )
    gpu_scheduler_policy: str = field(
        default="spread",
        metadata={
            "help": "spread, binpack, topology-aware, mutex, numa or a chain such as numa,binpack",
            "policy": "gpu",
        },
    )
    fgd_target_workload: str = field(
        default="",
        metadata={
            "help": "FGD's target workload, a JSON file of [cpu_milli, per-GPU milli, GPU count, models 'A|B', share] "
            "rows, as the trace replay gives it (default: learned from the recent placements)"
        },
    )
    metrics_bind_address: str = field(default=":9395", metadata={"help": "Prometheus /metrics address ('' disables)"})
    node_label_selector: str = field(default="", metadata={"help": "k=v,k=v: only these nodes are considered"})
    kube_qps: float = field(default=5.0, metadata={"help": "API client queries per second"})
    kube_burst: int = field(default=10, metadata={"help": "API client burst"})
    kube_timeout: float = field(
        default=0.0, metadata={"help": "API request timeout in seconds (0: 30 s)", "duration": True}
    )
    node_lock_timeout: float = field(default=300.0, metadata={"help": "node lock expiry (e.g. 5m)", "duration": True})
    node_lock_retry_timeout: float = field(
        default=28.0, metadata={"help": "PodGroup lock retry budget", "duration": True}
    )
    bind_wait_timeout: float = field(
        default=25.0,
        metadata={
            "help": "how long a bind waits its turn for a held node lock before failing as HAMi does "
            "(0: fail at once); keep below kube-scheduler's extender httpTimeout",
            "duration": True,
        },
    )
    bind_timeout: float = field(
        default=30.0,
        metadata={
            "help": "kube-scheduler's extender httpTimeout: a Bind's API writes stop retrying in time "
            "to answer within it",
            "duration": True,
        },
    )
    bind_workers: int = field(
        default=64, metadata={"help": "binds run at once (each waits on the API server, not the CPU)"}
    )
    allocation_write: str = field(
        default="binding",
        metadata={
            "help": "when Filter's allocation annotations reach the pod. bind: one pod patch at Bind with "
            "bind-phase, under the node lock and before the binding (Filter answers without a write; a Bind "
            "for a pod this process holds no allocation for is refused). binding: as bind, but carried by the "
            "binding itself, one write fewer per pod (needs Kubernetes 1.35 or later, whose API server copies "
            "the binding's labels too). filter: HAMi's order, patched before Filter answers. behind-answer: "
            "Filter answers, the patch follows and Bind waits for it",
            "choices": ("bind", "binding", "filter", "behind-answer"),
        },
    )
    success_events: bool = field(
        default=True,
        metadata={
            "help": "post HAMi's FilteringSucceed and BindingSucceed Events (one each per pod; kube-scheduler "
            "posts its own Scheduled). Failure Events are always posted"
        },
    )
    requeue_qps: float = field(
        default=10.0,
        metadata={
            "help": "pods put back in kube-scheduler's active queue per second when a release of vGPU capacity "
            "makes room for them (0 disables retry at release)"
        },
    )
    requeue_burst: int = field(default=10, metadata={"help": "requeue patches allowed at once"})
    vgpu_preemption: bool = field(
        default=True,
        metadata={
            "help": "evict the fewest lower-priority pods that free the vGPU a pending pod needs (its priority "
            "class allowing preemption; PodDisruptionBudgets honoured) and hold the freed GPUs for it"
        },
    )
    event_queue_size: int = field(
        default=20_000,
        metadata={
            "help": "events held while the API server is slow or unreachable (identical ones are counted, "
            "not queued twice); past it new events are dropped and counted in hami_fast_events_dropped_total"
        },
    )
    filter_patch_behind_answer: bool = field(
        default=False,
        metadata={"help": "the same as --allocation-write=behind-answer (kept for existing configurations)"},
    )
    force_overwrite_default_scheduler: bool = field(
        default=True, metadata={"help": "take over pods naming default-scheduler"}
    )
    leader_elect: bool = field(default=False, metadata={"help": "follow kube-scheduler's Lease"})
    leader_elect_resource_name: str = field(default="hami-scheduler", metadata={"help": "Lease name"})
    leader_elect_resource_namespace: str = field(
        default="", metadata={"help": "Lease namespace (default: POD_NAMESPACE)"}
    )
    watch_timeout: float = field(
        default=300.0, metadata={"help": "server-side timeout of each WATCH request", "duration": True}
    )
    kubeconfig: str = field(
        default="", metadata={"help": "kubeconfig path (else KUBECONFIG, ~/.kube/config, in-cluster)"}
    )
    snapshot: str = field(default="", metadata={"help": "serve an in-memory cluster loaded from this List file"})
    demo: bool = field(default=False, metadata={"help": "serve the built-in demo cluster"})
    resource_name: str = field(default="nvidia.com/gpu", metadata={"help": "count resource"})
    resource_mem: str = field(default="nvidia.com/gpumem", metadata={"help": "memory resource"})
    resource_mem_percentage: str = field(
        default="nvidia.com/gpumem-percentage", metadata={"help": "memory percentage resource"}
    )
    resource_cores: str = field(default="nvidia.com/gpucores", metadata={"help": "cores resource"})
    resource_priority: str = field(default="nvidia.com/priority", metadata={"help": "priority resource"})
    default_mem: int = field(default=0, metadata={"help": "default memory (MiB) when none is requested"})
    default_cores: int = field(default=0, metadata={"help": "default cores when none are requested"})
    default_gpu_num: int = field(default=1, metadata={"help": "GPUs added when only memory/cores are requested"})
    gpu_core_policy: str = field(default="default", metadata={"help": "default, force or disable"})
    http_mode: str = field(
        default="auto",
        metadata={
            "help": "Granian HTTP mode: auto (HTTP/1.1 and, over TLS, HTTP/2 as kube-apiserver's webhook client may use), 1 or 2"
        },
    )
    runtime_threads: int = field(default=1, metadata={"help": "Granian Rust runtime threads"})
    log_level: str = field(default="info", metadata={"help": "debug, info, warning, error"})
    log_format: str = field(
        default="json", metadata={"help": "json (one object per line) or text", "choices": ("json", "text")}
    )
    device_config_file: str = field(default="", metadata={"help": device_config.FILE_HELP})
    enable_ascend: bool = field(default=False, metadata={"help": "schedule Ascend devices (HAMi's --enable-ascend)"})
    enable_iluvatar: bool = field(
        default=False, metadata={"help": "schedule Iluvatar devices (HAMi's --enable-iluvatar)"}
    )
    config: str = field(default="", metadata={"help": "config file (YAML/JSON) with any of these options"})
    devices: device_config.DeviceSettings = field(
        default_factory=device_config.DeviceSettings, metadata={"internal": True}
    )

    @property
    def tls(self) -> bool:
        return bool(self.cert_file and self.key_file)

    def engine_config(self) -> bytes:
        """The subset the Rust engine needs, as JSON."""
        return orjson.dumps(
            {
                "resource_count_name": self.resource_name,
                "resource_memory_name": self.resource_mem,
                "resource_memory_percentage_name": self.resource_mem_percentage,
                "resource_core_name": self.resource_cores,
                "resource_priority_name": self.resource_priority,
                "default_memory": self.default_mem,
                "default_cores": self.default_cores,
                "default_gpu_num": self.default_gpu_num,
                "node_scheduler_policy": self.node_scheduler_policy,
                "gpu_scheduler_policy": self.gpu_scheduler_policy,
                "scheduler_name": self.scheduler_name,
                "force_overwrite_default_scheduler": self.force_overwrite_default_scheduler,
                "gpu_core_policy": self.gpu_core_policy,
                "fgd_target_workload": _read_json(self.fgd_target_workload, []),
                **self.devices.engine_fields(),
            }
        )

    def managed_resources(self) -> list[str]:
        return [
            self.resource_name,
            self.resource_mem,
            self.resource_mem_percentage,
            self.resource_cores,
            self.resource_priority,
        ]


def _read_json(path: str, default: Any) -> Any:
    """The JSON file at `path`, or `default` when no path is given."""
    return orjson.loads(Path(path).read_bytes()) if path else default


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _coerce(f: dataclasses.Field, value: Any) -> Any:
    number = _number(f, value)
    if number is not None:
        if number < 0:  # every count, rate, size and timeout here: a negative one means nothing
            raise ValueError(f"want a number of at least 0, got {value!r}")
        return number
    return _other(f, value)


def _number(f: dataclasses.Field, value: Any) -> float | int | None:
    if f.metadata.get("duration"):
        return parse_duration(value)
    kind = {"int": int, "float": float}.get(f.type, f.type) if isinstance(f.type, str) else f.type
    if kind not in (int, float) or isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        whole = "a whole number" if kind is int else "a number"
        raise ValueError(f"want {whole} of at least 0, got {value!r}") from None


def _other(f: dataclasses.Field, value: Any) -> Any:
    if f.metadata.get("policy"):
        from hami_fast import policies

        check = policies.check_node_policy if f.metadata["policy"] == "node" else policies.check_gpu_policy
        return check(str(value))
    if f.metadata.get("choices") and str(value) not in f.metadata["choices"]:
        raise ValueError(f"{value!r} is not one of {', '.join(f.metadata['choices'])}")
    if f.type in ("bool", bool):
        if isinstance(value, bool):
            return value
        return parse_bool(str(value), f.name)
    return str(value)


# The NVIDIA flags a device config file's `nvidia:` section replaces (HAMi's file wins over flags).
NVIDIA_FLAGS = (
    "resource_name",
    "resource_mem",
    "resource_mem_percentage",
    "resource_cores",
    "resource_priority",
    "default_mem",
    "default_cores",
    "default_gpu_num",
    "gpu_core_policy",
)


def option_fields() -> list[dataclasses.Field]:
    return [f for f in fields(Config) if not f.metadata.get("internal")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for f in option_fields():
        flag = _flag(f)
        aliases = [flag] + ([f"--{f.name}"] if flag != f"--{f.name}" and "_" in f.name else [])
        if f.type in ("bool", bool):
            parser.add_argument(
                *aliases, dest=f.name, nargs="?", const="true", default=None, help=f.metadata.get("help")
            )
        else:
            parser.add_argument(*aliases, dest=f.name, default=None, help=_help(f))


def _help(f: dataclasses.Field[Any]) -> str:
    text = f.metadata.get("help", "")
    if f.metadata.get("policy") == "node":
        from hami_fast.policies import node_policy_names

        text = f"{text}: {', '.join(node_policy_names())}"
    default = f.default
    shown = format_duration(default) if f.metadata.get("duration") and isinstance(default, float) else repr(default)
    return f"{text} (default {shown})".replace("%", "%%")


def _yaml_error(path: Path, exc: yaml.YAMLError) -> str:
    """The native reader's one-line message (`decode FILE:L:C: ...`), PyYAML's when that one accepts it."""
    from hami_fast import _native

    try:
        _native.yaml_to_json(path.read_bytes(), str(path))
    except _native.EngineError as native:
        return str(native)
    return f"{path}: {' '.join(str(exc).split())}"


def load(args: argparse.Namespace | None = None, environ: dict[str, str] | None = None) -> Config:
    """Defaults < config file < environment < flags. Errors name the option."""
    environ = dict(os.environ if environ is None else environ)
    given = {k: v for k, v in vars(args or argparse.Namespace()).items() if v is not None}
    values: dict[str, Any] = {}
    config_path = given.get("config") or environ.get("HAMI_FAST_CONFIG", "")
    if config_path:
        try:
            loaded = yaml.safe_load(Path(config_path).read_text()) or {}
        except OSError as exc:
            raise ValueError(f"config file {config_path}: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            raise ValueError(f"config file {_yaml_error(Path(config_path), exc)}") from exc
        if not isinstance(loaded, dict):
            raise ValueError(f"config file {config_path}: expected a mapping of option: value")
        values.update({str(k).replace("-", "_"): v for k, v in loaded.items()})
    for f in option_fields():
        env = environ.get("HAMI_FAST_" + f.name.upper())
        if env is not None:
            values[f.name] = env
    values.update(given)
    known = {f.name: f for f in option_fields()}
    unknown = sorted(set(values) - set(known) - {"func", "command"})
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)} in config file")
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        if name in known:
            try:
                kwargs[name] = _coerce(known[name], value)
            except ValueError as exc:
                raise ValueError(f"option {_flag(known[name])}: {exc}") from exc
    config = Config(**kwargs)
    return with_devices(config, sorted(set(values) & set(NVIDIA_FLAGS)))


def with_devices(config: Config, nvidia_flags_given: list[str]) -> Config:
    """The device config file read and checked; the NVIDIA flags it replaces named in a warning."""
    devices = device_config.settings(config.device_config_file, config.enable_ascend, config.enable_iluvatar)
    if devices.config is not None and nvidia_flags_given:
        import logging

        flags = ", ".join(_flag(f) for f in fields(Config) if f.name in nvidia_flags_given)
        logging.getLogger("hami_fast").warning(
            "%s: the device config file's nvidia section replaces %s", config.device_config_file, flags
        )
    return dataclasses.replace(config, devices=devices)


def split_address(address: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"address {address!r} must be host:port")
    if int(port) > 65535:
        raise ValueError(f"address {address!r}: port {port} is out of range (0-65535)")
    return (host.strip("[]") or default_host), int(port)
