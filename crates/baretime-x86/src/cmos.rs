//! The CMOS real-time clock's registers, decoded: BCD or binary and 12- or 24-hour as
//! register B says, the century from the FADT's century register where the firmware offers
//! one (else 20xx), and the civil date turned into Unix seconds. Pure functions, on every
//! host; the port reads are in `cmos_rtc.rs` (x86_64 only).

use core::fmt;

/// Register B's "data mode" bit: set for binary, clear for BCD.
pub(crate) const B_BINARY: u8 = 1 << 2;
/// Register B's 24-hour bit: set for 24-hour, clear for 12-hour (PM in the hour's bit 7).
pub(crate) const B_24H: u8 = 1 << 1;
/// The hour register's PM bit in 12-hour mode.
const PM: u8 = 1 << 7;

/// Why the CMOS real-time clock gave no time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CmosError {
    /// A register holds a value that is no BCD digit pair (a nibble above 9), in BCD mode.
    BadBcd {
        /// The register's index (0x00 seconds … 0x09 year, or the century register).
        register: u8,
        /// What it held.
        value: u8,
    },
    /// A field is out of its range: second 60 or more, minute 60, hour 24 (or 0 and 13 in
    /// 12-hour mode), day 0 or past the month's end, month 0 or 13.
    BadDate {
        /// The register's index.
        register: u8,
        /// The decoded value.
        value: u8,
    },
    /// Two consecutive reads of the registers never agreed (an update kept landing between
    /// them).
    Unsettled,
    /// The seconds never changed within 1.1 s plus a 100 ms margin (or 2^22 polls, on a
    /// clock that does not move), or UIP stayed set past that limit in the full read after
    /// the edge: the RTC does not tick (stopped, its oscillator off, stuck in an update, or
    /// no RTC there).
    NotTicking,
}

impl fmt::Display for CmosError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmosError::BadBcd { register, value } => {
                write!(
                    f,
                    "CMOS RTC register {register:#04x} holds {value:#04x}, not BCD"
                )
            }
            CmosError::BadDate { register, value } => {
                write!(
                    f,
                    "CMOS RTC register {register:#04x} holds {value}, out of range"
                )
            }
            CmosError::Unsettled => f.write_str("CMOS RTC reads never agreed"),
            CmosError::NotTicking => f.write_str("CMOS RTC seconds did not change in 1.2 s"),
        }
    }
}

impl core::error::Error for CmosError {}

/// Register indices.
pub(crate) const SECONDS: u8 = 0x00;
pub(crate) const MINUTES: u8 = 0x02;
pub(crate) const HOURS: u8 = 0x04;
pub(crate) const DAY: u8 = 0x07;
pub(crate) const MONTH: u8 = 0x08;
pub(crate) const YEAR: u8 = 0x09;
pub(crate) const STATUS_A: u8 = 0x0A;
pub(crate) const STATUS_B: u8 = 0x0B;
/// Register A's update-in-progress bit.
pub(crate) const UIP: u8 = 1 << 7;

/// The time registers as read, in the RTC's own format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Raw {
    pub(crate) seconds: u8,
    pub(crate) minutes: u8,
    pub(crate) hours: u8,
    pub(crate) day: u8,
    pub(crate) month: u8,
    pub(crate) year: u8,
    /// The century register's value and index, where the FADT names one.
    pub(crate) century: Option<(u8, u8)>,
    pub(crate) status_b: u8,
}

/// `value` as a number: BCD (each nibble 0–9) unless `binary`.
pub(crate) fn number(register: u8, value: u8, binary: bool) -> Result<u8, CmosError> {
    if binary {
        return Ok(value);
    }
    let (hi, lo) = (value >> 4, value & 0x0f);
    if hi > 9 || lo > 9 {
        return Err(CmosError::BadBcd { register, value });
    }
    // hi, lo ≤ 9: at most 99.
    Ok(hi.wrapping_mul(10).wrapping_add(lo))
}

fn in_range(register: u8, value: u8, lo: u8, hi: u8) -> Result<u8, CmosError> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(CmosError::BadDate { register, value })
    }
}

impl Raw {
    /// The Unix time these registers say (UTC assumed: a PC whose RTC keeps local time, as
    /// Windows sets it, is off by the zone's offset).
    // Every field is range-checked first: the year below 10 000, the sum below 2^39.
    #[allow(clippy::arithmetic_side_effects)]
    pub(crate) fn unix_seconds(&self) -> Result<u64, CmosError> {
        let binary = self.status_b & B_BINARY != 0;
        let n = |register, value| number(register, value, binary);
        let second = in_range(SECONDS, n(SECONDS, self.seconds)?, 0, 59)?;
        let minute = in_range(MINUTES, n(MINUTES, self.minutes)?, 0, 59)?;
        let hour = if self.status_b & B_24H != 0 {
            in_range(HOURS, n(HOURS, self.hours)?, 0, 23)?
        } else {
            // 12-hour: 12 AM is midnight, 12 PM noon; PM in bit 7.
            let h = in_range(HOURS, n(HOURS, self.hours & !PM)?, 1, 12)? % 12;
            if self.hours & PM != 0 {
                h.wrapping_add(12)
            } else {
                h
            }
        };
        let year_lo = in_range(YEAR, n(YEAR, self.year)?, 0, 99)?;
        let century = match self.century {
            Some((register, value)) => in_range(register, n(register, value)?, 19, 99)?,
            None => 20,
        };
        let year = u32::from(century) * 100 + u32::from(year_lo);
        let month = in_range(MONTH, n(MONTH, self.month)?, 1, 12)?;
        let day = in_range(DAY, n(DAY, self.day)?, 1, days_in_month(year, month))?;
        let days = days_from_civil(year, month, day).ok_or(CmosError::BadDate {
            register: YEAR,
            value: year_lo,
        })?;
        Ok(days * 86_400 + u64::from(hour) * 3_600 + u64::from(minute) * 60 + u64::from(second))
    }
}

/// Days in `month` (1–12) of `year` (Gregorian).
pub(crate) fn days_in_month(year: u32, month: u8) -> u8 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian), for dates from 1970 on:
/// Howard Hinnant's `days_from_civil`, in unsigned arithmetic. `None` before 1970, for a
/// month outside 1–12 or a day outside 1–31 (the caller checks the month's length).
// year < 2^32: every product and sum is below 2^43, and the subtractions are of smaller
// terms (y ≥ 1969, yoe = y mod 400).
#[allow(clippy::arithmetic_side_effects)]
pub(crate) fn days_from_civil(year: u32, month: u8, day: u8) -> Option<u64> {
    if year < 1970 || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (year, month, day) = (u64::from(year), u64::from(month), u64::from(day));
    // Years begin in March, so that the leap day is the last of the year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400; // 0..=399
    let mp = (month + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + day - 1; // 0..=365
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // 0..=146096
                                                     // 719 468 days from 0000-03-01 to 1970-01-01; y ≥ 1969 keeps the sum above it.
    (era * 146_097 + doe).checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference: count days year by year and month by month.
    fn days_by_counting(year: u32, month: u8, day: u8) -> u64 {
        let mut days = 0u64;
        for y in 1970..year {
            days += if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) {
                366
            } else {
                365
            };
        }
        for m in 1..month {
            days += u64::from(days_in_month(year, m));
        }
        days + u64::from(day) - 1
    }

    fn bcd(v: u8) -> u8 {
        (v / 10) << 4 | (v % 10)
    }

    #[test]
    fn known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(days_from_civil(2024, 2, 29), Some(19_782));
        assert_eq!(days_from_civil(1969, 12, 31), None);
        assert_eq!(days_from_civil(2024, 13, 1), None);
        // 2024-01-01T00:00:00Z in BCD, 24-hour, with a century register.
        let raw = Raw {
            seconds: 0,
            minutes: 0,
            hours: 0,
            day: 1,
            month: 1,
            year: 0x24,
            century: Some((0x32, 0x20)),
            status_b: B_24H,
        };
        assert_eq!(raw.unix_seconds(), Ok(1_704_067_200));
    }

    #[test]
    fn twelve_hour_and_garbage() {
        let base = Raw {
            seconds: 0x59,
            minutes: 0x30,
            hours: 0x12, // 12 AM
            day: 0x15,
            month: 0x06,
            year: 0x23,
            century: None,
            status_b: 0,
        };
        let midnight = base.unix_seconds().unwrap();
        let noon = Raw {
            hours: 0x12 | PM,
            ..base
        }
        .unix_seconds()
        .unwrap();
        let one_pm = Raw {
            hours: 0x01 | PM,
            ..base
        }
        .unix_seconds()
        .unwrap();
        assert_eq!((noon - midnight, one_pm - noon), (43_200, 3_600));
        assert_eq!(midnight % 86_400, 30 * 60 + 59);
        let bad = |raw: Raw| raw.unix_seconds().unwrap_err();
        assert_eq!(
            bad(Raw {
                month: 0x13,
                ..base
            }),
            CmosError::BadDate {
                register: MONTH,
                value: 13
            }
        );
        assert_eq!(
            bad(Raw {
                seconds: 0x5a,
                ..base
            }),
            CmosError::BadBcd {
                register: SECONDS,
                value: 0x5a
            }
        );
        assert_eq!(
            bad(Raw { day: 0x31, ..base }),
            CmosError::BadDate {
                register: DAY,
                value: 31
            }
        );
        assert_eq!(
            bad(Raw {
                hours: 0x00,
                ..base
            }),
            CmosError::BadDate {
                register: HOURS,
                value: 0
            }
        );
        assert_eq!(
            bad(Raw {
                hours: 0x24,
                status_b: B_24H,
                ..base
            }),
            CmosError::BadDate {
                register: HOURS,
                value: 24
            }
        );
        let binary = Raw {
            seconds: 1,
            minutes: 2,
            hours: 3,
            day: 4,
            month: 5,
            status_b: B_BINARY | B_24H,
            ..base
        };
        assert_eq!(
            bad(Raw {
                year: 0xff,
                ..binary
            }),
            CmosError::BadDate {
                register: YEAR,
                value: 255
            }
        );
        assert_eq!(
            bad(Raw {
                century: Some((0x32, 0x0a)),
                ..base
            }),
            CmosError::BadBcd {
                register: 0x32,
                value: 0x0a
            }
        );
        assert_eq!(
            bad(Raw {
                day: 0x29,
                month: 0x02,
                ..base
            }),
            CmosError::BadDate {
                register: DAY,
                value: 29
            }
        );
        assert!(Raw {
            day: 0x29,
            month: 0x02,
            year: 0x24,
            ..base
        }
        .unix_seconds()
        .is_ok());
    }

    proptest! {
        /// days_from_civil against counting, for every valid date 1970–2999.
        #[test]
        fn civil_matches_counting(year in 1970u32..3000, month in 1u8..=12, day in 1u8..=31) {
            let day = day.min(days_in_month(year, month));
            prop_assert_eq!(days_from_civil(year, month, day), Some(days_by_counting(year, month, day)));
        }

        /// Any register contents, either mode: a time or a typed error, never a panic; and a
        /// time's fields round-trip from the encoding.
        #[test]
        fn any_registers(regs in any::<[u8; 7]>(), b in any::<u8>()) {
            let raw = Raw {
                seconds: regs[0], minutes: regs[1], hours: regs[2], day: regs[3],
                month: regs[4], year: regs[5], century: Some((0x32, regs[6])), status_b: b,
            };
            let _ = raw.unix_seconds();
        }

        #[test]
        fn encoded_dates_decode(year in 1970u32..2100, month in 1u8..=12, day in 1u8..=31,
                                hour in 0u8..24, minute in 0u8..60, second in 0u8..60, binary: bool) {
            let day = day.min(days_in_month(year, month));
            let enc = |v: u8| if binary { v } else { bcd(v) };
            let raw = Raw {
                seconds: enc(second), minutes: enc(minute), hours: enc(hour), day: enc(day),
                month: enc(month), year: enc((year % 100) as u8),
                century: Some((0x32, enc((year / 100) as u8))),
                status_b: B_24H | if binary { B_BINARY } else { 0 },
            };
            let want = days_by_counting(year, month, day) * 86_400
                + u64::from(hour) * 3600 + u64::from(minute) * 60 + u64::from(second);
            prop_assert_eq!(raw.unix_seconds(), Ok(want));
        }
    }
}
