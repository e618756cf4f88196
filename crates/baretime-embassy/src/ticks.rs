//! embassy ticks ([`TICK_HZ`]) to and from the clock's nanoseconds, rounded so that a wake is
//! never early: `now` rounds down, a deadline rounds up, and `now_ticks(ns_of(t)) >= t`.
//!
//! The core's own conversions (`Instant::ticks_floor`, `Instant::from_ticks_ceil`) at
//! embassy's rate.

use baretime::Instant;
use embassy_time_driver::TICK_HZ;

/// The embassy tick that contains `ns`: ⌊ns × TICK_HZ / 10⁹⌋ ([`Instant::ticks_floor`]).
#[inline]
pub(crate) fn ticks_floor(ns: u64) -> u64 {
    Instant::from_nanos(ns).ticks_floor(TICK_HZ)
}

/// The first instant at which embassy's clock reads tick `t`: ⌈t × 10⁹ / TICK_HZ⌉ ns,
/// saturating at `u64::MAX` ns (embassy's "never" is `u64::MAX` ticks)
/// ([`Instant::from_ticks_ceil`]).
#[inline]
pub(crate) fn instant_ceil(t: u64) -> Instant {
    Instant::from_ticks_ceil(t, TICK_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_is_reached_exactly_at_its_instant() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = match i % 4 {
                0 => x,
                1 => x >> 20,
                2 => i,
                _ => u64::MAX - i,
            };
            let at = instant_ceil(t).as_nanos();
            if at == u64::MAX {
                continue; // saturated: "never"
            }
            assert!(
                ticks_floor(at) >= t,
                "tick {t}: at {at} ns reads {}",
                ticks_floor(at)
            );
            if at > 0 {
                assert!(
                    ticks_floor(at - 1) < t,
                    "tick {t}: {at} is not the first ns"
                );
            }
        }
    }

    #[test]
    fn rounding_directions_at_the_default_rate() {
        assert_eq!(TICK_HZ, 1_000_000);
        assert_eq!(ticks_floor(1_999), 1);
        assert_eq!(ticks_floor(2_000), 2);
        assert_eq!(instant_ceil(2).as_nanos(), 2_000);
        assert_eq!(instant_ceil(u64::MAX).as_nanos(), u64::MAX);
        assert_eq!(ticks_floor(u64::MAX), u64::MAX / 1_000);
    }
}
