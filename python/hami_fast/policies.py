"""Policy names for flags and configuration, from the engine's own list (a new policy appears here by itself).

Annotations follow HAMi (an unknown value acts as binpack); a flag or config value must be a valid name.
"""

from __future__ import annotations

import argparse

from hami_fast import _native


def node_policy_names() -> list[str]:
    return list(_native.node_policy_names())


def check_node_policy(value: str) -> str:
    """The canonical name, or ValueError listing the valid ones."""
    return _native.check_node_policy(str(value))


def check_gpu_policy(value: str) -> str:
    return _native.check_gpu_policy(str(value))


def node_policy_arg(value: str) -> str:
    """argparse type: rejects an unknown name with the list of valid names."""
    try:
        return check_node_policy(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def gpu_policy_arg(value: str) -> str:
    try:
        return check_gpu_policy(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def node_policy_help(default: str = "binpack") -> str:
    return f"node scheduler policy: {', '.join(node_policy_names())} (default {default}; docs/policies.md)"


GPU_POLICY_HELP = (
    "GPU scheduler policy: spread (default), binpack, topology-aware, mutex, numa, or a chain such as numa,binpack"
)
