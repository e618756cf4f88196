//! The robust straight-line fit behind calibration, in exact integer arithmetic.
//!
//! # Model
//!
//! Each accepted sample is a point `(x, y)`: `x` is the unwrapped reference count and `y` the
//! *sum* of the two bracketing counter reads (twice the bracket midpoint, so it stays an
//! integer), both relative to the first fitted sample. The counter's rate in counter ticks per
//! reference tick is half the least-squares slope `Sxy / Sxx`.
//!
//! # Storage: a window of bins, no allocation
//!
//! Samples are not stored. They are summed into bins (`n, Σx, Σy, Σx², Σxy`, exact `u128`s);
//! when all [`BINS`] bins are full, neighbours are merged pairwise and each bin then takes
//! twice as many samples. So the window always covers the whole calibration with 32 to 64
//! bins of equal sample counts, and the least-squares fit over the bins' sums is *exactly* the
//! fit over every sample.
//!
//! # Robustness and the uncertainty
//!
//! Wide brackets are rejected before they get here (the sampler's job). What remains is
//! checked per bin: each bin's mean residual `r_b` against the line gives `n_b·r_b²`, which
//! for well-behaved noise is `σ²·χ²₁`. A bin whose value exceeds 79 times the median (the
//! median of `χ²₁` is 0.455, so this is six standard deviations) is an outlier — a reference
//! glitch that stayed inside a narrow bracket — and is dropped, unless more than a quarter
//! of the bins would go, which is then not an outlier but the model failing, and nothing is
//! dropped (the scatter then shows in the bound instead).
//!
//! The per-sample variance is estimated from the scatter of the **bin means**,
//! `s² = Σ n_b·r_b² / (B − 2)`, not from the scatter of single samples: errors correlated over
//! less than a bin (quantization beating against the sampling cadence, a slowly wandering
//! read cost) inflate the bin means' scatter and therefore the bound, where a per-sample
//! estimate would call them averaged out. It is floored by the variance the bracket and the
//! reference's resolution imply on their own (`(2w)²/12 + q²/12` in `y` units, with `w` the
//! narrowest bracket and `q` one reference step), so a lucky quiet window cannot claim more
//! than the instruments allow. The slope's standard uncertainty is `sqrt(s²/Sxx)`; the
//! reported bound is that times a Student-t coverage factor for `B − 2` degrees of freedom
//! at 99.5 % two-sided (never below 3), which the simulation's coverage test checks.

use super::wide::{
    div_wide, isqrt, isqrt_ceil, mul_div_ceil, mul_div_round, mul_div_signed, mul_wide,
};

/// Number of bins in the window (merged pairwise when full).
pub(crate) const BINS: usize = 64;

/// Largest `x` (reference ticks) and `y` (twice the counter ticks) accepted into a fit, and
/// the largest sample count: with these, every sum stays below 2^126.
pub(crate) const X_LIMIT: u64 = 1 << 44;
/// See [`X_LIMIT`].
pub(crate) const Y_LIMIT: u64 = 1 << 50;
/// See [`X_LIMIT`].
pub(crate) const N_LIMIT: u64 = 1 << 31;

/// Exact sums over a set of samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    pub n: u64,
    pub sx: u128,
    pub sy: u128,
    pub sxx: u128,
    pub sxy: u128,
}

impl Sums {
    fn add(&mut self, x: u64, y: u64) -> Option<()> {
        let (x, y) = (u128::from(x), u128::from(y));
        let next = Sums {
            n: self.n.checked_add(1)?,
            sx: self.sx.checked_add(x)?,
            sy: self.sy.checked_add(y)?,
            sxx: self.sxx.checked_add(x.checked_mul(x)?)?,
            sxy: self.sxy.checked_add(x.checked_mul(y)?)?,
        };
        *self = next;
        Some(())
    }

    fn merge(&self, o: &Sums) -> Option<Sums> {
        Some(Sums {
            n: self.n.checked_add(o.n)?,
            sx: self.sx.checked_add(o.sx)?,
            sy: self.sy.checked_add(o.sy)?,
            sxx: self.sxx.checked_add(o.sxx)?,
            sxy: self.sxy.checked_add(o.sxy)?,
        })
    }

    /// The least-squares line through these sums, or `None` if degenerate (no spread in
    /// `x`) or not rising.
    fn line(&self) -> Option<Line> {
        // n·Sxx = n·Σx² − (Σx)² and n·Sxy = n·Σxy − Σx·Σy, exactly, in 256 bits.
        let n = u128::from(self.n);
        let den = sub_wide(mul_wide(n, self.sxx), mul_wide(self.sx, self.sx))?;
        let num = sub_wide(mul_wide(n, self.sxy), mul_wide(self.sx, self.sy))?;
        let sxx = div_wide(den.0, den.1, n)?.0;
        // The slope is num/den: shift both down together until they fit in 120 bits, which
        // keeps at least 100 significant bits of the larger.
        let (num, den) = shrink(num, den);
        if num == 0 || den == 0 || sxx == 0 {
            return None;
        }
        Some(Line { num, den, sxx })
    }
}

/// A fitted line: slope `num/den` in `y` units per reference tick, and the centred `Σ(x−x̄)²`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Line {
    num: u128,
    den: u128,
    sxx: u128,
}

/// `a − b` for 256-bit `(high, low)` pairs, `None` if negative.
fn sub_wide(a: (u128, u128), b: (u128, u128)) -> Option<(u128, u128)> {
    let (lo, borrow) = a.1.overflowing_sub(b.1);
    let hi = a.0.checked_sub(b.0)?.checked_sub(u128::from(borrow))?;
    Some((hi, lo))
}

/// Shifts two 256-bit values right by the same amount until both are below 2^120.
fn shrink(a: (u128, u128), b: (u128, u128)) -> (u128, u128) {
    // leading_zeros() ≤ 128, so these subtractions cannot wrap.
    let bits = |v: (u128, u128)| {
        if v.0 != 0 {
            256u32.wrapping_sub(v.0.leading_zeros())
        } else {
            128u32.wrapping_sub(v.1.leading_zeros())
        }
    };
    let shift = bits(a).max(bits(b)).saturating_sub(120);
    let shr = |v: (u128, u128)| match shift {
        0 => v.1,
        1..=127 => (v.1 >> shift) | (v.0 << 128u32.wrapping_sub(shift)),
        _ => v.0 >> shift.wrapping_sub(128).min(127),
    };
    (shr(a), shr(b))
}

/// Fixed-capacity window of bins covering every accepted sample.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    bins: heapless::Vec<Sums, BINS>,
    current: Sums,
    bin_len: u64,
    /// The largest `x` pushed (the window's span: it starts at 0).
    x_last: u64,
}

/// What the sampler knows about the instruments, for the variance floor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Floor {
    /// Narrowest bracket seen, in counter ticks.
    pub min_width: u64,
    /// Smallest reference step seen, in reference ticks.
    pub step: u64,
}

/// Result of a fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fit {
    /// Slope numerator: the slope is `num/den` `y` units per reference tick.
    pub num: u128,
    /// Slope denominator.
    pub den: u128,
    /// Expanded relative uncertainty of the slope, in ppb (rounded up).
    pub uncertainty_ppb: u64,
    /// Samples in the bins the fit used.
    pub used: u64,
    /// Samples in bins dropped as outliers.
    pub dropped: u64,
}

impl Window {
    pub(crate) const fn new() -> Self {
        Window {
            bins: heapless::Vec::new(),
            current: Sums {
                n: 0,
                sx: 0,
                sy: 0,
                sxx: 0,
                sxy: 0,
            },
            bin_len: 1,
            x_last: 0,
        }
    }

    /// Samples in the window.
    pub(crate) fn samples(&self) -> u64 {
        self.bins
            .iter()
            .fold(self.current.n, |acc, b| acc.saturating_add(b.n))
    }

    /// Adds a sample. `Ok(true)` when it completed a bin, `Err(())` when the window is full
    /// (a limit of [`X_LIMIT`], [`Y_LIMIT`], [`N_LIMIT`]): the caller stops sampling.
    pub(crate) fn push(&mut self, x: u64, y: u64) -> Result<bool, ()> {
        if x > X_LIMIT || y > Y_LIMIT || self.samples() >= N_LIMIT {
            return Err(());
        }
        self.current.add(x, y).ok_or(())?;
        self.x_last = self.x_last.max(x);
        if self.current.n < self.bin_len {
            return Ok(false);
        }
        self.bins.push(self.current).map_err(|_| ())?;
        self.current = Sums::default();
        if self.bins.is_full() {
            // Merge now, so the next bin already takes the doubled count and all bins stay equal.
            self.merge_pairs()?;
        }
        Ok(true)
    }

    fn merge_pairs(&mut self) -> Result<(), ()> {
        let mut merged: heapless::Vec<Sums, BINS> = heapless::Vec::new();
        for pair in self.bins.chunks(2) {
            let sum = match pair {
                [a, b] => a.merge(b).ok_or(())?,
                [a] => *a,
                _ => continue,
            };
            merged.push(sum).map_err(|_| ())?;
        }
        self.bins = merged;
        self.bin_len = self.bin_len.checked_mul(2).ok_or(())?;
        Ok(())
    }

    /// The robust fit over every sample in the window, or `None` with fewer than 3 non-empty
    /// bins (or degenerate data: no spread in `x`, or a non-positive slope).
    pub(crate) fn fit(&self, floor: Floor) -> Option<Fit> {
        let mut all: heapless::Vec<Sums, { BINS + 1 }> = heapless::Vec::new();
        for b in self.bins.iter().chain(core::iter::once(&self.current)) {
            if b.n > 0 {
                all.push(*b).ok()?;
            }
        }
        if all.len() < 3 {
            return None;
        }
        let total = all
            .iter()
            .try_fold(Sums::default(), |acc, b| acc.merge(b))?;
        let first = Residuals::of(&all, &total, None, floor)?;

        // Drop outlier bins (see the module docs) and fit again without them.
        let mut keep = [true; BINS + 1];
        let mut dropped_bins = 0usize;
        let mut dropped = 0u64;
        let mut kept = total;
        if all.len() >= 8 {
            let mut stats: heapless::Vec<u128, { BINS + 1 }> = heapless::Vec::new();
            for s in first.stats.iter() {
                stats.push(*s).ok()?;
            }
            stats.sort_unstable();
            let median = *stats.get(stats.len() / 2)?;
            let limit = median
                .saturating_mul(79)
                .max(first.floor_var.saturating_mul(36));
            let outliers = first.stats.iter().filter(|s| **s > limit).count();
            if outliers > 0 && outliers.saturating_mul(4) <= all.len() {
                for ((k, s), b) in keep.iter_mut().zip(first.stats.iter()).zip(all.iter()) {
                    if *s > limit {
                        *k = false;
                        dropped_bins = dropped_bins.saturating_add(1);
                        dropped = dropped.saturating_add(b.n);
                        kept = Sums {
                            n: kept.n.checked_sub(b.n)?,
                            sx: kept.sx.checked_sub(b.sx)?,
                            sy: kept.sy.checked_sub(b.sy)?,
                            sxx: kept.sxx.checked_sub(b.sxx)?,
                            sxy: kept.sxy.checked_sub(b.sxy)?,
                        };
                    }
                }
            }
        }
        let used_bins = all.len().saturating_sub(dropped_bins);
        let second = if dropped_bins == 0 {
            first
        } else {
            Residuals::of(&all, &kept, Some(&keep), floor)?
        };

        // s² = Σ n_b r_b² / (B - 2), floored by the instruments' own variance.
        let dof = used_bins.checked_sub(2).filter(|d| *d > 0)?;
        let dof128 = u128::try_from(dof).ok()?;
        let scatter = second.stats_sum.checked_div(dof128)?;
        let (scatter, structured) = inflate_for_correlation(scatter, &second.signed);
        let var = scatter.max(second.floor_var).max(1);

        // Relative expanded uncertainty: k·sqrt(var/Sxx)/β with β = num/den, each step rounded
        // up; var is scaled by 2^32 before its root for precision (var < 2^96 holds for any
        // window within the limits).
        let line = second.line;
        let sd_fp = isqrt_ceil(var.checked_mul(1 << 32)?); // sqrt(var)·2^16, y units
        let sd_x = mul_div_ceil(sd_fp, line.den, line.num)?; // in reference ticks ·2^16
        let sqrt_sxx = isqrt(line.sxx).max(1);
        let k = coverage_milli(dof);
        // ppb = sd_x·k·10^9 / (1000 · 2^16 · sqrt(Sxx)).
        let q = mul_div_ceil(sd_x, u128::from(k).checked_mul(1_000_000)?, sqrt_sxx)?;
        let mut ppb = q.div_ceil(1 << 16);
        if structured {
            // Worst case for an error of any shape bounded by E over a span X: the slope moves
            // by at most 3E/X (uniform x). E is estimated by the largest bin residual, which
            // a fit partly absorbs, hence 4 rather than 3.
            let e_x = mul_div_ceil(second.max_abs_r, line.den, line.num)?; // reference ticks
            let sys = mul_div_ceil(e_x, 4_000_000_000, u128::from(self.x_last.max(1)))?;
            ppb = ppb.max(sys);
        }
        Some(Fit {
            num: line.num,
            den: line.den,
            uncertainty_ppb: crate::scale::saturate_u64(ppb),
            used: kept.n,
            dropped,
        })
    }
}

/// Per-bin residual statistics for one line.
#[derive(Clone, Debug)]
struct Residuals {
    line: Line,
    /// `n_b·r_b²` for every bin (in `y` units², rounded up).
    stats: heapless::Vec<u128, { BINS + 1 }>,
    /// `n·n_b·r_b` for every bin, signed, 0 for bins not in use.
    signed: heapless::Vec<i128, { BINS + 1 }>,
    /// The largest `|r_b|` of the bins in use, `y` units, rounded up.
    max_abs_r: u128,
    /// Sum of `stats` over the bins in use.
    stats_sum: u128,
    /// The instruments' own variance per sample, `y` units².
    floor_var: u128,
}

impl Residuals {
    /// Fits `total` (the sums over the kept bins) and computes every bin's residual statistic;
    /// `keep` (if given) says which bins count in `stats_sum`.
    fn of(
        all: &[Sums],
        total: &Sums,
        keep: Option<&[bool; BINS + 1]>,
        floor: Floor,
    ) -> Option<Self> {
        let line = total.line()?;
        let (sxy, sxx) = (line.num, line.den);
        let n = u128::from(total.n);
        let n_i = i128::try_from(n).ok()?;
        let (sx_i, sy_i) = (
            i128::try_from(total.sx).ok()?,
            i128::try_from(total.sy).ok()?,
        );
        let mut stats = heapless::Vec::new();
        let mut signed = heapless::Vec::new();
        let mut max_abs_r = 0u128;
        let mut stats_sum = 0u128;
        for (i, b) in all.iter().enumerate() {
            let nb = i128::from(b.n);
            // n·(n_b·r_b) = (n·Sy_b − n_b·Sy) − β·(n·Sx_b − n_b·Sx), β = Sxy/Sxx: all exact but
            // the last division (rounded toward zero).
            let dy = n_i
                .checked_mul(i128::try_from(b.sy).ok()?)?
                .checked_sub(nb.checked_mul(sy_i)?)?;
            let dx = n_i
                .checked_mul(i128::try_from(b.sx).ok()?)?
                .checked_sub(nb.checked_mul(sx_i)?)?;
            let fitted = mul_div_signed(dx, sxy, sxx)?;
            let signed_r = dy.checked_sub(fitted)?;
            let big_r = signed_r.unsigned_abs();
            // n_b·r_b² = R²/(n²·n_b), R = n·n_b·r_b.
            let denom = n.checked_mul(n)?.checked_mul(u128::from(b.n))?;
            let stat = mul_div_ceil(big_r, big_r, denom)?;
            stats.push(stat).ok()?;
            if keep.map_or(true, |k| k.get(i).copied().unwrap_or(false)) {
                stats_sum = stats_sum.checked_add(stat)?;
                signed.push(signed_r).ok()?;
                let r = big_r.div_ceil(n.checked_mul(u128::from(b.n))?.max(1));
                max_abs_r = max_abs_r.max(r);
            } else {
                signed.push(0).ok()?;
            }
        }
        // Floor: bracket (2w)²/12 + quantization q²/12, q = one reference step in y units
        // = step·Sxy/Sxx.
        let w2 = u128::from(floor.min_width).checked_mul(2)?;
        let q = mul_div_ceil(u128::from(floor.step.max(1)), sxy, sxx)?;
        let floor_var = w2
            .checked_mul(w2)?
            .checked_add(q.checked_mul(q)?)?
            .div_ceil(12);
        Some(Residuals {
            line,
            stats,
            signed,
            max_abs_r,
            stats_sum,
            floor_var,
        })
    }
}

/// Inflates a variance estimated from bin means for their lag-1 autocorrelation `ρ`, by the
/// AR(1) factor `(1 + ρ)/(1 − ρ)` (at most 100), when `ρ > 0`.
///
/// Independent noise leaves neighbouring bins' residuals uncorrelated (`ρ ≈ 0`, factor ≈ 1).
/// Structure that a straight line cannot absorb — a step in either count too small to flag
/// per sample, a rate that drifts, a slowly wandering read cost — leaves runs of residuals of
/// one sign, and biases the slope far beyond what their scatter alone suggests: a step of
/// `δ` half-way biases it by `1.5·δ/T`. The factor widens the bound; and when `ρ > ½` the
/// residuals are called *structured* (white noise over 16 or more bins almost never gets
/// there), for which the caller adds a worst-case term.
fn inflate_for_correlation(var: u128, residuals: &[i128]) -> (u128, bool) {
    // Scale residuals so that products and their sum fit in i128.
    let max = residuals
        .iter()
        .map(|r| r.unsigned_abs())
        .max()
        .unwrap_or(0);
    let shift = (128u32.wrapping_sub(max.leading_zeros())).saturating_sub(60);
    let scaled = |r: i128| r >> shift.min(127);
    let mut lag = 0i128;
    let mut energy = 0i128;
    let mut prev: Option<i128> = None;
    for &r in residuals {
        // A dropped bin (0) breaks the chain: its neighbours were not adjacent in the fit.
        let r = scaled(r);
        energy = energy.saturating_add(r.saturating_mul(r));
        if let Some(p) = prev {
            lag = lag.saturating_add(p.saturating_mul(r));
        }
        prev = if r == 0 { None } else { Some(r) };
    }
    if lag <= 0 || energy <= 0 {
        return (var, false);
    }
    let structured = lag.saturating_mul(2) > energy;
    let (num, den) = (
        energy.saturating_add(lag).unsigned_abs(),
        energy.saturating_sub(lag).unsigned_abs(),
    );
    if den.saturating_mul(100) <= num {
        return (var.saturating_mul(100), structured);
    }
    (mul_div_ceil(var, num, den).unwrap_or(u128::MAX), structured)
}

/// Coverage factor ×1000: Student's t at 99.5 % two-sided for `dof` degrees of freedom, never
/// below 3.0 (t falls below 3.0 past 40 degrees of freedom: 2.971 at 60, 2.915 at 120).
const fn coverage_milli(dof: usize) -> u32 {
    match dof {
        0 | 1 => 127_321,
        2 => 14_089,
        3 => 7_453,
        4 => 5_598,
        5 => 4_773,
        6 => 4_317,
        7 => 4_029,
        8 => 3_833,
        9 => 3_690,
        10 => 3_581,
        11..=12 => 3_497,
        13..=15 => 3_372,
        16..=20 => 3_286,
        21..=30 => 3_153,
        31..=40 => 3_030,
        _ => 3_000,
    }
}

/// Converts the slope (`num/den` in `y` units per reference tick) to the counter's rate in
/// mHz, rounded to the nearest: `rate = num · ref_millihz / (2 · den)`.
pub(crate) fn rate_millihz(fit: &Fit, ref_millihz: u64) -> Option<u128> {
    mul_div_round(fit.num, u128::from(ref_millihz), fit.den.checked_mul(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_FLOOR: Floor = Floor {
        min_width: 0,
        step: 1,
    };

    fn window_of(points: impl Iterator<Item = (u64, u64)>) -> Window {
        let mut w = Window::new();
        for (x, y) in points {
            w.push(x, y).unwrap();
        }
        w
    }

    #[test]
    fn exact_line_is_recovered_through_merges() {
        // y = 2·(3x + 7): slope 6 in y units, 3 counter ticks per reference tick.
        let w = window_of((0..1000u64).map(|i| (i * 5, 2 * (3 * i * 5 + 7))));
        assert!(w.bins.len() >= 32 && w.bins.len() < 64);
        assert_eq!(w.samples(), 1000);
        let fit = w.fit(NO_FLOOR).unwrap();
        assert_eq!(fit.num, 6 * fit.den);
        assert_eq!(fit.used, 1000);
        assert_eq!(fit.dropped, 0);
        assert_eq!(rate_millihz(&fit, 1_000_000), Some(3_000_000));
        // The floor (one reference step = 6 y units → var 3) sets the bound: the x span is only
        // 5000 reference ticks, so ±1 step is ~6 ppm (1σ); with k ≈ 3 about 20 ppm.
        assert!(
            fit.uncertainty_ppb > 10_000 && fit.uncertainty_ppb < 40_000,
            "{}",
            fit.uncertainty_ppb
        );
    }

    #[test]
    fn a_glitched_bin_is_dropped() {
        let w = window_of((0..4096u64).map(|i| {
            let noise = (i * 7919) % 13; // deterministic small scatter
            let glitch = if i == 2000 { 1_000_000 } else { 0 };
            (i * 100, 2 * 300 * i + noise + glitch)
        }));
        let fit = w.fit(NO_FLOOR).unwrap();
        assert!(fit.dropped > 0 && fit.dropped < 200, "{}", fit.dropped);
        let rate = rate_millihz(&fit, 1_000_000_000).unwrap();
        // 600 y units per 100 x = 3 counter ticks per tick of a 1 MHz reference → 3 MHz.
        let err = (rate as i128 - 3_000_000_000).abs();
        assert!(err < 3_000, "{rate}");
    }

    #[test]
    fn too_few_bins_or_no_spread_is_none() {
        assert!(window_of((0..2u64).map(|i| (i, i))).fit(NO_FLOOR).is_none());
        assert!(window_of((0..100u64).map(|_| (5, 9)))
            .fit(NO_FLOOR)
            .is_none());
    }

    #[test]
    fn limits_stop_the_window() {
        let mut w = Window::new();
        assert_eq!(w.push(X_LIMIT + 1, 0), Err(()));
        assert_eq!(w.push(0, Y_LIMIT + 1), Err(()));
        assert_eq!(w.push(X_LIMIT, Y_LIMIT), Ok(true));
    }

    #[test]
    fn correlated_residuals_inflate_the_variance() {
        assert_eq!(inflate_for_correlation(10, &[5, -5, 5, -5, 5]), (10, false));
        assert_eq!(inflate_for_correlation(10, &[]), (10, false));
        // + + + − − −: ρ = 3/6 → (1 + ½)/(1 − ½) = 3, not yet "structured".
        assert_eq!(
            inflate_for_correlation(10, &[1, 1, 1, -1, -1, -1]),
            (30, false)
        );
        assert_eq!(inflate_for_correlation(10, &[1; 64]), (1000, true));
        assert_eq!(
            inflate_for_correlation(7, &[i128::MAX, i128::MIN, 3]),
            (7, false)
        );
    }

    #[test]
    fn a_small_step_widens_the_bound_to_cover_its_bias() {
        let step_at = |i: u64| if i >= 2048 { 5_000 } else { 0 };
        let w = window_of(
            (0..4096u64).map(|i| (i * 100, 2 * 300 * i + (i * 7919) % 13 + 10_000 - step_at(i))),
        );
        let fit = w.fit(NO_FLOOR).unwrap();
        let rate = rate_millihz(&fit, 1_000_000_000).unwrap();
        let err_ppb = (rate as i128 - 3_000_000_000).unsigned_abs() * 1_000_000_000 / 3_000_000_000;
        assert!(err_ppb > 1_000, "the step biases the slope: {err_ppb} ppb");
        assert!(
            err_ppb as u64 <= fit.uncertainty_ppb,
            "{err_ppb} ppb vs bound {}",
            fit.uncertainty_ppb
        );
    }

    #[test]
    fn coverage_factor_decreases_to_three() {
        let mut last = u32::MAX;
        for dof in 0..200 {
            let k = coverage_milli(dof);
            assert!(k <= last && k >= 3000);
            last = k;
        }
        assert_eq!(coverage_milli(1000), 3000);
    }
}
