//! Exact wide-integer helpers for the fit: 128 × 128 → 256-bit products, their division, and
//! integer square roots. Nothing here can panic or overflow silently: every result that would
//! not fit is `None`.
//!
//! The fit's sums reach about 2^120 and their products 2^240; these helpers let it compute
//! slopes and residuals exactly instead of scaling down and losing digits.

const LOW64: u128 = (1u128 << 64) - 1;

/// `a × b` as `(high, low)` 128-bit halves.
pub(crate) const fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = (a >> 64, a & LOW64);
    let (b1, b0) = (b >> 64, b & LOW64);
    // Each partial product of two 64-bit halves is below 2^128: the wrapping ops never wrap.
    let p00 = a0.wrapping_mul(b0);
    let p01 = a0.wrapping_mul(b1);
    let p10 = a1.wrapping_mul(b0);
    let p11 = a1.wrapping_mul(b1);
    // Three terms below 2^64 each: below 2^66, no wrap.
    let mid = (p00 >> 64)
        .wrapping_add(p01 & LOW64)
        .wrapping_add(p10 & LOW64);
    let lo = (p00 & LOW64) | ((mid & LOW64) << 64);
    // The full product is below 2^256, so the high half cannot wrap either.
    let hi = p11
        .wrapping_add(p01 >> 64)
        .wrapping_add(p10 >> 64)
        .wrapping_add(mid >> 64);
    (hi, lo)
}

/// `(high·2^128 + low) / d` as `(quotient, remainder)`, or `None` if `d` is 0 or the quotient
/// does not fit in 128 bits.
pub(crate) fn div_wide(hi: u128, lo: u128, d: u128) -> Option<(u128, u128)> {
    if d == 0 || hi >= d {
        return None;
    }
    if hi == 0 {
        return Some((lo.checked_div(d)?, lo.checked_rem(d)?));
    }
    // Restoring long division; the invariant `rem < d` keeps `rem` within 129 bits, the
    // 129th being `carry`.
    let mut rem = hi;
    let mut low = lo;
    let mut q = 0u128;
    let mut i = 0u32;
    while i < 128 {
        let carry = rem >> 127;
        rem = (rem << 1) | (low >> 127);
        low <<= 1;
        q <<= 1;
        if carry == 1 || rem >= d {
            rem = rem.wrapping_sub(d);
            q |= 1;
        }
        i = i.wrapping_add(1);
    }
    Some((q, rem))
}

/// `floor(a × b / d)`, or `None` if `d` is 0 or the result exceeds `u128`.
pub(crate) fn mul_div(a: u128, b: u128, d: u128) -> Option<u128> {
    let (hi, lo) = mul_wide(a, b);
    div_wide(hi, lo, d).map(|(q, _)| q)
}

/// `ceil(a × b / d)`, or `None` if `d` is 0 or the result exceeds `u128`.
pub(crate) fn mul_div_ceil(a: u128, b: u128, d: u128) -> Option<u128> {
    let (hi, lo) = mul_wide(a, b);
    let (q, r) = div_wide(hi, lo, d)?;
    if r == 0 {
        Some(q)
    } else {
        q.checked_add(1)
    }
}

/// `a × b / d` rounded to the nearest (halves up), or `None` if `d` is 0 or it overflows.
pub(crate) fn mul_div_round(a: u128, b: u128, d: u128) -> Option<u128> {
    let (hi, lo) = mul_wide(a, b);
    let (q, r) = div_wide(hi, lo, d)?;
    // r < d, so d - r cannot wrap; round up when r ≥ d - r, i.e. 2r ≥ d.
    if r >= d.wrapping_sub(r) {
        q.checked_add(1)
    } else {
        Some(q)
    }
}

/// `a × b / d` for a signed `a`, rounded toward zero, or `None` on overflow or `d == 0`.
pub(crate) fn mul_div_signed(a: i128, b: u128, d: u128) -> Option<i128> {
    let q = mul_div(a.unsigned_abs(), b, d)?;
    let q = i128::try_from(q).ok()?;
    Some(if a < 0 { q.wrapping_neg() } else { q })
}

/// A signed 256-bit integer: a sign and a `(high, low)` magnitude (zero is never negative).
/// Only what the fit with a covariate needs: exact products of `i128`s, differences, and the
/// magnitude's bit length and shifts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signed256 {
    neg: bool,
    mag: (u128, u128),
}

impl Signed256 {
    /// `a × b`, exactly.
    pub(crate) const fn product(a: i128, b: i128) -> Self {
        let mag = mul_wide(a.unsigned_abs(), b.unsigned_abs());
        Signed256 {
            neg: (a < 0) != (b < 0) && !(mag.0 == 0 && mag.1 == 0),
            mag,
        }
    }

    /// A non-negative value from its `(high, low)` magnitude.
    pub(crate) const fn unsigned(mag: (u128, u128)) -> Self {
        Signed256 { neg: false, mag }
    }

    /// `a × b` for unsigned factors, exactly.
    pub(crate) const fn unsigned_product(a: u128, b: u128) -> Self {
        Signed256 {
            neg: false,
            mag: mul_wide(a, b),
        }
    }

    /// `self − o`, or `None` if the magnitude would reach 2^256.
    pub(crate) fn checked_sub(self, o: Self) -> Option<Self> {
        let minus_o = Signed256 {
            neg: !o.neg && !o.is_zero(),
            mag: o.mag,
        };
        self.checked_add(minus_o)
    }

    /// `self + o`, or `None` if the magnitude would reach 2^256.
    pub(crate) fn checked_add(self, o: Self) -> Option<Self> {
        if self.neg == o.neg {
            let (lo, carry) = self.mag.1.overflowing_add(o.mag.1);
            let hi = self
                .mag
                .0
                .checked_add(o.mag.0)?
                .checked_add(u128::from(carry))?;
            return Some(Signed256 {
                neg: self.neg,
                mag: (hi, lo),
            });
        }
        // Opposite signs: the larger magnitude keeps its sign.
        let (big, small, neg) = if self.mag >= o.mag {
            (self.mag, o.mag, self.neg)
        } else {
            (o.mag, self.mag, o.neg)
        };
        let (lo, borrow) = big.1.overflowing_sub(small.1);
        // big ≥ small, so the high halves cannot underflow.
        let hi = big.0.wrapping_sub(small.0).wrapping_sub(u128::from(borrow));
        Some(Signed256 {
            neg: neg && !(hi == 0 && lo == 0),
            mag: (hi, lo),
        })
    }

    /// Whether it is below zero.
    pub(crate) const fn is_negative(self) -> bool {
        self.neg
    }

    /// Whether it is zero.
    pub(crate) const fn is_zero(self) -> bool {
        self.mag.0 == 0 && self.mag.1 == 0
    }

    /// The magnitude, `(high, low)`.
    pub(crate) const fn magnitude(self) -> (u128, u128) {
        self.mag
    }

    /// Bits in the magnitude (0 for zero).
    pub(crate) const fn bits(self) -> u32 {
        bits256(self.mag)
    }

    /// The magnitude shifted right by `s` (toward zero), with the sign, as an `i128`; `None`
    /// if it does not fit.
    pub(crate) fn shr_to_i128(self, s: u32) -> Option<i128> {
        let m = shr256(self.mag, s);
        if m.0 != 0 {
            return None;
        }
        let v = i128::try_from(m.1).ok()?;
        Some(if self.neg { v.wrapping_neg() } else { v })
    }
}

/// Bits in a 256-bit `(high, low)` value (0 for zero).
pub(crate) const fn bits256(v: (u128, u128)) -> u32 {
    // leading_zeros() ≤ 128, so these subtractions cannot wrap.
    if v.0 != 0 {
        256u32.wrapping_sub(v.0.leading_zeros())
    } else {
        128u32.wrapping_sub(v.1.leading_zeros())
    }
}

/// A 256-bit `(high, low)` value shifted right by `s` (0 for `s` ≥ 256).
pub(crate) const fn shr256(v: (u128, u128), s: u32) -> (u128, u128) {
    match s {
        0 => v,
        1..=127 => (v.0 >> s, (v.1 >> s) | (v.0 << 128u32.wrapping_sub(s))),
        128..=255 => (0, v.0 >> s.wrapping_sub(128)),
        _ => (0, 0),
    }
}

/// A 256-bit `(high, low)` value shifted left by `s`, or `None` if bits would be lost.
pub(crate) fn checked_shl256(v: (u128, u128), s: u32) -> Option<(u128, u128)> {
    if s == 0 {
        return Some(v);
    }
    if bits256(v).checked_add(s)? > 256 {
        return None;
    }
    Some(match s {
        1..=127 => ((v.0 << s) | (v.1 >> 128u32.wrapping_sub(s)), v.1 << s),
        128..=255 => (v.1 << s.wrapping_sub(128), 0),
        _ => (0, 0),
    })
}

/// `floor(sqrt(v))`.
pub(crate) const fn isqrt(v: u128) -> u128 {
    // Digit-by-digit (base 4) square root: exact, no division, 64 rounds.
    let mut rem = v;
    let mut root = 0u128;
    let mut bit = 1u128 << 126;
    while bit > v {
        bit >>= 2;
    }
    while bit != 0 {
        // root < 2^64 and bit ≤ 2^126, so root + bit cannot wrap; rem ≥ root + bit is checked
        // before subtracting.
        let trial = root.wrapping_add(bit);
        if rem >= trial {
            rem = rem.wrapping_sub(trial);
            root = (root >> 1).wrapping_add(bit);
        } else {
            root >>= 1;
        }
        bit >>= 2;
    }
    root
}

/// `ceil(sqrt(v))`.
pub(crate) const fn isqrt_ceil(v: u128) -> u128 {
    let r = isqrt(v);
    // r ≤ 2^64 - 1, so r² fits and r + 1 cannot wrap.
    if r.wrapping_mul(r) == v {
        r
    } else {
        r.wrapping_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_u128_when_small() {
        for &(a, b) in &[
            (0u128, 7u128),
            (3, 5),
            (u64::MAX as u128, u64::MAX as u128),
            (1 << 100, 1 << 27),
        ] {
            assert_eq!(mul_wide(a, b), (0, a * b));
        }
    }

    #[test]
    fn products_carry_into_the_high_half() {
        assert_eq!(mul_wide(u128::MAX, u128::MAX), (u128::MAX - 1, 1));
        assert_eq!(mul_wide(1 << 127, 4), (2, 0));
        assert_eq!(mul_wide(u128::MAX, 2), (1, u128::MAX - 1));
    }

    #[test]
    fn division_inverts_multiplication() {
        let cases = [
            (u128::MAX, u128::MAX, u128::MAX),
            (
                123_456_789_012_345_678_901_234_567,
                98_765_432_109_876_543_210,
                77_777_777_777_777_777_777_777_777,
            ),
            (1 << 120, 1 << 100, (1 << 110) + 12345),
            (2_596_118_000_000, 1u128 << 90, 3),
        ];
        for &(a, b, d) in &cases {
            let (hi, lo) = mul_wide(a, b);
            match div_wide(hi, lo, d) {
                Some((q, r)) => {
                    assert!(r < d);
                    // q·d + r == a·b
                    let (qh, ql) = mul_wide(q, d);
                    let (sl, c) = ql.overflowing_add(r);
                    assert_eq!((qh + c as u128, sl), (hi, lo));
                }
                None => assert!(hi >= d),
            }
        }
        assert_eq!(mul_div(u128::MAX, u128::MAX, u128::MAX), Some(u128::MAX));
        assert_eq!(mul_div(u128::MAX, 2, 1), None);
        assert_eq!(mul_div(5, 5, 0), None);
        assert_eq!(mul_div_ceil(10, 1, 3), Some(4));
        assert_eq!(mul_div_ceil(9, 1, 3), Some(3));
        assert_eq!(mul_div_round(10, 1, 4), Some(3));
        assert_eq!(mul_div_round(9, 1, 4), Some(2));
        assert_eq!(mul_div_signed(-10, 3, 4), Some(-7));
        assert_eq!(mul_div_signed(10, 3, 4), Some(7));
    }

    #[test]
    fn signed_products_and_differences() {
        let p = |a: i128, b: i128| Signed256::product(a, b);
        assert_eq!(p(-3, 5).checked_sub(p(-4, 4)), Some(p(1, 1)));
        assert_eq!(p(3, 5).checked_sub(p(4, 4)), Some(p(-1, 1)));
        assert_eq!(p(-3, 5).checked_add(p(3, 5)), Some(p(0, 7)));
        assert!(!p(0, -7).is_negative() && p(0, -7).is_zero());
        let big = p(i128::MAX, i128::MIN);
        assert!(big.is_negative());
        // (2^127 − 1)·2^127 = 2^254 − 2^127.
        assert_eq!(big.bits(), 254);
        assert_eq!(big.shr_to_i128(130), Some(-((1i128 << 124) - 1)));
        assert_eq!(big.shr_to_i128(120), None);
        assert_eq!(big.checked_add(big).map(Signed256::bits), Some(255));
        let max = Signed256::unsigned_product(u128::MAX, u128::MAX);
        assert_eq!(max.checked_add(max), None);
        assert_eq!(max.checked_sub(max), Some(p(0, 0)));
        assert_eq!(shr256((1, 0), 1), (0, 1 << 127));
        assert_eq!(checked_shl256((0, 1 << 127), 1), Some((1, 0)));
        assert_eq!(checked_shl256((1 << 127, 0), 1), None);
        assert_eq!(checked_shl256((0, 3), 200), Some((3 << 72, 0)));
    }

    #[test]
    fn square_roots() {
        for v in 0u128..2000 {
            let r = isqrt(v);
            assert!(r * r <= v && (r + 1) * (r + 1) > v, "{v}");
            let c = isqrt_ceil(v);
            assert!(c * c >= v && (c == 0 || (c - 1) * (c - 1) < v), "{v}");
        }
        assert_eq!(isqrt(u128::MAX), u64::MAX as u128);
        assert_eq!(isqrt_ceil(u128::MAX), 1u128 << 64);
        assert_eq!(isqrt(1u128 << 100), 1u128 << 50);
    }
}
