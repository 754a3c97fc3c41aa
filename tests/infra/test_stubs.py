"""`_native.pyi` matches the compiled module: every name, class member and parameter (fails on drift)."""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest
from hami_fast import _native

ROOT = Path(__file__).parents[2]
STUB = ROOT / "python" / "hami_fast" / "_native.pyi"
TREE = ast.parse(STUB.read_text())
#: Each wire document's keys as the Rust side serialises them (`rust/hami-core/src/wire/samples.rs`).
WIRE_KEYS = ROOT / "rust" / "hami-core" / "src" / "wire" / "keys.json"


def stub_defs(body: list[ast.stmt]) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node  # `Move = TypedDict("Move", {...})`
    return out


def is_typed_dict(node: ast.AST) -> bool:
    if isinstance(node, ast.Assign):  # the functional form, for keys that are Python keywords
        call = node.value
        return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "TypedDict"
    return isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)


MODULE = stub_defs(TREE.body)
#: The documents the methods return: stub-only, so not among the module's runtime names.
TYPED_DICTS = {n: d for n, d in MODULE.items() if is_typed_dict(d)}


def public(names: list[str]) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def test_every_runtime_name_is_in_the_stub_and_back() -> None:
    runtime = public(dir(_native)) | {"__version__"}
    assert runtime == public(list(MODULE.keys() - TYPED_DICTS.keys())) | {"__version__"}


def params(fn: ast.FunctionDef) -> list[tuple[str, bool]]:
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    defaults = [None] * (len(fn.args.posonlyargs + fn.args.args) - len(fn.args.defaults)) + list(fn.args.defaults)
    defaults += list(fn.args.kw_defaults)
    return [(a.arg, d is not None) for a, d in zip(args, defaults, strict=True) if a.arg != "self"]


def runtime_params(obj: object) -> list[tuple[str, bool]]:
    sig = inspect.signature(obj)  # type: ignore[arg-type]
    return [(p.name, p.default is not inspect.Parameter.empty) for p in sig.parameters.values() if p.name != "self"]


FUNCTIONS = [n for n, d in MODULE.items() if isinstance(d, ast.FunctionDef)]
CLASSES = [n for n, d in MODULE.items() if isinstance(d, ast.ClassDef) and n not in TYPED_DICTS]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_signatures_match(name: str) -> None:
    assert runtime_params(getattr(_native, name)) == params(MODULE[name])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CLASSES)
def test_class_members_match(name: str) -> None:
    cls = getattr(_native, name)
    members = stub_defs(MODULE[name].body)  # type: ignore[attr-defined]
    if issubclass(cls, BaseException):
        return  # its attributes are set on raised instances: see the EngineError test below
    runtime = public(dir(cls))
    assert runtime == public(list(members)), f"{name}: runtime {sorted(runtime)} vs stub {sorted(members)}"
    for member, node in members.items():
        if member.startswith("__"):
            continue  # `__init__` is checked on the class itself, below
        attr = getattr(cls, member)
        if isinstance(node, ast.FunctionDef) and callable(attr) and not isinstance(attr, property):
            if any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                continue
            assert runtime_params(attr) == params(node), f"{name}.{member}"
    if "__init__" in members:
        assert runtime_params(cls) == params(members["__init__"])  # type: ignore[arg-type]


def test_engine_error_carries_kind_object_field_and_message() -> None:
    with pytest.raises(_native.EngineError) as err:
        _native.Cluster().apply(
            b'{"kind":"Pod","metadata":{"name":"p","namespace":"d","annotations":'
            b'{"hami.io/vgpu-node":"n","hami.io/vgpu-devices-allocated":"broken,,:;"}}}'
        )
    assert (err.value.kind, err.value.object, err.value.field) == (
        "invalid",
        "Pod d/p",
        "annotation hami.io/vgpu-devices-allocated",
    )
    assert str(err.value) == f"{err.value.object}: {err.value.field}: {err.value.message}"
    assert err.value.message.endswith("needs 4 comma fields UUID,TYPE,MEM,CORES")
    with pytest.raises(_native.EngineError) as err:
        _native.Cluster().apply(b"{not json")
    assert err.value.kind == "decode"
    stub_members = stub_defs(MODULE["EngineError"].body)  # type: ignore[attr-defined]
    assert {"kind", "object", "field", "message"} <= set(stub_members)


def typed_dict_keys(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        fields = node.value.args[1]  # type: ignore[attr-defined]
        return sorted(k.value for k in fields.keys)
    body = node.body  # type: ignore[attr-defined]
    return sorted(n.target.id for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name))


def test_every_wire_document_has_a_typed_dict_and_back() -> None:
    wire = json.loads(WIRE_KEYS.read_text())
    assert set(wire) == set(TYPED_DICTS), "a wire type without a TypedDict in _native.pyi, or the reverse"


@pytest.mark.parametrize("name", sorted(TYPED_DICTS))
def test_typed_dict_keys_match_the_wire_type(name: str) -> None:
    wire = json.loads(WIRE_KEYS.read_text())
    assert typed_dict_keys(TYPED_DICTS[name]) == sorted(wire.get(name, [])), name
