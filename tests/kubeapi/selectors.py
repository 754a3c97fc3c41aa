"""Label selectors (equality and set-based) and field selectors, as the API server parses them."""

from __future__ import annotations

import re
from collections.abc import Callable


class SelectorError(ValueError):
    pass


def _split_top(expr: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in expr:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


_SET = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")
_EQ = re.compile(r"^([^=!\s]+)\s*(==|=|!=)\s*(.*)$")


def parse_label_selector(expr: str | None) -> Callable[[dict], bool]:
    if not expr:
        return lambda labels: True
    reqs = []
    for term in _split_top(expr):
        m = _SET.match(term)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                reqs.append(lambda l, k=key, vs=values: k in l and l[k] in vs)
            else:
                reqs.append(lambda l, k=key, vs=values: k not in l or l[k] not in vs)
            continue
        m = _EQ.match(term)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3).strip()
            if op == "!=":
                reqs.append(lambda l, k=key, v=value: l.get(k) != v)
            else:
                reqs.append(lambda l, k=key, v=value: k in l and l[k] == v)
            continue
        if term.startswith("!"):
            reqs.append(lambda l, k=term[1:].strip(): k not in l)
        elif re.fullmatch(r"[A-Za-z0-9._/-]+", term):
            reqs.append(lambda l, k=term: k in l)
        else:
            raise SelectorError(f"unable to parse requirement: {term!r}")
    return lambda labels: all(r(labels) for r in reqs)


def field_value(obj: dict, path: str) -> str:
    """The string value of a dotted field path; absent fields read as ""."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(expr: str | None) -> Callable[[dict], bool]:
    if not expr:
        return lambda obj: True
    reqs = []
    for term in _split_top(expr):
        m = _EQ.match(term)
        if not m:
            raise SelectorError(f"invalid field selector: {term!r}")
        path, op, value = m.group(1), m.group(2), m.group(3).strip()
        if op == "!=":
            reqs.append(lambda o, p=path, v=value: field_value(o, p) != v)
        else:
            reqs.append(lambda o, p=path, v=value: field_value(o, p) == v)
    return lambda obj: all(r(obj) for r in reqs)


def matcher(label_selector: str | None, field_selector: str | None) -> Callable[[dict], bool] | None:
    """A predicate on whole objects, or None when nothing is selected on."""
    if not label_selector and not field_selector:
        return None
    lab = parse_label_selector(label_selector)
    fld = parse_field_selector(field_selector)
    return lambda obj: lab((obj.get("metadata") or {}).get("labels") or {}) and fld(obj)
