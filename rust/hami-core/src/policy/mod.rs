//! Scheduling policy: one vocabulary (`NodePolicy`, `GpuPolicy`) parsed once, the device and node
//! scores of HAMi ([`device`]), the simulator-derived node policies ([`node`]), one node-scoring
//! dispatch shared by the live engine, the replay and the planner ([`score`]), and the per-pod
//! policy hints read from annotations ([`hints`]).

pub mod balance;
pub mod device;
pub mod hints;
pub mod node;
pub mod score;

use crate::error::Error;
pub use hints::{PodHints, ScoringWeights};
use node::Scorer;

/// Every node policy name, in the order the simulator's figures list them.
pub const POLICY_NAMES: [&str; 9] =
    ["random", "dotprod", "clustering", "packing", "bestfit", "fgd", "binpack", "spread", "fgd-balance"];

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

    /// Every node policy name a flag accepts: HAMi's two, then the scored policies.
    pub fn names() -> Vec<&'static str> {
        ["binpack", "spread"].into_iter().chain(Scorer::ALL.iter().map(|s| s.as_str())).collect()
    }

    /// For flags and configuration: unlike [`Self::parse`] (HAMi's annotation rule, where anything
    /// unknown is binpack), an unknown name is an error listing the valid ones. Case-sensitive, as
    /// HAMi's own `spread`.
    pub fn parse_strict(value: &str) -> Result<Self, Error> {
        let policy = Self::parse(value);
        if policy.as_str() == value.trim() || Scorer::parse(value).is_some_and(|s| Self::Scored(s) == policy) {
            Ok(policy)
        } else {
            Err(Error::config(
                "",
                format!("unknown node scheduler policy {value:?} (valid: {})", Self::names().join(", ")),
            ))
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

    /// Single GPU policy names; a comma chain of `binpack`, `spread` and `numa` is valid too.
    pub const NAMES: [&'static str; 5] = ["spread", "binpack", "topology-aware", "mutex", "numa"];
    const CHAIN_KEYS: [&'static str; 3] = ["binpack", "spread", "numa"];

    /// For flags and configuration: an unknown name is an error listing the valid ones.
    pub fn parse_strict(value: &str) -> Result<Self, Error> {
        let text = value.trim();
        let chain = text.contains(',') && text.split(',').all(|t| Self::CHAIN_KEYS.contains(&t.trim()));
        if Self::NAMES.contains(&text) || chain {
            Ok(Self::parse(text))
        } else {
            let valid =
                format!("valid: {}, or a comma chain of {}", Self::NAMES.join(", "), Self::CHAIN_KEYS.join(", "));
            Err(Error::config("", format!("unknown GPU scheduler policy {value:?} ({valid})")))
        }
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
        assert_eq!(NodePolicy::parse_strict("spread"), Ok(NodePolicy::Spread));
        assert_eq!(NodePolicy::parse_strict("best-fit"), Ok(NodePolicy::Scored(Scorer::BestFit)));
        let err = NodePolicy::parse_strict("foo").unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Config);
        assert!(err.message.contains("\"foo\"") && err.message.contains("binpack, spread, random"), "{err}");
        assert!(NodePolicy::parse_strict("Spread").is_err(), "flags are case-sensitive as HAMi's");
        assert!(GpuPolicy::parse_strict("numa,binpack").is_ok() && GpuPolicy::parse_strict("topology-aware").is_ok());
        assert!(GpuPolicy::parse_strict("fast").unwrap_err().message.contains("valid: spread, binpack"));
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
