//! Small arithmetic: a span's rate and worst-case bound, distances in ppb, rounding, and
//! a measured rate as a [`Frequency`].

use super::*;

/// The rate and worst-case bound between two points (see [`Watchdog`]'s docs), or `None`
/// where the span is within its own uncertainty.
pub(super) fn measure(
    a: &Point,
    b: &Point,
    ref_millihz: u64,
    c_step: u64,
    r_step: u64,
) -> Option<Span> {
    let dy = b.y.checked_sub(a.y)?;
    let dx = b.x.checked_sub(a.x)?;
    let dy_u64 = saturate_u64(dy);
    let u_y = u128::from(a.width)
        .saturating_add(u128::from(b.width))
        .saturating_add(u128::from(c_step).saturating_mul(2));
    // A step not seen yet: the span itself (no bound below 100 %, so nothing is judged).
    let u_x = if r_step == u64::MAX { dx } else { r_step };
    if dy <= u_y || dx <= u_x {
        return None;
    }
    let millihz = saturate_u64(mul_div_round(
        dy,
        u128::from(ref_millihz),
        u128::from(dx).saturating_mul(2),
    )?);
    let b1 = mul_div_ceil(u_y, u128::from(PPB), dy)?;
    let b2 = mul_div_ceil(
        u128::from(u_x),
        u128::from(PPB),
        u128::from(dx.saturating_sub(u_x)),
    )?;
    let cross = mul_div_ceil(b1, b2, u128::from(PPB))?;
    let bound = saturate_u64(b1.saturating_add(b2).saturating_add(cross))
        .saturating_add(rounding_ppb(millihz));
    Some(Span {
        dy: dy_u64,
        dx,
        n: 1,
        millihz,
        bound_ppb: bound,
    })
}

/// How far (ppb of the counter's rate) a rate `apart` ppb from a measured rate (in ppb of
/// that rate, [`ppb_apart`]) can be from the counter's rate, the measurement off by at most
/// `bound` ppb of itself: `(apart + bound) / (1 − bound)`, rounded up. The counter's rate can
/// be as slow as the measured rate less its bound, and a distance in ppb of a slower rate is
/// larger (a clock 0.4 % fast against a window known to 40 ppm: 160 ppb more).
pub(super) fn from_measured(apart: u64, bound: u64) -> u64 {
    let d = apart.saturating_add(bound);
    if bound >= PPB {
        return u64::MAX;
    }
    let more = mul_div_ceil(
        u128::from(d),
        u128::from(bound),
        u128::from(PPB.saturating_sub(bound)),
    )
    .unwrap_or(u128::MAX);
    d.saturating_add(saturate_u64(more))
}

/// The rates (mHz, floor and ceiling) a measured span allows: its rate less and plus its
/// bound.
pub(super) fn rate_range(s: &Span) -> (u64, u64) {
    let off = saturate_u64(
        mul_div_ceil(
            u128::from(s.millihz),
            u128::from(s.bound_ppb),
            u128::from(PPB),
        )
        .unwrap_or(u128::MAX),
    );
    (s.millihz.saturating_sub(off), s.millihz.saturating_add(off))
}

/// Half a millihertz, in ppb of `millihz`, rounded up.
pub(super) fn rounding_ppb(millihz: u64) -> u64 {
    (PPB / 2).div_ceil(millihz.max(1))
}

/// `|a − b|` in ppb of `b`, rounded up.
pub(super) fn ppb_apart(a: u64, b: u64) -> u64 {
    saturate_u64(
        mul_div_ceil(
            u128::from(a.abs_diff(b)),
            u128::from(PPB),
            u128::from(b.max(1)),
        )
        .unwrap_or(u128::MAX),
    )
}

/// A measured rate, clamped into [`Frequency`]'s range.
pub(super) fn measured(millihz: u64, bound_ppb: u64) -> Frequency {
    let accuracy = Accuracy::Measured {
        uncertainty_ppb: bound_ppb,
    };
    let clamped = millihz.clamp(
        Frequency::MIN_HZ.saturating_mul(1000),
        Frequency::MAX_HZ.saturating_mul(1000),
    );
    Frequency::from_millihz(clamped, Source::Calibrated, accuracy).unwrap_or(Frequency::FASTEST)
}
