//! HAMi's registration health of a node's NVIDIA devices (`CheckHealth` of the NVIDIA backend).
//!
//! HAMi's scheduler writes `Requesting_<time>` into `hami.io/node-handshake`; the device plugin
//! answers with `Reported_<time>`. A node whose handshake is still `Requesting_...` a minute later
//! and whose `status.allocatable` no longer has the GPU resource (the plugin is gone) is cleaned up
//! and is "node unregistered" until the scheduler asks again. Times are HAMi's `time.DateTime`
//! layout in the scheduler's local zone, UTC in its container image.

pub const HANDSHAKE_KEY: &str = "hami.io/node-handshake";
/// How long HAMi waits for the device plugin's answer before it gives a node up.
pub const HANDSHAKE_TIMEOUT_SECS: i64 = 60;
const REQUESTING: &str = "Requesting";

/// What the health rule reads of a node, captured when the Node object is applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Registration {
    /// When the scheduler last asked, if the handshake is a readable `Requesting_<time>`.
    pub requested_at: Option<i64>,
    /// `status.allocatable` has a positive GPU count.
    pub allocatable: bool,
}

impl Registration {
    pub fn read(handshake: Option<&str>, allocatable: Option<&str>) -> Self {
        Self {
            requested_at: handshake.and_then(requested_at),
            allocatable: allocatable.is_some_and(quantity_is_positive),
        }
    }

    /// HAMi gives the node's devices up: the request went unanswered for a minute and the
    /// device plugin no longer advertises GPUs.
    pub fn expired(&self, now: i64) -> bool {
        !self.allocatable && self.requested_at.is_some_and(|t| now >= t + HANDSHAKE_TIMEOUT_SECS)
    }
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

/// A quantity's `Value()` (rounded up) is positive: a non-negative number with a non-zero digit.
fn quantity_is_positive(q: &str) -> bool {
    let q = q.trim();
    let body = q.strip_prefix('+').unwrap_or(q);
    if body.starts_with('-') {
        return false;
    }
    let mantissa_end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    body[..mantissa_end].bytes().any(|c| (b'1'..=b'9').contains(&c))
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

    #[test]
    fn stale_request_without_allocatable_gpus_expires() {
        let t = parse_go_datetime("2026-01-01 00:00:00").unwrap();
        let stale = Registration::read(Some("Requesting_2026-01-01 00:00:00"), None);
        assert!(!stale.expired(t + 59));
        assert!(stale.expired(t + 60));
        assert!(!Registration::read(Some("Requesting_2026-01-01 00:00:00"), Some("8")).expired(t + 600));
        assert!(Registration::read(Some("Requesting_2026-01-01 00:00:00"), Some("0")).expired(t + 600));
        assert!(!Registration::read(Some("Reported_2026-01-01 00:00:00"), None).expired(t + 600));
        assert!(!Registration::read(Some("Requesting_garbage"), None).expired(t + 600));
        assert!(!Registration::read(Some("Requesting"), None).expired(t + 600));
        assert!(Registration::read(Some("xRequesting_2026-01-01 00:00:00"), Some("500m")).allocatable);
    }

    #[test]
    fn requesting_value_is_hami_layout() {
        assert_eq!(requesting_value(1_767_225_600), "Requesting_2026-01-01 00:00:00");
        assert!(is_requesting(Some("Requesting_x")) && !is_requesting(Some("Reported_x")) && !is_requesting(None));
    }
}
