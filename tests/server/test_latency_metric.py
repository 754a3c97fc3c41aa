"""The request-latency histogram batched off the request path exposes what prometheus_client's would."""

from __future__ import annotations

import random
import threading

from hami_fast.server.metrics import BUCKETS, BatchedHistogram
from prometheus_client import CollectorRegistry, Histogram, generate_latest


def exposition(registry: CollectorRegistry) -> list[str]:
    """The text format without `_created` (a timestamp of first use, different by nature)."""
    return sorted(line for line in generate_latest(registry).decode().splitlines() if "_created" not in line)


def test_same_exposition_as_prometheus_client_histogram() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    batched = BatchedHistogram("req_seconds", "Latency", "route", BUCKETS, ours)
    reference = Histogram("req_seconds", "Latency", ["route"], buckets=BUCKETS, registry=theirs)
    draw = random.Random(9)
    values = [*BUCKETS, 0.0, 31.0, 1e-9, *(draw.random() * 0.02 for _ in range(3000))]  # bounds land in their bucket
    for value in values:
        route = draw.choice(["filter", "bind", "webhook"])
        batched.observe(route, value)
        reference.labels(route).observe(value)
    assert exposition(ours) == exposition(theirs)
    assert 'req_seconds_created{route="filter"}' in generate_latest(ours).decode()
    with batched.labels("admit").time():
        pass
    assert ours.get_sample_value("req_seconds_count", {"route": "admit"}) == 1
    assert 0 < ours.get_sample_value("req_seconds_sum", {"route": "admit"}) < 1  # type: ignore[operator]


def test_observations_from_many_threads_are_all_counted() -> None:
    registry = CollectorRegistry()
    batched = BatchedHistogram("req_seconds", "Latency", "route", BUCKETS, registry)
    per_thread = BatchedHistogram.FOLD_AT * 2 + 17  # every thread folds on the way

    def observe() -> None:
        for _ in range(per_thread):
            batched.observe("filter", 0.0002)

    threads = [threading.Thread(target=observe) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(batched.pending) < BatchedHistogram.FOLD_AT  # bounded without a scrape
    assert registry.get_sample_value("req_seconds_count", {"route": "filter"}) == 4 * per_thread
    assert registry.get_sample_value("req_seconds_bucket", {"route": "filter", "le": "0.0001"}) == 0
    assert registry.get_sample_value("req_seconds_bucket", {"route": "filter", "le": "0.00025"}) == 4 * per_thread
