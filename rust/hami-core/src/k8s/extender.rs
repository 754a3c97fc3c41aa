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

/// `body` cut where kube-scheduler puts `NodeNames`, last (Go's field order, no spaces): the
/// document without it (`{...}`) and the list's text (`[...]`, not checked: see [`plain_names`]).
/// The list is the body's last member, so it is the one a full parse keeps (a later key wins).
/// `known` is the list the caller expects (the last one): when the body ends with it the cut is
/// found without searching a long list for its start, and the list is `Cut::Known`. `None` when
/// the body does not end so; the caller parses the whole body then, and does so too when the head
/// is no document of its own.
pub fn split_node_names<'b>(body: &'b [u8], known: &[u8]) -> Option<(Vec<u8>, Cut<'b>)> {
    const KEY: &[u8] = b",\"NodeNames\":";
    let rest = trim_json_end(trim_json_end(body).strip_suffix(b"}")?);
    let (open, is_known) = match rest.strip_suffix(known) {
        Some(before) if !known.is_empty() => (before.len(), true),
        _ => (memchr::memrchr(b'[', rest)?, false),
    };
    let head = trim_json_end(&rest[..open]).strip_suffix(KEY)?;
    let mut doc = Vec::with_capacity(head.len() + 1);
    doc.extend_from_slice(head);
    doc.push(b'}');
    Some((doc, if is_known { Cut::Known } else { Cut::Other(&rest[open..]) }))
}

/// The list [`split_node_names`] cut off: the one the caller expected, or another (its text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut<'b> {
    Known,
    Other(&'b [u8]),
}

fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn trim_json_end(text: &[u8]) -> &[u8] {
    let end = text.iter().rposition(|&b| !is_json_space(b)).map_or(0, |i| i + 1);
    &text[..end]
}

fn trim_json_start(text: &[u8]) -> &[u8] {
    let start = text.iter().position(|&b| !is_json_space(b)).unwrap_or(text.len());
    &text[start..]
}

/// The strings of `list` when it is a JSON array of plain strings (ASCII, no escape or control
/// character: node names are), read straight off the text; `None` for any other text.
pub fn plain_names(list: &[u8]) -> Option<Vec<&str>> {
    let text = std::str::from_utf8(list).ok()?;
    let inner = trim_json_start(list.strip_prefix(b"[")?.strip_suffix(b"]")?);
    let mut at = list.len() - 1 - inner.len();
    let mut names = Vec::with_capacity(list.len() / 8 + 1);
    if inner.is_empty() {
        return Some(names);
    }
    loop {
        if list[at] != b'"' {
            return None;
        }
        let from = at + 1;
        let len = list[from..].iter().position(|&b| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b))?;
        if list[from + len] != b'"' {
            return None;
        }
        names.push(&text[from..from + len]);
        let rest = trim_json_start(&list[from + len + 1..list.len() - 1]);
        if rest.is_empty() {
            return Some(names);
        }
        let next = trim_json_start(rest.strip_prefix(b",")?);
        at = list.len() - 1 - next.len();
    }
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
    fn plain_names_read_what_serde_reads_or_nothing() {
        let lists = [
            r#"[]"#,
            r#"[ ]"#,
            r#"["a"]"#,
            r#"["n00001","n-2.x"]"#,
            r#"[ "a" , "b" ]"#,
            r#"["a","a",""]"#,
            r#"["a\"b"]"#,
            r#"["\u0061"]"#,
            r#"["é"]"#,
            "[\"a\u{1}\"]",
            r#"["a",]"#,
            r#"["a""b"]"#,
            r#"[,"a"]"#,
            r#"["a"#,
            r#"[1]"#,
            r#"null"#,
            "[\u{c}\"a\"]",
            r#"["[a"]"#,
        ];
        for list in lists {
            let serde: Option<Vec<String>> = serde_json::from_str(list).ok();
            match plain_names(list.as_bytes()) {
                Some(names) => assert_eq!(Some(names.iter().map(|n| n.to_string()).collect()), serde, "{list}"),
                None => assert!(
                    serde.is_none_or(|names| names.iter().any(|n| n.bytes().any(|b| !(0x20..0x80).contains(&b))))
                        || list.contains('\\'),
                    "{list} is plain"
                ),
            }
        }
        assert_eq!(plain_names(br#"[ "a" , "b" ]"#), Some(vec!["a", "b"]));
    }

    #[test]
    fn split_node_names_cuts_only_a_last_node_names() {
        let body = br#"{"Pod":{"x":[1]},"Nodes":null,"NodeNames":["a","b"]} "#;
        for known in [&b""[..], br#"["b"]"#, br#"["x"]"#] {
            let (doc, list) = split_node_names(body, known).unwrap();
            let head = &br#"{"Pod":{"x":[1]},"Nodes":null}"#[..];
            assert_eq!((doc.as_slice(), list), (head, Cut::Other(br#"["a","b"]"#)));
        }
        let (doc, list) = split_node_names(body, br#"["a","b"]"#).unwrap();
        assert_eq!((doc.as_slice(), list), (&br#"{"Pod":{"x":[1]},"Nodes":null}"#[..], Cut::Known));
        let (doc, list) = split_node_names(br#"{"Pod":1,"NodeNames": [ ] }"#, b"").unwrap();
        assert_eq!((doc.as_slice(), list), (&br#"{"Pod":1}"#[..], Cut::Other(b"[ ]")));
        let (_, list) = split_node_names(br#"{"Pod":1,"NodeNames":["a[b"]}"#, br#"["a[b"]"#).unwrap();
        assert_eq!(list, Cut::Known, "found by the known list, not by searching");
        for body in [
            &br#"{"NodeNames":["a"]}"#[..],
            br#"{"Pod":null,"NodeNames":["a"],"Nodes":null}"#,
            br#"{"Pod":null,"NodeNames":null}"#,
            br#"{"Pod":{"NodeNames":["a"]}}"#,
            br#"{"Pod":null,"nodenames":["a"]}"#,
            br#"{"Pod":{"x":1,"NodeNames":["a"]}}"#,
        ] {
            let cut = split_node_names(body, b"").map(|(doc, list)| (String::from_utf8(doc).unwrap(), list));
            let parsed: Option<ExtenderArgs> = cut.as_ref().and_then(|(doc, _)| serde_json::from_str(doc).ok());
            let plain = match cut.as_ref().map(|(_, list)| *list) {
                Some(Cut::Other(list)) => plain_names(list).is_some(),
                _ => false,
            };
            assert!(parsed.is_none() || !plain, "{}", String::from_utf8_lossy(body));
        }
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
