//! MetaX GPU (`Metax-GPU`), whole cards: no register annotation, one device per unit of the node's
//! capacity of the GPU resource (`<node>-metax-<i>`, 65536 MiB and 100 cores each); a request
//! takes all of a card; a container may only take the cards the pod's earlier containers took (so
//! in effect one container set per pod). No node lock, no handshake.
//!
//! The node's score adds `2000 - table[n]`, `n` the devices the pod takes there, from the node's
//! `metax-tech.com/gpu.topology.losses` (binpack) or `.scores` (spread): a JSON object from device
//! counts to integers; a table that does not parse, or lacks `n`, gives 2000. HAMi adds it for
//! every pod placed on a node with MetaX devices, whatever it asks.

use super::{Backend, FitChecks, NodeScore, RegisterFormat};
use crate::device_config::DeviceConfig;
use crate::k8s::view::HamiAnnotations;
use crate::model::ScoreTables;

const LOSSES_KEY: &str = "metax-tech.com/gpu.topology.losses";
const SCORES_KEY: &str = "metax-tech.com/gpu.topology.scores";

pub fn gpu_backend(config: &DeviceConfig) -> Option<Backend> {
    let count_name = &config.metax.resource_count_name;
    (!count_name.is_empty()).then(|| Backend {
        common_word: "Metax-GPU".into(),
        to_allocate_key: "hami.io/metax-gpu-devices-to-allocate".into(),
        allocated_key: "hami.io/metax-gpu-devices-allocated".into(),
        count_name: count_name.clone(),
        default_cores: 100,
        register_format: RegisterFormat::Capacity { devmem: 65536, devcore: 100, id_word: "metax" },
        fixed_request: Some((0, 100)),
        checks: FitChecks::SameDevices,
        score: NodeScore::Topology,
        ..Backend::default()
    })
}

/// The node's tables, as its annotations give them, and the first annotation that does not parse
/// (its table is then empty, as HAMi reads it).
pub fn score_tables(ann: &HamiAnnotations) -> (ScoreTables, Option<&'static str>) {
    let read = |key| ann.vendor_value(key).map(|text| (parse_table(text), key));
    let (binpack, spread) = (read(LOSSES_KEY), read(SCORES_KEY));
    let spoilt = [&binpack, &spread].into_iter().flatten().find(|(t, _)| t.is_none()).map(|(_, key)| *key);
    let tables = ScoreTables {
        binpack: binpack.map(|(t, _)| t.unwrap_or_default()),
        spread: spread.map(|(t, _)| t.unwrap_or_default()),
    };
    (tables, spoilt)
}

#[cfg(test)]
fn table(text: &str) -> Vec<(i64, i64)> {
    parse_table(text).unwrap_or_default()
}

/// A table as Go's JSON decoding into `map[int]int` reads it: integer keys and values (`null` is
/// 0, the last of a repeated key wins); anything else spoils the whole table (`None`). JSON
/// `null` is an empty table.
fn parse_table(text: &str) -> Option<Vec<(i64, i64)>> {
    let value = serde_json::from_str::<serde_json::Value>(text).ok()?;
    if value.is_null() {
        return Some(Vec::new());
    }
    let entry = |(k, v): (&String, &serde_json::Value)| {
        let value = if v.is_null() { Some(0) } else { v.as_i64() };
        Some((k.parse::<i64>().ok()?, value?))
    };
    value.as_object()?.iter().map(entry).collect()
}

/// `2000 - table[taken]` (float32), the entry 0 when absent.
pub fn topology_score(table: &[(i64, i64)], taken: i64) -> f32 {
    let entry = table.iter().rev().find(|(n, _)| *n == taken).map_or(0, |(_, v)| *v);
    2000.0 - entry as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_read_as_go_reads_a_map_of_ints() {
        assert_eq!(table(r#"{"1": 10, "2": 50, "4": null}"#), [(1, 10), (2, 50), (4, 0)]);
        assert_eq!(table(r#"{"+1": 7}"#), [(1, 7)], "Go's ParseInt takes a sign");
        for spoilt in [r#"{"1": 1.5}"#, r#"{"a": 1}"#, r#"{"1": "10"}"#, "[1]", "{bad", ""] {
            assert!(parse_table(spoilt).is_none(), "{spoilt}");
        }
        assert_eq!(parse_table("null"), Some(Vec::new()), "Go leaves the map empty");
    }

    #[test]
    fn the_score_is_2000_less_the_entry() {
        let t = table(r#"{"1": 10, "2": 300}"#);
        assert_eq!(topology_score(&t, 2), 1700.0);
        assert_eq!(topology_score(&t, 0), 2000.0, "a pod taking no MetaX device: no entry");
        assert_eq!(topology_score(&[], 1), 2000.0, "a table that does not parse");
    }
}
