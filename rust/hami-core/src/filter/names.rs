//! The node names by id in one compact table, for resolving candidate lists.
//!
//! A candidate list is resolved name by name, 500 or more per call, and a new list comes with every
//! call when kube-scheduler rotates where its list starts. The node table's own index keeps each
//! name in an allocation of its own, spread over the heap between the nodes; this one keeps the
//! names side by side and each slot in 8 bytes, so a lookup touches about three cache lines of a
//! table small enough to stay in cache from one call to the next. Rebuilt when the set of nodes
//! changes (the node table's generation): a node's name and id never change otherwise.

use crate::state::nodes::NodeTable;
use std::hash::Hasher;

#[derive(Debug, Default)]
pub(super) struct NameIndex {
    /// The node table generation it was built at (`None`: never built).
    generation: Option<u64>,
    /// Open addressing, linear probing: `tag << 32 | (id + 1)`, 0 for an empty slot.
    slots: Vec<u64>,
    /// By id: where its name is in `text` (`(0, 0)` for a free id).
    spans: Vec<(u32, u32)>,
    text: String,
    /// By id: its name's rank among all node names in byte order, so that ties between fits are
    /// broken without comparing names (any list's names compare as their ranks do).
    ranks: Vec<u32>,
}

fn hash(name: &str) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(name.as_bytes());
    h.finish()
}

impl NameIndex {
    /// Brings the index to the node table's set of nodes.
    pub fn sync(&mut self, nodes: &NodeTable) {
        if self.generation == Some(nodes.generation()) {
            return;
        }
        self.generation = Some(nodes.generation());
        let size = (nodes.len() * 2).next_power_of_two().max(8);
        self.slots.clear();
        self.slots.resize(size, 0);
        self.spans.clear();
        self.text.clear();
        for (name, id) in nodes.ids() {
            let at = id as usize;
            if at >= self.spans.len() {
                self.spans.resize(at + 1, (0, 0));
            }
            self.spans[at] = (self.text.len() as u32, name.len() as u32);
            self.text.push_str(name);
            let h = hash(name);
            let mut slot = h as usize & (size - 1);
            while self.slots[slot] != 0 {
                slot = (slot + 1) & (size - 1);
            }
            self.slots[slot] = (h >> 32) << 32 | u64::from(id + 1);
        }
        let mut by_name: Vec<u32> = nodes.ids().map(|(_, id)| id).collect();
        by_name.sort_unstable_by(|&a, &b| self.name(a).cmp(self.name(b)));
        self.ranks.clear();
        self.ranks.resize(self.spans.len(), u32::MAX);
        for (rank, id) in by_name.into_iter().enumerate() {
            self.ranks[id as usize] = rank as u32;
        }
    }

    fn name(&self, id: u32) -> &str {
        let (at, len) = self.spans[id as usize];
        &self.text[at as usize..(at + len) as usize]
    }

    /// The rank of node `id`'s name among all node names (see `ranks`).
    pub fn rank(&self, id: u32) -> u32 {
        self.ranks.get(id as usize).copied().unwrap_or(u32::MAX)
    }

    /// The id of the node named `name`, as [`NodeTable::id`] at the generation synced to.
    #[cfg(test)]
    pub fn id(&self, name: &str) -> Option<u32> {
        self.find(name, hash(name))
    }

    /// The ids of `names` in order, as [`Self::id`] gives them one by one (`hashes`: scratch space).
    /// A new list's lookups land on random slots, which a server idle between requests has often
    /// lost from its caches: each slot is loaded several names ahead, so the misses overlap instead
    /// of being waited for one after another.
    pub fn ids(&self, names: &[&str], hashes: &mut Vec<u64>, mut each: impl FnMut(usize, Option<u32>)) {
        const AHEAD: usize = 12;
        hashes.clear();
        hashes.extend(names.iter().map(|name| hash(name)));
        for (k, name) in names.iter().enumerate() {
            if let Some(&ahead) = hashes.get(k + AHEAD) {
                self.prefetch_slot(ahead);
            }
            each(k, self.find(name, hashes[k]));
        }
    }

    #[inline]
    fn prefetch_slot(&self, h: u64) {
        #[cfg(target_arch = "x86_64")]
        if let Some(slot) = self.slots.get(h as usize & self.slots.len().wrapping_sub(1)) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: prefetching is a hint; the address is a slot of the table, nothing is dereferenced.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(slot).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h;
    }

    fn find(&self, name: &str, h: u64) -> Option<u32> {
        let mask = self.slots.len().checked_sub(1)?;
        let (tag, mut slot) = (h >> 32, h as usize & mask);
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            if entry >> 32 == tag {
                let id = (entry as u32) - 1;
                if self.name(id) == name {
                    return Some(id);
                }
            }
            slot = (slot + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuNode;

    fn node(name: &str) -> GpuNode {
        GpuNode { name: name.into(), ..GpuNode::default() }
    }

    #[test]
    fn ids_are_the_node_tables_through_additions_and_removals() {
        let mut table = NodeTable::default();
        let mut index = NameIndex::default();
        assert_eq!(index.id("a"), None, "never synced");
        index.sync(&table);
        assert_eq!(index.id("a"), None, "no nodes");
        let names: Vec<String> = (0..300).map(|i| format!("n{i:04}")).collect();
        for n in &names {
            table.insert(node(n));
        }
        for (k, gone) in names.iter().enumerate().filter(|(k, _)| k % 7 == 3) {
            table.remove(gone);
            if k % 2 == 0 {
                table.insert(node(&format!("{gone}-again")));
            }
        }
        index.sync(&table);
        let probes = names.iter().cloned().chain(names.iter().map(|n| format!("{n}-again")));
        let probes: Vec<String> = probes.chain(["".into(), "n".into(), "n0001x".into(), "n00010".into()]).collect();
        for name in &probes {
            assert_eq!(index.id(name), table.id(name), "{name}");
        }
        let (names, mut hashes, mut seen) = (probes.iter().map(String::as_str).collect::<Vec<_>>(), vec![], vec![]);
        index.ids(&names, &mut hashes, |k, id| seen.push((k, id)));
        let expected: Vec<_> = names.iter().enumerate().map(|(k, name)| (k, table.id(name))).collect();
        assert_eq!(seen, expected, "a whole list resolves as its names one by one, in order");
        let mut ids: Vec<u32> = table.ids().map(|(_, id)| id).collect();
        ids.sort_by_key(|&id| index.rank(id));
        let sorted: Vec<&str> = ids.iter().map(|&id| table.by_id(id).unwrap().name.as_str()).collect();
        assert!(sorted.windows(2).all(|w| w[0] < w[1]), "ranks order the names");
        assert_eq!(sorted.len(), table.len());
        table.insert(node("late"));
        assert_eq!(index.id("late"), None, "not synced since");
        index.sync(&table);
        assert_eq!(index.id("late"), table.id("late"));
    }
}
