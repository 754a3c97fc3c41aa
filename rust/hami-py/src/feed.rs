//! What `Cluster` and `ObjectCache` share: their engine behind a mutex, and the reflectors' feed
//! (watch lines, LIST pages) answered to Python as tuples.

use hami_core::state::{EventInfo, ListInfo};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

/// (event type, resourceVersion, key, Status code, error of the object or None)
pub(crate) type WatchEventTuple = (String, String, String, i32, Option<String>);

/// (resourceVersion, continue token, item keys, per-item errors)
pub(crate) type ListPageTuple = (String, String, Vec<String>, Vec<String>);

/// The engine, waiting for it. A poisoned lock (a panic `errors::run` caught while it was held) is
/// taken as it is: the engine stays in service instead of failing every later call.
pub(crate) fn lock<T>(engine: &Mutex<T>) -> MutexGuard<'_, T> {
    engine.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The engine if no other thread holds it (never waits).
pub(crate) fn try_lock<T>(engine: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match engine.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

pub(crate) fn watch_event_tuple(e: EventInfo) -> WatchEventTuple {
    (e.event_type, e.resource_version, e.key, e.code, e.error.map(|e| e.to_string()))
}

pub(crate) fn list_page_tuple(l: ListInfo) -> ListPageTuple {
    (l.resource_version, l.continue_token, l.keys, l.errors.iter().map(ToString::to_string).collect())
}
