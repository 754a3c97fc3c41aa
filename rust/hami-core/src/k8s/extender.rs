//! kube-scheduler extender wire types: Go field names out, keys matched case-insensitively in.

use crate::error::Error;
use crate::k8s::view::Text;
use crate::k8s::Pod;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// `ExtenderArgs` as kube-scheduler sends it to `/filter`; node names borrowed from the body.
#[derive(Debug, Default)]
pub struct ExtenderArgs<'a> {
    pub pod: Option<Pod>,
    pub nodes: Option<&'a RawValue>,
    /// Left raw: a repeated candidate list is recognised by its bytes without parsing 5,000 strings.
    pub node_names: Option<&'a RawValue>,
}

/// Parses a raw `NodeNames` array (`null` reads as empty).
pub fn parse_node_names(raw: Option<&RawValue>) -> Result<Vec<Cow<'_, str>>, Error> {
    let Some(raw) = raw else { return Ok(Vec::new()) };
    let names: Option<Vec<Text>> =
        serde_json::from_str(raw.get()).map_err(|e| Error::decode("ExtenderArgs.NodeNames", e))?;
    Ok(names.unwrap_or_default().into_iter().map(|t| t.0).collect())
}

impl<'de: 'a, 'a> Deserialize<'de> for ExtenderArgs<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ArgsVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for ArgsVisitor<'a> {
            type Value = ExtenderArgs<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an ExtenderArgs object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtenderArgs<'a>, A::Error> {
                let mut out = ExtenderArgs::default();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    match key.to_ascii_lowercase().as_str() {
                        "pod" => out.pod = map.next_value()?,
                        "nodes" => {
                            let raw: &'de RawValue = map.next_value()?;
                            out.nodes = (raw.get() != "null").then_some(raw);
                        }
                        "nodenames" => {
                            let raw: &'de RawValue = map.next_value()?;
                            out.node_names = (raw.get() != "null").then_some(raw);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(ArgsVisitor(std::marker::PhantomData))
    }
}

/// `ExtenderFilterResult`, serialized with Go's field names.
#[derive(Debug, Default, Serialize)]
pub struct ExtenderFilterResult<'a> {
    #[serde(rename = "Nodes")]
    pub nodes: Option<NodeItems<'a>>,
    #[serde(rename = "NodeNames")]
    pub node_names: Option<Vec<Cow<'a, str>>>,
    #[serde(rename = "FailedNodes")]
    pub failed_nodes: Option<BTreeMap<String, String>>,
    #[serde(rename = "FailedAndUnresolvableNodes")]
    pub failed_and_unresolvable: Option<BTreeMap<String, String>>,
    #[serde(rename = "Error")]
    pub error: String,
}

#[derive(Debug, Serialize)]
pub struct NodeItems<'a> {
    #[serde(borrow)]
    pub items: Vec<&'a RawValue>,
}

impl ExtenderFilterResult<'_> {
    pub fn error(message: impl Into<String>) -> Self {
        Self { error: message.into(), ..Self::default() }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| br#"{"Error":"failed to encode filter result"}"#.to_vec())
    }
}

/// `ExtenderBindingArgs` for `/bind`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ExtenderBindingArgs {
    pub pod_name: String,
    pub pod_namespace: String,
    pub pod_uid: String,
    pub node: String,
}

impl<'de> Deserialize<'de> for ExtenderBindingArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BindVisitor;
        impl<'de> Visitor<'de> for BindVisitor {
            type Value = ExtenderBindingArgs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an ExtenderBindingArgs object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtenderBindingArgs, A::Error> {
                let mut out = ExtenderBindingArgs::default();
                while let Some(key) = map.next_key::<String>()? {
                    let slot = match key.to_ascii_lowercase().as_str() {
                        "podname" => &mut out.pod_name,
                        "podnamespace" => &mut out.pod_namespace,
                        "poduid" => &mut out.pod_uid,
                        "node" => &mut out.node,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = map.next_value::<Option<String>>()?.unwrap_or_default();
                }
                if out.pod_name.is_empty() || out.node.is_empty() {
                    return Err(de::Error::custom("ExtenderBindingArgs needs PodName and Node"));
                }
                Ok(out)
            }
        }
        d.deserialize_map(BindVisitor)
    }
}

pub fn parse_binding_args(body: &[u8]) -> Result<ExtenderBindingArgs, Error> {
    serde_json::from_slice(body).map_err(|e| Error::decode("ExtenderBindingArgs", e))
}

#[derive(Debug, Serialize)]
pub struct ExtenderBindingResult {
    #[serde(rename = "Error")]
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_keys_are_case_insensitive() {
        let a: ExtenderArgs =
            serde_json::from_str(r#"{"pod":{"metadata":{"name":"p"}},"nodes":null,"nodenames":["a","b"]}"#).unwrap();
        assert_eq!(a.pod.unwrap().metadata.name, "p");
        assert!(a.nodes.is_none());
        assert_eq!(parse_node_names(a.node_names).unwrap(), vec!["a", "b"]);
        let a: ExtenderArgs =
            serde_json::from_str(r#"{"Pod":null,"Nodes":{"items":[]},"NodeNames":null,"Extra":1}"#).unwrap();
        assert!(a.pod.is_none() && a.nodes.is_some() && a.node_names.is_none());
    }

    #[test]
    fn filter_result_uses_go_field_names() {
        let r = ExtenderFilterResult { node_names: Some(vec!["node-b".into()]), ..Default::default() };
        assert_eq!(
            String::from_utf8(r.to_bytes()).unwrap(),
            r#"{"Nodes":null,"NodeNames":["node-b"],"FailedNodes":null,"FailedAndUnresolvableNodes":null,"Error":""}"#
        );
    }

    #[test]
    fn binding_args() {
        let b =
            parse_binding_args(br#"{"PodName":"gpu-pod","PodNamespace":"default","PodUID":"1b4c","Node":"node-b"}"#)
                .unwrap();
        assert_eq!(b.pod_uid, "1b4c");
        let b = parse_binding_args(br#"{"podname":"p","node":"n"}"#).unwrap();
        assert_eq!(b.pod_name, "p");
        assert!(parse_binding_args(br#"{"PodName":"p"}"#).unwrap_err().to_string().contains("Node"));
        assert!(parse_binding_args(b"nope").is_err());
    }
}
