"""Reading Kubernetes manifests (YAML or JSON, single objects, Lists, multi-document YAML)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from hami_fast import _native


class ManifestError(ValueError):
    """A manifest file that cannot be read; the message names the file."""


def _documents(path: Path) -> Iterator[Any]:
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{path}: {exc.strerror or exc}") from exc
    try:
        yield orjson.loads(text)
        return
    except orjson.JSONDecodeError:
        pass
    if b"\0" in text[:8192]:
        raise ManifestError(f"{path}: a binary file, not YAML or JSON")
    # YAML is read in Rust (one native pass, ~50x faster than PyYAML's objects even with libyaml)
    # and comes back as one JSON array of the documents; its error names file:line:column and document.
    try:
        yield from orjson.loads(_native.yaml_to_json(text, str(path)))
    except _native.EngineError as exc:
        raise ManifestError(str(exc)) from None


def _what(doc: Any) -> str:
    if isinstance(doc, str):
        first = (doc.splitlines() or [""])[0]
        return f"plain text ({first[:40]!r})"
    return {list: "a list", int: "a number", float: "a number", bool: "a boolean"}.get(type(doc), type(doc).__name__)


def _hint(doc: Any) -> str:
    """What the file more likely is, when it is text with a trace CSV's header."""
    if isinstance(doc, str) and "cpu_milli" in doc.split(" ")[0]:
        return "; it looks like a trace CSV, which simulate --nodes/--pods and plan --replay read"
    return ""


def load_document(path: str | Path) -> Any:
    """The one YAML or JSON document of a file (not a Kubernetes object: any value)."""
    path = Path(path)
    documents = list(_documents(path))
    if len(documents) != 1:
        raise ManifestError(f"{path}: expected one YAML or JSON document, found {len(documents)}")
    return documents[0]


def load_objects(path: str | Path) -> list[dict[str, Any]]:
    """Every object in the file, with List wrappers flattened."""
    path = Path(path)
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(_documents(path)):
        if not isinstance(doc, dict):
            raise ManifestError(f"{path}: document {i} is {_what(doc)}, not a Kubernetes object{_hint(doc)}")
        items = doc.get("items")
        if isinstance(items, list) and str(doc.get("kind", "List")).endswith("List"):
            out.extend(item for item in items if isinstance(item, dict))
        else:
            out.append(doc)
    return out


def require_nodes(objects: list[dict[str, Any]], path: str | Path) -> list[dict[str, Any]]:
    """The objects of a cluster snapshot, or ManifestError when it holds no Node (a lone Pod, say)."""
    if not any(o.get("kind") == "Node" for o in objects):
        kinds = sorted({str(o.get("kind", "?")) for o in objects}) or ["nothing"]
        raise ManifestError(
            f"{path}: the snapshot has no nodes (found {', '.join(kinds)}); "
            "pass a List with Nodes, e.g. kubectl get nodes,pods -A -o yaml"
        )
    return objects


def load_one(path: str | Path, kind: str) -> dict[str, Any]:
    """Exactly one object of `kind` (a missing kind is taken as `kind`)."""
    objects = load_objects(path)
    if len(objects) != 1:
        raise ManifestError(f"{path}: expected one {kind}, found {len(objects)} objects")
    obj = objects[0]
    obj.setdefault("kind", kind)
    if obj["kind"] != kind:
        raise ManifestError(f"{path}: expected kind {kind}, found {obj['kind']}")
    return obj


def as_list_bytes(objects: list[dict[str, Any]]) -> bytes:
    """A Kubernetes `List` of the objects as JSON bytes, ready for `Cluster.apply`."""
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, default=str)
