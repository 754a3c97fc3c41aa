//! Nodes in a slot table: stable numeric ids, name index, a generation that changes when the set
//! does, and a log of the nodes that may have changed (every mutable access), in order.

use crate::model::GpuNode;
use rustc_hash::FxHashMap;

#[derive(Debug, Default)]
pub struct NodeTable {
    slots: Vec<Option<GpuNode>>,
    index: FxHashMap<String, u32>,
    free: Vec<u32>,
    generation: u64,
    /// Ids of the nodes mutably accessed since position `log_start`, oldest first.
    log: Vec<u32>,
    log_start: u64,
}

/// Past this many entries the older half of the change log is dropped (readers that far behind
/// are told to start over).
const LOG_MAX: usize = 1 << 16;

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

    /// The node to change: it goes into the change log, so whatever was derived from it is known stale.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut GpuNode> {
        let id = self.id(name)?;
        self.touch(id);
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// The node to change and change back before anyone reads the state again (a what-if inside
    /// one call): the change log is left alone, so nothing derived from the node is thrown away.
    pub(crate) fn get_mut_untracked(&mut self, name: &str) -> Option<&mut GpuNode> {
        let id = self.id(name)?;
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// The change log's current position (see [`Self::changed_since`]).
    pub fn log_position(&self) -> u64 {
        self.log_start + self.log.len() as u64
    }

    /// The ids of the nodes that may have changed since `position` (repeats possible), or `None`
    /// when the log no longer reaches back that far: treat every node as changed then.
    pub fn changed_since(&self, position: u64) -> Option<&[u32]> {
        let from = usize::try_from(position.checked_sub(self.log_start)?).ok()?;
        self.log.get(from..)
    }

    fn touch(&mut self, id: u32) {
        if self.log.len() >= LOG_MAX {
            self.log.drain(..LOG_MAX / 2);
            self.log_start += (LOG_MAX / 2) as u64;
        }
        self.log.push(id);
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
        self.touch(id);
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

    /// Every node's name and id.
    pub fn ids(&self) -> impl Iterator<Item = (&str, u32)> {
        self.index.iter().map(|(name, &id)| (name.as_str(), id))
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
    fn the_change_log_names_every_changed_node_since_a_position() {
        let mut t = NodeTable::default();
        t.insert(node("a"));
        t.insert(node("b"));
        let start = t.log_position();
        assert_eq!(t.changed_since(start), Some(&[][..]));
        let _ = t.get("a");
        assert_eq!(t.changed_since(start), Some(&[][..]), "a read changes nothing");
        t.get_mut("b").unwrap().name = "b".into();
        t.insert(node("a"));
        t.remove("b");
        assert_eq!(t.changed_since(start), Some(&[1, 0, 1][..]));
        assert_eq!(t.changed_since(start + 2), Some(&[1][..]));
        assert_eq!(t.changed_since(t.log_position() + 1), None, "a position not reached yet");
        for _ in 0..LOG_MAX {
            t.get_mut("a");
        }
        assert_eq!(t.changed_since(start), None, "too far behind: start over");
        let recent = t.log_position() - 3;
        assert_eq!(t.changed_since(recent), Some(&[0, 0, 0][..]));
    }
}
