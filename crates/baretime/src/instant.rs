//! [`Instant`] (nanoseconds on a [`crate::Clock`]'s timeline) and [`RawInstant`] (raw ticks).

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};
use core::time::Duration;

use crate::scale::saturate_u64;

/// A point in time: nanoseconds since the epoch of the [`crate::Clock`] that produced it
/// (its creation). Only compare instants from the same clock.
///
/// Arithmetic with [`Duration`] follows `std::time::Instant`: `checked_*` return `None`
/// where the result does not fit, `saturating_*` clamp, and the operators saturate rather
/// than panic (a clock in a kernel must not bring it down).
///
/// ```
/// use baretime::Instant;
/// use core::time::Duration;
///
/// let boot = Instant::ZERO;
/// let t = Instant::from_nanos(1_500_000);
/// assert_eq!(t - boot, Duration::from_micros(1500));
/// assert_eq!(boot - t, Duration::ZERO); // saturates instead of panicking
/// assert_eq!(boot.checked_duration_since(t), None);
/// let deadline = t + Duration::from_millis(10);
/// assert_eq!(deadline.as_nanos(), 11_500_000);
/// assert_eq!(Instant::from_nanos(u64::MAX).checked_add(Duration::from_nanos(1)), None);
/// assert_eq!(deadline.since_epoch(), Duration::from_micros(11_500));
/// assert_eq!(deadline.as_millis(), 11); // whole units, truncated
/// assert_eq!(deadline.as_micros(), 11_500);
/// assert_eq!(deadline.to_string(), "0.011500000 s");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant {
    ns: u64,
}

/// A [`Duration`] in nanoseconds, saturating at `u64::MAX` (584 years).
pub(crate) const fn duration_ns(d: Duration) -> u64 {
    saturate_u64(d.as_nanos())
}

/// Nanoseconds in a second.
const NS_PER_S: u64 = 1_000_000_000;

/// Nanoseconds per tick of a `hz` timebase, where a tick is a whole number of them (`hz`
/// divides 10⁹, nonzero).
#[allow(clippy::arithmetic_side_effects)] // `hz` is nonzero where it divides
const fn ns_per_tick(hz: u64) -> Option<u64> {
    if hz != 0 && NS_PER_S % hz == 0 {
        Some(NS_PER_S / hz)
    } else {
        None
    }
}

impl Instant {
    /// The clock's epoch.
    pub const ZERO: Instant = Instant { ns: 0 };

    /// The instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant { ns }
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(&self) -> u64 {
        self.ns
    }

    /// The tick of a `hz`-ticks-a-second timebase (an executor's: embassy-time's `TICK_HZ`,
    /// an RTIC monotonic's rate) that contains this instant: `⌊ns × hz / 10⁹⌋`, saturating.
    /// Rounded down, as a clock's reading is: with [`Instant::from_ticks_ceil`],
    /// `from_ticks_ceil(t, hz).ticks_floor(hz) >= t`, so a wake at that instant is never
    /// early by the timebase's clock. A `hz` that divides 10⁹ takes one 64-bit division (none
    /// at 10⁹), a constant one where `hz` is; others go through 128 bits. `hz` = 0 reads 0.
    ///
    /// ```
    /// use baretime::Instant;
    /// assert_eq!(Instant::from_nanos(1_999).ticks_floor(1_000_000), 1);
    /// assert_eq!(Instant::from_nanos(1_000_000_000).ticks_floor(32_768), 32_768);
    /// assert_eq!(Instant::from_ticks_ceil(2, 1_000_000), Instant::from_nanos(2_000));
    /// assert_eq!(Instant::from_ticks_ceil(1, 32_768), Instant::from_nanos(30_518)); // 30 517.58
    /// ```
    #[inline]
    #[allow(clippy::arithmetic_side_effects)] // divisors nonzero, product below 2^128: below
    pub const fn ticks_floor(&self, hz: u64) -> u64 {
        match ns_per_tick(hz) {
            Some(1) => self.ns,
            // `per` is nonzero: it divides 10⁹.
            Some(per) => self.ns / per,
            None if hz == 0 => 0,
            None => {
                // ns × hz < 2^128; NS_PER_S is nonzero.
                let t = (self.ns as u128) * (hz as u128) / (NS_PER_S as u128);
                if t > u64::MAX as u128 {
                    u64::MAX
                } else {
                    t as u64
                }
            }
        }
    }

    /// The first instant at which a `hz`-ticks-a-second timebase reads tick `ticks` (see
    /// [`Instant::ticks_floor`]): `⌈ticks × 10⁹ / hz⌉` ns, saturating at `u64::MAX` ns (584
    /// years: never reached). `hz` = 0 is never reached either.
    #[inline]
    #[allow(clippy::arithmetic_side_effects)] // divisor nonzero, product below 2^128: below
    pub const fn from_ticks_ceil(ticks: u64, hz: u64) -> Instant {
        let ns = match ns_per_tick(hz) {
            Some(per) => ticks.saturating_mul(per),
            None if hz == 0 => u64::MAX,
            None => {
                // ticks × 10⁹ < 2^128; `hz` is nonzero.
                let num = (ticks as u128) * (NS_PER_S as u128);
                let den = hz as u128;
                let q = num.div_ceil(den);
                if q > u64::MAX as u128 {
                    u64::MAX
                } else {
                    q as u64
                }
            }
        };
        Instant { ns }
    }

    /// Whole microseconds since the epoch (truncated: 1999 ns is 1 µs).
    pub const fn as_micros(&self) -> u64 {
        self.ns / 1_000
    }

    /// Whole milliseconds since the epoch (truncated: 1.999 ms is 1 ms).
    pub const fn as_millis(&self) -> u64 {
        self.ns / 1_000_000
    }

    /// Time since the epoch.
    pub const fn since_epoch(&self) -> Duration {
        Duration::from_nanos(self.ns)
    }

    /// `self - earlier`, or `None` if `earlier` is later.
    pub const fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        match self.ns.checked_sub(earlier.ns) {
            Some(ns) => Some(Duration::from_nanos(ns)),
            None => None,
        }
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.ns.saturating_sub(earlier.ns))
    }

    /// `self + d`, or `None` past `u64::MAX` ns.
    pub const fn checked_add(&self, d: Duration) -> Option<Instant> {
        let d = d.as_nanos();
        if d > u64::MAX as u128 {
            return None;
        }
        match self.ns.checked_add(d as u64) {
            Some(ns) => Some(Instant { ns }),
            None => None,
        }
    }

    /// `self - d`, or `None` before the epoch.
    pub const fn checked_sub(&self, d: Duration) -> Option<Instant> {
        let d = d.as_nanos();
        if d > u64::MAX as u128 {
            return None;
        }
        match self.ns.checked_sub(d as u64) {
            Some(ns) => Some(Instant { ns }),
            None => None,
        }
    }

    /// `self + d`, clamped to the latest representable instant.
    pub const fn saturating_add(&self, d: Duration) -> Instant {
        Instant {
            ns: self.ns.saturating_add(duration_ns(d)),
        }
    }

    /// `self - d`, clamped to the epoch.
    pub const fn saturating_sub(&self, d: Duration) -> Instant {
        Instant {
            ns: self.ns.saturating_sub(duration_ns(d)),
        }
    }
}

impl fmt::Display for Instant {
    /// Seconds since the epoch with nine decimals, from the integer (`12.000345678 s`): the
    /// nanosecond count exactly, as a log line wants it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09} s",
            self.ns / 1_000_000_000,
            self.ns % 1_000_000_000
        )
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturating: see [`Instant::checked_add`] to detect overflow.
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Saturating at the epoch: see [`Instant::checked_sub`].
    fn sub(self, d: Duration) -> Instant {
        self.saturating_sub(d)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, d: Duration) {
        *self = self.saturating_sub(d);
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating at zero, like `std::time::Instant`.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// A raw counter reading, for the cheapest possible timestamps: take two with
/// [`crate::Clock::raw`] and convert only their difference with
/// [`crate::Clock::delta`] when it is needed, as `quanta::Clock::raw` does.
///
/// A difference of two readings has one rule, the counter's width: [`crate::Clock::delta`]
/// (in time) and [`crate::Width::elapsed`] (in ticks) both take it modulo the wrap, and read
/// a reading more than half a wrap ahead as behind (zero, or `None`).
///
/// ```
/// use baretime::{Clock, FnCounter, Frequency, RawInstant, Width};
/// use core::cell::Cell;
/// use core::time::Duration;
///
/// let now = Cell::new(0xffff_ff00u64);
/// // A 32-bit counter at 1 MHz.
/// let clock = Clock::new(FnCounter::new(|| now.get(), 32), Frequency::exact_hz(1_000_000).unwrap());
/// let a = clock.raw(); // one counter read, no conversion
/// now.set(2_500 - 0x100); // wrapped through 2^32
/// let b = clock.raw();
/// assert_eq!(clock.delta(a, b), Duration::from_micros(2_500)); // converted when needed
/// let width = Width::of(clock.counter());
/// assert_eq!(width.elapsed(a.as_ticks(), b.as_ticks()), Some(2_500)); // in ticks
/// assert_eq!(clock.delta(b, a), Duration::ZERO); // `a` is behind `b`
/// assert_eq!(RawInstant::from_ticks(7).as_ticks(), 7);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RawInstant {
    ticks: u64,
}

impl RawInstant {
    /// A reading of `ticks`.
    pub const fn from_ticks(ticks: u64) -> RawInstant {
        RawInstant { ticks }
    }

    /// The counter value.
    pub const fn as_ticks(&self) -> u64 {
        self.ticks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_and_saturating() {
        let a = Instant::from_nanos(5);
        let b = Instant::from_nanos(9);
        assert_eq!(b.checked_duration_since(a), Some(Duration::from_nanos(4)));
        assert_eq!(a.checked_duration_since(b), None);
        assert_eq!(a - b, Duration::ZERO);
        assert_eq!(b - a, Duration::from_nanos(4));
        assert_eq!(a.checked_sub(Duration::from_nanos(6)), None);
        assert_eq!(a - Duration::from_nanos(6), Instant::ZERO);
        assert_eq!(
            Instant::from_nanos(u64::MAX).checked_add(Duration::from_nanos(1)),
            None
        );
        assert_eq!(
            Instant::from_nanos(u64::MAX - 1) + Duration::MAX,
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(a.checked_add(Duration::MAX), None);
        let mut c = a;
        c += Duration::from_nanos(10);
        c -= Duration::from_nanos(3);
        assert_eq!(c.as_nanos(), 12);
        assert_eq!(c.since_epoch(), Duration::from_nanos(12));
    }

    #[test]
    fn units_truncate_and_display_is_exact() {
        let t = Instant::from_nanos(12_345_678_999);
        assert_eq!(t.as_micros(), 12_345_678);
        assert_eq!(t.as_millis(), 12_345);
        assert_eq!(Instant::from_nanos(999_999).as_millis(), 0);
        assert_eq!(std::format!("{t}"), "12.345678999 s");
        assert_eq!(std::format!("{}", Instant::ZERO), "0.000000000 s");
        assert_eq!(
            std::format!("{}", Instant::from_nanos(u64::MAX)),
            "18446744073.709551615 s"
        );
    }
}
