//! Ingest: Node, Pod and ResourceQuota objects, watch lines and LIST pages into the state.

use super::reservations::Reservation;
use super::{Applied, ClusterState, EventInfo, ListInfo, QuotaLimits};
use crate::codec::{self, decode_pod_devices};
use crate::error::{Error, Result};
use crate::health::Registration;
use crate::k8s::view::{parse_object, parse_raw, NodeStatusView, ObjectView, PodSpecView, PodStatusView};
use crate::k8s::{ListPage, ObjectKey, QuotaSpec, WatchEvent};
use crate::model::{collapse, GpuNode};
use serde_json::value::RawValue;
use std::collections::HashSet;

impl ClusterState {
    /// Adds or updates a Node, Pod, ResourceQuota, or every item of a List.
    pub fn apply(&mut self, bytes: &[u8]) -> Result<Applied> {
        let view = parse_object(bytes)?;
        self.apply_view(&view, "")
    }

    fn apply_view(&mut self, view: &ObjectView, list_kind: &str) -> Result<Applied> {
        let kind = if view.kind.is_empty() { list_kind.strip_suffix("List").unwrap_or("") } else { view.kind.as_ref() };
        match kind {
            "Node" => self.apply_node(view).map(|_| Applied::Node),
            "Pod" => self.apply_pod(view),
            "ResourceQuota" => self.apply_quota(view).map(|_| Applied::Quota),
            _ if view.kind.ends_with("List") || view.items.is_some() => {
                let items = view.items.as_deref().unwrap_or_default();
                let errors: Vec<Error> =
                    items.iter().filter_map(|item| self.apply_raw_item(item, &view.kind).err()).collect();
                match errors.as_slice() {
                    [] => Ok(Applied::List(items.len())),
                    [one] => Err(one.clone()),
                    [first, ..] => {
                        let all: Vec<String> = errors.iter().map(Error::to_string).collect();
                        Err(Error::new(first.kind, "", all.join("; ")))
                    }
                }
            }
            "" => Err(Error::decode("object", "field `kind` is missing")),
            _ => Ok(Applied::Other),
        }
    }

    fn apply_raw_item(&mut self, item: &RawValue, list_kind: &str) -> Result<Applied> {
        self.apply_item(item.get().as_bytes(), list_kind)
    }

    /// One item of a List whose kind is `list_kind` (an item without `kind` takes the list's).
    pub fn apply_item(&mut self, bytes: &[u8], list_kind: &str) -> Result<Applied> {
        let view = parse_object(bytes)?;
        self.apply_view(&view, list_kind)
    }

    /// Removes a Node, Pod or ResourceQuota given its last known state.
    pub fn delete(&mut self, bytes: &[u8]) -> Result<()> {
        let view = parse_object(bytes)?;
        self.delete_view(&view);
        Ok(())
    }

    fn delete_view(&mut self, view: &ObjectView) {
        let meta = &view.metadata;
        match view.kind.as_ref() {
            "Node" => {
                self.nodes.remove(meta.name.as_ref());
                self.host.set_allocatable(meta.name.as_ref(), None);
            }
            "Pod" => {
                let key = meta.reservation_key();
                self.forget_pod_host(&meta.namespace, &meta.name, true);
                self.release(&key);
                self.unhold(&key);
                self.forget_waiting(&key);
            }
            "ResourceQuota" => {
                if let Some(m) = self.quotas.get_mut(meta.namespace.as_ref()) {
                    m.remove(meta.name.as_ref());
                }
            }
            _ => {}
        }
    }

    /// One line of a Kubernetes watch stream. Bad objects inside a valid event are reported in `error`.
    pub fn apply_watch_event(&mut self, line: &[u8]) -> Result<EventInfo> {
        let event: WatchEvent = serde_json::from_slice(line).map_err(|e| Error::decode("watch event", e))?;
        let view = match parse_object(event.object.get().as_bytes()) {
            Ok(view) => view,
            Err(e) => return Ok(EventInfo { event_type: event.event_type, error: Some(e), ..EventInfo::default() }),
        };
        let outcome = match event.event_type.as_str() {
            "ADDED" | "MODIFIED" => self.apply_view(&view, "").map(|_| ()),
            "DELETED" => {
                self.delete_view(&view);
                Ok(())
            }
            _ => Ok(()),
        };
        Ok(EventInfo {
            event_type: event.event_type,
            key: view.metadata.key().to_string(),
            resource_version: view.metadata.resource_version.into_owned(),
            code: view.code,
            error: outcome.err(),
        })
    }

    /// One page of a LIST response: applies every item, returns the list metadata and item keys.
    pub fn apply_list_page(&mut self, bytes: &[u8]) -> Result<ListInfo> {
        let page: ListPage = serde_json::from_slice(bytes).map_err(|e| Error::decode("list", e))?;
        let mut info = ListInfo {
            resource_version: page.metadata.resource_version,
            continue_token: page.metadata.continue_token,
            ..Default::default()
        };
        for item in page.items {
            match parse_object(item.get().as_bytes()) {
                Ok(view) => {
                    info.keys.push(view.metadata.key().to_string());
                    if let Err(e) = self.apply_view(&view, &page.kind) {
                        info.errors.push(e);
                    }
                }
                Err(e) => info.errors.push(e),
            }
        }
        Ok(info)
    }

    /// After a re-list: forgets every object of `kind` whose key (`name` or `namespace/name`) is not in `keys`.
    pub fn retain(&mut self, kind: &str, keys: &HashSet<String>) -> usize {
        match kind {
            "Node" => {
                let gone: Vec<String> = self.nodes.names().filter(|k| !keys.contains(*k)).cloned().collect();
                gone.iter().for_each(|k| {
                    self.nodes.remove(k);
                });
                self.host.retain_nodes(keys);
                gone.len()
            }
            "Pod" => {
                let gone: Vec<String> = self
                    .pods
                    .iter()
                    .filter(|(_, r)| !keys.contains(&ObjectKey::namespaced(&r.namespace, &r.name).to_string()))
                    .map(|(uid, _)| uid.clone())
                    .collect();
                gone.iter().for_each(|uid| {
                    self.release(uid);
                });
                self.host.retain_pods(keys);
                self.retain_waiting(keys);
                let lapsed: Vec<String> =
                    self.holds.iter().filter(|(_, r)| !keys.contains(&r.pod)).map(|(k, _)| k.clone()).collect();
                lapsed.iter().for_each(|k| {
                    self.unhold(k);
                });
                gone.len()
            }
            "ResourceQuota" => {
                let mut removed = 0;
                for (ns, quotas) in &mut self.quotas {
                    let before = quotas.len();
                    quotas.retain(|name, _| keys.contains(&ObjectKey::namespaced(ns, name).to_string()));
                    removed += before - quotas.len();
                }
                removed
            }
            _ => 0,
        }
    }

    fn apply_node(&mut self, view: &ObjectView) -> Result<()> {
        if view.metadata.name.is_empty() {
            return Err(Error::invalid("Node", "metadata.name is empty"));
        }
        let status: NodeStatusView = parse_raw(view.status)
            .map_err(|e| Error::invalid(format!("Node {}", view.metadata.name), e).field("status"))?;
        let quantity = |key: &str, f: fn(&str) -> Option<i64>| status.allocatable.get(key).and_then(|q| f(&q.0));
        let host =
            quantity("cpu", crate::k8s::quantity::cpu_milli).zip(quantity("memory", crate::k8s::quantity::memory_mib));
        self.host.set_allocatable(&view.metadata.name, host);
        let was_member =
            self.nodes.get(view.metadata.name.as_ref()).map(|n| n.vendor_members.clone()).unwrap_or_default();
        let labels = &view.metadata.labels;
        let (vendor_devices, members, skipped) =
            self.vendor_devices(&view.metadata.name, &view.metadata.annotations, (&status, labels), &was_member);
        let mut fresh = GpuNode::from_annotations(&view.metadata.name, &view.metadata.annotations, vendor_devices);
        fresh.vendor_members = members;
        fresh.vnpu_core =
            view.metadata.annotations.vendor_value(crate::annotations::VNPU_CORE_NODE_KEY).map(str::to_owned);
        let (tables, spoilt) = self.score_tables(&fresh, &view.metadata.annotations);
        fresh.score_tables = tables;
        self.sync_sgpu_qos(&mut fresh);
        let skipped = skipped.or(spoilt);
        let allocatable = status.allocatable.get(&self.config.resource_count_name).map(|q| q.0.as_str());
        fresh.registration = Registration::read(view.metadata.annotations.handshake.as_deref(), allocatable);
        fresh.registration.requesting_keys = view.metadata.annotations.requesting_keys;
        fresh.registration.register_hash = view.metadata.annotations.register.as_deref().map_or(0, register_hash);
        if let Some(old) = self.nodes.get(&fresh.name) {
            fresh.membership = old.membership;
        }
        fresh.park_nvidia(fresh.membership.member == Some(false));
        match self.nodes.get(&fresh.name) {
            Some(old) if old.same_inventory(&fresh) => fresh.copy_usage_from(old),
            _ => self.rebuild_usage(&mut fresh),
        }
        self.mark_holds_on(&mut fresh);
        self.nodes.insert(fresh);
        skipped.map_or(Ok(()), Err)
    }

    /// The devices the other backends registered on a node (HAMi's `GetNodeDevices` of each). An
    /// annotation that does not decode leaves that backend's devices out, as HAMi skips them; the
    /// node's other backends still schedule.
    fn vendor_devices(
        &self,
        node: &str,
        ann: &crate::k8s::view::HamiAnnotations,
        (status, labels): (&NodeStatusView, &crate::k8s::view::InstanceType),
        was_member: &[u8],
    ) -> (Vec<codec::Device>, Vec<u8>, Option<Error>) {
        let mut out = Vec::new();
        let mut members = Vec::new();
        let mut skipped = None;
        for (id, backend) in self.backends.with_ids() {
            if !vendor_registered(backend, ann, status, was_member.contains(&id)) {
                continue;
            }
            members.push(id);
            if let crate::vendor::RegisterFormat::Capacity { devmem, devcore, id_word } = backend.register_format {
                let count = status.capacity.get(&backend.count_name).and_then(crate::k8s::Quantity::as_int);
                let shape = (devmem, devcore, id_word);
                out.extend(crate::vendor::capacity_devices(node, backend, count.unwrap_or(0), shape, id));
                continue;
            }
            if backend.register_format == crate::vendor::RegisterFormat::KunlunCards {
                let count = status.capacity.get(&backend.count_name).and_then(crate::k8s::Quantity::as_int);
                out.extend(crate::vendor::kunlun::cards(node, backend, count.unwrap_or(0), id));
                continue;
            }
            if backend.register_format == crate::vendor::RegisterFormat::NeuronCapacity {
                let instance_type = labels.0.as_deref().unwrap_or("");
                if let Err(e) = neuron_devices(node, backend, status, instance_type, id, &mut out) {
                    skipped.get_or_insert(e);
                }
                continue;
            }
            if backend.register_format == crate::vendor::RegisterFormat::Sgpu {
                if let Err(e) = sgpu_devices(node, backend, ann, id, &mut out) {
                    skipped.get_or_insert(e);
                }
                continue;
            }
            if backend.register_format == crate::vendor::RegisterFormat::DrsCapacity {
                let Some(value) = ann.vendor_value(&backend.register_key) else { continue };
                match crate::vendor::enflame_drs::devices(node, value, backend, id) {
                    Ok(devices) => out.extend(devices),
                    Err(e) => {
                        let field = format!("annotation {} (its Enflame devices are skipped)", backend.register_key);
                        skipped.get_or_insert(Error::invalid(format!("Node {node}"), e).field(field));
                    }
                }
                continue;
            }
            if let crate::vendor::RegisterFormat::CoreShares(shares) = backend.register_format {
                if let Err(e) = core_share_devices(node, backend, shares, status, id, &mut out) {
                    skipped.get_or_insert(e);
                }
                continue;
            }
            let Some(value) = ann.vendor_value(&backend.register_key) else { continue };
            let json = backend.register_format == crate::vendor::RegisterFormat::Json;
            match codec::decode_vendor_register(value, json) {
                Ok(devices) => out.extend(devices.into_iter().map(|d| codec::Device {
                    vendor: id,
                    devcore: backend.devcore.unwrap_or(d.devcore),
                    ..d
                })),
                Err(e) => {
                    let field = format!(
                        "annotation {} (its {} devices are skipped)",
                        backend.register_key, backend.common_word
                    );
                    skipped.get_or_insert(Error::invalid(format!("Node {node}"), e).field(field));
                }
            }
        }
        (out, members, skipped)
    }

    /// The node's score tables, when it has devices of a backend that scores by them; a warning
    /// naming a table that does not parse (HAMi then scores as if it had no entry).
    fn score_tables(
        &self,
        node: &GpuNode,
        ann: &crate::k8s::view::HamiAnnotations,
    ) -> (Option<Box<crate::model::ScoreTables>>, Option<Error>) {
        let scored = self.backends.iter().filter(|b| b.score == crate::vendor::NodeScore::Topology);
        let mut words = scored.map(|b| b.common_word.as_str());
        if !words.any(|w| node.devices.iter().any(|d| d.device_type == w)) {
            return (None, None);
        }
        let (tables, spoilt) = crate::vendor::metax::score_tables(ann);
        let warning = spoilt.map(|key| {
            let why = "not a JSON object of integers (scored as HAMi does: no entry for any count)";
            Error::invalid(format!("Node {}", node.name), why).field(format!("annotation {key}"))
        });
        (Some(Box::new(tables)), warning)
    }

    /// Recomputes one node's usage from the pods recorded on it (only when its GPUs changed).
    pub(super) fn rebuild_usage(&self, node: &mut GpuNode) {
        node.clear_usage();
        let name = node.name.clone();
        for record in self.pods.values().filter(|r| *r.node == *name) {
            node.account(&record.footprint, 1);
            node.account_mig(&record.footprint, &record.mig, 1);
        }
    }

    fn apply_pod(&mut self, view: &ObjectView) -> Result<Applied> {
        let meta = &view.metadata;
        let key = meta.reservation_key();
        let pod_name = || format!("Pod {}", ObjectKey::namespaced(&meta.namespace, &meta.name));
        let status: PodStatusView =
            parse_raw(view.status).map_err(|e| Error::invalid(pod_name(), e).field("status"))?;
        if status.is_terminal() {
            self.forget_pod_host(&meta.namespace, &meta.name, false);
            self.release(&key);
            self.unhold(&key);
            self.forget_waiting(&key);
            return Ok(Applied::Pod);
        }
        if self.waiting.contains(&key) && (meta.annotations.vgpu_node.is_some() || is_bound(view.spec)) {
            self.forget_waiting(&key);
        }
        let ann = &meta.annotations;
        let vendor_allocated = self.backends.iter().any(|b| ann.vendor_value(&b.allocated_key).is_some());
        let assigned = ann.vgpu_node.as_deref().filter(|_| ann.allocated.is_some() || vendor_allocated);
        let named = (meta.namespace.as_ref(), meta.name.as_ref(), meta.creation_timestamp.as_ref());
        self.observe_pod(named, view.spec, ann.use_type.as_deref(), assigned);
        if let (Some(node), None, Some(mig)) =
            (ann.vgpu_node.as_deref(), ann.allocated.as_deref(), ann.mig_allocations.as_deref())
        {
            // HAMi caches an assigned pod without a device list as using no device; its MIG
            // reservations still hold their placements (or mark the node's MIG GPUs unhealthy).
            self.unhold(&key);
            let mut record = self.record(&meta.namespace, &meta.name, node, Vec::new());
            record.mig = mig_holds(Some(mig));
            record.terminating = meta.deletion_timestamp.is_some();
            record.priority = parse_raw::<PodSpecView>(view.spec).ok().and_then(|s| s.priority).unwrap_or(0);
            self.reserve(key, record);
            return Ok(Applied::Pod);
        }
        let Some(node) = assigned else {
            return self.apply_hold(view, &key).map(|()| Applied::PodIgnored);
        };
        // The owner of a reservation has its allocation now: its GPUs are its own, not held.
        self.unhold(&key);
        let spec: PodSpecView = parse_raw(view.spec).map_err(|e| Error::invalid(pod_name(), e).field("spec"))?;
        let init_count = spec.init_containers.len();
        let init_done = status.init_succeeded(init_count);
        let mut footprint = Vec::new();
        let mut vendor_footprint = Vec::new();
        if let Some(allocated) = ann.allocated.as_deref() {
            let mut slots = decode_pod_devices(allocated)
                .map_err(|e| Error::invalid(pod_name(), e).field(format!("annotation {}", codec::ALLOCATED_KEY)))?;
            if slots.len() < init_count + spec.containers.len() {
                if let Some(aligned) = self.align_unpadded(view.spec, &slots) {
                    slots = aligned;
                }
            }
            footprint = collapse(&slots, init_count, init_done);
        }
        for backend in self.backends.iter() {
            let Some(value) = ann.vendor_value(&backend.allocated_key) else { continue };
            let slots = decode_pod_devices(value)
                .map_err(|e| Error::invalid(pod_name(), e).field(format!("annotation {}", backend.allocated_key)))?;
            vendor_footprint.push((backend.clone(), collapse(&slots, init_count, init_done)));
        }
        let mut record = self.record_with_vendors(&meta.namespace, &meta.name, node, (footprint, vendor_footprint));
        let class = crate::vendor::sgpu::AppClass::read(ann.vendor_value(crate::vendor::sgpu::APP_CLASS_KEY));
        record.footprint.iter_mut().for_each(|c| c.app_class = class);
        record.mig = mig_holds(ann.mig_allocations.as_deref());
        record.priority = spec.priority.unwrap_or(0);
        record.terminating = meta.deletion_timestamp.is_some();
        self.reserve(key, record);
        Ok(Applied::Pod)
    }

    /// A pod without an allocation: holds the GPUs its reservation names, or drops its hold when
    /// the annotation is gone, it is bound, or the annotation is malformed (the error says which field).
    fn apply_hold(&mut self, view: &ObjectView, key: &str) -> Result<()> {
        let ann = &view.metadata.annotations;
        if ann.reservation.is_none() {
            self.unhold(key);
            return Ok(());
        }
        if is_bound(view.spec) {
            self.unhold(key);
            return Ok(());
        }
        let pod = ObjectKey::namespaced(&view.metadata.namespace, &view.metadata.name).to_string();
        match Reservation::parse(&pod, ann.reservation.as_deref(), ann.reservation_expires.as_deref()) {
            Ok(Some(r)) => self.hold(key, r),
            Ok(None) => Ok(()),
            Err(e) => {
                self.unhold(key);
                Err(e)
            }
        }
    }

    /// HAMi writes one slot per GPU container, not one per container; its own reader then takes
    /// slot *i* for container *i*, so a GPU-less init container turns the first app container's
    /// GPUs into init usage that its shrink drops to 0 once init finishes (a HAMi bug). Read the
    /// slots onto the containers that request GPUs instead.
    fn align_unpadded(&self, spec: Option<&RawValue>, slots: &codec::PodDevices) -> Option<codec::PodDevices> {
        let spec: crate::k8s::PodSpec = parse_raw(spec).ok()?;
        let uses_gpu: Vec<bool> = spec
            .init_containers
            .iter()
            .chain(&spec.containers)
            .map(|c| crate::request::container_request(c, &self.config).is_some())
            .collect();
        codec::align_to_containers(slots, &uses_gpu)
    }

    fn apply_quota(&mut self, view: &ObjectView) -> Result<()> {
        let meta = &view.metadata;
        let object = || format!("ResourceQuota {}", ObjectKey::namespaced(&meta.namespace, &meta.name));
        let spec: QuotaSpec = parse_raw(view.spec).map_err(|e| Error::invalid(object(), e).field("spec"))?;
        let limit = |resource: &str| -> Result<Option<i64>> {
            let key = format!("limits.{resource}");
            spec.hard
                .get(&key)
                .map(|v| {
                    v.as_int().ok_or_else(|| {
                        Error::invalid(object(), format!("{:?} is not an integer", v.0))
                            .field(format!("spec.hard[{key}]"))
                    })
                })
                .transpose()
        };
        let limits = QuotaLimits {
            mem: limit(&self.config.resource_memory_name)?,
            cores: limit(&self.config.resource_core_name)?,
        };
        self.quotas.entry(meta.namespace.to_string()).or_default().insert(meta.name.to_string(), limits);
        let mut vendor = std::collections::BTreeMap::new();
        for resource in self.backends.quota_resources() {
            if let Some(value) = limit(&resource)? {
                vendor.insert(resource, value);
            }
        }
        self.vendor_quotas.entry(meta.namespace.to_string()).or_default().insert(meta.name.to_string(), vendor);
        Ok(())
    }
}

/// A pod with `spec.nodeName` set.
fn is_bound(spec: Option<&RawValue>) -> bool {
    #[derive(Default, serde::Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct Bound {
        node_name: String,
    }
    !parse_raw::<Bound>(spec).unwrap_or_default().node_name.is_empty()
}

/// The MIG instances a resident pod holds. HAMi discards a malformed annotation whole, without a
/// word, and then marks the pod's MIG GPUs unhealthy for lacking a reservation: the same here.
fn mig_holds(value: Option<&str>) -> Box<[crate::model::MigHold]> {
    let Some(list) = value.and_then(|v| codec::decode_mig_allocations(v).ok()) else { return Box::default() };
    list.into_iter().map(|a| crate::model::MigHold { gpu: a.gpu_uuid.into(), placement: a.placement }).collect()
}

/// Whether HAMi's cache holds a backend's devices of a node, by the backend's handshake (the
/// generic `CheckHealth`): a node whose handshake carries no request is registered on the next
/// pass; one whose request is pending keeps what it had (a HAMi just started has nothing yet).
/// HAMi's removal of a node whose request went unanswered for a minute without allocatable
/// devices is not modelled for these backends.
///
/// A backend whose health is its capacity (AMD) is held while the node's capacity of its count
/// resource is a non-zero integer.
fn vendor_registered(
    backend: &crate::vendor::Backend,
    ann: &crate::k8s::view::HamiAnnotations,
    status: &NodeStatusView,
    was: bool,
) -> bool {
    if backend.health == crate::vendor::Health::Capacity {
        let count = status.capacity.get(&backend.count_name).map_or(Some(0), crate::k8s::Quantity::as_int);
        return count.is_some_and(|c| c != 0);
    }
    if backend.handshake_key.is_empty() {
        return true;
    }
    let requesting = ann.vendor_value(&backend.handshake_key).is_some_and(|v| v.contains("Requesting"));
    !requesting || was
}

/// The devices of a backend cut from the node's core capacity. HAMi skips the backend when that
/// capacity is no integer (the error names it); a memory capacity that is none counts as 0.
fn core_share_devices(
    node: &str,
    backend: &crate::vendor::Backend,
    shares: crate::vendor::CoreShares,
    status: &NodeStatusView,
    id: u8,
    out: &mut Vec<codec::Device>,
) -> Result<()> {
    let memory = status.capacity.get(&backend.memory_name).and_then(crate::k8s::Quantity::as_int).unwrap_or(0);
    let Some(quantity) = status.capacity.get(&backend.core_name) else { return Ok(()) };
    let Some(cores) = quantity.as_int() else {
        let field = format!("status.capacity[{}] (its {} devices are skipped)", backend.core_name, backend.common_word);
        return Err(Error::invalid(format!("Node {node}"), format!("{:?} is not an integer", quantity.0)).field(field));
    };
    out.extend(crate::vendor::core_share_devices(node, backend, shares, cores, memory, id));
    Ok(())
}

/// AWS Neuron's devices from the node's capacities. A count that is no integer leaves them out and
/// a core capacity that is none gives devices without cores, as in HAMi; a count no instance has
/// is left out too (HAMi would make that many devices); each with a warning.
fn neuron_devices(
    node: &str,
    backend: &crate::vendor::Backend,
    status: &NodeStatusView,
    instance_type: &str,
    id: u8,
    out: &mut Vec<codec::Device>,
) -> Result<()> {
    let not_integer = |name: &str, q: &crate::k8s::Quantity, outcome: &str| {
        let field = format!("status.capacity[{name}] (its {} devices {outcome})", backend.common_word);
        Error::invalid(format!("Node {node}"), format!("{:?} is not an integer", q.0)).field(field)
    };
    let Some(quantity) = status.capacity.get(&backend.count_name) else { return Ok(()) };
    let Some(count) = quantity.as_int() else {
        return Err(not_integer(&backend.count_name, quantity, "are skipped"));
    };
    if count > crate::vendor::neuron::MAX_NODE_DEVICES {
        let field =
            format!("status.capacity[{}] (its {} devices are skipped)", backend.count_name, backend.common_word);
        let message = format!("{count} devices, more than {} on one node", crate::vendor::neuron::MAX_NODE_DEVICES);
        return Err(Error::invalid(format!("Node {node}"), message).field(field));
    }
    let cores = status.capacity.get(&backend.core_name);
    let core_count = cores.map_or(Some(0), crate::k8s::Quantity::as_int);
    out.extend(crate::vendor::neuron::devices(node, count, core_count.unwrap_or(0), instance_type, id));
    match (cores, core_count) {
        (Some(q), None) => Err(not_integer(&backend.core_name, q, "have no cores")),
        _ => Ok(()),
    }
}

/// A non-zero fingerprint of the register annotation: HAMi's registration rule notices when it changes.
fn register_hash(register: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    register.hash(&mut h);
    h.finish() | 1
}

/// MetaX sGPU's cards on a node; a list that does not decode is skipped, naming node and annotation.
fn sgpu_devices(
    node: &str,
    backend: &crate::vendor::Backend,
    ann: &crate::k8s::view::HamiAnnotations,
    id: u8,
    out: &mut Vec<codec::Device>,
) -> Result<()> {
    let Some(value) = ann.vendor_value(&backend.register_key) else { return Ok(()) };
    let devices = crate::vendor::sgpu::devices(value, id).map_err(|e| {
        let field = format!("annotation {} (its {} devices are skipped)", backend.register_key, backend.common_word);
        Error::invalid(format!("Node {node}"), e).field(field)
    })?;
    out.extend(devices);
    Ok(())
}
