"""Resource types the test API server knows, and the discovery documents describing them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    # Subresources served besides the object itself ("status", "binding", "eviction").
    subresources: tuple[str, ...] = ()
    # Custom resources: status dropped on create, strategic merge patch refused (415),
    # list items keep apiVersion/kind, PUT needs a resourceVersion.
    custom: bool = False
    # DELETE answers with the deleted object (pods, custom resources) instead of a Status.
    return_deleted_object: bool = False
    # metadata.generation is set to 1 on create and bumped when anything but metadata/status changes.
    tracks_generation: bool = False
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "get", "list", "patch", "update", "watch")
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def qualified(self) -> str:
        """`pods`, `leases.coordination.k8s.io`: the name used in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)


PLACEMENT_GROUP = "scheduling.hami.placement.com"

BUILTIN: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("status",), short_names=("ns",)),
    ResourceType("", "v1", "nodes", "Node", False, ("status",), short_names=("no",)),
    ResourceType(
        "",
        "v1",
        "pods",
        "Pod",
        True,
        ("status", "binding", "eviction"),
        return_deleted_object=True,
        tracks_generation=True,
        short_names=("po",),
    ),
    ResourceType("", "v1", "bindings", "Binding", True, verbs=("create",)),
    ResourceType("", "v1", "events", "Event", True, short_names=("ev",)),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, ("status",), short_names=("quota",)),
    ResourceType("", "v1", "configmaps", "ConfigMap", True, short_names=("cm",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, short_names=("ev",)),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        True,
        ("status",),
        tracks_generation=True,
        short_names=("pdb",),
    ),
    # Reviews are answered, never stored (see access.py).
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=("create",)),
    ResourceType(
        PLACEMENT_GROUP,
        "v1",
        "hamipodplacements",
        "HamiPodPlacement",
        True,
        ("status",),
        custom=True,
        return_deleted_object=True,
        tracks_generation=True,
        short_names=("hpp",),
    ),
)


class Registry:
    def __init__(self, types=BUILTIN):
        self._by_gvr: dict[tuple[str, str, str], ResourceType] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_gvr[(rt.group, rt.version, rt.plural)] = rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self._by_gvr.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None

    def resolve(self, name: str) -> ResourceType:
        """Find a type by plural (`pods`), group-qualified plural (`leases.coordination.k8s.io`),
        kind (`Pod`) or short name. A bare `events` is the core/v1 one."""
        candidates = []
        for rt in self._by_gvr.values():
            if name in (rt.qualified, f"{rt.plural}.{rt.group}"):
                return rt
            if name in (rt.plural, rt.kind, rt.kind.lower()) or name in rt.short_names:
                candidates.append(rt)
        if not candidates:
            raise KeyError(f"unknown resource {name!r}")
        candidates.sort(key=lambda rt: rt.group != "")
        return candidates[0]

    def all(self) -> list[ResourceType]:
        return list(self._by_gvr.values())

    # -- discovery -------------------------------------------------------------------------

    def api_versions(self) -> dict:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
        }

    def api_group_list(self) -> dict:
        groups: dict[str, list[str]] = {}
        for rt in self._by_gvr.values():
            if rt.group:
                groups.setdefault(rt.group, [])
                if rt.version not in groups[rt.group]:
                    groups[rt.group].append(rt.version)
        out = []
        for g, versions in sorted(groups.items()):
            vs = [{"groupVersion": f"{g}/{v}", "version": v} for v in versions]
            out.append({"name": g, "versions": vs, "preferredVersion": vs[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

    def api_resource_list(self, group: str, version: str) -> dict | None:
        rts = [rt for rt in self._by_gvr.values() if rt.group == group and rt.version == version]
        if not rts:
            return None
        resources = []
        for rt in rts:
            resources.append(
                {
                    "name": rt.plural,
                    "singularName": rt.kind.lower(),
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": list(rt.verbs),
                    "shortNames": list(rt.short_names),
                }
            )
            for sub in rt.subresources:
                verbs = ["get", "patch", "update"] if sub == "status" else ["create"]
                kind = {"status": rt.kind, "binding": "Binding", "eviction": "Eviction"}[sub]
                resources.append(
                    {
                        "name": f"{rt.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rt.namespaced,
                        "kind": kind,
                        "verbs": verbs,
                    }
                )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }
