//! Vastai (`Vastai`): registered as a JSON device list under `hami.io/node-va-register` (every
//! device's cores set to 100), handshake `hami.io/node-handshake-va`, whole devices by count only.
//!
//! In die mode (the first candidate's `custominfo.DeviceStrategy` is `"die"`) each device is a die
//! of a card named by `custominfo.AIC`: every eligible die is collected, then a request for several
//! takes the cards with the most free dies first (HAMi orders cards of equal counts by Go's map
//! order: any order of them is one HAMi can take); under `mutex` a die whose card has a die in
//! use is refused. The node's score adds, per container, the share of its dies on its largest card.

use super::{Backend, FitChecks, RegisterFormat};
use crate::codec::Device;
use crate::device_config::DeviceConfig;

pub fn backend(config: &DeviceConfig) -> Option<Backend> {
    let count_name = &config.vastai.resource_count_name;
    (!count_name.is_empty()).then(|| Backend {
        common_word: "Vastai".into(),
        register_key: "hami.io/node-va-register".into(),
        handshake_key: "hami.io/node-handshake-va".into(),
        to_allocate_key: "hami.io/Vastai-devices-to-allocate".into(),
        allocated_key: "hami.io/Vastai-devices-allocated".into(),
        count_name: count_name.clone(),
        uuid_keys: ("vastaitech.com/use-gpuuuid".into(), "vastaitech.com/nouse-gpuuuid".into()),
        register_format: RegisterFormat::Json,
        devcore: Some(100),
        checks: FitChecks::Dies,
        score: super::NodeScore::DieShare,
        ..Backend::default()
    })
}

/// A custominfo entry as a string (HAMi ignores entries of another JSON type).
fn text<'a>(d: &'a Device, key: &str) -> Option<&'a str> {
    d.custom_info.as_ref()?.get(key)?.as_str()
}

/// Whether HAMi places a request in die mode: the first candidate (in its sorted order) says so.
pub fn die_mode(first: Option<&Device>) -> bool {
    first.and_then(|d| text(d, "DeviceStrategy")) == Some("die")
}

/// The card (AIC) a die sits on.
pub fn card_of(d: &Device) -> Option<&str> {
    text(d, "AIC")
}

/// Of the dies collected (in walk order), the `nums` HAMi keeps: the first one for one die; for
/// several, whole cards with the most collected dies first, each card's dies in walk order (dies
/// without a card are left out, so the pick may fall short, as HAMi's does).
pub fn best_dies(nums: usize, collected: &[&Device]) -> Vec<usize> {
    if nums == 1 {
        return (0..collected.len().min(1)).collect();
    }
    let mut cards: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, d) in collected.iter().enumerate() {
        let Some(card) = card_of(d) else { continue };
        match cards.iter_mut().find(|(c, _)| *c == card) {
            Some((_, dies)) => dies.push(i),
            None => cards.push((card, vec![i])),
        }
    }
    cards.sort_by_key(|(_, dies)| std::cmp::Reverse(dies.len()));
    cards.into_iter().flat_map(|(_, dies)| dies).take(nums).collect()
}

/// HAMi's Vastai `ScoreNode`: per container with devices, the share of them on its largest card.
/// A device without custominfo or a card, or one whose strategy is another string, scores the
/// node 0 altogether.
pub fn die_share(containers: &[Vec<&Device>]) -> f32 {
    let mut score = 0f32;
    for devices in containers.iter().filter(|c| !c.is_empty()) {
        let mut cards: Vec<(&str, i32)> = Vec::new();
        for d in devices {
            let Some(info) = d.custom_info.as_ref() else { return 0.0 };
            if info.get("DeviceStrategy").and_then(|v| v.as_str()).is_some_and(|s| s != "die") {
                return 0.0;
            }
            let Some(aic) = info.get("AIC") else { return 0.0 };
            let Some(card) = aic.as_str() else { continue };
            match cards.iter_mut().find(|(c, _)| *c == card) {
                Some((_, n)) => *n += 1,
                None => cards.push((card, 1)),
            }
        }
        let total: i32 = cards.iter().map(|(_, n)| n).sum();
        let most = cards.iter().map(|(_, n)| *n).max().unwrap_or(0);
        if total > 0 {
            score += most as f32 / total as f32;
        }
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    fn die(id: &str, info: serde_json::Value) -> Device {
        Device { id: id.into(), custom_info: info.as_object().cloned().map(Box::new), ..Device::default() }
    }

    fn on_card(id: &str, card: &str) -> Device {
        die(id, serde_json::json!({"DeviceStrategy": "die", "AIC": card}))
    }

    #[test]
    fn die_mode_is_read_off_the_first_candidate() {
        assert!(die_mode(Some(&on_card("d0", "0"))));
        assert!(!die_mode(Some(&die("d0", serde_json::json!({"DeviceStrategy": "card"})))));
        assert!(!die_mode(Some(&die("d0", serde_json::json!({"DeviceStrategy": 1})))));
        assert!(!die_mode(Some(&Device::default())));
        assert!(!die_mode(None));
    }

    #[test]
    fn several_dies_come_from_the_fullest_cards_first() {
        let dies = [on_card("a0", "A"), on_card("b0", "B"), on_card("b1", "B"), on_card("a1", "A"), on_card("b2", "B")];
        let collected: Vec<&Device> = dies.iter().collect();
        assert_eq!(best_dies(2, &collected), [1, 2], "card B has three free dies, A two");
        assert_eq!(best_dies(4, &collected), [1, 2, 4, 0]);
        assert_eq!(best_dies(1, &collected), [0], "one die: the first collected");
        let loose = [die("x", serde_json::json!({"DeviceStrategy": "die"})), on_card("a0", "A")];
        let collected: Vec<&Device> = loose.iter().collect();
        assert_eq!(best_dies(2, &collected), [1], "a die without a card is left out: the pick falls short");
    }

    #[test]
    fn the_score_is_the_share_on_the_largest_card_per_container() {
        let (a0, a1, b0) = (on_card("a0", "A"), on_card("a1", "A"), on_card("b0", "B"));
        assert_eq!(die_share(&[vec![&a0, &a1, &b0], vec![], vec![&b0]]), 2.0 / 3.0 + 1.0);
        let plain = Device::default();
        assert_eq!(die_share(&[vec![&a0], vec![&plain]]), 0.0, "a device without custominfo: 0 for the node");
        let card_mode = die("c", serde_json::json!({"DeviceStrategy": "card", "AIC": "A"}));
        assert_eq!(die_share(&[vec![&card_mode]]), 0.0);
        let numbered = die("n", serde_json::json!({"DeviceStrategy": "die", "AIC": 3}));
        assert_eq!(die_share(&[vec![&numbered, &a0]]), 1.0, "a card that is not a string is not counted");
    }
}
