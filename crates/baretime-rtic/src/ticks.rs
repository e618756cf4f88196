//! The monotonic's ticks (`HZ` a second) to and from the clock's nanoseconds, rounded so that a
//! wake is never early: `now` rounds down, a deadline rounds up, and
//! `ticks_floor(instant_ceil(t)) >= t`.
//!
//! At the default rate (10⁹: a tick is a nanosecond) both are the identity; a rate that divides
//! 10⁹ (1 MHz, 1 kHz) takes one 64-bit division by a constant; others go through 128 bits.
//! Every result saturates rather than overflows.

use baretime::Instant;

const NS_PER_S: u64 = 1_000_000_000;

/// Nanoseconds per tick, where a tick is a whole number of them (`HZ` divides 10⁹).
const fn ns_per_tick(hz: u32) -> Option<u64> {
    let hz = hz as u64;
    match (NS_PER_S.checked_rem(hz), NS_PER_S.checked_div(hz)) {
        (Some(0), Some(per)) => Some(per),
        _ => None,
    }
}

/// The tick that contains `ns`: ⌊ns × HZ / 10⁹⌋.
#[inline]
pub(crate) fn ticks_floor<const HZ: u32>(ns: u64) -> u64 {
    match ns_per_tick(HZ) {
        Some(1) => ns,
        // `per` is nonzero: HZ ≤ 10⁹ when it divides 10⁹.
        Some(per) => ns.checked_div(per).unwrap_or(0),
        None => {
            let t = u128::from(ns)
                .saturating_mul(u128::from(HZ))
                .checked_div(u128::from(NS_PER_S))
                .unwrap_or(0);
            u64::try_from(t).unwrap_or(u64::MAX)
        }
    }
}

/// The first instant at which the monotonic reads tick `t`: ⌈t × 10⁹ / HZ⌉ ns, saturating at
/// `u64::MAX` ns (584 years: never reached).
#[inline]
pub(crate) fn instant_ceil<const HZ: u32>(t: u64) -> Instant {
    let ns = match ns_per_tick(HZ) {
        Some(per) => t.saturating_mul(per),
        None => {
            let num = u128::from(t).saturating_mul(u128::from(NS_PER_S));
            let den = u128::from(HZ.max(1));
            // `den` is at least 1: neither division can fail.
            let q = num.checked_div(den).unwrap_or(u128::MAX);
            let q = if num.checked_rem(den) != Some(0) {
                q.saturating_add(1)
            } else {
                q
            };
            u64::try_from(q).unwrap_or(u64::MAX)
        }
    };
    Instant::from_nanos(ns)
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
