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

/// Seconds since the Unix epoch of an RFC 3339 UTC time (`YYYY-MM-DDTHH:MM:SS`, an
/// optional fraction, then `Z` or `+00:00`); the fraction is dropped. `None` for any
/// other form or offset.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let rest = text
        .strip_suffix('Z')
        .or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = rest.split_once(['T', 't', ' '])?;
    let time = time.split_once('.').map_or(time, |(whole, fraction)| {
        if fraction.bytes().all(|b| b.is_ascii_digit()) {
            whole
        } else {
            ""
        }
    });
    let number = |part: &str, len: usize| -> Option<u64> {
        (part.len() == len && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    let mut dates = date.split('-');
    let (year, month, day) = (
        number(dates.next()?, 4)?,
        number(dates.next()?, 2)?,
        number(dates.next()?, 2)?,
    );
    let mut times = time.split(':');
    let (hour, minute, second) = (
        number(times.next()?, 2)?,
        number(times.next()?, 2)?,
        number(times.next()?, 2)?,
    );
    if dates.next().is_some()
        || times.next().is_some()
        || year < 1970
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second)
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

// Howard Hinnant's civil-to-days algorithm (years from 1970 on).
fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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

    #[test]
    fn parses_what_it_formats_and_package_indexes_upload_times() {
        use super::{parse_rfc3339, rfc3339};
        for t in [0, 951_782_400, 1_779_477_846, 4_107_542_399] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t), "{}", rfc3339(t));
        }
        // PyPI's `upload-time` (PEP 700): microseconds, dropped.
        assert_eq!(
            parse_rfc3339("2025-09-25T21:25:57.066874Z")
                .map(rfc3339)
                .as_deref(),
            Some("2025-09-25T21:25:57Z")
        );
        assert_eq!(
            parse_rfc3339("2024-02-29T00:00:00+00:00"),
            Some(1_709_164_800)
        );
        for bad in [
            "",
            "2025-09-25",
            "2025-09-25T21:25:57",
            "2025-09-25T21:25:57+02:00",
            "2025-13-01T00:00:00Z",
            "2025-09-25T21:25:57.x1Z",
            "25-09-25T21:25:57Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}
