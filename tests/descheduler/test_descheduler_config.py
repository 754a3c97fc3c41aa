"""`hami-fast descheduler`'s typed configuration: flags > HAMI_FAST_DESCHEDULER_* > --config file >
defaults written once; a bad value from anywhere is one line naming the option."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from hami_fast.cli import main as hami_fast_main
from hami_fast.descheduler.auto import AutoOptions
from hami_fast.descheduler.config import DEFAULTS, DeschedulerConfig, add_arguments, load
from hami_fast.descheduler.controller import Timeouts


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_defaults_when_nothing_is_given():
    config = load(parse(), environ={})
    assert config == dataclasses.replace(DeschedulerConfig(), lease_namespace="kube-system")
    assert (config.bind, config.eviction_timeout, config.max_concurrent_moves) == ("127.0.0.1:8083", 300.0, 2)


def test_a_flag_beats_the_environment_which_beats_the_file(tmp_path):
    file = tmp_path / "descheduler.yaml"
    file.write_text("eviction-timeout: 1m\nreplacement_timeout: 2m\nbind-timeout: 3m\n")
    environ = {
        "HAMI_FAST_DESCHEDULER_CONFIG": str(file),
        "HAMI_FAST_DESCHEDULER_EVICTION_TIMEOUT": "10m",
        "HAMI_FAST_DESCHEDULER_REPLACEMENT_TIMEOUT": "20m",
    }
    config = load(parse("--eviction-timeout=90s"), environ=environ)
    assert (config.eviction_timeout, config.replacement_timeout, config.bind_timeout) == (90.0, 1200.0, 180.0)


def test_a_flag_given_hides_a_bad_value_of_its_option_elsewhere():
    config = load(parse("--auto-period=5s"), environ={"HAMI_FAST_DESCHEDULER_AUTO_PERIOD": "often"})
    assert config.auto_period == 5.0


def test_a_flag_given_at_its_default_value_still_beats_the_environment():
    environ = {"HAMI_FAST_DESCHEDULER_DRY_RUN": "true", "HAMI_FAST_DESCHEDULER_KUBE_QPS": "5"}
    config = load(parse("--dry-run=false"), environ=environ)
    assert config.dry_run is False and config.kube_qps == 5.0


def test_the_file_takes_any_spelling_of_a_flag_and_typed_yaml_values(tmp_path):
    file = tmp_path / "descheduler.yaml"
    file.write_text(
        "http_bind: 0.0.0.0:8083\nresync-period: 45\nleader-elect-resource-name: mine\n"
        "auto: true\nmax-moves-per-hour: 3\nselector: team=ml\n"
    )
    config = load(parse("--config", str(file)), environ={})
    assert (config.bind, config.period, config.lease_name) == ("0.0.0.0:8083", 45.0, "mine")
    assert (config.auto, config.max_moves_per_hour, config.selector) == (True, 3, "team=ml")


def test_the_lease_namespace_defaults_to_the_pods_own():
    assert load(parse(), environ={"POD_NAMESPACE": "gpu"}).lease_namespace == "gpu"
    assert load(parse("--lease-namespace", "ops"), environ={"POD_NAMESPACE": "gpu"}).lease_namespace == "ops"


@pytest.mark.parametrize(
    "environ, message",
    [
        (
            {"HAMI_FAST_DESCHEDULER_EVICTION_TIMEOUT": "soon"},
            "option --eviction-timeout (HAMI_FAST_DESCHEDULER_EVICTION_TIMEOUT): invalid duration 'soon'",
        ),
        (
            {"HAMI_FAST_DESCHEDULER_MAX_CONCURRENT_MOVES": "0"},
            "option --max-concurrent-moves (HAMI_FAST_DESCHEDULER_MAX_CONCURRENT_MOVES):"
            " want a whole number of at least 1, got '0'",
        ),
        (
            {"HAMI_FAST_DESCHEDULER_API_AUTH": "maybe"},
            "option --api-auth (HAMI_FAST_DESCHEDULER_API_AUTH): 'maybe' is not one of auto, kubernetes, none",
        ),
        (
            {"HAMI_FAST_DESCHEDULER_DRY_RUN": "perhaps"},
            "option --dry-run (HAMI_FAST_DESCHEDULER_DRY_RUN): 'perhaps' is not a boolean",
        ),
        (
            {"HAMI_FAST_DESCHEDULER_NAMESPACE_SELECTOR": "team in ml"},
            "option --namespace-selector (HAMI_FAST_DESCHEDULER_NAMESPACE_SELECTOR): label selector:"
            ' cannot parse "team in ml" in "team in ml"',
        ),
        (
            {"HAMI_FAST_DESCHEDULER_PLACEMENT_TTL": "-5"},
            "option --placement-ttl (HAMI_FAST_DESCHEDULER_PLACEMENT_TTL): want a duration of at least 0, got '-5'",
        ),
    ],
)
def test_a_bad_environment_value_names_the_option_and_the_variable(environ, message):
    with pytest.raises(ValueError) as refused:
        load(parse(), environ=environ)
    assert str(refused.value).startswith(message)


@pytest.mark.parametrize(
    "text, message",
    [
        ("max-in-flight: lots\n", "option --max-in-flight (config file {}): want a whole number of at least 0"),
        ("kube-burst: true\n", "option --kube-burst (config file {}): want a whole number of at least 0, got True"),
        ("eviction-mode: Delete\n", "option --eviction-mode (config file {}): 'Delete' is not one of Eviction"),
        ("evict-faster: yes\n", "config file {}: unknown option(s) evict-faster"),
        ("- bind\n", "config file {}: expected a mapping of option: value"),
    ],
)
def test_a_bad_file_names_the_option_and_the_file(tmp_path, text, message):
    file = tmp_path / "descheduler.yaml"
    file.write_text(text)
    with pytest.raises(ValueError) as refused:
        load(parse("--config", str(file)), environ={})
    assert str(refused.value).startswith(message.format(file))


def test_the_command_exits_with_one_line_on_a_bad_value(monkeypatch, capsys):
    monkeypatch.setenv("HAMI_FAST_DESCHEDULER_AUTO_PERIOD", "often")
    assert hami_fast_main(["descheduler", "--snapshot", "none.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hami-fast descheduler: option --auto-period (HAMI_FAST_DESCHEDULER_AUTO_PERIOD):")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_bad_flag_is_argparses_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        parse("--max-concurrent-moves=0")
    assert exited.value.code == 2
    assert "want a whole number of at least 1, got '0'" in capsys.readouterr().err


def test_the_configuration_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.dry_run = True  # type: ignore[misc]


def test_the_controller_and_auto_mode_take_their_defaults_from_the_configuration():
    assert Timeouts() == Timeouts.of(DEFAULTS)
    assert dataclasses.replace(AutoOptions(), record_namespace="") == dataclasses.replace(
        AutoOptions.of(DEFAULTS), record_namespace=""
    )
    config = load(parse("--eviction-timeout=1m", "--period=5", "--max-moves-per-pending-pod=2"), environ={})
    assert (Timeouts.of(config).eviction, Timeouts.of(config).resync) == (60.0, 5.0)
    assert AutoOptions.of(config).max_moves_per_pod == 2 and AutoOptions.of(config).record_namespace == "kube-system"


def test_help_shows_each_default_from_its_field():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert "(default 5m0s)" in text and "(default 127.0.0.1:8083)" in text and "(default false)" in text
