//! embassy ticks ([`TICK_HZ`]) to and from the clock's nanoseconds, rounded so that a wake is
//! never early: `now` rounds down, a deadline rounds up, and `now_ticks(ns_of(t)) >= t`.
//!
//! The core's own conversions (`Instant::ticks_floor`, `Instant::from_ticks_ceil`) at
//! embassy's rate, except the common one: at a rate that divides 10⁹ (the default 1 MHz among
//! them) a tick is a whole number of nanoseconds, and `ns / per` is a multiply-high by a
//! constant computed at compile time. The compiler does that itself on a 64-bit core; on a
//! 32-bit one it calls its 64-bit division routine instead, about 60 instructions on a
//! Cortex-M4 against 22, in every `Instant::now()` and every alarm.

use baretime::Instant;
use embassy_time_driver::TICK_HZ;

/// Nanoseconds per embassy tick, where that is a whole number: `ns / PER` is the tick.
const PER: Option<u64> = if TICK_HZ != 0 && 1_000_000_000 % TICK_HZ == 0 {
    Some(1_000_000_000 / TICK_HZ)
} else {
    None
};

/// ⌊n / d⌋ for every `n` below 2^64 as a multiply-high, an add and two shifts (Granlund and
/// Montgomery, "Division by invariant integers using multiplication", 1994, figure 4.1): with
/// `l` = ⌈log2 d⌉ and `m` = ⌊2^64 × (2^l − d) / d⌋ + 1, `t` = ⌊m × n / 2^64⌋ and the quotient
/// `(t + (n − t) / 2) >> (l − 1)` (for d = 1: `n`).
#[derive(Clone, Copy)]
struct Divider {
    magic: u64,
    shift: u32,
}

impl Divider {
    /// The divider for `d` (≥ 2).
    #[allow(clippy::arithmetic_side_effects)] // compile-time: d ≥ 2, 2^l − d < d < 2^64
    const fn new(d: u64) -> Divider {
        // l = ⌈log2 d⌉: 1 ≤ l ≤ 64.
        let l = 64 - (d - 1).leading_zeros();
        // 2^l − d < d, so 2^64 × (2^l − d) / d < 2^64: the magic fits.
        let magic = ((1u128 << 64) * ((1u128 << l) - d as u128) / d as u128) as u64 + 1;
        Divider {
            magic,
            shift: l - 1,
        }
    }

    /// ⌊n / d⌋.
    #[inline(always)]
    fn divide(self, n: u64) -> u64 {
        // t ≤ n: the high half of `magic` × n with `magic` < 2^64.
        let t = (u128::from(self.magic).wrapping_mul(u128::from(n)) >> 64) as u64;
        // (n − t) / 2 + t ≤ n: no overflow; `shift` < 64.
        (t.wrapping_add(n.wrapping_sub(t) >> 1)) >> self.shift
    }
}

/// `PER`'s divider, where `PER` is 2 or more.
const DIVIDER: Option<Divider> = match PER {
    Some(per) if per >= 2 => Some(Divider::new(per)),
    _ => None,
};

/// The embassy tick that contains `ns`: ⌊ns × TICK_HZ / 10⁹⌋ ([`Instant::ticks_floor`]).
#[inline]
pub(crate) fn ticks_floor(ns: u64) -> u64 {
    match (PER, DIVIDER) {
        (Some(1), _) => ns,
        (_, Some(divider)) => divider.divide(ns),
        _ => Instant::from_nanos(ns).ticks_floor(TICK_HZ),
    }
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
    fn the_divider_is_exact() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let divisors = [
            2u64,
            3,
            7,
            125,
            1_000,
            1_024,
            15_625,
            1_000_000,
            999_999_937,
            1_000_000_000,
        ];
        for &d in &divisors {
            let divider = Divider::new(d);
            let edges = [
                0,
                1,
                d - 1,
                d,
                d + 1,
                u64::MAX,
                u64::MAX - 1,
                u64::MAX / d * d,
                u64::MAX / d * d - 1,
            ];
            for n in edges {
                assert_eq!(divider.divide(n), n / d, "{n} / {d}");
            }
            for _ in 0..100_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                for n in [
                    x,
                    x >> (x % 64),
                    (x >> 32) * d,
                    ((x >> 32) * d).wrapping_sub(1),
                ] {
                    assert_eq!(divider.divide(n), n / d, "{n} / {d}");
                }
            }
        }
    }

    #[test]
    fn ticks_floor_is_the_cores() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for ns in [x, x >> 20, x % 1_000_000] {
                assert_eq!(
                    ticks_floor(ns),
                    Instant::from_nanos(ns).ticks_floor(TICK_HZ)
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
