//! Modification time messages: old (0x000E, spec "IV.A.2.o") and new (0x0012, "IV.A.2.s").
//!
//! The old message is ASCII `YYYYMMDDhhmmss` in UTC followed by two reserved bytes; it is
//! converted to seconds since the Unix epoch with the proleptic Gregorian calendar (no date
//! crate: the arithmetic is a few lines). The new message is version 1, three reserved bytes
//! and a 4-byte count of seconds since the epoch.

use crate::error::Result;
use crate::io::Cursor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModificationTime {
    /// Seconds since the Unix epoch (UTC).
    pub seconds: u64,
}

const SECONDS_PER_DAY: u64 = 86_400;

impl ModificationTime {
    /// New-style message (0x0012).
    pub fn parse(data: &[u8], addr: u64) -> Result<ModificationTime> {
        let mut c = Cursor::new(data, addr, "modification time message");
        super::expect_version(&mut c, &[1])?;
        c.skip(3)?;
        Ok(ModificationTime {
            seconds: c.u32()? as u64,
        })
    }

    /// Old-style message (0x000E): `YYYYMMDDhhmmss` UTC.
    pub fn parse_old(data: &[u8], addr: u64) -> Result<ModificationTime> {
        let mut c = Cursor::new(data, addr, "modification time message (old)");
        let text = c.bytes(14)?;
        let field = |range: std::ops::Range<usize>| -> Result<u64> {
            text[range].iter().try_fold(0u64, |acc, &b| {
                if b.is_ascii_digit() {
                    Ok(acc * 10 + (b - b'0') as u64)
                } else {
                    Err(c.corrupt(format!("non-digit in {:?}", String::from_utf8_lossy(text))))
                }
            })
        };
        let (year, month, day) = (field(0..4)?, field(4..6)?, field(6..8)?);
        let (hour, minute, second) = (field(8..10)?, field(10..12)?, field(12..14)?);
        let valid = year >= 1970
            && (1..=12).contains(&month)
            && day >= 1
            && day <= days_in_month(year, month)
            && hour < 24
            && minute < 60
            && second <= 60; // 60: a leap second
        if !valid {
            return Err(c.corrupt(format!("invalid date {:?}", String::from_utf8_lossy(text))));
        }
        let days = (1970..year).map(days_in_year).sum::<u64>()
            + (1..month).map(|m| days_in_month(year, m)).sum::<u64>()
            + (day - 1);
        Ok(ModificationTime {
            seconds: days * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second,
        })
    }
}

fn is_leap(year: u64) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_year(year: u64) -> u64 {
    if is_leap(year) {
        366
    } else {
        365
    }
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_format() {
        let t = |s: &[u8]| ModificationTime::parse_old(s, 0).map(|m| m.seconds);
        assert_eq!(t(b"19700101000000\0\0").unwrap(), 0);
        // date -u -d 2000-02-29T12:34:56 +%s
        assert_eq!(t(b"20000229123456\0\0").unwrap(), 951_827_696);
        // date -u -d 2024-12-31T23:59:59 +%s
        assert_eq!(t(b"20241231235959").unwrap(), 1_735_689_599);
        assert!(t(b"19000229000000").is_err()); // 1900 is not a leap year (and < 1970)
        assert!(t(b"20230229000000").is_err());
        assert!(t(b"2023013100000").is_err()); // short
        assert!(t(b"2023-1-3100000").is_err());
        assert!(t(b"20231301000000").is_err());
    }

    #[test]
    fn new_format() {
        let d = [1, 0, 0, 0, 0x80, 0x51, 0x01, 0x00];
        assert_eq!(ModificationTime::parse(&d, 0).unwrap().seconds, 86_400);
        assert!(ModificationTime::parse(&[2, 0, 0, 0, 0, 0, 0, 0], 0).is_err());
        assert!(ModificationTime::parse(&d[..6], 0).is_err());
    }
}
