//! One model of Kubernetes objects: keys, typed objects, one-pass views, list and watch envelopes,
//! quantities and the scheduler extender's wire types. Each object is parsed once.

pub mod envelope;
pub mod extender;
pub mod key;
pub mod object;
pub mod quantity;
pub mod selector;
pub mod view;

pub use envelope::{Envelope, ListMeta, ListPage, WatchEvent};
pub use key::{reservation_key, ObjectKey};
pub use object::{
    nullable, Container, Object, ObjectMeta, ObjectStatus, OwnerReference, Pod, PodSpec, QuotaSpec, ResourceList,
    Resources, StringMap,
};
pub use quantity::Quantity;
pub use selector::LabelSelector;
