"""Trace replay (``hami-fast simulate``): openb CSV loading, sweeps, tables and plots.

All scheduling math runs in the Rust engine (``hami_fast._native.replay``); this package only
reads files, fans runs out over processes, aggregates the summaries and draws figures.
"""

from hami_fast.sim.runner import POLICIES, Run, replay, summary

__all__ = ["POLICIES", "Run", "replay", "summary"]
