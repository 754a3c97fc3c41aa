"""Vendor cases as both sides are started: HAMi's chart device config with Ascend and Iluvatar on.

HAMi gets `--device-config-file=<chart config> --enable-ascend=true --enable-iluvatar=true`, as its
binary runs in production; hami_fast's engine gets the same file (checked by its own loader) and the
same switches as settings.

Run as a script, it surveys what HAMi does with the generated cases, per vendor:

    cd tests && ../.venv/bin/python -m hamigen.vendor_oracle --cases 80 --reruns 5

prints the share of cases HAMi schedules, leaves unscheduled and refuses (webhook or Filter error),
and, rerunning some cases, which vendors' answers vary between identical runs.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from hamigen import oracle, seeding, sgpu
from hamigen.vendor_specs import FAMILIES, SGPU, TIME_ANNOTATIONS, VENDORS

CHART_CONFIG = Path(oracle.REPO.parent / "shared" / "tools" / "hami-scheduler" / "device-config.yaml")
SKIP_REASON = f"HAMi's chart device config not found at {CHART_CONFIG}"


def hami_args(config: Path = CHART_CONFIG) -> str:
    return f"--device-config-file={config} --enable-ascend=true --enable-iluvatar=true"


@functools.cache
def engine_settings(config: Path = CHART_CONFIG) -> dict[str, Any]:
    import orjson
    from hami_fast import _native

    checked = orjson.loads(_native.load_device_config(config.read_bytes(), str(config)))
    return {"device_config": checked, "vendors": {"enable_ascend": True, "enable_iluvatar": True}}


# Extra HAMi runs of a case it decides at random (model.resolved): with two possible answers per
# node, each is seen in 11 runs but for a chance of 1 in 1024. A node registering two backends is
# one: HAMi lists its devices in Go's map order of vendors, then sorts them with sort.Sort, which
# keeps that order for equal devices up to 12 devices (insertion sort) but not above (pdqsort):
# 8 Hygon + 8 NVIDIA devices give either of two Hygon devices, half the runs each; 6 + 6 or 13
# Hygon alone always the same one. Every mixed node is rerun, the smaller ones at no harm.
RERUNS = 10


def prepared(case: dict[str, Any], config: Path = CHART_CONFIG) -> dict[str, Any]:
    """The case as check_batch takes it: HAMi's flags, hami_fast's settings, and reruns where HAMi
    picks at random."""
    sgpu_ties = sgpu.random_in_hami(case, SGPU)
    reruns = RERUNS if case.get("mixed_nodes") or random_in_hami(case["pod"]) or sgpu_ties else 0
    return {**case, "hami_args": hami_args(config), "settings": engine_settings(config), "hami_reruns": reruns}


def random_in_hami(pod: dict[str, Any]) -> bool:
    """The pod asks two backends (their order is Go's map order, in the webhook and in each
    container's Fit), or Vastai (die groups of equal size are taken in map order), or several
    Ascend910 NPUs (network groups and 910C cards likewise: the shape is compared, model.canonical,
    but which ones a container took changes what the next one finds)."""
    asked = backends_asked(pod)
    return len(asked) > 1 or "Vastai" in asked or several_npus(pod)


def several_npus(pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.get("resources") or {}
        for name, value in {**(res.get("requests") or {}), **(res.get("limits") or {})}.items():
            count = name.startswith("huawei.com/Ascend910") and not name.endswith(("-memory", "-core"))
            if count and (value not in ("0", "1") or name.endswith("910C")):
                return True
    return False


def backends_asked(pod: dict[str, Any]) -> set[str]:
    spec = pod.get("spec") or {}
    names = set()
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.get("resources") or {}
        names |= set(res.get("limits") or {}) | set(res.get("requests") or {})
    return {b.common_word for backends in FAMILIES.values() for b in backends if b.count in names}


def outcome(answer: dict[str, Any]) -> str:
    if answer.get("error"):
        return "error"
    return "scheduled" if answer.get("node") else "unscheduled"


def stable_view(answer: dict[str, Any]) -> str:
    """An answer without its timestamps, to compare reruns."""
    ann = {k: ("<time>" if k in TIME_ANNOTATIONS else v) for k, v in (answer.get("annotations") or {}).items()}
    return json.dumps({**answer, "annotations": ann}, sort_keys=True)


def varying_fields(cases: list[dict[str, Any]], reruns: int) -> Counter:
    """How many of `cases` get different answers from identical HAMi runs, per answer field."""
    runs = [oracle.run_many(oracle_calls(cases)) for _ in range(reruns)]
    varying: Counter = Counter()
    for i in range(len(cases)):
        answers = [json.loads(stable_view(run[i])) for run in runs]
        for field in sorted(set().union(*answers)):
            if len({json.dumps(a.get(field), sort_keys=True) for a in answers}) > 1:
                varying[field] += 1
        if len({stable_view(run[i]) for run in runs}) > 1:
            varying["any"] += 1
    return varying


def draw_cases(family: str, count: int, partners: tuple[str, ...]) -> list[dict[str, Any]]:
    from hypothesis import given

    from hamigen.vendors import vendor_cases

    drawn: list[dict[str, Any]] = []

    @seeding.seeded_batches(count)
    @given(vendor_cases(family, partners))
    def collect(case):
        drawn.append(case)

    collect()
    return drawn[:count]


def oracle_calls(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        dict(
            items=c["items"],
            pod=c["pod"],
            node_policy=c["node_policy"],
            gpu_policy=c["gpu_policy"],
            hami_args=hami_args(),
        )
        for c in cases
    ]


def survey(family: str, count: int, reruns: int, partners: tuple[str, ...]) -> dict[str, Any]:
    cases = draw_cases(family, count, partners)
    answers = oracle.run_many(oracle_calls(cases))
    tally = Counter(outcome(a) for a in answers)
    errors = Counter((a.get("error") or "")[:90] for a in answers if a.get("error"))
    sample = cases[: min(len(cases), 16)]
    varying = varying_fields(sample, reruns) if reruns > 1 else Counter()
    return {
        "family": family,
        "cases": len(cases),
        **{k: tally.get(k, 0) for k in ("scheduled", "unscheduled", "error")},
        "top_errors": errors.most_common(4),
        "rerun_sample": len(sample) if reruns > 1 else 0,
        "varying": dict(varying),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=80)
    parser.add_argument("--reruns", type=int, default=5)
    parser.add_argument("--vendors", default=",".join(VENDORS))
    parser.add_argument("--partners", default=",".join(VENDORS), help="families a node may carry beside the focus")
    args = parser.parse_args()
    if oracle.find_oracle() is None:
        raise SystemExit(oracle.SKIP_REASON)
    partners = tuple(p for p in args.partners.split(",") if p)
    for family in args.vendors.split(","):
        print(json.dumps(survey(family, args.cases, args.reruns, partners)), flush=True)


if __name__ == "__main__":
    main()
