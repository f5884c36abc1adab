//! Event timestamps: milliseconds since the Unix epoch, and their UTC rendering.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch (the unit of [`crate::Event::ts`]).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `2026-11-21 21:04:05.123Z` from milliseconds since the epoch (UTC, proleptic Gregorian).
pub fn format_utc_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(format_utc_ms(0), "1970-01-01 00:00:00.000Z");
        assert_eq!(format_utc_ms(1_704_067_200_000), "2024-01-01 00:00:00.000Z");
        assert_eq!(
            format_utc_ms(951_782_400_000 + 3_723_004),
            "2000-02-29 01:02:03.004Z"
        );
        assert_eq!(format_utc_ms(-1), "1969-12-31 23:59:59.999Z");
    }
}
