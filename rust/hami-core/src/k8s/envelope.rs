//! List and watch envelopes: the wrappers around objects, items left raw so each is parsed once.

use crate::k8s::object::nullable;
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Debug, Deserialize)]
pub struct WatchEvent<'a> {
    #[serde(rename = "type")]
    pub event_type: String,
    #[serde(borrow)]
    pub object: &'a RawValue,
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

/// The kind of an object or list, and a list's raw items.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Envelope<'a> {
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    #[serde(borrow)]
    pub items: Option<Vec<&'a RawValue>>,
}
