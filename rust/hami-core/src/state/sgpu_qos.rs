//! MetaX sGPU's pending QoS switches: a placement asks its cards to run the pod's QoS policy (or
//! none, for a whole card); until a card's registration shows that policy, later Filters read the
//! asked one. HAMi keeps them in memory by card UUID, written by Filter on the chosen node and
//! dropped when a registration pass reads the policy; a restart starts with none, as here.

use super::ClusterState;
use crate::model::GpuNode;

impl ClusterState {
    /// A node's registration was read: switches its cards now show are done; the node keeps the
    /// ones still pending for its cards.
    pub(super) fn sync_sgpu_qos(&mut self, node: &mut GpuNode) {
        let sgpu = node.devices.iter().filter(|d| d.device_type == crate::vendor::sgpu::WORD);
        for d in sgpu {
            if self.sgpu_qos.get(&d.id).is_some_and(|q| q == crate::vendor::sgpu::qos_of(d)) {
                self.sgpu_qos.remove(&d.id);
            }
        }
        node.sgpu_qos = self.pending_on(node);
    }

    /// Records the switches a placement on `node` asks (card UUID, policy), the last for a card winning.
    pub fn note_sgpu_qos(&mut self, node: &str, switches: Vec<(String, String)>) {
        if switches.is_empty() {
            return;
        }
        self.sgpu_qos.extend(switches);
        let Some(n) = self.nodes.get(node) else { return };
        let pending = self.pending_on(n);
        if let Some(n) = self.nodes.get_mut(node) {
            n.sgpu_qos = pending;
        }
    }

    /// The pending switch of a card, if any.
    pub fn sgpu_qos_pending(&self, uuid: &str) -> Option<&str> {
        self.sgpu_qos.get(uuid).map(String::as_str)
    }

    fn pending_on(&self, node: &GpuNode) -> Vec<(Box<str>, Box<str>)> {
        if self.sgpu_qos.is_empty() {
            return Vec::new();
        }
        let ids = node.devices.iter().filter(|d| d.device_type == crate::vendor::sgpu::WORD).map(|d| &d.id);
        ids.filter_map(|id| self.sgpu_qos.get(id).map(|q| (id.as_str().into(), q.as_str().into()))).collect()
    }
}
