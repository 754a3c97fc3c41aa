"""Other builds of the native module, loaded beside this one so a benchmark compares them in one run.

``HAMI_FAST_BENCH_BUILDS="main=/tmp/main/_native.abi3.so,pre=/tmp/pre/_native.abi3.so"`` names
extension modules built from other commits (e.g. ``maturin build --release`` in a second worktree,
the ``.so`` taken out of the wheel). Each is imported under its own package name (``hami_build_main``)
so its statics and ours stay apart; ``this`` is always the installed ``hami_fast._native``.
"""

from __future__ import annotations

import importlib.util
import os
from types import ModuleType

from hami_fast import _native


def _load(tag: str, path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"hami_build_{tag}._native", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"HAMI_FAST_BENCH_BUILDS: {tag}={path}: not an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def builds() -> dict[str, ModuleType]:
    """``{"this": hami_fast._native, <tag>: <module>, ...}`` in the order given."""
    out = {"this": _native}
    for entry in filter(None, (e.strip() for e in os.environ.get("HAMI_FAST_BENCH_BUILDS", "").split(","))):
        tag, sep, path = entry.partition("=")
        if not sep or not tag or tag in out:
            raise ValueError(f"HAMI_FAST_BENCH_BUILDS: {entry!r} is not a new TAG=PATH")
        out[tag] = _load(tag, path)
    return out


BUILDS = builds()
