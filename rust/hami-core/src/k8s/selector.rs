//! Label selectors in the text form `kubectl -l` and `?labelSelector=` take (`app=web,tier!=db,
//! env in (a,b),!legacy`), parsed once and matched against an object's labels as the API server does.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Exists(String),
    Absent(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector: every requirement must hold (the empty selector matches everything).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the text form; the error says which requirement does not parse.
    pub fn parse(text: &str) -> Result<Self, String> {
        let requirements = split_top_level(text)
            .into_iter()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| requirement(r).ok_or_else(|| format!("cannot parse {r:?} in {text:?}")))
            .collect::<Result<_, _>>()?;
        Ok(Self { requirements })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        })
    }
}

/// Splits at the commas that are not inside a `( … )` value set.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn requirement(text: &str) -> Option<Requirement> {
    if let Some(key) = text.strip_prefix('!') {
        return valid_key(key.trim()).then(|| Requirement::Absent(key.trim().to_owned()));
    }
    for (op, build) in
        [("!=", Requirement::NotEquals as fn(String, String) -> Requirement), ("==", Requirement::Equals)]
    {
        if let Some((k, v)) = text.split_once(op) {
            return pair(k, v).map(|(k, v)| build(k, v));
        }
    }
    if let Some((k, v)) = text.split_once('=') {
        return pair(k, v).map(|(k, v)| Requirement::Equals(k, v));
    }
    let mut words = text.splitn(2, char::is_whitespace);
    let key = words.next()?.trim();
    let Some(rest) = words.next().map(str::trim) else {
        return valid_key(key).then(|| Requirement::Exists(key.to_owned()));
    };
    let (negated, set) = match (rest.strip_prefix("notin"), rest.strip_prefix("in")) {
        (Some(set), _) => (true, set),
        (None, Some(set)) => (false, set),
        _ => return None,
    };
    let values = value_set(set.trim())?;
    if !valid_key(key) {
        return None;
    }
    Some(if negated { Requirement::NotIn(key.to_owned(), values) } else { Requirement::In(key.to_owned(), values) })
}

fn pair(key: &str, value: &str) -> Option<(String, String)> {
    let (key, value) = (key.trim(), value.trim());
    (valid_key(key) && valid_value(value)).then(|| (key.to_owned(), value.to_owned()))
}

fn value_set(text: &str) -> Option<Vec<String>> {
    let inner = text.strip_prefix('(')?.strip_suffix(')')?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
    values.iter().all(|v| valid_value(v)).then_some(values)
}

/// A label key: an optional DNS prefix and `/`, then a name of letters, digits, `-`, `_`, `.`.
fn valid_key(key: &str) -> bool {
    let name = key.rsplit_once('/').map_or(key, |(prefix, name)| if prefix.is_empty() { "" } else { name });
    !name.is_empty() && name.len() <= 63 && valid_value(name)
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63 && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::LabelSelector;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_requirement_must_hold() {
        let s = LabelSelector::parse("app=web, tier!=db,env in (prod, staging),!legacy,team").unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "dev"), ("team", "x")])), "env not in the set");
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "x"), ("legacy", "")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod")])), "team must exist");
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "x"), ("tier", "db")])));
    }

    #[test]
    fn notin_and_not_equal_hold_for_a_missing_label() {
        let s = LabelSelector::parse("example.com/zone notin (a,b),app!=x").unwrap();
        assert!(s.matches(&labels(&[])));
        assert!(!s.matches(&labels(&[("example.com/zone", "a")])));
        assert!(LabelSelector::parse("app==web").unwrap().matches(&labels(&[("app", "web")])));
        assert!(LabelSelector::parse("").unwrap().matches(&labels(&[("any", "thing")])), "empty: everything");
    }

    #[test]
    fn malformed_selectors_name_the_requirement() {
        for bad in ["app in a,b", "a b c", "app=we b", "=x", "env in (a,b", "bad key=x"] {
            let err = LabelSelector::parse(bad).expect_err(bad);
            assert!(err.contains("cannot parse"), "{bad}: {err}");
        }
    }
}
