//! The parts of Kubernetes objects the engine reads. Unknown fields are skipped; `null` reads as empty.

use crate::quantity::Quantity;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
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
    pub deletion_timestamp: Option<String>,
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
    pub fn key(&self) -> String {
        format!("{}/{}", self.metadata.namespace, self.metadata.name)
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct QuotaSpec {
    #[serde(deserialize_with = "nullable")]
    pub hard: ResourceList,
}

#[derive(Debug, Deserialize)]
pub struct WatchEvent<'a> {
    #[serde(rename = "type")]
    pub event_type: String,
    #[serde(borrow)]
    pub object: &'a RawValue,
}

impl ObjectMeta {
    /// `name` for cluster-scoped objects, `namespace/name` otherwise.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ListMeta {
    #[serde(deserialize_with = "nullable")]
    pub resource_version: String,
    #[serde(rename = "continue", deserialize_with = "nullable")]
    pub continue_token: String,
}

#[derive(Debug, Deserialize)]
pub struct ListPage<'a> {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: ListMeta,
    #[serde(borrow, default)]
    pub items: Vec<&'a RawValue>,
}
