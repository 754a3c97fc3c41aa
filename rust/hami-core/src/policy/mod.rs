//! Scheduling policy: one vocabulary (`NodePolicy`, `GpuPolicy`) parsed once, the device and node
//! scores of HAMi ([`device`]), the simulator-derived node policies ([`node`]), one node-scoring
//! dispatch shared by the live engine, the replay and the planner ([`score`]), and the per-pod
//! policy hints read from annotations ([`hints`]).

pub mod device;
pub mod hints;
pub mod node;
pub mod score;

use crate::error::Error;
pub use hints::{PodHints, ScoringWeights};
use node::Scorer;

/// Every node policy name, in the order the simulator's figures list them.
pub const POLICY_NAMES: [&str; 8] =
    ["random", "dotprod", "clustering", "packing", "bestfit", "fgd", "binpack", "spread"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodePolicy {
    #[default]
    Binpack,
    Spread,
    /// A node policy of the FGD paper's simulator (`fgd`, `bestfit`, `dotprod`, `packing`,
    /// `clustering`, `random`), see [`crate::policy::node`].
    Scored(Scorer),
}

impl NodePolicy {
    /// HAMi: `spread` is spread, anything else behaves as binpack — except the names of the
    /// simulator-derived policies, which select them.
    pub fn parse(value: &str) -> Self {
        // HAMi compares the untrimmed value with "spread"; anything else it does not know is binpack.
        if value == "spread" {
            return Self::Spread;
        }
        let value = value.trim();
        if let Some(s) = Scorer::parse(value).filter(|_| value == value.to_ascii_lowercase()) {
            Self::Scored(s)
        } else {
            Self::Binpack
        }
    }

    /// A policy named on a command line or in an option: any known name (case-insensitive), else an error.
    pub fn from_name(name: &str) -> Result<Self, Error> {
        match name.trim().to_ascii_lowercase().as_str() {
            "binpack" => Ok(Self::Binpack),
            "spread" => Ok(Self::Spread),
            other => Scorer::parse(other).map(Self::Scored).ok_or_else(|| {
                Error::config("", format!("unknown policy {name:?} (want one of {})", POLICY_NAMES.join(", ")))
            }),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Binpack => "binpack",
            Self::Spread => "spread",
            Self::Scored(s) => s.as_str(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    ScoreAscending,
    ScoreDescending,
    NumaAscending,
}

/// GPU policy: how devices are ordered and which extra Fit filters apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPolicy {
    pub text: String,
    pub mutex: bool,
    pub topology: bool,
}

impl GpuPolicy {
    /// The value as written: HAMi compares it untrimmed, and finds the mutex and topology-aware
    /// filters among its comma-separated, trimmed tokens.
    pub fn parse(value: &str) -> Self {
        let has = |name: &str| value.split(',').any(|t| t.trim() == name);
        Self { mutex: has("mutex"), topology: has("topology-aware"), text: value.to_owned() }
    }

    fn is_chain(&self) -> bool {
        self.text.contains(',') || self.text == "numa"
    }

    /// Comma chains (or bare `numa`): sort keys in written order, deduplicated; numa first under numa-bind.
    pub fn chain_keys(&self, numa_bind: bool) -> Option<Vec<SortKey>> {
        if !self.is_chain() {
            return None;
        }
        let mut keys = Vec::new();
        for token in self.text.split(',').map(str::trim) {
            let key = match token {
                "binpack" => SortKey::ScoreAscending,
                "spread" => SortKey::ScoreDescending,
                "numa" => SortKey::NumaAscending,
                _ => continue,
            };
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        if keys.is_empty() {
            keys.push(SortKey::ScoreDescending);
        }
        if numa_bind && keys[0] != SortKey::NumaAscending {
            keys.retain(|k| *k != SortKey::NumaAscending);
            keys.insert(0, SortKey::NumaAscending);
        }
        Some(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_chains() {
        assert_eq!(GpuPolicy::parse("binpack").chain_keys(false), None);
        assert_eq!(GpuPolicy::parse("numa").chain_keys(false), Some(vec![SortKey::NumaAscending]));
        assert_eq!(
            GpuPolicy::parse("binpack,numa,binpack").chain_keys(true),
            Some(vec![SortKey::NumaAscending, SortKey::ScoreAscending])
        );
        assert_eq!(GpuPolicy::parse("mutex,topology-aware").chain_keys(false), Some(vec![SortKey::ScoreDescending]));
        assert!(GpuPolicy::parse("binpack,mutex").mutex);
        assert_eq!(NodePolicy::parse("whatever"), NodePolicy::Binpack);
        assert_eq!(NodePolicy::parse(" fgd "), NodePolicy::Scored(Scorer::Fgd));
        assert_eq!(NodePolicy::parse("bestfit").as_str(), "bestfit");
        assert_eq!(NodePolicy::parse("FGD"), NodePolicy::Binpack, "names are case-sensitive, as HAMi's spread");
    }

    #[test]
    fn names_from_the_command_line() {
        assert_eq!(NodePolicy::from_name("FGD").unwrap(), NodePolicy::Scored(Scorer::Fgd));
        assert_eq!(NodePolicy::from_name("spread").unwrap(), NodePolicy::Spread);
        assert!(NodePolicy::from_name("nope").unwrap_err().to_string().contains("unknown policy"));
        for name in POLICY_NAMES {
            assert_eq!(NodePolicy::from_name(name).unwrap().as_str(), name);
        }
    }
}
