//! The pods placed so far, in arrival order: what `fgd-balance` learns from, as the replay's
//! [`History`] does (the replay learns a pod when some node can host it, and then places it).
//! The caller learns each pod once ([`super::host::HostBook::knows`]); deleting a pod does not
//! unlearn it. Arrival order is the creation time, then the pod.
//!
//! The replay rebuilds its target workload only at 1, 2, 4, …, 512 pods seen and then every 512
//! ([`History::refresh_due`]), so the workload at `s` pods seen is that of the first
//! [`last_refresh`]`(s)` arrivals. The most recent arrivals are kept in order for that; older ones
//! are folded into counts, so memory stays bounded however many pods come and go.

use crate::frag::{TaskType, Workload};
use crate::policy::balance::{last_refresh, History};
use std::collections::BTreeMap;

/// Arrivals kept in order before they are folded into counts (more than one refresh period).
const TAIL: usize = 2048;

/// Arrival order: creation time (RFC 3339, sorts as text), then the pod key.
type Arrival = (Box<str>, Box<str>);

#[derive(Debug, Default, Clone)]
pub struct Arrivals {
    /// Every pod seen: `c̄` and the share of demand naming each model read all of them.
    all: History,
    /// The oldest arrivals, as counts.
    folded: History,
    /// The most recent arrivals, in order.
    tail: BTreeMap<Arrival, TaskType>,
    /// The target workload at a refresh point, while no arrival lands before it.
    cache: Option<(u64, Workload)>,
}

impl Arrivals {
    pub fn seen(&self) -> u64 {
        self.all.seen()
    }

    /// Learns a pod; `created` is its creation timestamp (empty: unknown, ordered first).
    pub fn observe(&mut self, key: &str, created: &str, t: TaskType) {
        self.all.observe(t.clone());
        let at: Arrival = (created.into(), key.into());
        // Only an arrival older than the newest kept can land before the cached refresh point.
        if self.tail.last_key_value().is_some_and(|(last, _)| at < *last) {
            self.cache = None;
        }
        self.tail.insert(at, t);
        self.fold();
    }

    fn fold(&mut self) {
        let limit = last_refresh(self.seen());
        while self.tail.len() > TAIL && self.folded.seen() < limit {
            let Some((_, t)) = self.tail.pop_first() else { break };
            self.folded.observe(t);
        }
    }

    /// Brings the cached workload up to the current refresh point.
    pub fn prepare(&mut self) {
        let r = last_refresh(self.seen());
        if self.cache.as_ref().is_none_or(|(at, _)| *at != r) {
            let w = self.history_at(r, None).workload();
            self.cache = Some((r, w));
        }
    }

    /// The learned state with `pod` (not yet seen: the newest arrival) counted too when given:
    /// the target workload at the refresh point and the history of every pod seen.
    pub fn with_pod(&self, pod: Option<&TaskType>) -> (Workload, History) {
        let mut all = self.all.clone();
        if let Some(t) = pod {
            all.observe(t.clone());
        }
        let r = last_refresh(all.seen());
        let workload = match &self.cache {
            Some((at, w)) if *at == r => w.clone(),
            _ => self.history_at(r, pod).workload(),
        };
        (workload, all)
    }

    /// The history of the first `r` arrivals (`pod` last, when given and reached).
    fn history_at(&self, r: u64, pod: Option<&TaskType>) -> History {
        let mut h = self.folded.clone();
        for t in self.tail.values().chain(pod) {
            if h.seen() >= r {
                break;
            }
            h.observe(t.clone());
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(milli: i64) -> TaskType {
        TaskType { cpu_milli: 1000, gpu_milli: milli, num_gpu: 1, gpu_spec: String::new() }
    }

    #[test]
    fn the_workload_is_that_of_the_last_refresh_point_in_arrival_order() {
        let mut a = Arrivals::default();
        // Arrivals 1..=5 given out of order: at 5 seen the workload is the first 4 by creation.
        for (k, milli) in [(3, 300), (1, 100), (5, 500), (2, 200), (4, 400)] {
            a.observe(&format!("p{k}"), &format!("2026-01-01T00:00:0{k}Z"), ty(milli));
        }
        assert_eq!(a.seen(), 5);
        let (w, all) = a.with_pod(None);
        let millis: Vec<i64> = w.types.iter().map(|(t, _)| t.gpu_milli).collect();
        assert_eq!(millis.len(), 4);
        assert!(!millis.contains(&500), "the fifth arrival comes after the refresh at 4: {millis:?}");
        assert_eq!(all.seen(), 5);
        a.prepare();
        assert_eq!(a.with_pod(None).0.types, w.types, "cached the same");
        // Three more seen (8, a refresh point): the pod being placed is part of it.
        a.observe("p6", "2026-01-01T00:00:06Z", ty(600));
        a.observe("p7", "2026-01-01T00:00:07Z", ty(700));
        let (w8, _) = a.with_pod(Some(&ty(800)));
        assert!(w8.types.iter().any(|(t, _)| t.gpu_milli == 800));
        assert_eq!(w8.types.len(), 8);
        // An arrival older than the cached point invalidates the cache: at 9 seen (with the pod
        // being placed, the newest) the workload is that of p0..p7.
        a.prepare();
        a.observe("p0", "2026-01-01T00:00:00Z", ty(50));
        let (w8, _) = a.with_pod(Some(&ty(800)));
        let millis: Vec<i64> = w8.types.iter().map(|(t, _)| t.gpu_milli).collect();
        assert!(millis.contains(&50) && millis.contains(&700) && !millis.contains(&800), "{millis:?}");
    }

    #[test]
    fn old_arrivals_fold_into_counts() {
        let mut a = Arrivals::default();
        for k in 0..5000 {
            a.observe(&format!("p{k:05}"), &format!("t{k:05}"), ty(100 + (k % 7) * 100));
        }
        assert!(a.tail.len() <= TAIL + 512, "{}", a.tail.len());
        let mut whole = History::default();
        (0..4608).for_each(|k| whole.observe(ty(100 + (k % 7) * 100)));
        assert_eq!(a.with_pod(None).0.types, whole.workload().types, "at 5000 seen: the first 4608");
    }
}
