"""No import cycle among hami_fast's modules (`demo.py` and `server/serve.py` once imported each
other), counting the imports inside functions too: a lazy import only hides a cycle until the
function runs. Read from the sources with `ast`, so nothing is imported to check it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "hami_fast"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """{dotted module name: file} for every module and package of hami_fast."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The hami_fast modules `module` imports anywhere in its file (`from pkg import mod` names mod)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {m for m in found if m in modules and m != module}


def graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {m: imported(m, path, modules) for m, path in modules.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle as `[a, b, ..., a]`, or None (depth-first search)."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        done.add(node)
        for nxt in sorted(edges.get(node, ())):
            if cycle := visit(nxt, [*path, node]):
                return cycle
        return None

    for start in sorted(edges):
        if cycle := visit(start, []):
            return cycle
    return None


def test_hami_fast_modules_import_no_cycle() -> None:
    modules = module_files()
    assert {"hami_fast.cli", "hami_fast.server.serve", "hami_fast.demo.run", "hami_fast.descheduler.controller"} <= set(
        modules
    )
    edges = graph(modules)
    assert "hami_fast.server.serve" in edges["hami_fast.demo.run"], "the graph misses a known import"
    assert find_cycle(edges) is None, " -> ".join(find_cycle(edges) or [])


def test_a_lazy_import_cycle_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    modules = module_files(package)
    edges = graph(modules)
    assert edges["pkg.a"] == {"pkg.sub.b"} and edges["pkg.sub.b"] == {"pkg.a"}
    assert find_cycle(edges) == ["pkg.a", "pkg.sub.b", "pkg.a"]
