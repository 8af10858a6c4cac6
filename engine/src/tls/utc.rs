//! UTC calendar dates to and from seconds since the Unix epoch, for certificate validity: read
//! from a certificate's DER, and written into error messages for people.

/// Seconds since the epoch of a UTC date and time; `None` for a date that does not exist.
pub(crate) fn unix_seconds(year: i64, month: u32, day: u32, hour: u32, minute: u32, second: u32) -> Option<i64> {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month[month as usize - 1] {
        return None;
    }
    // X.509 allows a leap second (:60); it only has to order correctly.
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + (hour * 3600 + minute * 60 + second) as i64)
}

/// `2025-03-01 12:00:00 UTC`.
pub(crate) fn format(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", secs / 3600, secs / 60 % 60, secs % 60)
}

// Howard Hinnant's proleptic Gregorian algorithms (http://howardhinnant.github.io/date_algorithms.html).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::{format, unix_seconds};

    #[test]
    fn known_instants_convert_both_ways() {
        assert_eq!(unix_seconds(1970, 1, 1, 0, 0, 0), Some(0));
        // `date -u -d '2000-02-29 23:59:59' +%s`
        assert_eq!(unix_seconds(2000, 2, 29, 23, 59, 59), Some(951_868_799));
        assert_eq!(unix_seconds(2049, 12, 31, 0, 0, 0), Some(2_524_521_600));
        assert_eq!(format(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format(951_868_799), "2000-02-29 23:59:59 UTC");
        assert_eq!(format(2_524_521_600), "2049-12-31 00:00:00 UTC");
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        let mut t = 0;
        let end = unix_seconds(2370, 1, 1, 0, 0, 0).unwrap();
        while t < end {
            let text = format(t as u64);
            let n = |r: std::ops::Range<usize>| text[r].parse::<u32>().unwrap();
            let year = text[0..4].parse::<i64>().unwrap();
            assert_eq!(unix_seconds(year, n(5..7), n(8..10), 0, 0, 0), Some(t), "{text}");
            t += 86_400;
        }
    }

    #[test]
    fn dates_that_do_not_exist_are_refused() {
        assert_eq!(unix_seconds(1900, 2, 29, 0, 0, 0), None);
        assert_eq!(unix_seconds(2023, 4, 31, 0, 0, 0), None);
        assert_eq!(unix_seconds(2023, 13, 1, 0, 0, 0), None);
        assert_eq!(unix_seconds(2023, 1, 1, 24, 0, 0), None);
    }
}
