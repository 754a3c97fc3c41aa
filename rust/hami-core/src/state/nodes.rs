//! Nodes in a slot table: stable numeric ids, name index, a generation that changes when the set
//! does, and a stamp per node that changes whenever the node may have (every mutable access).

use crate::model::GpuNode;
use rustc_hash::FxHashMap;

#[derive(Debug, Default)]
pub struct NodeTable {
    slots: Vec<Option<GpuNode>>,
    index: FxHashMap<String, u32>,
    free: Vec<u32>,
    generation: u64,
    /// Per slot: the clock's value at the node's last mutable access; never 0 for a live node.
    stamps: Vec<u64>,
    clock: u64,
}

impl NodeTable {
    pub fn id(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    pub fn by_id(&self, id: u32) -> Option<&GpuNode> {
        self.slots.get(id as usize).and_then(Option::as_ref)
    }

    pub fn get(&self, name: &str) -> Option<&GpuNode> {
        self.id(name).and_then(|id| self.by_id(id))
    }

    /// The node to change: its stamp moves on, so whatever was derived from it is known stale.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut GpuNode> {
        let id = self.id(name)?;
        self.touch(id);
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Changes whenever the node with this id may have changed (0: no node has that id).
    pub fn stamp(&self, id: u32) -> u64 {
        self.stamps.get(id as usize).copied().unwrap_or(0)
    }

    fn touch(&mut self, id: u32) {
        self.clock += 1;
        if let Some(stamp) = self.stamps.get_mut(id as usize) {
            *stamp = self.clock;
        }
    }

    /// Replaces a node in place (same id), or adds it in a free slot.
    pub fn insert(&mut self, node: GpuNode) {
        if let Some(id) = self.id(&node.name) {
            self.slots[id as usize] = Some(node);
            self.touch(id);
            return;
        }
        let id = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.stamps.push(0);
            (self.slots.len() - 1) as u32
        });
        self.index.insert(node.name.clone(), id);
        self.slots[id as usize] = Some(node);
        self.touch(id);
        self.generation += 1;
    }

    pub fn remove(&mut self, name: &str) -> Option<GpuNode> {
        let id = self.index.remove(name)?;
        self.free.push(id);
        self.generation += 1;
        self.stamps[id as usize] = 0;
        self.slots[id as usize].take()
    }

    /// Changes whenever a node is added or removed (ids of existing names never change otherwise).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn values(&self) -> impl Iterator<Item = &GpuNode> {
        self.slots.iter().flatten()
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.index.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> GpuNode {
        GpuNode { name: name.into(), ..GpuNode::default() }
    }

    #[test]
    fn ids_are_stable_and_reused() {
        let mut t = NodeTable::default();
        t.insert(node("a"));
        t.insert(node("b"));
        let g = t.generation();
        t.insert(node("a"));
        assert_eq!((t.id("a"), t.generation()), (Some(0), g));
        assert!(t.remove("a").is_some());
        assert!(t.generation() > g);
        t.insert(node("c"));
        assert_eq!(t.id("c"), Some(0));
        assert_eq!(t.len(), 2);
        assert!(t.get("a").is_none());
    }

    #[test]
    fn stamps_move_on_every_change() {
        let mut t = NodeTable::default();
        t.insert(node("a"));
        t.insert(node("b"));
        let (a, b) = (t.stamp(0), t.stamp(1));
        assert!(a > 0 && b > 0 && a != b);
        let _ = t.get("a");
        assert_eq!(t.stamp(0), a, "a read leaves the stamp");
        t.get_mut("a").unwrap().name = "a".into();
        assert!(t.stamp(0) > a);
        assert_eq!(t.stamp(1), b, "other nodes keep theirs");
        let a = t.stamp(0);
        t.insert(node("a"));
        assert!(t.stamp(0) > a, "a replaced node is a changed node");
        t.remove("a");
        assert_eq!(t.stamp(0), 0);
        t.insert(node("c"));
        assert!(t.stamp(0) > a, "a reused id does not inherit the stamp");
        assert_eq!(t.stamp(7), 0);
    }
}
