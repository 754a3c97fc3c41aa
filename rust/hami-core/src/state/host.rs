//! What the node policies read of a node's CPU and memory: its allocatable, and the requests of
//! the pods bound or assigned to it. Kept beside the GPU usage from the same Node and Pod watches;
//! the Fit never reads it (kube-scheduler checks CPU and memory before the extender is called).

use rustc_hash::FxHashMap;
use std::collections::HashSet;
use std::sync::Arc;

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
    node: Arc<str>,
    cpu: i64,
    memory: i64,
    /// False once the pod has ended: its requests no longer count, but the pod is still known.
    counted: bool,
}

/// Nodes' allocatable and the pods' requests on them, by pod (`namespace/name`).
#[derive(Debug, Default, Clone)]
pub struct HostBook {
    nodes: FxHashMap<Box<str>, NodeHost>,
    pods: FxHashMap<Box<str>, PodHost>,
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

    /// Whether the pod was ever placed (its requests may have stopped counting since).
    pub fn knows(&self, pod: &str) -> bool {
        self.pods.contains_key(pod)
    }

    /// The node a pod's requests count on, if they do.
    pub fn placed_on(&self, pod: &str) -> Option<&str> {
        self.pods.get(pod).filter(|p| p.counted).map(|p| &*p.node)
    }

    /// Counts a pod's requests on `node` (moving them if they counted elsewhere).
    pub fn place(&mut self, pod: &str, node: Arc<str>, (cpu, memory): (i64, i64)) {
        self.uncount(pod);
        let n = self.nodes.entry(node.as_ref().into()).or_default();
        n.cpu_requested += cpu;
        n.memory_requested += memory;
        n.pods += 1;
        self.pods.insert(pod.into(), PodHost { node, cpu, memory, counted: true });
    }

    /// A pod that ended: its requests stop counting; it stays known.
    pub fn uncount(&mut self, pod: &str) {
        let Some(p) = self.pods.get_mut(pod).filter(|p| p.counted) else { return };
        p.counted = false;
        let (node, cpu, memory) = (p.node.clone(), p.cpu, p.memory);
        if let Some(n) = self.nodes.get_mut(&*node) {
            n.cpu_requested -= cpu;
            n.memory_requested -= memory;
            n.pods -= 1;
            if n.allocatable.is_none() && n.pods == 0 {
                self.nodes.remove(&*node);
            }
        }
    }

    /// A pod deleted (or a decision rolled back): forgotten; true if it was known.
    pub fn remove(&mut self, pod: &str) -> bool {
        self.uncount(pod);
        self.pods.remove(pod).is_some()
    }

    /// After a re-list of pods: forgets those whose `namespace/name` is not in `pods`.
    pub fn retain_pods(&mut self, pods: &HashSet<String>) {
        let gone: Vec<Box<str>> = self.pods.keys().filter(|k| !pods.contains(&***k)).cloned().collect();
        for pod in gone {
            self.remove(&pod);
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
        book.place("ns/a", "n1".into(), (1500, 100));
        assert_eq!(book.node("n1").unwrap().cpu_left(), None, "no allocatable yet");
        book.set_allocatable("n1", Some((8000, 1000)));
        book.place("ns/b", "n1".into(), (500, 10));
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(6000));
        book.place("ns/a", "n2".into(), (1500, 100));
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(7500), "moved off n1");
        assert_eq!(book.placed_on("ns/a"), Some("n2"));
        book.uncount("ns/b");
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(8000), "an ended pod's requests stop counting");
        assert!(book.knows("ns/b") && book.placed_on("ns/b").is_none());
        book.uncount("ns/b");
        assert_eq!(book.node("n1").unwrap().cpu_left(), Some(8000), "once");
        book.retain_pods(&HashSet::from(["ns/b".to_owned()]));
        assert!(!book.knows("ns/a"));
        assert!(book.node("n2").is_none(), "a node known only by its pods goes with them");
        assert!(book.remove("ns/b") && !book.remove("ns/b"));
        book.retain_nodes(&HashSet::new());
        assert_eq!(book.node("n1").unwrap().allocatable, None);
    }
}
