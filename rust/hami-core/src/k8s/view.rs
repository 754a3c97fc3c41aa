//! One-pass views of watched objects: only the fields the cache needs, strings borrowed where possible.
//!
//! A pod event is parsed once: identity, the two HAMi annotations, and the small `spec`/`status`
//! slices the usage rules read. Other annotations (often large) are skipped without allocation.

use crate::annotations as codec;
use crate::error::Error;
use crate::k8s::ObjectKey;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// A string borrowed from the input when it has no escapes, owned otherwise.
pub struct Text<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(TextVisitor(std::marker::PhantomData))
    }
}

/// The HAMi annotations the cache reads, from nodes and pods alike.
#[derive(Debug, Default)]
pub struct HamiAnnotations<'a> {
    pub register: Option<Cow<'a, str>>,
    pub pair_scores: Option<Cow<'a, str>>,
    pub cordon: Option<Cow<'a, str>>,
    pub handshake: Option<Cow<'a, str>>,
    /// Which of HAMi's handshake annotations already carry a request (see [`crate::health`]).
    pub requesting_keys: u8,
    pub vgpu_node: Option<Cow<'a, str>>,
    pub allocated: Option<Cow<'a, str>>,
    pub mig_allocations: Option<Cow<'a, str>>,
    /// hami-fast's reservation of GPUs for a pending pod (see [`crate::state::reservations`]).
    pub reservation: Option<Cow<'a, str>>,
    pub reservation_expires: Option<Cow<'a, str>>,
    /// `nvidia.com/use-gputype`: the GPU models a pod accepts (what the node policies learn).
    pub use_type: Option<Cow<'a, str>>,
    /// The other vendors' register (`hami.io/node-*-register`) and allocation
    /// (`hami.io/*-devices-allocated`) annotations, as (key, value).
    pub vendor: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl HamiAnnotations<'_> {
    /// Another vendor's register or allocation annotation.
    pub fn vendor_value(&self, key: &str) -> Option<&str> {
        self.vendor.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_ref())
    }
}

/// A key of another vendor's registration (`hami.io/node-<word>-register`, Ascend's
/// `hami.io/node-register-<word>`), allocation or node score table (NVIDIA's own have fields of
/// their own), or Ascend's node mode.
fn is_vendor_key(key: &str) -> bool {
    key == crate::annotations::VNPU_CORE_NODE_KEY
        || key.starts_with(crate::annotations::METAX_TOPOLOGY_PREFIX)
        || key == crate::annotations::KUNLUN_ALLOCATED_KEY
        || key == crate::annotations::ENFLAME_DRS_CAPACITY_KEY
        || key == crate::annotations::SGPU_NODE_DEVICES_KEY
        || key == crate::annotations::SGPU_APP_CLASS_KEY
        || key.starts_with("hami.io/")
            && (key.ends_with("-devices-allocated")
                || (key.starts_with("hami.io/node-") && key.ends_with("-register"))
                || key.starts_with("hami.io/node-register-"))
}

impl<'de: 'a, 'a> Deserialize<'de> for HamiAnnotations<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AnnotationVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for AnnotationVisitor<'a> {
            type Value = HamiAnnotations<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(HamiAnnotations::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = HamiAnnotations::default();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    let slot = match key.as_ref() {
                        codec::REGISTER_KEY => &mut out.register,
                        codec::PAIR_SCORE_KEY => &mut out.pair_scores,
                        codec::DEVICE_CORDON_KEY => &mut out.cordon,
                        k if k.starts_with(crate::annotations::NODE_HANDSHAKE_KEY) => {
                            let value = map.next_value::<Option<Text<'de>>>()?.map(|t| t.0);
                            if let Some(i) = crate::annotations::NODE_HANDSHAKE_KEYS.iter().position(|h| *h == k) {
                                if value.as_deref().is_some_and(|v| v.contains("Requesting")) {
                                    out.requesting_keys |= 1 << i;
                                }
                                if i == 0 {
                                    out.handshake = value;
                                    continue;
                                }
                            }
                            if let Some(value) = value {
                                out.vendor.push((key, value));
                            }
                            continue;
                        }
                        codec::VGPU_NODE_KEY => &mut out.vgpu_node,
                        codec::ALLOCATED_KEY => &mut out.allocated,
                        codec::MIG_ALLOCATIONS_KEY => &mut out.mig_allocations,
                        codec::RESERVATION_KEY => &mut out.reservation,
                        codec::RESERVATION_EXPIRES_KEY => &mut out.reservation_expires,
                        crate::annotations::USE_TYPE_KEY => &mut out.use_type,
                        k if is_vendor_key(k) => {
                            if let Some(Text(value)) = map.next_value::<Option<Text<'de>>>()? {
                                out.vendor.push((key, value));
                            }
                            continue;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = map.next_value::<Option<Text<'de>>>()?.map(|t| t.0);
                }
                Ok(out)
            }
        }
        d.deserialize_any(AnnotationVisitor(std::marker::PhantomData))
    }
}

fn cow_or_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Cow<'de, str>, D::Error> {
    Ok(Option::<Text<'de>>::deserialize(d)?.map(|t| t.0).unwrap_or_default())
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct MetaView<'a> {
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub name: Cow<'a, str>,
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub namespace: Cow<'a, str>,
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub uid: Cow<'a, str>,
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub resource_version: Cow<'a, str>,
    #[serde(borrow)]
    pub annotations: HamiAnnotations<'a>,
    /// The one label a backend reads (AWS Neuron's instance type).
    #[serde(borrow)]
    pub labels: InstanceType<'a>,
    /// Set once the object is being deleted (a pod in its termination grace period).
    pub deletion_timestamp: Option<IgnoredAny>,
    /// RFC 3339 (sorts as text): a pod's arrival order for the policies that learn from pods seen.
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub creation_timestamp: Cow<'a, str>,
}

impl MetaView<'_> {
    /// `name` for cluster-scoped objects, `namespace/name` otherwise.
    pub fn key(&self) -> ObjectKey<'_> {
        ObjectKey::new(&self.namespace, &self.name)
    }

    /// A pod's reservation key: its UID, else `namespace/name`.
    pub fn reservation_key(&self) -> String {
        crate::k8s::reservation_key(&self.uid, &self.namespace, &self.name)
    }
}

/// A node's `node.kubernetes.io/instance-type` label; the other labels are skipped unread.
#[derive(Debug, Default)]
pub struct InstanceType<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for InstanceType<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LabelVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for LabelVisitor<'a> {
            type Value = InstanceType<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of labels")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(InstanceType::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = InstanceType::default();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    if key == crate::annotations::INSTANCE_TYPE_LABEL {
                        out.0 = map.next_value::<Option<Text<'de>>>()?.map(|t| t.0);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_any(LabelVisitor(std::marker::PhantomData))
    }
}

/// Any object (or a `Status` in a watch ERROR event), with kind-specific parts left raw.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ObjectView<'a> {
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub kind: Cow<'a, str>,
    #[serde(borrow, deserialize_with = "crate::k8s::object::nullable")]
    pub metadata: MetaView<'a>,
    #[serde(borrow)]
    pub spec: Option<&'a RawValue>,
    #[serde(borrow)]
    pub status: Option<&'a RawValue>,
    #[serde(borrow)]
    pub items: Option<Vec<&'a RawValue>>,
    pub code: i32,
}

/// What the registration health rule reads of a node's status.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct NodeStatusView {
    #[serde(deserialize_with = "crate::k8s::object::nullable")]
    pub allocatable: crate::k8s::ResourceList,
    /// Read by the backends whose devices HAMi derives from the node's capacity.
    #[serde(deserialize_with = "crate::k8s::object::nullable")]
    pub capacity: crate::k8s::ResourceList,
}

/// What the usage rules read from a pod's spec: how many init and app containers it has.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpecView {
    #[serde(deserialize_with = "crate::k8s::object::nullable")]
    pub init_containers: Vec<IgnoredAny>,
    #[serde(deserialize_with = "crate::k8s::object::nullable")]
    pub containers: Vec<IgnoredAny>,
    /// Resolved from the priority class at admission (0 when unset, as kube-scheduler reads it).
    pub priority: Option<i32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct TerminatedView {
    exit_code: i32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StateView {
    terminated: Option<TerminatedView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContainerStatusView {
    state: Option<StateView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatusView<'a> {
    #[serde(borrow, deserialize_with = "cow_or_empty")]
    pub phase: Cow<'a, str>,
    #[serde(deserialize_with = "crate::k8s::object::nullable")]
    init_container_statuses: Vec<ContainerStatusView>,
}

impl PodStatusView<'_> {
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase.as_ref(), "Succeeded" | "Failed")
    }

    /// Every one of `init_count` (> 0) init containers terminated with exit code 0.
    pub fn init_succeeded(&self, init_count: usize) -> bool {
        init_count > 0
            && self.init_container_statuses.len() >= init_count
            && self
                .init_container_statuses
                .iter()
                .all(|s| matches!(s.state.as_ref().and_then(|st| st.terminated.as_ref()), Some(t) if t.exit_code == 0))
    }
}

pub fn parse_raw<'a, T: Deserialize<'a> + Default>(raw: Option<&'a RawValue>) -> Result<T, serde_json::Error> {
    match raw {
        None => Ok(T::default()),
        Some(r) if r.get() == "null" => Ok(T::default()),
        Some(r) => serde_json::from_str(r.get()),
    }
}

/// Parses an object view; on failure says which kind and which field was wrong.
pub fn parse_object(bytes: &[u8]) -> Result<ObjectView<'_>, Error> {
    serde_json::from_slice(bytes).map_err(|_| describe_error(bytes))
}

/// A second, slower parse that only runs on bad input: names the object's kind and the field path.
pub fn describe_error(bytes: &[u8]) -> Error {
    #[derive(Deserialize, Default)]
    struct KindOnly {
        #[serde(default)]
        kind: Option<String>,
    }
    let kind = serde_json::from_slice::<KindOnly>(bytes).ok().and_then(|k| k.kind).unwrap_or_else(|| "object".into());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, ObjectView>(&mut de) {
        Err(e) if e.path().iter().next().is_some() => {
            Error::decode(kind, e.inner()).field(format!("field {}", e.path()))
        }
        Err(e) => Error::decode(kind, e.inner()),
        Ok(_) => Error::decode(kind, "invalid JSON"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hami_annotations_are_kept() {
        let v: ObjectView = serde_json::from_str(
            r#"{"kind":"Pod","metadata":{"name":"p","namespace":"d","uid":"u","resourceVersion":"7",
               "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"big\":1}","hami.io/vgpu-node":"n","hami.io/vgpu-devices-allocated":"G,NVIDIA,1,2:;"}},
               "spec":{"initContainers":[{"name":"i"}],"containers":[]},"status":{"phase":"Running"}}"#,
        )
        .unwrap();
        assert_eq!(v.metadata.key().to_string(), "d/p");
        assert_eq!(v.metadata.annotations.vgpu_node.as_deref(), Some("n"));
        assert!(matches!(v.metadata.annotations.vgpu_node, Some(Cow::Borrowed(_))));
        let spec: PodSpecView = parse_raw(v.spec).unwrap();
        assert_eq!(spec.init_containers.len(), 1);
        let status: PodStatusView = parse_raw(v.status).unwrap();
        assert!(!status.is_terminal() && !status.init_succeeded(1));
    }

    #[test]
    fn nulls_and_status_objects() {
        let v: ObjectView = serde_json::from_str(r#"{"kind":"Status","code":410,"metadata":null}"#).unwrap();
        assert_eq!(v.code, 410);
        let v: ObjectView = serde_json::from_str(r#"{"metadata":{"annotations":null,"name":null}}"#).unwrap();
        assert!(v.metadata.annotations.register.is_none() && v.metadata.name.is_empty());
    }
}
