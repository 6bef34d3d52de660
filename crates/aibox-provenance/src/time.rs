//! RFC 3339 timestamps without a date library: callers pass the time in, so output stays
//! deterministic in tests.

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn rfc3339(unix_seconds: u64) -> String {
    let days = unix_seconds / 86_400;
    let rem = unix_seconds % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The current time as RFC 3339 (UTC, whole seconds).
pub fn now_rfc3339() -> String {
    rfc3339(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// Compact form used in migration ids: `YYYYMMDDTHHMMSS`, from an RFC 3339 string.
pub(crate) fn compact(rfc: &str) -> String {
    rfc.chars()
        .filter(char::is_ascii_alphanumeric)
        .take(15)
        .collect()
}

// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_779_477_846), "2026-05-22T19:24:06Z");
        assert_eq!(super::compact("2026-05-22T19:24:06Z"), "20260522T192406");
    }
}
