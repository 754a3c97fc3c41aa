"""Whether the API server applies a Binding's metadata the way `--allocation-write binding` needs.

kube-apiserver has copied a Binding's annotations onto the pod it binds for a long time; its labels
only from Kubernetes 1.35 (PodTopologyLabelsAdmission, on by default from that release). HAMi's
allocation includes the `hami.io/vgpu-node` label (its vGPU monitor lists a node's pods by it), so
on an older server, or one whose version cannot be read, Bind writes the pod patch first instead.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace

from hami_fast.config import Config
from hami_fast.kube.client import KubeClient
from hami_fast.kube.errors import ApiError

log = logging.getLogger("hami_fast.serve")

FIRST_COPYING_LABELS = (1, 35)


def server_version(client: KubeClient) -> tuple[int, int] | None:
    """(major, minor) from `/version` (a minor such as `35+` read as 35); None when unreadable."""
    try:
        doc = client.request("GET", "/version").json()
    except (ApiError, ValueError) as exc:
        log.warning("API server version not read", extra={"error": str(exc)})
        return None
    numbers = []
    for key in ("major", "minor"):
        digits = re.match(r"\d+", str(doc.get(key, "")))
        if digits is None:
            return None
        numbers.append(int(digits.group()))
    return numbers[0], numbers[1]


def effective_allocation_write(config: Config, client: KubeClient) -> Config:
    """`config`, with `--allocation-write binding` turned into `bind` where the server would drop
    the binding's label."""
    if config.allocation_write != "binding" or config.filter_patch_behind_answer:
        return config
    version = server_version(client)
    if version is not None and version >= FIRST_COPYING_LABELS:
        return config
    shown = "unknown" if version is None else f"{version[0]}.{version[1]}"
    log.warning(
        "--allocation-write binding needs Kubernetes 1.35 or later (a binding's labels copied onto the pod); "
        "writing the allocation with a pod patch at Bind instead (--allocation-write bind)",
        extra={"version": shown},
    )
    return replace(config, allocation_write="bind")
