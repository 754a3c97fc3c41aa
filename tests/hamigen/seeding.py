"""The random draw of the oracle suite: fixed by default, so CI draws the same clusters every run.

`HAMI_ORACLE_SEED` picks the draw: unset or empty means `DEFAULT_SEED`, an integer means that
seed, and `random` a fresh seed per run (for exploration). The seed in use is printed at the end
of the pytest run and in every failure, and `HAMI_ORACLE_SEED=<that seed>` draws the same cases.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings

DEFAULT_SEED = 10
ENV = "HAMI_ORACLE_SEED"


def resolve(value: str | None) -> int:
    value = (value or "").strip()
    if not value:
        return DEFAULT_SEED
    if value.lower() == "random":
        return random.SystemRandom().getrandbits(32)
    try:
        return int(value, 0)
    except ValueError:
        raise SystemExit(f"{ENV}={value!r}: expected an integer or 'random'") from None


SEED = resolve(os.environ.get(ENV))


def describe() -> str:
    origin = "default" if not os.environ.get(ENV, "").strip() else f"{ENV}={os.environ[ENV].strip()}"
    return f"hami-oracle suite: hypothesis seed {SEED} ({origin}; rerun with {ENV}={SEED})"


def seeded_batches(max_examples: int) -> Callable[[Any], Any]:
    """The oracle suites' hypothesis settings: the draw fixed by `SEED`, no database, no deadline, and
    no shrinking (every step would cost a batch of oracle calls; failing cases are printed whole)."""
    configured = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    return lambda test: configured(seed(SEED)(test))
