"""Configuration: HAMi's flag names and defaults; flags over environment over config file."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
import pytest
from hami_fast import config


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_are_hamis() -> None:
    c = config.load(parse(), environ={})
    assert (c.http_bind, c.scheduler_name, c.node_scheduler_policy, c.gpu_scheduler_policy) == (
        "127.0.0.1:8080",
        "hami-scheduler",
        "binpack",
        "spread",
    )
    assert (c.metrics_bind_address, c.kube_qps, c.kube_burst, c.node_lock_timeout) == (":9395", 5.0, 10, 300.0)
    assert c.force_overwrite_default_scheduler is True and c.leader_elect is False


def test_precedence_flag_env_file(tmp_path: Path) -> None:
    file = tmp_path / "hami.yaml"
    file.write_text(
        "node-scheduler-policy: spread\nkube_qps: 20\nnode_lock_timeout: 2m\ngpu_scheduler_policy: binpack\n"
    )
    env = {"HAMI_FAST_KUBE_QPS": "30", "HAMI_FAST_LEADER_ELECT": "true"}
    c = config.load(
        parse("--config", str(file), "--gpu-scheduler-policy", "topology-aware", "--http_bind", "0.0.0.0:443"),
        environ=env,
    )
    assert c.node_scheduler_policy == "spread"  # file
    assert c.node_lock_timeout == 120.0  # file, Go duration
    assert c.kube_qps == 30.0  # env beats file
    assert c.leader_elect is True  # env
    assert c.gpu_scheduler_policy == "topology-aware"  # flag beats file
    assert c.http_bind == "0.0.0.0:443"
    engine = orjson.loads(c.engine_config())
    assert engine["gpu_scheduler_policy"] == "topology-aware" and engine["node_scheduler_policy"] == "spread"


@pytest.mark.parametrize(
    ("argv", "env", "needle"),
    [
        (("--node-lock-timeout", "5 minutes"), {}, "--node-lock-timeout"),
        (("--kube-burst", "many"), {}, "--kube-burst"),
        ((), {"HAMI_FAST_LEADER_ELECT": "perhaps"}, "--leader-elect"),
    ],
)
def test_bad_values_name_the_option(argv: tuple[str, ...], env: dict[str, str], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        config.load(parse(*argv), environ=env)


def test_unknown_file_keys_are_refused(tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("node_sheduler_policy: spread\n")
    with pytest.raises(ValueError, match="node_sheduler_policy"):
        config.load(parse("--config", str(file)), environ={})


@pytest.mark.parametrize(
    ("text", "seconds"), [("5m", 300), ("28s", 28), ("1m30s", 90), ("500ms", 0.5), ("45", 45), ("1h", 3600)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert config.parse_duration(text) == seconds
