"""Command-line plumbing shared by `hami-fast` and `kubectl hami`: numeric option types that refuse
nonsense (a negative pod count, zero jobs) and a parser whose mistakes are one line."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """A usage mistake is one line on stderr and exit 2, not the usage block (`--help` has it)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unrecognized option is reported by the subcommand it was given to."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._subcommand(getattr(parsed, "command", None)).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _subcommand(self, name: str | None) -> argparse.ArgumentParser:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        return self


def _number(kind: Callable[[str], float], lowest: float, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"want {what}, got {text!r}") from None
        if not math.isfinite(value) or value < lowest:
            raise argparse.ArgumentTypeError(f"want {what}, got {text!r}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


#: Whole numbers from 1 (counts that must be at least one: pods, jobs, top N).
positive_int = _number(int, 1, "a whole number of at least 1")
#: Whole numbers from 0 (budgets, seeds).
non_negative_int = _number(int, 0, "a whole number of at least 0")
#: Finite numbers from 0 (seconds, ratios).
non_negative_float = _number(float, 0.0, "a number of at least 0")


def positive_float(text: str) -> float:
    """A finite number above 0 (a timeout, a percentage of capacity)."""
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"want a number above 0, got {text!r}")
    return value


def require_file(path: str, option: str = "") -> None:
    """ValueError (one line, naming the option) unless `path` is an existing file."""
    where = f"{option} {path}" if option else path
    if Path(path).is_dir():
        raise ValueError(f"{where}: a directory, not a file")
    if not Path(path).is_file():
        raise ValueError(f"{where}: no such file")


TRUE = frozenset({"1", "t", "true", "y", "yes", "on"})
FALSE = frozenset({"0", "f", "false", "n", "no", "off", ""})


def parse_bool(text: str, name: str = "") -> bool:
    """One boolean parser for flags, environment and Helm values: Go's strconv.ParseBool spellings
    (1/0, t/f, true/false in any case) plus yes/no, y/n and on/off as YAML and shell users write
    them; empty is false (a variable set to nothing). ValueError names the setting otherwise."""
    lowered = text.strip().lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise ValueError(f"{name + ': ' if name else ''}{text!r} is not a boolean (true/false, 1/0, yes/no, on/off)")
