"""hami_fast: a HAMi-compatible GPU-sharing scheduler extender with a Rust engine."""

from hami_fast._native import Cluster, EngineError, __version__

__all__ = ["Cluster", "EngineError", "__version__"]
