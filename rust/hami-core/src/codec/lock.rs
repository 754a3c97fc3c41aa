//! `hami.io/mutex.lock`: `<RFC3339>,<namespace>,<name>` (legacy: bare timestamp).

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLock {
    pub timestamp: String,
    pub namespace: String,
    pub name: String,
}

/// The lock's parts; an error names no field (the caller names the annotation).
pub fn parse_node_lock(value: &str) -> Result<NodeLock> {
    if !value.contains(',') {
        if value.trim().is_empty() {
            return Err(Error::invalid("", "empty node lock value"));
        }
        return Ok(NodeLock { timestamp: value.to_owned(), namespace: String::new(), name: String::new() });
    }
    let parts: Vec<&str> = value.split(',').collect();
    match parts.as_slice() {
        [ts, ns, name] => Ok(NodeLock { timestamp: (*ts).into(), namespace: (*ns).into(), name: (*name).into() }),
        _ => Err(Error::invalid("", format!("node lock {value:?} must be '<RFC3339>,<namespace>,<name>'"))),
    }
}

pub fn format_node_lock(timestamp: &str, namespace: &str, name: &str) -> String {
    format!("{timestamp},{namespace},{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_legacy() {
        let v = "2025-06-01T12:00:05Z,default,gpu-pod";
        let l = parse_node_lock(v).unwrap();
        assert_eq!((l.namespace.as_str(), l.name.as_str()), ("default", "gpu-pod"));
        assert_eq!(format_node_lock(&l.timestamp, &l.namespace, &l.name), v);
        let legacy = parse_node_lock("2025-06-01T12:00:05+08:00").unwrap();
        assert!(legacy.namespace.is_empty() && legacy.name.is_empty());
        assert_eq!(
            parse_node_lock("a,b").unwrap_err().message,
            "node lock \"a,b\" must be '<RFC3339>,<namespace>,<name>'"
        );
        assert_eq!(parse_node_lock(" ").unwrap_err().to_string(), "empty node lock value");
        assert!(parse_node_lock("a,b,c,d").is_err());
    }
}
