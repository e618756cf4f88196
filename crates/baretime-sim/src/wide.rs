//! `floor(a × b / d)` with a 256-bit intermediate, for the simulated timers' exact phase.
//! (The core keeps its wide arithmetic private; this is the part the simulation needs.)

const LOW64: u128 = (1u128 << 64) - 1;

/// `a × b` as `(high, low)` 128-bit halves.
const fn mul_wide(a: u128, b: u128) -> (u128, u128) {
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
fn div_wide(hi: u128, lo: u128, d: u128) -> Option<(u128, u128)> {
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
