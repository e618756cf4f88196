//! embassy ticks ([`TICK_HZ`]) to and from the clock's nanoseconds, rounded so that a wake is
//! never early: `now` rounds down, a deadline rounds up, and `now_ticks(ns_of(t)) >= t`.
//!
//! The common rates (1 MHz, 32 768 Hz, 1 GHz) take one 64-bit division by a constant or none;
//! others go through 128 bits. Every result saturates rather than overflows.

use baretime::Instant;
use embassy_time_driver::TICK_HZ;

const NS_PER_S: u64 = 1_000_000_000;

/// A tick is a whole number of nanoseconds (TICK_HZ divides 10^9: 1 MHz, 1 kHz, 1 GHz).
const NS_PER_TICK: Option<u64> = if TICK_HZ != 0 && NS_PER_S.is_multiple_of(TICK_HZ) {
    Some(NS_PER_S / TICK_HZ)
} else {
    None
};

/// The embassy tick that contains `ns`: ⌊ns × TICK_HZ / 10⁹⌋.
#[inline]
pub(crate) fn ticks_floor(ns: u64) -> u64 {
    match NS_PER_TICK {
        // NS_PER_TICK is nonzero: TICK_HZ ≤ 10^9 when it divides 10^9.
        Some(per) => ns.checked_div(per).unwrap_or(0),
        None => {
            let t = u128::from(ns)
                .saturating_mul(u128::from(TICK_HZ))
                .checked_div(u128::from(NS_PER_S))
                .unwrap_or(0);
            u64::try_from(t).unwrap_or(u64::MAX)
        }
    }
}

/// The first instant at which embassy's clock reads tick `t`: ⌈t × 10⁹ / TICK_HZ⌉ ns,
/// saturating at `u64::MAX` ns (embassy's "never" is `u64::MAX` ticks).
#[inline]
pub(crate) fn instant_ceil(t: u64) -> Instant {
    let ns = match NS_PER_TICK {
        Some(per) => t.saturating_mul(per),
        None => {
            let num = u128::from(t).saturating_mul(u128::from(NS_PER_S));
            let den = u128::from(TICK_HZ.max(1));
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
