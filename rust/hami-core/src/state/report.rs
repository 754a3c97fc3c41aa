//! Reports of the state as JSON: per-device usage, per-pod footprints and quotas (metrics, REST API).

use super::reservations::format_rfc3339;
use super::ClusterState;
use crate::model::{GpuNode, CORDONED};
use crate::wire::state::{Accounting, DeviceUsage, Held, Hold, NodeUsage, PodDevice, PodFootprint, QuotaUsage};

impl ClusterState {
    /// Per-node, per-device usage as JSON, nodes sorted by name.
    pub fn usage_json(&self) -> Vec<u8> {
        let mut nodes: Vec<&GpuNode> = self.nodes.values().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let report: Vec<NodeUsage> = nodes
            .into_iter()
            .map(|n| NodeUsage {
                name: &n.name,
                registered: n.is_registered() && n.membership.member != Some(false),
                error: n.register_error.as_ref().map(ToString::to_string),
                devices: n
                    .devices
                    .iter()
                    .zip(&n.usage)
                    .zip(&n.hot)
                    .map(|((d, u), hot)| DeviceUsage {
                        uuid: &d.id,
                        index: d.index,
                        device_type: &d.device_type,
                        numa: d.numa,
                        health: d.health,
                        cordoned: hot.has(CORDONED),
                        count: d.count,
                        devmem: d.devmem,
                        devcore: d.devcore,
                        used: u.used,
                        usedmem: u.usedmem,
                        usedcores: u.usedcores,
                        held: self.held_report(&n.name, &d.id),
                    })
                    .collect(),
            })
            .collect();
        serde_json::to_vec(&report).unwrap_or_default()
    }

    fn held_report(&self, node: &str, uuid: &str) -> Option<Held<'_>> {
        if self.holds.is_empty() {
            return None;
        }
        let (_, r) = self.holds.holder(node, uuid)?;
        Some(Held { pod: &r.pod, expires: format_rfc3339(r.expires) })
    }

    /// The live holds as JSON, `[{pod, node, gpus, expires}]` sorted by pod, after dropping those
    /// lapsed at `now`. `gpus` lists what the reservation names, registered on the node or not.
    pub fn holds_json(&mut self, now: i64) -> Vec<u8> {
        self.expire_holds(now);
        let mut holds: Vec<Hold> = self
            .holds
            .iter()
            .map(|(_, r)| Hold { pod: &r.pod, node: &r.node, gpus: &r.gpus, expires: format_rfc3339(r.expires) })
            .collect();
        holds.sort_by(|a, b| a.pod.cmp(b.pod));
        serde_json::to_vec(&holds).unwrap_or_default()
    }
}

impl ClusterState {
    /// Every counted pod with its per-GPU footprint, and every vGPU quota with its namespace's usage (for metrics).
    pub fn accounting_json(&self) -> Vec<u8> {
        let mut pods: Vec<PodFootprint> = self
            .pods
            .values()
            .map(|r| PodFootprint {
                namespace: &r.namespace,
                name: &r.name,
                node: &r.node,
                devices: r
                    .footprint
                    .iter()
                    .map(|c| PodDevice { uuid: &c.uuid, usedmem: c.mem, usedcores: c.cores })
                    .collect(),
            })
            .collect();
        pods.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
        let (mem_name, core_name) =
            (self.config.resource_memory_name.as_str(), self.config.resource_core_name.as_str());
        let mut quotas = Vec::new();
        for (namespace, by_name) in &self.quotas {
            let (used_mem, used_cores) = self.ns_usage.get(namespace).copied().unwrap_or_default();
            for (name, limits) in by_name {
                let entries = [(mem_name, limits.mem, used_mem), (core_name, limits.cores, used_cores)];
                for (resource, limit, used) in entries {
                    if let Some(limit) = limit {
                        quotas.push(QuotaUsage { namespace, name, resource, limit, used });
                    }
                }
            }
        }
        quotas.sort_by(|a, b| (a.namespace, a.name, a.resource).cmp(&(b.namespace, b.name, b.resource)));
        serde_json::to_vec(&Accounting { pods, quotas }).unwrap_or_default()
    }
}
