//! The `namespace/name` key of an object, written in one place.

use std::fmt;

/// `namespace/name`; a cluster-scoped object (no namespace) is keyed by its name alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObjectKey<'a> {
    namespace: Option<&'a str>,
    name: &'a str,
}

impl<'a> ObjectKey<'a> {
    /// `name` when `namespace` is empty, `namespace/name` otherwise.
    pub fn new(namespace: &'a str, name: &'a str) -> Self {
        Self { namespace: (!namespace.is_empty()).then_some(namespace), name }
    }

    /// Always `namespace/name`, even with an empty namespace (pods are namespaced).
    pub fn namespaced(namespace: &'a str, name: &'a str) -> Self {
        Self { namespace: Some(namespace), name }
    }

    pub fn name(&self) -> &'a str {
        self.name
    }

    pub fn namespace(&self) -> &'a str {
        self.namespace.unwrap_or("")
    }
}

impl fmt::Display for ObjectKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(self.name),
        }
    }
}

/// A pod's reservation key: its UID, or `namespace/name` for a manifest without one.
pub fn reservation_key(uid: &str, namespace: &str, name: &str) -> String {
    if uid.is_empty() {
        ObjectKey::namespaced(namespace, name).to_string()
    } else {
        uid.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert_eq!(ObjectKey::new("", "node-a").to_string(), "node-a");
        assert_eq!(ObjectKey::new("ns", "p").to_string(), "ns/p");
        assert_eq!(ObjectKey::namespaced("", "p").to_string(), "/p");
        assert_eq!(reservation_key("u-1", "ns", "p"), "u-1");
        assert_eq!(reservation_key("", "ns", "p"), "ns/p");
    }
}
