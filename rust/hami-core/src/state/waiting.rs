//! The pods Filter turned away for want of vGPU room, kept until they are placed, bind, end or
//! are deleted: what a release of capacity may unblock. Pure bookkeeping; which of them fit after
//! a release is [`crate::requeue`]'s question.

use super::{ClusterState, PodRecord};
use crate::k8s::Pod;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// One pod Filter rejected, as kube-scheduler last sent it.
#[derive(Debug, Clone)]
pub struct WaitingPod {
    pub pod: Arc<Pod>,
    /// `spec.priority` (0 when unset, as kube-scheduler reads it).
    pub priority: i32,
    /// `metadata.creationTimestamp`, RFC 3339 in UTC: sorts as text.
    pub created: String,
    /// The nodes kube-scheduler offered it (those that passed its own plugins).
    pub candidates: Arc<[String]>,
    /// The node change log's position when Fit last looked at the pod: only nodes changed since
    /// can have room for it now.
    pub seen: u64,
    /// Its namespace's vGPU quota room (memory, cores) when Fit last looked; `None` without quota.
    pub quota_room: Option<(i64, i64)>,
    /// Set once it is put back in kube-scheduler's queue: it is not again until Filter rejects it again.
    pub requeued: Option<Requeued>,
    /// The node change log's position when preemption last looked for victims for it (kept across
    /// rejections): it looks again only once a node has changed since.
    pub preempt_seen: Option<u64>,
    /// Where preemption's last look ran out of work (a node name): the next goes on from there.
    pub preempt_from: Option<String>,
}

/// Where a requeued pod is expected to go: its footprint counts against the node until Filter
/// sees it again or `until` passes, so that one release does not requeue two pods for one room.
#[derive(Debug, Clone)]
pub struct Requeued {
    /// Taken out when `until` passes: the room it kept is released then.
    pub record: Option<PodRecord>,
    /// Unix seconds.
    pub until: i64,
}

impl WaitingPod {
    pub fn new(pod: Arc<Pod>, candidates: Arc<[String]>, seen: u64, quota_room: Option<(i64, i64)>) -> Self {
        let priority = pod.spec.priority.unwrap_or(0);
        let created = pod.metadata.creation_timestamp.clone().unwrap_or_default();
        Self {
            pod,
            priority,
            created,
            candidates,
            seen,
            quota_room,
            requeued: None,
            preempt_seen: None,
            preempt_from: None,
        }
    }

    /// Whether it may evict lower-priority pods: not with `preemptionPolicy: Never`.
    pub fn may_preempt(&self) -> bool {
        self.pod.spec.preemption_policy.as_deref() != Some("Never")
    }

    /// kube-scheduler's queue order: higher priority first, then older first.
    pub fn queue_order(&self, other: &Self) -> std::cmp::Ordering {
        other.priority.cmp(&self.priority).then_with(|| self.created.cmp(&other.created))
    }
}

/// The waiting pods by reservation key (UID, else `namespace/name`).
#[derive(Debug, Default)]
pub struct Waiting {
    by_key: FxHashMap<String, WaitingPod>,
    /// The candidate list of the last rejection, shared by the next one when it is the same list.
    last_candidates: Option<Arc<[String]>>,
}

impl Waiting {
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    pub fn get(&self, key: &str) -> Option<&WaitingPod> {
        self.by_key.get(key)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut WaitingPod> {
        self.by_key.get_mut(key)
    }

    /// Records (or renews) a rejected pod; a rejection clears an earlier requeue, not when preemption
    /// last looked. The entry it replaces.
    fn remember(&mut self, key: String, mut pod: WaitingPod) -> Option<WaitingPod> {
        if let Some(before) = self.by_key.get(&key) {
            pod.preempt_seen = before.preempt_seen;
        }
        self.by_key.insert(key, pod)
    }

    /// Forgets a pod (placed, bound, ended or deleted): its entry if it was waiting.
    fn forget(&mut self, key: &str) -> Option<WaitingPod> {
        self.by_key.remove(key)
    }

    /// Keeps only the pods `keep` accepts; the entries dropped.
    fn retain(&mut self, mut keep: impl FnMut(&Pod) -> bool) -> Vec<WaitingPod> {
        let gone: Vec<String> = self.by_key.iter().filter(|(_, w)| !keep(&w.pod)).map(|(k, _)| k.clone()).collect();
        gone.iter().filter_map(|k| self.by_key.remove(k)).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &WaitingPod)> {
        self.by_key.iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut WaitingPod)> {
        self.by_key.iter_mut()
    }

    /// `names` as a shared list: the previous rejection's when equal (one candidate list is
    /// typically offered to every pod of a burst), a new one otherwise.
    pub fn shared_candidates<'n>(&mut self, names: impl ExactSizeIterator<Item = &'n str> + Clone) -> Arc<[String]> {
        if let Some(last) = &self.last_candidates {
            if last.len() == names.len() && last.iter().zip(names.clone()).all(|(a, b)| a == b) {
                return last.clone();
            }
        }
        let list: Arc<[String]> = names.map(str::to_owned).collect();
        self.last_candidates = Some(list.clone());
        list
    }
}

impl ClusterState {
    /// The pods Filter rejected that have not been placed, bound, ended or deleted since.
    pub fn waiting(&self) -> &Waiting {
        &self.waiting
    }

    /// Records a pod Filter rejected (see [`WaitingPod`]).
    pub fn remember_waiting(&mut self, key: String, pod: WaitingPod) {
        let before = self.waiting.remember(key, pod);
        self.release_requeue_hold(before);
    }

    /// Forgets a waiting pod; true if it was waiting.
    pub fn forget_waiting(&mut self, key: &str) -> bool {
        let before = self.waiting.forget(key);
        let was = before.is_some();
        self.release_requeue_hold(before);
        was
    }

    /// After a re-list: forgets the waiting pods whose `namespace/name` is not in `keys`.
    pub(crate) fn retain_waiting(&mut self, keys: &std::collections::HashSet<String>) {
        for gone in self.waiting.retain(|p| keys.contains(&p.key().to_string())) {
            self.release_requeue_hold(Some(gone));
        }
    }

    /// A requeued pod's expected placement is counted only while it waits (see [`Requeued`]):
    /// when it stops waiting, its node counts as changed for the other pods.
    fn release_requeue_hold(&mut self, entry: Option<WaitingPod>) {
        if let Some(record) = entry.and_then(|w| w.requeued).and_then(|r| r.record) {
            self.nodes.get_mut(&record.node);
        }
    }

    pub fn waiting_mut(&mut self) -> &mut Waiting {
        &mut self.waiting
    }

    /// What a namespace's vGPU quota leaves (memory, cores; `i64::MAX` where unlimited), `None`
    /// without quota: a release in the namespace widens it for every node at once.
    pub fn quota_room(&self, namespace: &str) -> Option<(i64, i64)> {
        let q = self.quota_state(namespace)?;
        let room = |limit: Option<i64>, used: i64| limit.map_or(i64::MAX, |l| l - used);
        Some((room(q.limit_mem, q.used_mem), room(q.limit_cores, q.used_cores)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, priority: Option<i32>, created: &str) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.name = name.into();
        pod.metadata.creation_timestamp = Some(created.into());
        pod.spec.priority = priority;
        Arc::new(pod)
    }

    #[test]
    fn queue_order_is_priority_then_age() {
        let none: Arc<[String]> = Arc::from(Vec::new());
        let w = |name, p, t| WaitingPod::new(pod(name, p, t), none.clone(), 0, None);
        let mut pods = [
            w("young-low", None, "2026-01-02T00:00:00Z"),
            w("old-low", Some(0), "2026-01-01T00:00:00Z"),
            w("high", Some(100), "2026-01-03T00:00:00Z"),
            w("negative", Some(-5), "2025-01-01T00:00:00Z"),
        ];
        pods.sort_by(WaitingPod::queue_order);
        let names: Vec<&str> = pods.iter().map(|w| w.pod.metadata.name.as_str()).collect();
        assert_eq!(names, ["high", "old-low", "young-low", "negative"]);
    }

    #[test]
    fn an_equal_candidate_list_is_shared_and_a_different_one_is_not() {
        let mut waiting = Waiting::default();
        let a = waiting.shared_candidates(["n1", "n2"].into_iter());
        let b = waiting.shared_candidates(["n1", "n2"].into_iter());
        assert!(Arc::ptr_eq(&a, &b));
        let c = waiting.shared_candidates(["n1", "n3"].into_iter());
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(&*c, ["n1".to_owned(), "n3".to_owned()]);
    }

    #[test]
    fn retain_drops_the_pods_not_kept() {
        let mut waiting = Waiting::default();
        let none: Arc<[String]> = Arc::from(Vec::new());
        for name in ["a", "b"] {
            waiting.remember(name.into(), WaitingPod::new(pod(name, None, ""), none.clone(), 0, None));
        }
        assert_eq!(waiting.retain(|p| p.metadata.name == "a").len(), 1);
        assert!(waiting.contains("a") && !waiting.contains("b"));
        assert!(waiting.forget("a").is_some() && waiting.is_empty());
    }
}
