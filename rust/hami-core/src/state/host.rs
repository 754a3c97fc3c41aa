//! What the node policies read of a node's CPU and memory: its allocatable, and the requests of
//! the pods bound or assigned to it. Kept beside the GPU usage from the same Node and Pod watches;
//! the Fit never reads it (kube-scheduler checks CPU and memory before the extender is called).

use rustc_hash::FxHashMap;
use std::collections::HashSet;

/// One node's CPU (milli) and memory (MiB): allocatable when the Node says, and what pods request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeHost {
    pub allocatable: Option<(i64, i64)>,
    pub cpu_requested: i64,
    pub memory_requested: i64,
    pub pods: i64,
}

impl NodeHost {
    /// CPU left, when the allocatable is known.
    pub fn cpu_left(&self) -> Option<i64> {
        self.allocatable.map(|(cpu, _)| cpu - self.cpu_requested)
    }
}

#[derive(Debug, Clone)]
struct PodHost {
    node: Box<str>,
    /// `namespace/name`, for a re-list.
    object: String,
    cpu: i64,
    memory: i64,
}

/// Nodes' allocatable and the pods' requests on them, by pod key (UID, else `namespace/name`).
#[derive(Debug, Default, Clone)]
pub struct HostBook {
    nodes: FxHashMap<Box<str>, NodeHost>,
    pods: FxHashMap<String, PodHost>,
}

impl HostBook {
    pub fn node(&self, name: &str) -> Option<&NodeHost> {
        self.nodes.get(name)
    }

    /// A Node's allocatable CPU and memory (`None`: not given, or not a quantity).
    pub fn set_allocatable(&mut self, node: &str, allocatable: Option<(i64, i64)>) {
        match (self.nodes.get_mut(node), allocatable) {
            (Some(n), a) => n.allocatable = a,
            (None, Some(a)) => {
                self.nodes.insert(node.into(), NodeHost { allocatable: Some(a), ..NodeHost::default() });
            }
            (None, None) => {}
        }
    }

    /// The node a pod's requests count on, if they do.
    pub fn placed_on(&self, key: &str) -> Option<&str> {
        self.pods.get(key).map(|p| &*p.node)
    }

    /// Counts a pod's requests on `node` (moving them if they counted elsewhere).
    pub fn place(&mut self, key: &str, object: String, node: &str, (cpu, memory): (i64, i64)) {
        self.remove(key);
        let n = self.nodes.entry(node.into()).or_default();
        n.cpu_requested += cpu;
        n.memory_requested += memory;
        n.pods += 1;
        self.pods.insert(key.to_owned(), PodHost { node: node.into(), object, cpu, memory });
    }

    /// Stops counting a pod's requests; true if they counted.
    pub fn remove(&mut self, key: &str) -> bool {
        let Some(p) = self.pods.remove(key) else { return false };
        if let Some(n) = self.nodes.get_mut(&p.node) {
            n.cpu_requested -= p.cpu;
            n.memory_requested -= p.memory;
            n.pods -= 1;
            if n.allocatable.is_none() && n.pods == 0 {
                self.nodes.remove(&p.node);
            }
        }
        true
    }

    /// After a re-list of pods: forgets those whose `namespace/name` is not in `objects`.
    pub fn retain_pods(&mut self, objects: &HashSet<String>) {
        let gone: Vec<String> =
            self.pods.iter().filter(|(_, p)| !objects.contains(&p.object)).map(|(k, _)| k.clone()).collect();
        for key in gone {
            self.remove(&key);
        }
    }

    /// After a re-list of nodes: forgets the allocatable of those not in `names`.
    pub fn retain_nodes(&mut self, names: &HashSet<String>) {
        let gone: Vec<Box<str>> = self.nodes.keys().filter(|n| !names.contains(&***n)).cloned().collect();
        for name in gone {
            self.set_allocatable(&name, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_follow_their_pod_and_allocatable_may_come_later() {
        let mut book = HostBook::default();
        book.place("u1", "ns/a".into(), "n1", (1500, 100));
        assert_eq!(book.node("n1").unwrap().cpu_left(), None, "no allocatable yet");
        book.set_allocatable("n1", Some((8000, 1000)));
        book.place("u2", "ns/b".into(), "n1", (500, 10));
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(6000));
        book.place("u1", "ns/a".into(), "n2", (1500, 100));
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(7500), "moved off n1");
        assert_eq!(book.placed_on("u1"), Some("n2"));
        book.retain_pods(&HashSet::from(["ns/b".to_owned()]));
        assert_eq!(book.placed_on("u1"), None);
        assert!(book.node("n2").is_none(), "a node known only by its pods goes with them");
        assert!(book.remove("u2") && !book.remove("u2"));
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(8000));
        book.retain_nodes(&HashSet::new());
        assert_eq!(book.node("n1").unwrap().allocatable, None);
    }
}
