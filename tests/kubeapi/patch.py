"""The three patch formats the API server accepts.

* JSON merge patch (RFC 7386): maps merge recursively, ``null`` deletes a key, anything else
  (lists included) replaces.
* Strategic merge patch: merge patch for maps, plus the Kubernetes merge keys for a few
  well-known lists (containers by ``name``, conditions by ``type``, ...) and the ``$patch``
  directives ``delete``/``replace``. Other ``$``-directives are dropped. Lists without a known
  merge key are replaced, as in a merge patch.
* JSON Patch (RFC 6902): add, remove, replace, move, copy, test.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch cannot be applied (answered as 422 Unprocessable Entity)."""


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# Field name -> merge key, for lists that strategic merge patch merges element-wise.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "ownerReferences": "uid",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "addresses": "type",
    "imagePullSecrets": "name",
}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_list(current: list, patch: list, merge_key: str) -> list:
    out = [copy.deepcopy(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            out.append(copy.deepcopy(item))
            continue
        idx = next(
            (i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
        elif idx is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if not k.startswith("$")})
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


# -- RFC 6902 ---------------------------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r}")
    idx = int(token)
    if idx > len(container) or (idx == len(container) and not allow_end):
        raise PatchError(f"array index {idx} out of range")
    return idx


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(f"path component {tok!r} does not exist")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, allow_end=False)]
        else:
            raise PatchError(f"cannot descend into {type(cur).__name__} at {tok!r}")
    return cur


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    tok = tokens[-1]
    if isinstance(parent, dict):
        if tok not in parent:
            raise PatchError(f"path component {tok!r} does not exist")
        return parent[tok]
    if isinstance(parent, list):
        return parent[_index(parent, tok, allow_end=False)]
    raise PatchError("invalid path")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    tok = tokens[-1]
    if isinstance(parent, dict):
        parent[tok] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, tok, allow_end=True), value)
    else:
        raise PatchError("invalid path")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens)
    tok = tokens[-1]
    if isinstance(parent, dict):
        if tok not in parent:
            raise PatchError(f"path component {tok!r} does not exist")
        del parent[tok]
    elif isinstance(parent, list):
        del parent[_index(parent, tok, allow_end=False)]
    else:
        raise PatchError("invalid path")
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid operation {op!r}")
        kind, tokens = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"operation {kind} needs a value")
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)  # must exist
            if tokens:
                doc = _remove(doc, tokens)
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_get(doc, src))
            if kind == "move":
                if tokens[: len(src)] == src and tokens != src:
                    raise PatchError("cannot move a value into one of its children")
                doc = _remove(doc, src)
            doc = _add(doc, tokens, value)
        elif kind == "test":
            if _get(doc, tokens) != op["value"]:
                raise PatchError(f"test operation failed at {op['path']!r}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc
