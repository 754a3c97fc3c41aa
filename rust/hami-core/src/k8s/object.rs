//! The parts of Kubernetes objects the engine reads. Unknown fields are skipped; `null` reads as empty.

use crate::k8s::quantity::Quantity;
use crate::k8s::ObjectKey;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

pub type StringMap = BTreeMap<String, String>;
pub type ResourceList = BTreeMap<String, Quantity>;

/// `null` and absence both read as the type's default.
pub fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A malformed value reads as the type's default instead of failing the whole object (for
/// fields only the planner reads, which must not make an otherwise usable object unreadable).
pub fn lenient<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + serde::de::DeserializeOwned,
{
    let value = serde_json::Value::deserialize(d)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// The controller of an object (its `ownerReferences` entry with `controller: true`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OwnerReference {
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    pub controller: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(deserialize_with = "nullable")]
    pub uid: String,
    #[serde(deserialize_with = "nullable")]
    pub resource_version: String,
    #[serde(deserialize_with = "nullable")]
    pub annotations: StringMap,
    #[serde(deserialize_with = "nullable")]
    pub labels: StringMap,
    /// RFC 3339 in UTC (`2026-01-01T00:00:00Z`, as the API server writes it): sorts as text.
    pub creation_timestamp: Option<String>,
    pub deletion_timestamp: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub owner_references: Vec<OwnerReference>,
}

impl ObjectMeta {
    /// The controlling owner as (kind, name), if any.
    pub fn controller(&self) -> Option<(&str, &str)> {
        self.owner_references.iter().find(|o| o.controller == Some(true)).map(|o| (o.kind.as_str(), o.name.as_str()))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Resources {
    pub limits: Option<ResourceList>,
    pub requests: Option<ResourceList>,
}

impl Resources {
    /// Limits first, then requests, as HAMi reads every vGPU resource.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.limits.as_ref().and_then(|l| l.get(name)).or_else(|| self.requests.as_ref().and_then(|r| r.get(name)))
    }

    pub fn limit(&self, name: &str) -> Option<&Quantity> {
        self.limits.as_ref().and_then(|l| l.get(name))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SecurityContext {
    pub privileged: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Container {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    pub resources: Option<Resources>,
    pub security_context: Option<SecurityContext>,
    pub env: Option<Vec<serde_json::Value>>,
}

impl Container {
    pub fn resources(&self) -> &Resources {
        static EMPTY: Resources = Resources { limits: None, requests: None };
        self.resources.as_ref().unwrap_or(&EMPTY)
    }

    pub fn privileged(&self) -> bool {
        self.security_context.as_ref().and_then(|s| s.privileged).unwrap_or(false)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(deserialize_with = "nullable")]
    pub containers: Vec<Container>,
    #[serde(deserialize_with = "nullable")]
    pub init_containers: Vec<Container>,
    #[serde(deserialize_with = "nullable")]
    pub scheduler_name: String,
    #[serde(deserialize_with = "nullable")]
    pub node_name: String,
    pub runtime_class_name: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub scheduling_group: SchedulingGroup,
    /// Resolved from the priority class at admission; kube-scheduler orders its queue by it.
    pub priority: Option<i32>,
    /// `Never`: the pod waits without evicting anyone (copied from its priority class at admission).
    pub preemption_policy: Option<String>,
    /// What the pod's RuntimeClass adds to its requests (`spec.overhead`).
    #[serde(deserialize_with = "nullable")]
    pub overhead: ResourceList,
}

impl PodSpec {
    /// CPU (milli) and memory (MiB) the pod requests of its node, as kube-scheduler counts them:
    /// the larger of the app containers' sum and any one init container, plus the overhead.
    /// Restartable (sidecar) init containers count as plain init containers here.
    pub fn host_request(&self) -> (i64, i64) {
        use crate::k8s::quantity::{cpu_milli, memory_mib};
        let req = |r: Option<&ResourceList>, key: &str, f: fn(&str) -> Option<i64>| {
            r.and_then(|r| r.get(key)).and_then(|q| f(&q.0)).unwrap_or(0)
        };
        let one = |c: &Container| {
            let r = c.resources().requests.as_ref();
            (req(r, "cpu", cpu_milli), req(r, "memory", memory_mib))
        };
        let (mut cpu, mut mem) = self.containers.iter().map(one).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        for (c, m) in self.init_containers.iter().map(one) {
            cpu = cpu.max(c);
            mem = mem.max(m);
        }
        let overhead = Some(&self.overhead);
        (cpu + req(overhead, "cpu", cpu_milli), mem + req(overhead, "memory", memory_mib))
    }
}

/// `spec.schedulingGroup` (Kubernetes' workload API): the PodGroup a pod belongs to.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SchedulingGroup {
    pub pod_group_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nullable")]
    pub spec: PodSpec,
}

impl Pod {
    /// Always `namespace/name`.
    pub fn key(&self) -> ObjectKey<'_> {
        ObjectKey::namespaced(&self.metadata.namespace, &self.metadata.name)
    }

    /// A member of a PodGroup, as HAMi's `IsPodGroupMember` reads it: the coscheduling label
    /// or `spec.schedulingGroup.podGroupName`, non-empty. HAMi retries its node lock for them.
    pub fn is_pod_group_member(&self) -> bool {
        let named = |v: Option<&String>| v.is_some_and(|v| !v.is_empty());
        named(self.metadata.labels.get(crate::annotations::POD_GROUP_LABEL))
            || named(self.spec.scheduling_group.pod_group_name.as_ref())
    }

    /// Where its reservation is kept: the UID, else `namespace/name`.
    pub fn reservation_key(&self) -> String {
        crate::k8s::reservation_key(&self.metadata.uid, &self.metadata.namespace, &self.metadata.name)
    }
}

/// The parts of a Pod's or Node's `status` the engine reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ObjectStatus {
    #[serde(deserialize_with = "nullable")]
    pub phase: String,
    #[serde(deserialize_with = "lenient")]
    pub allocatable: ResourceList,
    #[serde(deserialize_with = "lenient")]
    pub conditions: Vec<PodCondition>,
}

impl ObjectStatus {
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed")
    }

    /// kube-scheduler's message when its last attempt found no node (`PodScheduled` False,
    /// reason `Unschedulable`).
    pub fn unschedulable_message(&self) -> Option<&str> {
        self.conditions
            .iter()
            .find(|c| c.condition_type == "PodScheduled" && c.status == "False" && c.reason == "Unschedulable")
            .map(|c| c.message.as_str())
    }
}

/// One of a Pod's `status.conditions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodCondition {
    #[serde(rename = "type", deserialize_with = "nullable")]
    pub condition_type: String,
    #[serde(deserialize_with = "nullable")]
    pub status: String,
    #[serde(deserialize_with = "nullable")]
    pub reason: String,
    #[serde(deserialize_with = "nullable")]
    pub message: String,
}

/// Any Node or Pod in full, parsed once: what the planner reads of a snapshot item.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Object {
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(deserialize_with = "nullable")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nullable")]
    pub spec: PodSpec,
    #[serde(deserialize_with = "nullable")]
    pub status: ObjectStatus,
}

impl Object {
    /// The Pod part (metadata and spec) of the object.
    pub fn into_pod(self) -> (Pod, ObjectStatus) {
        (Pod { metadata: self.metadata, spec: self.spec }, self.status)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct QuotaSpec {
    #[serde(deserialize_with = "nullable")]
    pub hard: ResourceList,
}

impl ObjectMeta {
    /// `name` for cluster-scoped objects, `namespace/name` otherwise.
    pub fn key(&self) -> ObjectKey<'_> {
        ObjectKey::new(&self.namespace, &self.name)
    }
}
