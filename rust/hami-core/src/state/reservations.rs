//! GPUs held for a pending pod: the descheduler frees them with `plan --for POD --apply` and writes
//! the reservation on the pod itself (annotations [`RESERVATION_KEY`] and
//! [`RESERVATION_EXPIRES_KEY`]); the watch brings it here, and a restart re-reads it from the pod.
//!
//! A held GPU is unavailable, whole, to every other pod (Fit's reason `CardReserved`): `--for`
//! clears whole GPUs for its pod, and a whole-device hold is what an operator can read off a GPU
//! ("held for ns/pod until T"). The owner sees its GPUs as free. A hold lasts while its owner is
//! pending: it is dropped when the owner gets an allocation, binds, ends or is deleted, when the
//! annotation is removed, or at its expiry. One GPU is held for at most one pod: a reservation
//! naming a GPU already held for another pod is refused whole (first come, first held).

use super::ClusterState;
use crate::annotations::{RESERVATION_EXPIRES_KEY, RESERVATION_KEY};
use crate::error::{Error, Result};
use crate::model::{GpuNode, RESERVED};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// One pending pod's hold, as its annotations gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The owner, `namespace/name` (the table is keyed by its UID).
    pub pod: String,
    pub node: Arc<str>,
    pub gpus: Vec<Box<str>>,
    /// Unix seconds; the hold lapses at this instant.
    pub expires: i64,
}

impl Reservation {
    /// Reads the two annotations; `Ok(None)` when the pod carries no reservation.
    pub fn parse(pod: &str, value: Option<&str>, expires: Option<&str>) -> Result<Option<Self>> {
        let Some(value) = value else { return Ok(None) };
        let object = || format!("Pod {pod}");
        let bad = |field: &str, why: String| Error::invalid(object(), why).field(format!("annotation {field}"));
        let (node, list) = value
            .split_once('/')
            .ok_or_else(|| bad(RESERVATION_KEY, format!("{value:?} is not <node>/<GPU-uuid>[,<GPU-uuid>...]")))?;
        let gpus: Vec<Box<str>> = list.split(',').map(str::trim).filter(|g| !g.is_empty()).map(Box::from).collect();
        if node.trim().is_empty() || gpus.is_empty() {
            return Err(bad(RESERVATION_KEY, format!("{value:?} names no node or no GPU")));
        }
        let expires =
            expires.ok_or_else(|| bad(RESERVATION_EXPIRES_KEY, "is missing (a hold needs an expiry)".into()))?;
        let at = parse_rfc3339(expires)
            .ok_or_else(|| bad(RESERVATION_EXPIRES_KEY, format!("{expires:?} is not an RFC 3339 time")))?;
        Ok(Some(Self { pod: pod.to_owned(), node: Arc::from(node.trim()), gpus, expires: at }))
    }
}

/// The holds, keyed by owner UID (else `namespace/name`).
#[derive(Debug)]
pub struct Reservations {
    by_owner: FxHashMap<String, Reservation>,
    /// The earliest expiry among the holds (`i64::MAX` without any): sweeps are free until then.
    next_expiry: i64,
}

impl Default for Reservations {
    fn default() -> Self {
        Self { by_owner: FxHashMap::default(), next_expiry: i64::MAX }
    }
}

impl Reservations {
    pub fn is_empty(&self) -> bool {
        self.by_owner.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_owner.len()
    }

    pub fn get(&self, owner: &str) -> Option<&Reservation> {
        self.by_owner.get(owner)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Reservation)> {
        self.by_owner.iter()
    }

    /// Who holds GPU `uuid` of `node`, if anyone.
    pub fn holder(&self, node: &str, uuid: &str) -> Option<(&String, &Reservation)> {
        self.by_owner.iter().find(|(_, r)| &*r.node == node && r.gpus.iter().any(|g| &**g == uuid))
    }

    fn recompute_expiry(&mut self) {
        self.next_expiry = self.by_owner.values().map(|r| r.expires).min().unwrap_or(i64::MAX);
    }
}

/// Sets or clears the RESERVED mark of a reservation's GPUs on its node (unknown GPUs are skipped).
fn mark(node: &mut GpuNode, gpus: &[Box<str>], on: bool) {
    for gpu in gpus {
        if let Some(i) = node.device_index(gpu) {
            let flags = &mut node.hot[i].flags;
            *flags = if on { *flags | RESERVED } else { *flags & !RESERVED };
        }
    }
}

impl ClusterState {
    pub fn reservations(&self) -> &Reservations {
        &self.holds
    }

    /// Holds `r`'s GPUs for `owner` (replacing its previous hold), unless it has lapsed at `now`
    /// or another pod holds one of them already.
    pub fn hold(&mut self, owner: &str, r: Reservation) -> Result<()> {
        self.hold_on(owner, r, true)
    }

    /// [`Self::hold`] for a hold that may be dropped again with [`Self::unhold_tentative`] (a
    /// preemption not carried out yet): the node change log does not see it.
    pub fn hold_tentatively(&mut self, owner: &str, r: Reservation) -> Result<()> {
        self.hold_on(owner, r, false)
    }

    fn hold_on(&mut self, owner: &str, r: Reservation, tracked: bool) -> Result<()> {
        self.unhold_on(owner, tracked);
        for gpu in &r.gpus {
            if let Some((other, held)) = self.holds.holder(&r.node, gpu) {
                if other != owner {
                    return Err(Error::invalid(
                        format!("Pod {}", r.pod),
                        format!("GPU {gpu} of {} is already held for {}; reservation ignored", r.node, held.pod),
                    )
                    .field(format!("annotation {RESERVATION_KEY}")));
                }
            }
        }
        if let Some(node) = self.node_mut(&r.node, tracked) {
            mark(node, &r.gpus, true);
        }
        self.holds.next_expiry = self.holds.next_expiry.min(r.expires);
        self.holds.by_owner.insert(owner.to_owned(), r);
        Ok(())
    }

    /// Drops `owner`'s hold; true if it had one.
    pub fn unhold(&mut self, owner: &str) -> bool {
        self.unhold_on(owner, true)
    }

    /// Drops a hold taken with [`Self::hold_tentatively`] that nothing acted on: no node changed.
    pub fn unhold_tentative(&mut self, owner: &str) -> bool {
        self.unhold_on(owner, false)
    }

    fn unhold_on(&mut self, owner: &str, tracked: bool) -> bool {
        let Some(r) = self.holds.by_owner.remove(owner) else { return false };
        if let Some(node) = self.node_mut(&r.node, tracked) {
            mark(node, &r.gpus, false);
        }
        self.holds.recompute_expiry();
        true
    }

    /// Drops every hold whose expiry is at or before `now`; how many.
    pub fn expire_holds(&mut self, now: i64) -> usize {
        if now < self.holds.next_expiry {
            return 0;
        }
        let lapsed: Vec<String> =
            self.holds.by_owner.iter().filter(|(_, r)| r.expires <= now).map(|(k, _)| k.clone()).collect();
        lapsed.iter().for_each(|k| {
            self.unhold(k);
        });
        lapsed.len()
    }

    /// The owner's GPUs unmarked for the duration of its own Filter (it sees them free); the
    /// caller puts the mark back with [`ClusterState::restore_hold`].
    pub(super) fn lift_hold(&mut self, owner: &str) -> Option<Reservation> {
        let r = self.holds.by_owner.get(owner)?.clone();
        if let Some(node) = self.nodes.get_mut(&r.node) {
            mark(node, &r.gpus, false);
        }
        Some(r)
    }

    pub(super) fn restore_hold(&mut self, lifted: Option<Reservation>) {
        if let Some(r) = lifted {
            if let Some(node) = self.nodes.get_mut(&r.node) {
                mark(node, &r.gpus, true);
            }
        }
    }

    /// A node re-read from its annotations gets the marks of the holds on it back.
    pub(crate) fn mark_holds_on(&self, node: &mut GpuNode) {
        let name = node.name.clone();
        for r in self.holds.by_owner.values().filter(|r| *r.node == *name) {
            mark(node, &r.gpus, true);
        }
    }
}

/// Unix seconds as RFC 3339 in UTC (`2026-12-01T12:05:00Z`).
pub fn format_rfc3339(unix: i64) -> String {
    format!("{}Z", crate::health::format_go_datetime(unix).replacen(' ', "T", 1))
}

/// RFC 3339 (`2026-12-01T12:05:00Z`, `...T12:05:00.5+01:00`) as Unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim();
    let (clock, offset) = if let Some(rest) = s.strip_suffix(['Z', 'z']) {
        (rest, 0)
    } else {
        let at = s.len().checked_sub(6)?;
        let (rest, zone) = (s.get(..at)?, s.get(at..)?.as_bytes());
        let sign = match zone[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return None,
        };
        let two = |b: &[u8]| -> Option<i64> {
            b.iter().all(u8::is_ascii_digit).then(|| i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'))
        };
        if zone[3] != b':' {
            return None;
        }
        (rest, sign * (two(&zone[1..3])? * 3600 + two(&zone[4..6])? * 60))
    };
    let b = clock.as_bytes();
    if b.len() < 19 || !matches!(b[10], b'T' | b't') || !b[11..13].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let go = format!("{} {}", &clock[..10], &clock[11..]);
    crate::health::parse_go_datetime(&go).map(|t| t - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(format_rfc3339(1_796_126_700), "2026-12-01T12:05:00Z");
        assert_eq!(parse_rfc3339("2026-12-01T12:05:00Z"), Some(1_796_126_700));
        assert_eq!(parse_rfc3339("2026-12-01T13:05:00.250+01:00"), Some(1_796_126_700));
        assert_eq!(parse_rfc3339("2026-12-01T07:05:00-05:00"), Some(1_796_126_700));
        for bad in ["", "2026-12-01", "2026-12-01 12:05:00Z", "2026-12-01T1:05:00Z", "2026-13-01T00:00:00Z", "soon"] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn parse_names_the_pod_and_field() {
        let ok = Reservation::parse("ns/p", Some("n1/GPU-a, GPU-b"), Some("2026-12-01T12:05:00Z")).unwrap().unwrap();
        assert_eq!((&*ok.node, ok.gpus.len()), ("n1", 2));
        assert!(Reservation::parse("ns/p", None, None).unwrap().is_none());
        let e = Reservation::parse("ns/p", Some("GPU-a"), Some("2026-12-01T12:05:00Z")).unwrap_err().to_string();
        assert!(e.contains("Pod ns/p") && e.contains(RESERVATION_KEY), "{e}");
        let e = Reservation::parse("ns/p", Some("n1/GPU-a"), None).unwrap_err().to_string();
        assert!(e.contains(RESERVATION_EXPIRES_KEY) && e.contains("missing"), "{e}");
        let e = Reservation::parse("ns/p", Some("n1/GPU-a"), Some("tomorrow")).unwrap_err().to_string();
        assert!(e.contains(RESERVATION_EXPIRES_KEY) && e.contains("tomorrow"), "{e}");
        assert!(Reservation::parse("ns/p", Some("n1/"), Some("2026-12-01T12:05:00Z")).is_err());
    }
}
