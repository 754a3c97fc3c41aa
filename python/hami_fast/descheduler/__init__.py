"""GPU descheduler: HamiPodPlacement controller, eviction executor, planner driver, REST API on 8083.

The planning math (fit, fragmentation, move search, target validation) lives in the Rust engine
(``hami_fast._native.plan`` / ``fragmentation`` / ``validate_target``); this package drives the
Kubernetes API around it.
"""
