//! HAMi's registration of a node's NVIDIA devices (`RegisterFromNodeAnnotations`, the NVIDIA
//! backend's `CheckHealth`), replayed pass by pass.
//!
//! Every 15 s HAMi's scheduler writes `Requesting_<time>` into `hami.io/node-handshake` (and each
//! vendor's variant) of every node whose value does not already carry a request; the device
//! plugin answers with `Reported_<time>`. A node enters HAMi's cache only on a pass that sees a
//! change: its allocatable GPU count differs from the one last reported, its register annotation
//! changed, or the scheduler just (re)wrote the request. It leaves when the request went
//! unanswered for a minute while `status.allocatable` has no GPUs, or at once when that count
//! drops to 0; HAMi then deletes the handshake, and asks again on the next pass. Times are HAMi's
//! `time.DateTime` layout in the scheduler's local zone, UTC in its container image.

pub use crate::annotations::{NODE_HANDSHAKE_KEY as HANDSHAKE_KEY, NODE_HANDSHAKE_KEYS as HANDSHAKE_KEYS};
/// How long HAMi waits for the device plugin's answer before it gives a node up.
pub const HANDSHAKE_TIMEOUT_SECS: i64 = 60;
const REQUESTING: &str = "Requesting";

/// The NVIDIA handshake as HAMi reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Handshake {
    /// Absent, `Reported_...`, `Deleted_...`: HAMi writes a new request.
    #[default]
    NotRequesting,
    /// `Requesting_<time>`; `None` when the time is unreadable (HAMi then waits forever).
    Requesting(Option<i64>),
}

/// What the registration rule reads of a node, captured when the Node object is applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Registration {
    pub handshake: Handshake,
    /// `status.allocatable` GPU count as HAMi's `Quantity.Value()` reads it (rounded up).
    pub allocatable: i64,
    /// Which of [`HANDSHAKE_KEYS`] already carry a request (bit i for key i).
    pub requesting_keys: u8,
    /// Hash of the register annotation, to see it change as HAMi compares the strings.
    pub register_hash: u64,
}

/// HAMi's cache entry for a node: in it or not, and what it last recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Membership {
    /// `None` until a pass has looked at the node.
    pub member: Option<bool>,
    pub reported: i64,
    pub reported_register: u64,
}

pub use crate::wire::state::HandshakeWrite;

impl Registration {
    pub fn read(handshake: Option<&str>, allocatable: Option<&str>) -> Self {
        let handshake = match handshake {
            Some(h) if h.contains(REQUESTING) => {
                Handshake::Requesting(h.split_once('_').and_then(|(_, t)| parse_go_datetime(t)))
            }
            _ => Handshake::NotRequesting,
        };
        Self { handshake, allocatable: allocatable.map_or(0, quantity_value), ..Self::default() }
    }

    /// Whether the handshake check's verdict can change with the clock alone (a request the
    /// device plugin has not answered, on a node without allocatable GPUs).
    pub fn depends_on_time(&self) -> bool {
        matches!(self.handshake, Handshake::Requesting(Some(_))) && self.allocatable <= 0
    }

    /// The generic handshake check: (healthy, changed).
    fn handshake_health(&self, now: i64) -> (bool, bool) {
        match self.handshake {
            Handshake::NotRequesting => (true, true),
            Handshake::Requesting(None) => (true, false),
            Handshake::Requesting(Some(t)) if now < t + HANDSHAKE_TIMEOUT_SECS || self.allocatable > 0 => (true, false),
            Handshake::Requesting(Some(_)) => (false, false),
        }
    }
}

impl Membership {
    /// The NVIDIA backend's `CheckHealth`: (healthy, needs an update), recording what it saw.
    pub fn check(&mut self, reg: &Registration, now: i64) -> (bool, bool) {
        let (healthy, changed) = reg.handshake_health(now);
        if reg.allocatable <= 0 {
            if self.reported <= 0 {
                return (healthy, changed);
            }
            self.reported = reg.allocatable;
            self.reported_register = reg.register_hash;
            return (false, changed);
        }
        if self.reported != reg.allocatable {
            self.reported = reg.allocatable;
            self.reported_register = reg.register_hash;
            return (true, true);
        }
        if self.reported_register != reg.register_hash {
            self.reported_register = reg.register_hash;
            return (healthy, true);
        }
        (healthy, changed)
    }

    /// One registration pass over the node: returns whether HAMi cleans it up (deletes its handshake).
    /// `has_devices`: the register annotation decodes to at least one device.
    pub fn pass(&mut self, reg: &Registration, has_devices: bool, now: i64) -> bool {
        let (healthy, update) = self.check(reg, now);
        let was_member = self.member == Some(true);
        if !healthy {
            self.member = Some(false);
            return was_member;
        }
        if has_devices && update {
            self.member = Some(true);
        } else if self.member.is_none() {
            self.member = Some(false);
        }
        false
    }

    /// In HAMi's cache at `now`: as the last pass left it, or as a first pass would decide.
    pub fn registered(&self, reg: &Registration, has_devices: bool, now: i64) -> bool {
        match self.member {
            Some(member) => member,
            None => {
                let mut first = *self;
                first.pass(reg, has_devices, now);
                first.member == Some(true)
            }
        }
    }
}

/// The writes of one pass for a node: a request under every handshake key without one, after
/// the clean-up's deletion of the NVIDIA key if there was one.
pub fn handshake_writes(node: &str, reg: &Registration, cleaned_up: bool, now: i64) -> Vec<HandshakeWrite> {
    let mut out = Vec::new();
    if cleaned_up {
        out.push(HandshakeWrite { node: node.to_owned(), key: HANDSHAKE_KEY, value: None });
    }
    for (i, key) in HANDSHAKE_KEYS.iter().enumerate() {
        let requesting = reg.requesting_keys & (1 << i) != 0;
        if !(requesting || cleaned_up && i == 0) {
            out.push(HandshakeWrite { node: node.to_owned(), key, value: Some(requesting_value(now)) });
        }
    }
    out
}

/// `Requesting_<YYYY-MM-DD HH:MM:SS>` (anything containing `Requesting`, the time after the
/// first `_`), as Unix seconds; `None` for any other value or an unreadable time, which HAMi
/// treats as healthy.
pub fn requested_at(handshake: &str) -> Option<i64> {
    if !handshake.contains(REQUESTING) {
        return None;
    }
    let (_, stamp) = handshake.split_once('_')?;
    parse_go_datetime(stamp)
}

/// The value HAMi's scheduler writes to ask the device plugin to report.
pub fn requesting_value(now: i64) -> String {
    format!("{REQUESTING}_{}", format_go_datetime(now))
}

/// Whether the handshake already carries a request (HAMi writes a new one only otherwise).
pub fn is_requesting(handshake: Option<&str>) -> bool {
    handshake.is_some_and(|h| h.contains(REQUESTING))
}

/// Go's `time.Parse(time.DateTime, s)`: `2006-01-02 15:04:05`, the hour one or two digits, an
/// optional fractional second, nothing after it.
pub fn parse_go_datetime(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let digits = |from: usize, n: usize| -> Option<i64> {
        let part = b.get(from..from + n)?;
        part.iter().all(u8::is_ascii_digit).then(|| part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    let expect = |at: usize, c: u8| (b.get(at) == Some(&c)).then_some(());
    let year = digits(0, 4)?;
    expect(4, b'-')?;
    let month = digits(5, 2)?;
    expect(7, b'-')?;
    let day = digits(8, 2)?;
    expect(10, b' ')?;
    let hour_len = if b.get(12).is_some_and(u8::is_ascii_digit) { 2 } else { 1 };
    let hour = digits(11, hour_len)?;
    let mut at = 11 + hour_len;
    expect(at, b':')?;
    let minute = digits(at + 1, 2)?;
    expect(at + 3, b':')?;
    let second = digits(at + 4, 2)?;
    at += 6;
    if matches!(b.get(at), Some(b'.' | b',')) && b.get(at + 1).is_some_and(u8::is_ascii_digit) {
        at += 1;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
    }
    let valid = at == b.len()
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour < 24
        && minute < 60
        && second < 60;
    valid.then(|| days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
}

/// Unix seconds in Go's `time.DateTime` layout, UTC.
pub fn format_go_datetime(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", secs / 3600, secs % 3600 / 60, secs % 60)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A quantity's `Value()`: rounded up to an integer; 0 when unreadable.
fn quantity_value(q: &str) -> i64 {
    if let Some(v) = crate::k8s::quantity::parse_int_quantity(q) {
        return v;
    }
    let q = q.trim();
    let positive = !q.starts_with('-');
    let end = q.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(q.len());
    let nonzero = q[..end].bytes().any(|c| (b'1'..=b'9').contains(&c));
    i64::from(positive && nonzero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_datetime_round_trips() {
        let t = parse_go_datetime("2026-01-01 00:00:00").unwrap();
        assert_eq!(t, 1_767_225_600);
        assert_eq!(format_go_datetime(t), "2026-01-01 00:00:00");
        assert_eq!(parse_go_datetime("2024-02-29 23:59:59"), Some(1_709_251_199));
        assert_eq!(parse_go_datetime("2024-03-01 7:05:09"), parse_go_datetime("2024-03-01 07:05:09"));
        assert_eq!(parse_go_datetime("2024-03-01 07:05:09.125"), parse_go_datetime("2024-03-01 07:05:09"));
        for bad in ["2023-02-29 00:00:00", "2024-13-01 00:00:00", "2024-1-01 00:00:00", "2024-01-01T00:00:00", "x", ""]
        {
            assert_eq!(parse_go_datetime(bad), None, "{bad}");
        }
        assert_eq!(parse_go_datetime("2024-01-01 00:00:00 "), None);
        assert_eq!(parse_go_datetime("2024-01-01 24:00:00"), None);
    }

    fn first_pass(handshake: Option<&str>, allocatable: Option<&str>, now: i64) -> bool {
        let reg = Registration::read(handshake, allocatable);
        Membership::default().registered(&reg, true, now)
    }

    #[test]
    fn a_first_pass_registers_as_hami_does_at_start_up() {
        let t = parse_go_datetime("2026-01-01 00:00:00").unwrap();
        let asked = Some("Requesting_2026-01-01 00:00:00");
        assert!(first_pass(asked, Some("8"), t + 600), "the plugin advertises GPUs");
        assert!(first_pass(None, None, t), "no request yet: HAMi asks and registers");
        assert!(first_pass(Some("Reported_2026-01-01 00:00:00"), Some("0"), t + 600));
        assert!(!first_pass(asked, None, t + 10), "asked, no GPUs, no answer yet: not added");
        assert!(!first_pass(asked, None, t + 60), "given up");
        assert!(!first_pass(Some("Requesting_yesterday"), None, t), "unreadable time: never added");
    }

    #[test]
    fn passes_keep_members_until_the_request_expires() {
        let t = parse_go_datetime("2026-01-01 00:00:00").unwrap();
        let mut m = Membership::default();
        assert!(!m.pass(&Registration::read(None, None), true, t));
        assert_eq!(m.member, Some(true));
        let asked = Registration::read(Some("Requesting_2026-01-01 00:00:00"), None);
        assert!(!m.pass(&asked, true, t + 15));
        assert_eq!(m.member, Some(true), "a member stays while the plugin may still answer");
        assert!(m.pass(&asked, true, t + 60), "cleaned up");
        assert_eq!(m.member, Some(false));
        let mut m = Membership::default();
        m.pass(&Registration::read(None, Some("4")), true, t);
        assert!(m.pass(&Registration::read(Some("Reported_x"), Some("0")), true, t + 15), "GPUs gone: out at once");
    }

    #[test]
    fn writes_ask_under_every_key_without_a_request() {
        let mut reg = Registration::read(Some("Reported_x"), Some("1"));
        reg.requesting_keys = 0b00010;
        let writes = handshake_writes("n", &reg, false, 1_767_225_600);
        let keys: Vec<&str> = writes.iter().map(|w| w.key).collect();
        assert_eq!(keys, [HANDSHAKE_KEY, HANDSHAKE_KEYS[2], HANDSHAKE_KEYS[3], HANDSHAKE_KEYS[4]]);
        assert_eq!(writes[0].value.as_deref(), Some("Requesting_2026-01-01 00:00:00"));
        let cleanup = handshake_writes("n", &reg, true, 0);
        assert_eq!((cleanup[0].key, cleanup[0].value.as_deref()), (HANDSHAKE_KEY, None));
        assert!(cleanup.iter().skip(1).all(|w| w.key != HANDSHAKE_KEY));
    }

    #[test]
    fn requesting_value_is_hami_layout() {
        assert_eq!(requesting_value(1_767_225_600), "Requesting_2026-01-01 00:00:00");
        assert!(is_requesting(Some("Requesting_x")) && !is_requesting(Some("Reported_x")) && !is_requesting(None));
    }
}
