//! The monotonic's ticks (`HZ` a second) to and from the clock's nanoseconds, rounded so that a
//! wake is never early: `now` rounds down, a deadline rounds up, and
//! `ticks_floor(instant_ceil(t)) >= t`.
//!
//! The core's own conversions (`Instant::ticks_floor`, `Instant::from_ticks_ceil`) at the
//! monotonic's rate: at the default (10⁹: a tick is a nanosecond) both are the identity.

use baretime::Instant;

/// The tick that contains `ns`: ⌊ns × HZ / 10⁹⌋ ([`Instant::ticks_floor`]).
#[inline]
pub(crate) fn ticks_floor<const HZ: u32>(ns: u64) -> u64 {
    Instant::from_nanos(ns).ticks_floor(HZ as u64)
}

/// The first instant at which the monotonic reads tick `t`: ⌈t × 10⁹ / HZ⌉ ns, saturating at
/// `u64::MAX` ns (584 years: never reached) ([`Instant::from_ticks_ceil`]).
#[inline]
pub(crate) fn instant_ceil<const HZ: u32>(t: u64) -> Instant {
    Instant::from_ticks_ceil(t, HZ as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tick is first read at its instant, at each kind of rate.
    fn first_read_at_its_instant<const HZ: u32>() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..100_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = match i % 4 {
                0 => x,
                1 => x >> 24,
                2 => i,
                _ => u64::MAX - i,
            };
            let at = instant_ceil::<HZ>(t).as_nanos();
            if at == u64::MAX {
                continue; // saturated: never reached
            }
            assert!(
                ticks_floor::<HZ>(at) >= t,
                "{HZ} Hz, tick {t}: at {at} ns reads {}",
                ticks_floor::<HZ>(at)
            );
            if at > 0 {
                assert!(
                    ticks_floor::<HZ>(at - 1) < t,
                    "{HZ} Hz, tick {t}: {at} ns is not its first"
                );
            }
        }
    }

    #[test]
    fn a_tick_is_first_read_at_its_instant() {
        first_read_at_its_instant::<1_000_000_000>();
        first_read_at_its_instant::<1_000_000>();
        first_read_at_its_instant::<32_768>();
        first_read_at_its_instant::<3>();
        first_read_at_its_instant::<{ u32::MAX }>();
    }

    #[test]
    fn rounding_directions() {
        assert_eq!(ticks_floor::<1_000_000_000>(1_999), 1_999);
        assert_eq!(instant_ceil::<1_000_000_000>(7).as_nanos(), 7);
        assert_eq!(ticks_floor::<1_000_000>(1_999), 1);
        assert_eq!(instant_ceil::<1_000_000>(2).as_nanos(), 2_000);
        assert_eq!(ticks_floor::<32_768>(1_000_000_000), 32_768);
        assert_eq!(instant_ceil::<32_768>(1).as_nanos(), 30_518); // 30 517.578… rounded up
        assert_eq!(instant_ceil::<1_000_000>(u64::MAX).as_nanos(), u64::MAX);
    }
}
