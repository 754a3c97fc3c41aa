"""Reading Kubernetes manifests (YAML or JSON, single objects, Lists, multi-document YAML)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader


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
    try:
        yield from (d for d in yaml.load_all(text, Loader=_Loader) if d is not None)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: not valid YAML or JSON: {exc}") from exc


def load_objects(path: str | Path) -> list[dict[str, Any]]:
    """Every object in the file, with List wrappers flattened."""
    path = Path(path)
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(_documents(path)):
        if not isinstance(doc, dict):
            raise ManifestError(f"{path}: document {i} is a {type(doc).__name__}, not a Kubernetes object")
        items = doc.get("items")
        if isinstance(items, list) and str(doc.get("kind", "List")).endswith("List"):
            out.extend(item for item in items if isinstance(item, dict))
        else:
            out.append(doc)
    return out


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
