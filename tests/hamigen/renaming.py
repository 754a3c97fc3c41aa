"""Resource names renamed throughout a cluster, as a device config that renames them requires."""

from __future__ import annotations

from typing import Any


def renamed(obj: Any, names: dict[str, str]) -> Any:
    """`obj` with every resource key renamed (also as `limits.`/`requests.` quota keys)."""
    if isinstance(obj, list):
        return [renamed(o, names) for o in obj]
    if not isinstance(obj, dict):
        return obj
    return {renamed_key(key, names): renamed(value, names) for key, value in obj.items()}


def renamed_key(key: str, names: dict[str, str]) -> str:
    if key.startswith(("limits.", "requests.")):
        scope, resource = key.split(".", 1)
        return f"{scope}.{names.get(resource, resource)}"
    return names.get(key, key)
