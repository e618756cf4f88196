//! [`Scale`]: integer fixed-point conversion between ticks and nanoseconds (the argument is in
//! its docs). Private: `Scale` is re-exported at the crate root.

use crate::frequency::Frequency;

/// `10^12`: nanoseconds per second × millihertz per hertz.
const NS_MILLIHZ: u128 = 1_000_000_000_000;

/// Fixed-point constants for one [`Frequency`]: ticks → ns (rounded down) and
/// ns → ticks (rounded up, for deadlines and delays).
///
/// ticks → ns: `ns = (ticks × mult) >> 64`, where `mult` is the length of a tick in
/// nanoseconds as a 64.64 fixed-point number (`mult_int` + `mult_frac` / 2^64). Both halves
/// are multiplied by `ticks` in `u128` — two independent multiplies and an add, no variable
/// shift, which keeps the dependency chain after the counter read short. Because every factor
/// is a `u64`, no product can overflow `u128` for *any* input: there is no intermediate
/// overflow to guard against, ever (Linux's "208-day bug" was a 64-bit product
/// `cycles × mult` that overflowed once the cycle delta grew large enough). Only the result
/// can exceed `u64` — past 584 years of nanoseconds — and that saturates.
///
/// `mult` is rounded to the nearest 2^-64 ns, so its rounding adds at most `ticks × 2^-65` ns:
/// at most 3 × 10^-18 of the value at 100 GHz (and less at lower rates). The conversion error
/// is at most 1 ns (the final floor) plus that, at any rate from 1 kHz to 100 GHz.
///
/// ns → ticks: `ticks = ⌈(ns × inv_mult) >> inv_shift⌉` with `inv_mult` in `[2^63, 2^64)`,
/// rounded up, so a deadline or delay computed from it is never early.
/// Computing the constants takes a few `u128` divisions, once; the conversions need none.
///
/// Make one per rate (a few `u128` divisions) and convert as often as needed (multiplies and
/// shifts only). A [`crate::Clock`] keeps one; use a `Scale` directly to convert raw tick
/// counts, e.g. from a trace buffer.
///
/// ```
/// use baretime::{Frequency, Scale};
///
/// let scale = Scale::new(Frequency::exact_hz(2_300_000_000).unwrap()); // a 2.3 GHz TSC
/// assert_eq!(scale.ticks_to_ns(2_300_000_000), 1_000_000_000); // one second
/// assert_eq!(scale.ticks_to_ns(3), 1); // 1.304 ns, rounded down
/// assert_eq!(scale.ns_to_ticks_ceil(1), 3); // 2.3 ticks, rounded up: never early
/// // ⌊(2^64 - 1) / 2.3⌋ exactly: 254 years, no overflow on the way.
/// assert_eq!(scale.ticks_to_ns(u64::MAX), 8_020_323_510_308_500_702);
/// assert_eq!(scale.millihz(), 2_300_000_000_000);
///
/// // A 32 kHz RTC: the same code, no special case.
/// let rtc = Scale::new(Frequency::exact_hz(32_768).unwrap());
/// assert_eq!(rtc.ticks_to_ns(32_768), 1_000_000_000);
/// assert_eq!(rtc.checked_ticks_to_ns(u64::MAX), None); // past 584 years of ns
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Scale {
    mult_int: u64,
    mult_frac: u64,
    inv_mult: u64,
    inv_shift: u32,
    millihz: u64,
}

/// The largest `shift` such that `⌈num × 2^shift / den⌉ < 2^64`, with that quotient.
/// `num` and `den` are below 2^48 and at least 10^6, so `num × 2^shift` fits in `u128` for
/// every shift tried, and the start estimate from the bit lengths is at most two steps high:
/// two or three `u128` divisions in all.
#[allow(clippy::arithmetic_side_effects)] // bounds proven above
const fn best_fixed_point_ceil(num: u128, den: u128) -> (u64, u32) {
    let num_bits = 128 - num.leading_zeros();
    let den_bits = 128 - den.leading_zeros();
    // num / den < 2^(num_bits - den_bits + 1), so shift = 64 + den_bits - num_bits gives a
    // quotient below 2^65; clamp so that num << shift cannot overflow.
    let mut shift = 64 + den_bits - num_bits;
    if shift > 127 - num_bits {
        shift = 127 - num_bits;
    }
    loop {
        let scaled = num << shift;
        let q = scaled.div_ceil(den);
        if q <= u64::MAX as u128 || shift == 0 {
            // For the inputs we accept (num/den between 10^-2 and 10^6) a shift with
            // q ≥ 2^63 always exists, so this saturation never triggers.
            return (saturate_u64(q), shift);
        }
        shift -= 1;
    }
}

/// `v`, or `u64::MAX` if it does not fit: the one saturation every conversion ends with.
#[inline(always)]
pub(crate) const fn saturate_u64(v: u128) -> u64 {
    if v > u64::MAX as u128 {
        u64::MAX
    } else {
        v as u64
    }
}

/// `⌊ticks × (int + frac / 2^64)⌋` in `u128`: `ticks × int < 2^128 − 2^65` and the fraction
/// term is below 2^64, so the sum cannot overflow.
#[inline(always)]
#[allow(clippy::arithmetic_side_effects)] // bounds proven above
pub(crate) const fn mul_q64(ticks: u64, int: u64, frac: u64) -> u128 {
    // On a 32-bit core a `u128` product is a chain of 32-bit multiplies and carries several
    // times longer than this: a distance below 2^32 and an integer part below 2^32 (every
    // clock on such a core) take three 32 × 32 → 64-bit multiplies.
    #[cfg(target_pointer_width = "32")]
    if (ticks | int) >> 32 == 0 {
        return mul_q64_narrow(ticks as u32, int as u32, frac, 0).0 as u128;
    }
    let whole = (ticks as u128) * (int as u128);
    let part = ((ticks as u128) * (frac as u128)) >> 64;
    whole + part
}

/// `ticks × (int + frac / 2^64) + carry / 2^64` for 32-bit `ticks` and `int`: its whole part
/// (below 2^64) and its fraction (in 2^-64), exactly, in 32 × 32 → 64-bit multiplies.
///
/// With `t = ticks`, `f = frac = f1·2^32 + f0`, `c = carry = c1·2^32 + c0`:
/// `p0 = t·f0 + c0 ≤ (2^32 − 1)^2 + 2^32 − 1 < 2^64`, and
/// `p1 = t·f1 + ⌊p0 / 2^32⌋ + c1 ≤ (2^32 − 1)^2 + 2(2^32 − 1) = 2^64 − 1`; then
/// `t·f + c = p1·2^32 + (p0 mod 2^32)`, whose whole part `⌊p1 / 2^32⌋ < 2^32` adds to
/// `t·int ≤ (2^32 − 1)^2`: below 2^64.
#[inline(always)]
#[allow(clippy::arithmetic_side_effects)] // bounds proven above
#[cfg_attr(not(any(test, target_pointer_width = "32")), allow(dead_code))]
pub(crate) const fn mul_q64_narrow(ticks: u32, int: u32, frac: u64, carry: u64) -> (u64, u64) {
    let t = ticks as u64;
    let p0 = t * (frac & 0xffff_ffff) + (carry & 0xffff_ffff);
    let p1 = t * (frac >> 32) + (p0 >> 32) + (carry >> 32);
    (t * int as u64 + (p1 >> 32), (p1 << 32) | (p0 & 0xffff_ffff))
}

/// `⌈ns × inv_mult / 2^shift⌉` for `ns` below 2^32 and `shift` of 32 or more, without `u128`.
///
/// `a = ns·inv_lo`, `b = ns·inv_hi` (each below 2^64); `t = ⌊a / 2^32⌋ + b ≤ 2^32 − 1 +
/// (2^32 − 1)^2 < 2^64`, and `ns × inv_mult = t·2^32 + (a mod 2^32)`. With `s = shift − 32`:
/// the quotient is `⌊t / 2^s⌋`, plus one if `t mod 2^s` or `a mod 2^32` is not zero.
#[inline(always)]
#[allow(clippy::arithmetic_side_effects)] // bounds proven above; shift ≥ 32
#[cfg_attr(not(any(test, target_pointer_width = "32")), allow(dead_code))]
pub(crate) const fn ns_to_ticks_ceil_narrow(ns: u32, inv_mult: u64, shift: u32) -> u64 {
    let ns = ns as u64;
    let a = ns * (inv_mult & 0xffff_ffff);
    let t = (a >> 32) + ns * (inv_mult >> 32);
    let s = shift - 32;
    let (q, rem) = if s >= 64 {
        (0, t)
    } else {
        (t >> s, t & ((1u64 << s) - 1))
    };
    q + if rem != 0 || a & 0xffff_ffff != 0 {
        1
    } else {
        0
    }
}

impl Scale {
    /// Constants for `frequency`. Every [`Frequency`] is in 1 kHz..=100 GHz, so this cannot
    /// fail.
    pub const fn new(frequency: Frequency) -> Scale {
        let millihz = frequency.as_millihz();
        // ns per tick = 10^12 / millihz, in 64.64 fixed point, rounded to nearest.
        // 10^12 × 2^64 < 2^104, and millihz ≥ 10^6, so the quotient is below 2^84.
        let den = millihz as u128;
        #[allow(clippy::arithmetic_side_effects)] // bounds just above; den ≥ 10^6 ≠ 0
        let mult = ((NS_MILLIHZ << 64) + den / 2) / den;
        let mult_int = (mult >> 64) as u64;
        let mult_frac = mult as u64;
        // ticks per ns = millihz / 10^12, rounded up so deadlines are never early.
        let (inv_mult, inv_shift) = best_fixed_point_ceil(millihz as u128, NS_MILLIHZ);
        Scale::from_parts(mult_int, mult_frac, inv_mult, inv_shift, millihz)
    }

    /// Reassembles constants taken apart with the accessors (the clock stores them in atomics).
    pub(crate) const fn from_parts(
        mult_int: u64,
        mult_frac: u64,
        inv_mult: u64,
        inv_shift: u32,
        millihz: u64,
    ) -> Scale {
        Scale {
            mult_int,
            mult_frac,
            inv_mult,
            inv_shift,
            millihz,
        }
    }

    /// The rate these constants convert for, in millihertz.
    pub const fn millihz(&self) -> u64 {
        self.millihz
    }

    /// `ticks` in nanoseconds, rounded down; saturates at `u64::MAX` (584 years).
    #[inline(always)]
    pub const fn ticks_to_ns(&self, ticks: u64) -> u64 {
        saturate_u64(mul_q64(ticks, self.mult_int, self.mult_frac))
    }

    /// `ticks` in nanoseconds, rounded down, or `None` if that exceeds `u64::MAX`.
    #[inline]
    pub const fn checked_ticks_to_ns(&self, ticks: u64) -> Option<u64> {
        let ns = mul_q64(ticks, self.mult_int, self.mult_frac);
        if ns > u64::MAX as u128 {
            None
        } else {
            Some(ns as u64)
        }
    }

    /// The number of ticks that spans *at least* `ns` nanoseconds (rounded up); saturates at
    /// `u64::MAX`. Use it for deadlines and delays: waiting this many ticks never ends early.
    #[inline]
    #[allow(clippy::arithmetic_side_effects)] // u64 × u64 < 2^128; inv_shift ≤ 127; +1 < 2^128
    pub const fn ns_to_ticks_ceil(&self, ns: u64) -> u64 {
        // On a 32-bit core, a span below 2^32 ns (4.3 s: a handover margin, a deadline a few
        // seconds out) in two 32 × 32 → 64-bit multiplies and 64-bit shifts.
        #[cfg(target_pointer_width = "32")]
        if ns >> 32 == 0 && self.inv_shift >= 32 {
            return ns_to_ticks_ceil_narrow(ns as u32, self.inv_mult, self.inv_shift);
        }
        let prod = (ns as u128) * (self.inv_mult as u128);
        let mask = (1u128 << self.inv_shift) - 1;
        let ticks = (prod >> self.inv_shift) + if prod & mask != 0 { 1 } else { 0 };
        saturate_u64(ticks)
    }
}

/// The parts, for the one user that takes a `Scale` apart: the Clock, which stores them in
/// atomics (without atomics there is no Clock, and these go unused).
#[cfg_attr(
    not(any(loom, feature = "portable-atomic", target_has_atomic = "32")),
    allow(dead_code)
)]
impl Scale {
    /// These constants with the tick length's fraction rounded up to a multiple of 2^-32 ns
    /// (its low 32 bits zero): see the Clock's `in_force`. The inverse is kept: taken from
    /// the exact, shorter tick, it gives at least as many ticks as the longer one needs.
    #[allow(clippy::arithmetic_side_effects)] // frac_hi + 1 ≤ 2^32; mult_int + 1 < 2^21
    pub(crate) const fn frac_rounded_up_to_2_pow_32(self) -> Scale {
        let low = self.mult_frac & 0xffff_ffff;
        if low == 0 {
            return self;
        }
        let hi = (self.mult_frac >> 32) + 1;
        let (mult_int, mult_frac) = if hi == 1 << 32 {
            (self.mult_int + 1, 0)
        } else {
            (self.mult_int, hi << 32)
        };
        Scale {
            mult_int,
            mult_frac,
            ..self
        }
    }

    /// The inverse multiplier (`ticks = ⌈ns × inv_mult >> inv_shift⌉`).
    pub(crate) const fn inv_mult(&self) -> u64 {
        self.inv_mult
    }

    /// The inverse shift.
    pub(crate) const fn inv_shift(&self) -> u32 {
        self.inv_shift
    }

    /// The integer part of the tick length in ns (`ns = ticks × mult >> 64`).
    pub(crate) const fn mult_int(&self) -> u64 {
        self.mult_int
    }

    /// The fractional part of the tick length in ns, in units of 2^-64 ns.
    pub(crate) const fn mult_frac(&self) -> u64 {
        self.mult_frac
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::{Accuracy, Source};
    use proptest::prelude::*;

    proptest! {
        /// The 32-bit cores' product is the `u128` one, whole part and fraction, exactly.
        #[test]
        fn mul_q64_narrow_is_exact(ticks in any::<u32>(), int in any::<u32>(), frac in any::<u64>(), carry in any::<u64>()) {
            let exact = u128::from(ticks) * u128::from(frac) + u128::from(carry);
            let whole = u128::from(ticks) * u128::from(int) + (exact >> 64);
            prop_assert_eq!(mul_q64_narrow(ticks, int, frac, carry), (whole as u64, exact as u64));
            prop_assert!(whole <= u128::from(u64::MAX));
        }

        /// The 32-bit cores' tick count for a span below 2^32 ns is the `u128` one, for every
        /// rate's inverse.
        #[test]
        fn ns_to_ticks_ceil_narrow_is_exact(ns in any::<u32>(), millihz in 1_000_000u64..=100_000_000_000_000) {
            let scale = Scale::new(freq(millihz));
            let (inv, shift) = (scale.inv_mult, scale.inv_shift);
            prop_assume!(shift >= 32);
            let prod = u128::from(ns) * u128::from(inv);
            let exact = (prod >> shift) + u128::from(prod & ((1u128 << shift) - 1) != 0);
            prop_assert_eq!(u128::from(ns_to_ticks_ceil_narrow(ns, inv, shift)), exact);
            prop_assert_eq!(scale.ns_to_ticks_ceil(u64::from(ns)), exact as u64);
        }
    }

    fn freq(millihz: u64) -> Frequency {
        Frequency::from_millihz(millihz, Source::User, Accuracy::Exact).unwrap()
    }

    /// Exact ticks → ns, rounded down, as a rational (`u128` is enough: ticks < 2^64,
    /// 10^12 < 2^40).
    fn exact_ns(ticks: u64, millihz: u64) -> u128 {
        (ticks as u128) * NS_MILLIHZ / (millihz as u128)
    }

    #[test]
    fn inverse_is_normalised() {
        for hz in [
            1_000u64,
            32_768,
            1_193_182,
            24_000_000,
            1_000_000_000,
            2_596_118_000,
            100_000_000_000,
        ] {
            let s = Scale::new(Frequency::exact_hz(hz).unwrap());
            assert!(s.inv_mult >= 1 << 63, "{hz}: inv_mult {:#x}", s.inv_mult);
        }
    }

    #[test]
    fn one_second_of_ticks_is_one_second() {
        for hz in [
            1_000u64,
            1_193_182,
            62_500_000,
            2_596_118_000,
            10_000_000_000,
        ] {
            let s = Scale::new(Frequency::exact_hz(hz).unwrap());
            let ns = s.ticks_to_ns(hz);
            assert!((999_999_999..=1_000_000_000).contains(&ns), "{hz}: {ns}");
            let t = s.ns_to_ticks_ceil(1_000_000_000);
            assert!(t == hz || t == hz + 1, "{hz}: {t}");
        }
    }

    #[test]
    fn no_208_day_overflow() {
        // The Linux bug: cycles × mult in 64 bits overflowed after ~208 days at 2.x GHz.
        let s = Scale::new(Frequency::exact_hz(2_596_118_000).unwrap());
        let ticks_300_days = 2_596_118_000u64 * 86_400 * 300;
        let ns = s.ticks_to_ns(ticks_300_days);
        let want = 86_400 * 300 * 1_000_000_000u64;
        assert!((want - 1..=want).contains(&ns), "{ns} vs {want}");
        let exact = exact_ns(u64::MAX, 2_596_118_000_000) as u64;
        assert!(exact - s.ticks_to_ns(u64::MAX) <= 1);
    }

    #[test]
    fn saturates_only_past_u64_ns() {
        let slow = Scale::new(Frequency::exact_hz(1_000).unwrap());
        assert_eq!(slow.ticks_to_ns(u64::MAX), u64::MAX);
        assert_eq!(slow.checked_ticks_to_ns(u64::MAX), None);
        assert_eq!(slow.checked_ticks_to_ns(1_000), Some(1_000_000_000));
        let fast = Scale::new(Frequency::exact_hz(100_000_000_000).unwrap());
        assert_eq!(fast.ns_to_ticks_ceil(u64::MAX), u64::MAX);
    }

    proptest! {
        #[test]
        fn ticks_to_ns_error_within_1ns_plus_1ppb(
            millihz in 1_000_000u64..=10_000_000_000_000,
            ticks in any::<u64>(),
        ) {
            let s = Scale::new(freq(millihz));
            let exact = exact_ns(ticks, millihz);
            match s.checked_ticks_to_ns(ticks) {
                Some(ns) => {
                    let err = (ns as i128 - exact as i128).unsigned_abs();
                    prop_assert!(err <= 1 + exact / 1_000_000_000, "err {} at {}", err, exact);
                }
                None => prop_assert!(exact >= u64::MAX as u128),
            }
        }

        #[test]
        fn ticks_to_ns_is_monotonic(
            millihz in 1_000_000u64..=10_000_000_000_000,
            a in any::<u64>(),
            d in any::<u64>(),
        ) {
            let s = Scale::new(freq(millihz));
            let b = a.saturating_add(d);
            prop_assert!(s.ticks_to_ns(a) <= s.ticks_to_ns(b));
        }

        #[test]
        fn ns_to_ticks_never_short(
            millihz in 1_000_000u64..=10_000_000_000_000,
            ns in 0u64..=u64::MAX,
        ) {
            let s = Scale::new(freq(millihz));
            let t = s.ns_to_ticks_ceil(ns);
            // exact ticks = ns × millihz / 10^12; t must be ≥ it, and at most 1 + 1 ppb over.
            let exact_num = (ns as u128) * (millihz as u128);
            if t != u64::MAX {
                prop_assert!((t as u128) * NS_MILLIHZ >= exact_num, "short: {} ticks for {} ns", t, ns);
                let exact_ceil = exact_num.div_ceil(NS_MILLIHZ);
                prop_assert!((t as u128) <= exact_ceil + 1 + exact_ceil / 1_000_000_000);
            } else {
                prop_assert!(exact_num.div_ceil(NS_MILLIHZ) >= u64::MAX as u128);
            }
        }

        #[test]
        fn round_trip_covers_the_request(
            millihz in 1_000_000u64..=10_000_000_000_000,
            ns in 0u64..=1u64 << 50,
        ) {
            // Waiting ns_to_ticks_ceil(ns) ticks is at least ns by the exact rate; converting
            // those ticks back loses at most the 1 ns floor.
            let s = Scale::new(freq(millihz));
            let t = s.ns_to_ticks_ceil(ns);
            prop_assert!(s.ticks_to_ns(t) + 1 >= ns);
        }
    }
}
