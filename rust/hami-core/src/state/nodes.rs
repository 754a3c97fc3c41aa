//! Nodes in a slot table: stable numeric ids, name index, and a generation that changes when the set does.

use crate::model::GpuNode;
use rustc_hash::FxHashMap;

#[derive(Debug, Default)]
pub struct NodeTable {
    slots: Vec<Option<GpuNode>>,
    index: FxHashMap<String, u32>,
    free: Vec<u32>,
    generation: u64,
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

    pub fn get_mut(&mut self, name: &str) -> Option<&mut GpuNode> {
        let id = self.id(name)?;
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Replaces a node in place (same id), or adds it in a free slot.
    pub fn insert(&mut self, node: GpuNode) {
        if let Some(id) = self.id(&node.name) {
            self.slots[id as usize] = Some(node);
            return;
        }
        let id = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (self.slots.len() - 1) as u32
        });
        self.index.insert(node.name.clone(), id);
        self.slots[id as usize] = Some(node);
        self.generation += 1;
    }

    pub fn remove(&mut self, name: &str) -> Option<GpuNode> {
        let id = self.index.remove(name)?;
        self.free.push(id);
        self.generation += 1;
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
}
