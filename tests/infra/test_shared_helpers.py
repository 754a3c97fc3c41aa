"""One boolean parser for every entry point, and HAMi's annotation keys from one module."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from hami_fast import _native, annotations
from hami_fast.config import load, parse_bool
from hami_fast.descheduler.cli import add_arguments

PACKAGE = Path(annotations.__file__).parent

TRUE = ["1", "t", "T", "true", "True", "TRUE", "y", "yes", "Yes", "on", "ON", " true "]
FALSE = ["0", "f", "F", "false", "False", "FALSE", "n", "no", "No", "off", "OFF", ""]


@pytest.mark.parametrize("text", TRUE)
def test_true_spellings(text):
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", FALSE)
def test_false_spellings(text):
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["2", "enabled", "truee", "nope", "-1"])
def test_anything_else_is_refused_naming_the_setting(text):
    with pytest.raises(ValueError, match=rf"^leader_elect: '{text}' is not a boolean"):
        parse_bool(text, "leader_elect")


@pytest.mark.parametrize(("text", "expected"), [("T", True), ("Yes", True), ("off", False), ("F", False)])
def test_serve_and_descheduler_accept_the_same_spellings(text, expected):
    """Config (serve's flags/env/file) and the descheduler's flags used to disagree on `t`/`f` and `""`."""
    assert load(argparse.Namespace(), {"HAMI_FAST_LEADER_ELECT": text}).leader_elect is expected
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--dry-run", text]).dry_run is expected


def test_descheduler_flag_error_is_one_line(capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--dry-run", "maybe"])
    assert "'maybe' is not a boolean" in capsys.readouterr().err


# -- annotation keys ------------------------------------------------------------------------------


def test_keys_are_hami_s_spellings_from_the_engine():
    assert annotations.NODE_REGISTER == "hami.io/node-nvidia-register"
    assert annotations.NODE_LOCK == "hami.io/mutex.lock"
    assert annotations.ALLOCATED == "hami.io/vgpu-devices-allocated"
    assert annotations.BIND_PHASE == "hami.io/bind-phase" and annotations.BIND_TIME == "hami.io/bind-time"
    assert annotations.USE_GPU_UUID == "nvidia.com/use-gpuuuid"
    engine = set(_native.ANNOTATIONS.values())
    python = {v for k, v in vars(annotations).items() if k.isupper() and isinstance(v, str)}
    assert engine <= python, f"engine keys without a Python name: {sorted(engine - python)}"
    assert {v for v in python - engine} == {k for k in python if k.startswith("placement.hami.io/")}


# Pure data that imports nothing of hami_fast (test_first_ten_minutes checks it).
PURE = {"demo/cluster.py"}


def test_no_hami_key_is_spelled_out_elsewhere_in_python():
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "annotations.py" or rel in PURE:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if any(k in node.value for k in ("hami.io/", "nvidia.com/use-", "nvidia.com/nouse-")):
                    spelled.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not spelled, "use hami_fast.annotations:\n" + "\n".join(spelled)
