//! A candidate list as sent, its names kept as spans of its own text.
//!
//! kube-scheduler sends a new window of several hundred names on most calls: copying each name
//! into a string of its own costs an allocation and a copy per name, on memory a server idle
//! between requests has often lost from its caches. The list's text is kept once (it is compared
//! whole to recognise the list again) and every name is a span of it; only a name spelled with
//! escapes is written out, after the text.

use super::names::NameIndex;

#[derive(Debug, Clone, Copy)]
struct Entry {
    at: u32,
    len: u32,
    id: Option<u32>,
}

#[derive(Debug, Default)]
pub struct CandidateList {
    /// The list's JSON text as sent, then the names that had to be unescaped.
    text: String,
    /// How much of `text` is the list as sent.
    sent: usize,
    entries: Vec<Entry>,
    /// Scratch space for resolving a new list (its names' hashes).
    hashes: Vec<u64>,
}

impl CandidateList {
    /// Replaces the list: `sent` is its JSON text, `names` its names in order (each a slice of
    /// `sent` where it is spelled plainly there, else an unescaped copy), resolved in `index`.
    pub(super) fn fill(&mut self, sent: &str, names: &[&str], index: &NameIndex) {
        self.text.clear();
        self.text.push_str(sent);
        self.sent = sent.len();
        self.entries.clear();
        let (text, entries) = (&mut self.text, &mut self.entries);
        index.ids(names, &mut self.hashes, |k, id| {
            let name = names[k];
            let at = match offset_in(sent, name) {
                Some(at) => at,
                None => {
                    text.push_str(name);
                    text.len() - name.len()
                }
            };
            entries.push(Entry { at: at as u32, len: name.len() as u32, id });
        });
    }

    /// A list of `names` resolved against no node.
    #[cfg(test)]
    pub(super) fn of(names: &[&str]) -> Self {
        let mut list = Self::default();
        list.fill("", names, &NameIndex::default());
        list
    }

    /// The list as sent (JSON text).
    pub fn sent(&self) -> &str {
        &self.text[..self.sent]
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `k`th name and its node id.
    pub fn get(&self, k: usize) -> (&str, Option<u32>) {
        let e = self.entries[k];
        (&self.text[e.at as usize..(e.at + e.len) as usize], e.id)
    }

    /// The `k`th name's node id (`None` for a position past the end too).
    pub fn id(&self, k: usize) -> Option<u32> {
        self.entries.get(k).and_then(|e| e.id)
    }

    /// The names and their node ids, in the order sent.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, Option<u32>)> + Clone + '_ {
        (0..self.entries.len()).map(|k| self.get(k))
    }

    /// The names in the order sent.
    pub fn names(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.iter().map(|(name, _)| name)
    }
}

/// Where `name` starts in `text`, if it is a slice of it.
fn offset_in(text: &str, name: &str) -> Option<usize> {
    let at = (name.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    (at + name.len() <= text.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuNode;
    use crate::state::nodes::NodeTable;

    #[test]
    fn names_read_back_as_given_whether_slices_of_the_text_or_not() {
        let mut table = NodeTable::default();
        for name in ["a", "b\"q", "c"] {
            table.insert(GpuNode { name: name.into(), ..GpuNode::default() });
        }
        let mut index = NameIndex::default();
        index.sync(&table);
        let sent = r#"["a","b\"q","zz","c"]"#;
        let unescaped = String::from("b\"q");
        let names = [&sent[2..3], unescaped.as_str(), &sent[13..15], &sent[18..19]];
        let mut list = CandidateList::default();
        for _ in 0..2 {
            list.fill(sent, &names, &index);
            assert_eq!(list.sent(), sent);
            let got: Vec<(&str, Option<u32>)> = list.iter().collect();
            let ids = [table.id("a"), table.id("b\"q"), None, table.id("c")];
            assert_eq!(got, names.iter().copied().zip(ids).collect::<Vec<_>>());
            assert_eq!(list.id(4), None);
        }
        list.fill("[]", &[], &index);
        assert!(list.is_empty() && list.sent() == "[]");
    }
}
