//! The robust straight-line fit behind calibration, in exact integer arithmetic.
//!
//! # Model
//!
//! Each accepted sample is a point `(x, y)`: `x` is the unwrapped reference count and `y` the
//! *sum* of the two bracketing counter reads (twice the bracket midpoint, so it stays an
//! integer), both relative to the first fitted sample. The counter's rate in counter ticks per
//! reference tick is half the least-squares slope `β` of
//!
//! `y = a + β·x + γ·z`
//!
//! where `z` is the mean bracket width of the sample's bin (below): the **width term**.
//!
//! # The width term
//!
//! The reference is read somewhere inside its bracket. Where, relative to the midpoint, is
//! noise that averages away only while it is stationary. It is not when the time a read
//! takes changes for milliseconds at a time and the change falls mostly on one side of the
//! latch: under QEMU's `aarch64-virt` a host preemption brings the vCPU back with brackets
//! 100–150 ns wider or narrower, three quarters of it after the latch, so the midpoints shift
//! by about a quarter of the width change. With the few such regimes a calibration of tens
//! of milliseconds spans, a line through the midpoints takes the shifts for a rate, and
//! without a trace in its residuals (two regimes: a line fits any offset between them). That
//! made the bound miss in about 3 % of the boots there (issue 15).
//!
//! Such shifts show in the widths, which are measured: `γ` fits the midpoint's dependence
//! on them, at the scale of bins (per-sample jitter split evenly around the latch does not
//! dilute it), and `β` is then the rate with that dependence removed. The cost is one degree
//! of freedom, and, where the widths drift in step with time, the precision that `Sxx`
//! loses to them (the bound uses `Σ(x − x̄)²` less the part the widths explain), which is the
//! honest figure: such a drift cannot be told from a rate. Widths that do not vary at bin
//! scale, or move exactly with `x`, or fewer than 8 bins, leave the plain line `γ = 0`.
//!
//! What no fit can see is a latch that moves inside brackets whose widths stay the same:
//! that is the assumption the bound rests on (see [`crate::Reference`]).
//!
//! # Storage: a window of bins, no allocation
//!
//! Samples are not stored. They are summed into bins (`n, Σx, Σy, Σw, Σx², Σxy`, exact
//! `u128`s); when all [`BINS`] bins are full, neighbours are merged pairwise and each bin
//! then takes twice as many samples. So the window always covers the whole calibration with
//! 32 to 64 bins of nearly equal sample counts, and the least-squares fit over the bins' sums
//! is *exactly* the fit over every sample (`z` is constant within a bin; a bin's mean width
//! is scaled to `bin_len` samples and rounded, to `1/bin_len` of a tick).
//!
//! Where the reference is read more than twice a step (the sampler says so after its
//! warm-up), a full bin is closed only where the reference's count has moved since the
//! previous sample, so the samples that read one reference count (a coarse reference: a
//! 1 kHz tick read every microsecond) fall in one bin, and a bin holds up to one count's
//! samples more than `bin_len`. Their rounding is one pattern: a bin cut through it has its
//! mean shifted by a fraction of a step, which the scatter took for noise (issue 27: a 1 kHz
//! tick's bound was ±14 % for errors of a few ppm; now ±15–24 ppm). For the same reason the
//! first count's samples are dropped where there were several: the window may have begun
//! part-way through that count. There the sampler also fits the samples where the
//! reference moved and a slower counter did not, so every reference count is sampled evenly
//! (see `Engine::counter_still` in `sampler.rs`): the bins used to close where both counts
//! moved in one sample, which a counter slower than the sampling does only at a phase of
//! its ticks, and with those samples dropped, a counter nearly in step with the reference
//! (10 005 Hz against a 1 kHz tick) had its quantization's slow drift taken for a rate
//! (issue 27: up to 10 times the bound, 77 of 300 runs outside it).
//!
//! At the counter's edges the sums also carry the edges to odd counts (their number, `Σx`
//! and `Σy`): a counter whose ticks alternate long and short puts those edges off the even
//! ones' line by a constant, which bins of an even number of edges average out of their
//! means; its bias on the slope is bounded from them (see `parity_bias`).
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
//! `s² = Σ n_b·r_b² / (B − p)` (`p` = 3 parameters with the width term, else 2), not from
//! the scatter of single samples: errors correlated over
//! less than a bin (quantization beating against the sampling cadence, a slowly wandering
//! read cost) inflate the bin means' scatter and therefore the bound, where a per-sample
//! estimate would call them averaged out. It is floored by what the residuals cannot hide
//! (issue 27: a floor of the whole bracket, `(2w)²/12`, made the bound 3–100 times wider
//! than the error; these are measured instead):
//!
//! - what rounds independently in every sample: the counter's two reads (`2/12` in `y`
//!   units) and a reference tick `q1` (`q1²/12`, divided by the samples that share a tick);
//! - how far the latch can move against the bracket's midpoint with the read's duration,
//!   `(2f − 1)·w` for a latch at a fraction `f` of a bracket `w` wide: the samples' widths'
//!   variance, and, where the widths shift for milliseconds at a time (QEMU's
//!   `aarch64-virt`), the bins' mean widths' scatter per sample, `Σ n_b·(w̄_b − w̄)²/(B − 1)`,
//!   which does not average down with the samples of a bin;
//! - the variance the previous evaluation measured: the early stop looks at the bound again
//!   and again, and would otherwise stop at the look whose estimate came out low by chance
//!   (under QEMU, 16 of 400 boots missed by that alone).
//!
//! The slope's standard uncertainty is `sqrt(s²/Sxx)`; the
//! reported bound is that times a Student-t coverage factor for `B − p` degrees of freedom
//! at 99.5 % two-sided (never below 3), which the simulation's coverage tests check
//! (`suite/tests/sim_sweep.rs`), and `cargo xtask coverage` on QEMU's `aarch64-virt`,
//! whose truth is exact.
//!
//! # Structure the line absorbs
//!
//! Errors that stay put inside bins and move between them — small steps of either count, a
//! drifting read cost, a cadence in step with a coarse count — bias the slope far beyond
//! what their scatter suggests, and a line absorbs part of them. The residuals are called
//! *structured* when neighbouring bins move together (lag-1 correlation above ½), when
//! they jump like a staircase (the second largest difference of one sign more than twice
//! the largest of the other, across dropped bins), or when the bin means scatter more than
//! samples of bounded error could (four times the square of the most a narrow bracket and a
//! reference step allow). Structured residuals add a worst-case term: `F·E/X` for the
//! largest bin residual `E` over the span `X`, `F` the residuals' sign changes plus two (at
//! least 4), since `k` evenly spread steps of `δ` bias the slope by about `(k + 1)·δ/X` and
//! leave a sawtooth of `δ/2` that changes sign about `2k + 1` times. And the slope *inside*
//! the bins, pooled (bins with a step inside dropped by the median rule), is checked against
//! the line's: where they disagree beyond its own expanded uncertainty, the bound covers
//! both (issue 27: four ACPI PM steps of a tick gave 66 ppm of error under a 56 ppm bound in
//! 60 of 60 runs). That check needs samples that each read a count of their own; where the
//! bins are aligned to a coarse reference's counts it is skipped.
//!
//! Five to eight evenly spread steps of one tick left teeth of about five bins: no lag-1
//! correlation (a sawtooth of period five has none), no lopsided jumps (each drop is split
//! between two bins), and a slope inside the bins biased by the bins the steps fall in. What
//! shows them is the bin means' scatter against what the instruments let a sample scatter
//! by (the floors below): honest worlds whose samples each read a reference count of their
//! own keep that ratio below 4 (the sweep's families, a host against std's clock, QEMU's
//! `aarch64-virt`), the seven steps that missed put it at 700–1 000. Above 256 the residuals
//! are structured, and the worst-case term takes the larger of `F·E` and the residuals'
//! total variation (a rise and a drop of δ per step, above the bias of evenly
//! spread steps for any number of them): 13 of 400 runs of two to eight steps were outside
//! their bound (by up to 15.6×), now none, p99 |error|/bound 0.89.

use super::bounded::Bounded;
use super::wide::{
    bits256, checked_shl256, div_wide, isqrt, isqrt_ceil, mul_div, mul_div_ceil, mul_div_round,
    mul_div_signed, mul_wide, shr256, Signed256,
};

/// Number of bins in the window (merged pairwise when full).
pub(crate) const BINS: usize = 64;

/// Largest `x` (reference ticks), `y` (twice the counter ticks) and `w` (counter ticks)
/// accepted into a fit, and the largest sample count: with these, every sum stays below
/// 2^126.
pub(crate) const X_LIMIT: u64 = 1 << 44;
/// See [`X_LIMIT`].
pub(crate) const Y_LIMIT: u64 = 1 << 50;
/// See [`X_LIMIT`].
pub(crate) const W_LIMIT: u64 = 1 << 32;
/// See [`X_LIMIT`].
pub(crate) const N_LIMIT: u64 = 1 << 31;

/// Exact sums over a set of samples: `x`, `y` and the bracket width `w`; and, at the
/// counter's edges, the count, `Σx` and `Σy` of the samples at an odd count (see
/// `parity_bias`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    pub n: u64,
    pub sx: u128,
    pub sy: u128,
    pub sw: u128,
    pub sxx: u128,
    pub sxy: u128,
    pub n_odd: u64,
    pub sx_odd: u128,
    pub sy_odd: u128,
}

impl Sums {
    /// No samples.
    pub(crate) const ZERO: Sums = Sums {
        n: 0,
        sx: 0,
        sy: 0,
        sw: 0,
        sxx: 0,
        sxy: 0,
        n_odd: 0,
        sx_odd: 0,
        sy_odd: 0,
    };

    /// Adds a sample; `odd` if it is an edge to an odd count.
    fn add(&mut self, x: u64, y: u64, w: u64, odd: bool) -> Option<()> {
        let (x, y) = (u128::from(x), u128::from(y));
        let one = Sums {
            n: 1,
            sx: x,
            sy: y,
            sw: u128::from(w),
            sxx: x.checked_mul(x)?,
            sxy: x.checked_mul(y)?,
            n_odd: u64::from(odd),
            sx_odd: if odd { x } else { 0 },
            sy_odd: if odd { y } else { 0 },
        };
        *self = self.merge(&one)?;
        Some(())
    }

    fn merge(&self, o: &Sums) -> Option<Sums> {
        Some(Sums {
            n: self.n.checked_add(o.n)?,
            sx: self.sx.checked_add(o.sx)?,
            sy: self.sy.checked_add(o.sy)?,
            sw: self.sw.checked_add(o.sw)?,
            sxx: self.sxx.checked_add(o.sxx)?,
            sxy: self.sxy.checked_add(o.sxy)?,
            n_odd: self.n_odd.checked_add(o.n_odd)?,
            sx_odd: self.sx_odd.checked_add(o.sx_odd)?,
            sy_odd: self.sy_odd.checked_add(o.sy_odd)?,
        })
    }

    /// These sums less `o`'s (a bin's), or `None` if `o` is not part of them.
    fn without(&self, o: &Sums) -> Option<Sums> {
        Some(Sums {
            n: self.n.checked_sub(o.n)?,
            sx: self.sx.checked_sub(o.sx)?,
            sy: self.sy.checked_sub(o.sy)?,
            sw: self.sw.checked_sub(o.sw)?,
            sxx: self.sxx.checked_sub(o.sxx)?,
            sxy: self.sxy.checked_sub(o.sxy)?,
            n_odd: self.n_odd.checked_sub(o.n_odd)?,
            sx_odd: self.sx_odd.checked_sub(o.sx_odd)?,
            sy_odd: self.sy_odd.checked_sub(o.sy_odd)?,
        })
    }

    /// `n·Σab − Σa·Σb` (`n` times the centred sum of products), exactly, given `Σab`.
    fn centred(&self, sab: (u128, u128), sa: u128, sb: u128) -> Option<Signed256> {
        Signed256::unsigned(mul256(sab, u128::from(self.n))?)
            .checked_sub(Signed256::unsigned_product(sa, sb))
    }

    /// This bin's width regressor `z`: its mean bracket width scaled to a full bin of
    /// `bin_len` samples (its width sum when full; rounded when not).
    fn width_regressor(&self, bin_len: u64) -> Option<u128> {
        if self.n == bin_len {
            Some(self.sw)
        } else {
            mul_div_round(self.sw, u128::from(bin_len), u128::from(self.n))
        }
    }
}

/// The least-squares fit through the samples of the bins `all` that `keep` keeps (all when
/// `None`), whose sums are `total`: `y = a + β·x + γ·z`, `z` being each sample's bin's mean
/// bracket width (see the module docs), or `y = a + β·x` where those widths do not vary
/// (or vary with `x` alone) or there are fewer than 8 bins. `None` if degenerate (no spread
/// in `x`) or not rising.
fn fit_line(
    all: Bins<'_>,
    keep: Option<&[bool; BINS + 1]>,
    total: &Sums,
    bin_len: u64,
) -> Option<Line> {
    let n = u128::from(total.n);
    let cxx = total.centred((0, total.sxx), total.sx, total.sx)?;
    let cxy = total.centred((0, total.sxy), total.sx, total.sy)?;
    if cxx.is_negative() || cxx.is_zero() || cxy.is_negative() || cxy.is_zero() {
        return None;
    }
    let plain = || {
        let (hi, lo) = cxx.magnitude();
        let sxx = div_wide(hi, lo, n)?.0;
        // The slope is cxy/cxx: shift both down together until they fit in 120 bits, which
        // keeps at least 100 significant bits of the larger.
        let (num, den) = shrink(cxy.magnitude(), cxx.magnitude());
        if num == 0 || den == 0 || sxx == 0 {
            return None;
        }
        Some(Line {
            num,
            den,
            sxx,
            width: None,
        })
    };
    // The width regressor's sums over the kept bins: Σz, Σz², Σxz, Σyz (256 bits).
    let (mut bins, mut sz) = (0usize, 0u128);
    let (mut szz, mut sxz, mut syz) = ((0, 0), (0, 0), (0, 0));
    for (i, b) in all.iter().enumerate() {
        if b.n == 0 || !keep.map_or(true, |k| k.get(i).copied().unwrap_or(false)) {
            continue;
        }
        let z = b.width_regressor(bin_len)?;
        bins = bins.saturating_add(1);
        sz = sz.checked_add(u128::from(b.n).checked_mul(z)?)?;
        szz = add256(szz, mul256(mul_wide(z, z), u128::from(b.n))?)?;
        sxz = add256(sxz, mul_wide(z, b.sx))?;
        syz = add256(syz, mul_wide(z, b.sy))?;
    }
    if bins < 8 {
        return plain();
    }
    let czz = total.centred(szz, sz, sz)?;
    if czz.is_negative() || czz.is_zero() {
        return plain();
    }
    let cxz = total.centred(sxz, total.sx, sz)?;
    let cyz = total.centred(syz, total.sy, sz)?;
    // Scale each variable by a power of two so that every centred sum fits in about 100
    // bits: C_ab → C_ab / 2^(s_a + s_b). By Cauchy–Schwarz |C_xz| ≤ sqrt(C_xx·C_zz), so
    // C_xz fits when C_xx and C_zz do; y's shift is chosen for C_xy and C_zy directly.
    let half = |c: Signed256| c.bits().saturating_sub(100).div_ceil(2);
    let (sx, sz_shift) = (half(cxx), half(czz));
    let sy = cxy
        .bits()
        .saturating_sub(sx)
        .max(cyz.bits().saturating_sub(sz_shift))
        .saturating_sub(100);
    let xx = cxx.shr_to_i128(sx.checked_mul(2)?)?;
    let zz = czz.shr_to_i128(sz_shift.checked_mul(2)?)?;
    let xz = cxz.shr_to_i128(sx.checked_add(sz_shift)?)?;
    let xy = cxy.shr_to_i128(sx.checked_add(sy)?)?;
    let zy = cyz.shr_to_i128(sz_shift.checked_add(sy)?)?;
    let p = Signed256::product;
    // Cramer's rule on the centred normal equations: β = (C_xy·C_zz − C_zy·C_xz)/D and
    // γ = (C_zy·C_xx − C_xy·C_xz)/D, D = C_xx·C_zz − C_xz², in the scaled units:
    // β = (nb/d)·2^(sy − sx), γ = (ng/d)·2^(sy − sz).
    let d = p(xx, zz).checked_sub(p(xz, xz))?;
    let nb = p(xy, zz).checked_sub(p(zy, xz))?;
    let ng = p(zy, xx).checked_sub(p(xy, xz))?;
    // Widths that move with x alone (D ≈ 0 to the precision kept) cannot be told from a
    // rate: then the plain line.
    if d.is_negative() || d.bits() < 40 || zz <= 0 {
        return plain();
    }
    if nb.is_negative() || nb.is_zero() {
        return None;
    }
    let (num, den) = scaled_ratio(nb.magnitude(), d.magnitude(), sy, sx)?;
    let (g_num, g_den) = scaled_ratio(ng.magnitude(), d.magnitude(), sy, sz_shift)?;
    // Σ(x − x̄)² less the part the widths explain: (C_xx − C_xz²/C_zz)/n = D/(C_zz·n),
    // unscaled by 2^(2·sx).
    let (hi, lo) = d.magnitude();
    let partial = div_wide(hi, lo, zz.unsigned_abs())?.0;
    let sxx = mul_div(partial, 1u128.checked_shl(sx.checked_mul(2)?)?, n)?;
    if num == 0 || den == 0 || sxx == 0 {
        return None;
    }
    Some(Line {
        num,
        den,
        sxx,
        width: Some(WidthTerm {
            negative: ng.is_negative(),
            num: g_num,
            den: g_den,
            sum: sz,
            bin_len,
        }),
    })
}

/// `(a/b)·2^(e_num − e_den)` as a fraction of two values below 2^120 (see [`shrink`]), or
/// `None` if a shift would lose bits.
fn scaled_ratio(a: (u128, u128), b: (u128, u128), e_num: u32, e_den: u32) -> Option<(u128, u128)> {
    let (a, b) = if e_num >= e_den {
        (checked_shl256(a, e_num.wrapping_sub(e_den))?, b)
    } else {
        (a, checked_shl256(b, e_den.wrapping_sub(e_num))?)
    };
    let (num, den) = shrink(a, b);
    (den != 0).then_some((num, den))
}

/// `a + b` for 256-bit `(high, low)` pairs, `None` on overflow.
fn add256(a: (u128, u128), b: (u128, u128)) -> Option<(u128, u128)> {
    let (lo, carry) = a.1.overflowing_add(b.1);
    Some((a.0.checked_add(b.0)?.checked_add(u128::from(carry))?, lo))
}

/// `v × m` for a 256-bit `(high, low)` `v`, `None` on overflow.
fn mul256(v: (u128, u128), m: u128) -> Option<(u128, u128)> {
    let (lo_hi, lo_lo) = mul_wide(v.1, m);
    let (hi_hi, hi_lo) = mul_wide(v.0, m);
    if hi_hi != 0 {
        return None;
    }
    Some((lo_hi.checked_add(hi_lo)?, lo_lo))
}

/// A fitted line: slope `num/den` in `y` units per reference tick, the centred `Σ(x−x̄)²`
/// (less the part the widths explain, when they are fitted), and the width term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Line {
    num: u128,
    den: u128,
    sxx: u128,
    width: Option<WidthTerm>,
}

/// The fitted coefficient of the width regressor, `±num/den` `y` units per unit of `z`,
/// and what the residuals need to centre `z`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WidthTerm {
    negative: bool,
    num: u128,
    den: u128,
    /// `Σz` over the samples of the kept bins.
    sum: u128,
    /// The full bins' sample count, which `z` is scaled to.
    bin_len: u64,
}

impl Line {
    /// Parameters fitted: the intercept, the slope, and the width coefficient if any.
    fn parameters(&self) -> usize {
        if self.width.is_some() {
            3
        } else {
            2
        }
    }
}

/// Shifts two 256-bit values right by the same amount until both are below 2^120.
fn shrink(a: (u128, u128), b: (u128, u128)) -> (u128, u128) {
    let shift = bits256(a).max(bits256(b)).saturating_sub(120);
    (shr256(a, shift).1, shr256(b, shift).1)
}

/// Fixed-capacity window of bins covering every accepted sample.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    bins: Bounded<Sums, BINS>,
    current: Sums,
    bin_len: u64,
    /// The largest `x` pushed (the window's span: it starts at 0).
    x_last: u64,
    /// The last sample's `(x, y)`: a full bin is closed only where `x` changes (see `push`).
    last: (u64, u64),
    /// Whether the window still holds only the samples of its first counts, which a coarse
    /// count may have begun before the window did (see `push`).
    first_count: bool,
    /// Whether bins close only where the reference's count moves (see `align_to_counts`).
    align: bool,
    /// `Σw` and `Σw²` of every sample's bracket width, and their count (outlier bins
    /// included: the widths are what the reads did), for the widths' variance.
    widths: (u128, u128, u64),
    /// `y` is scaled by this (1, or the scale of [`Window::at_edges`]).
    scale: u64,
}

/// What the sampler knows about the instruments, for the variance floor.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Floor {
    /// Narrowest bracket seen, in counter ticks.
    pub min_width: u64,
    /// Smallest reference step seen, in reference ticks.
    pub step: u64,
    /// The variance per sample the previous evaluation measured (`Fit::var`), `y` units²;
    /// 0 if none.
    pub var: u128,
    /// At the counter's edges (see [`Window::at_edges`]): the longest gap between two
    /// consecutive samples' reference reads, plus a reference step for their rounding, in
    /// reference ticks; 0 otherwise.
    pub edge_gap: u64,
    /// At the counter's edges, over the samples kept: the mean square of the gaps before
    /// them (each plus a step) and three times their variance, in reference ticks²: twelve
    /// times the variance of an edge's place in its gap (see `Residuals::of`).
    pub edge_gap_sq: u128,
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
    /// The variance per sample the residuals showed (correlation included), `y` units².
    pub var: u128,
    /// `y` is in units this many times finer than a sum of two counter reads (1, or the
    /// scale of [`Window::at_edges`]).
    pub scale: u64,
}

impl Window {
    pub(crate) const fn new() -> Self {
        Window {
            bins: Bounded::filled_with(Sums::ZERO),
            current: Sums::ZERO,
            bin_len: 1,
            x_last: 0,
            last: (u64::MAX, u64::MAX),
            first_count: true,
            align: false,
            widths: (0, 0, 0),
            scale: 1,
        }
    }

    /// Samples in the window.
    pub(crate) fn samples(&self) -> u64 {
        self.bins
            .iter()
            .fold(self.current.n, |acc, b| acc.saturating_add(b.n))
    }

    /// Adds a sample: reference count `x`, counter sum `y` and bracket width `w`. `Ok(true)`
    /// when it closed a bin, `Err(())` when the window is full (a limit of [`X_LIMIT`],
    /// [`Y_LIMIT`], [`W_LIMIT`], [`N_LIMIT`]): the caller stops sampling.
    pub(crate) fn push(&mut self, x: u64, y: u64, w: u64) -> Result<bool, ()> {
        // At the counter's edges (see `at_edges`) `y` is the edge's count, in finer units,
        // and the bracket's width says nothing about where the read lies against it.
        // There `y` is twice the count reached: whether that count is odd says which of a
        // pair of ticks ended at the edge (see `parity_bias`).
        let (y, w, odd) = if self.scale > 1 {
            (y.checked_mul(self.scale).ok_or(())?, 0, y % 4 == 2)
        } else {
            (y, w, false)
        };
        if x > X_LIMIT || y > Y_LIMIT || w > W_LIMIT || self.samples() >= N_LIMIT {
            return Err(());
        }
        // Aligned (see `align_to_counts`), a full bin is closed where the reference's count
        // has moved since the last sample, so that the samples that share a reference count fall in one
        // bin: their rounding is one pattern, whose mean a bin cut through it would shift (a
        // 1 kHz tick read every microsecond: bins cut mid-tick put the bound at ±14 % over an
        // error of a few ppm). A bin then holds up to one count's samples more than `bin_len`,
        // and closes on the sample after it fills.
        if !self.align {
            return self.push_plain(x, y, w, odd);
        }
        // The reference's count moving is what closes a bin: a counter slower than the
        // sampling stands still across most steps (the sampler fits those samples too, see
        // `Engine::counter_still`), and bins that waited for both to move in one sample
        // closed at a phase of the counter's ticks, not at the reference's step.
        let moved = x != self.last.0;
        // The first counts' samples are dropped where there were several: the window may have
        // begun part-way through that reference step (or counter tick), and their mean is then
        // off its middle by up to half a step, at the end of the window where it weighs most
        // (a 1 ms clock over 150 ms: about 10 ppm of error).
        if self.first_count && moved && self.last.0 != u64::MAX {
            self.first_count = false;
            if self.current.n > 1 && self.bins.is_empty() {
                self.current = Sums::ZERO;
            }
        }
        let mut closed = false;
        if self.current.n >= self.bin_len && moved {
            self.bins.push(self.current).map_err(|_| ())?;
            self.current = Sums::default();
            closed = true;
            if self.bins.is_full() {
                // Merge now, so the next bin already takes the doubled count.
                self.merge_pairs()?;
            }
        }
        self.current.add(x, y, w, odd).ok_or(())?;
        self.last = (x, y);
        self.x_last = self.x_last.max(x);
        self.add_width(w);
        Ok(closed)
    }

    /// From now on, a full bin is closed only where the reference's count moves, and the
    /// first count's
    /// samples are dropped where there were several (see `push`): for a reference read
    /// several times a step. The sampler calls it before the first sample, once the warm-up
    /// has shown how often the reference steps. (Where every sample reads a count of its own
    /// the plain bins of `bin_len` samples are kept: the aligned ones, closed on the sample
    /// after, put QEMU's `aarch64-virt` at 9–17 of 200 boots outside their bound, against 3.)
    pub(crate) fn align_to_counts(&mut self) {
        self.align = true;
    }

    /// From now on, each sample is a counter's edge: `y` is twice the count the counter has
    /// just reached (not the bracket's midpoint), kept in units `scale` times finer, and its
    /// width is not used. The sampler calls it before the first sample, where a sample takes
    /// far less than a counter tick: then it keeps only samples whose counter moved since the
    /// previous sample's read, so the edge to that count lies between the two samples, and it
    /// says how far apart they can be ([`Floor::edge_gap`]), which the variance floor takes
    /// instead of a whole tick of rounding (see `Residuals::of`).
    pub(crate) fn at_edges(&mut self, scale: u64) {
        self.scale = scale.max(1);
    }

    /// `push` with bins of exactly `bin_len` samples, closed on their last sample.
    fn push_plain(&mut self, x: u64, y: u64, w: u64, odd: bool) -> Result<bool, ()> {
        self.current.add(x, y, w, odd).ok_or(())?;
        self.last = (x, y);
        self.x_last = self.x_last.max(x);
        self.add_width(w);
        if self.current.n < self.bin_len {
            return Ok(false);
        }
        self.bins.push(self.current).map_err(|_| ())?;
        self.current = Sums::default();
        if self.bins.is_full() {
            // Merge now, so the next bin already takes the doubled count.
            self.merge_pairs()?;
        }
        Ok(true)
    }

    fn add_width(&mut self, w: u64) {
        let w = u128::from(w);
        self.widths = (
            self.widths.0.saturating_add(w),
            self.widths.1.saturating_add(w.saturating_mul(w)),
            self.widths.2.saturating_add(1),
        );
    }

    /// The variance of the samples' bracket widths, in `y` units² (a width in counter ticks
    /// is a `y` unit): how far a latch at a fixed place in the read can move against the
    /// bracket's midpoint from one sample to the next. With the latch at a fraction `f` of
    /// the bracket the midpoint is off by `(2f − 1)·w` in `y` units, whose variance is at
    /// most the widths', at any `f`.
    fn width_variance(&self) -> u128 {
        let (s, ss, n) = self.widths;
        let n = u128::from(n.max(1));
        // (n·Σw² − (Σw)²)/n², exactly in 256 bits.
        let spread =
            Signed256::unsigned(mul_wide(ss, n)).checked_sub(Signed256::unsigned_product(s, s));
        match spread {
            Some(v) if !v.is_negative() => {
                let (hi, lo) = v.magnitude();
                div_wide(hi, lo, n.saturating_mul(n)).map_or(u128::MAX, |(q, _)| q)
            }
            _ => 0,
        }
    }

    fn merge_pairs(&mut self) -> Result<(), ()> {
        let mut merged: Bounded<Sums, BINS> = Bounded::new();
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
        // The bins with samples in them (the last one may be partly filled, or empty).
        let all = self.bins.as_slice();
        let all = match self.current.n {
            0 => Bins(all, None),
            _ => Bins(all, Some(&self.current)),
        };
        if all.len() < 3 {
            return None;
        }
        let total = all
            .iter()
            .try_fold(Sums::default(), |acc, b| acc.merge(b))?;
        let first = Residuals::of(all, &total, None, floor, self.bin_len, self.x_last)?;

        // Drop outlier bins (see the module docs) and fit again without them.
        let mut keep = [true; BINS + 1];
        let mut dropped_bins = 0usize;
        let mut dropped = 0u64;
        let mut kept = total;
        if all.len() >= 8 {
            let mut stats: Bounded<u128, { BINS + 1 }> = Bounded::new();
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
                        kept = kept.without(b)?;
                    }
                }
            }
        }
        let used_bins = all.len().saturating_sub(dropped_bins);
        let second = if dropped_bins == 0 {
            first
        } else {
            Residuals::of(all, &kept, Some(&keep), floor, self.bin_len, self.x_last)?
        };

        // s² = Σ n_b r_b² / (B − p), p the parameters fitted, floored by the instruments' own
        // variance.
        let dof = used_bins
            .checked_sub(second.line.parameters())
            .filter(|d| *d > 0)?;
        let dof128 = u128::try_from(dof).ok()?;
        let scatter = second.stats_sum.checked_div(dof128)?;
        // What the instruments let a sample scatter by, per sample: what rounds in every
        // sample, and how far the latch can move with the read's duration (see below).
        let instruments = second
            .floor_var
            .max(self.width_variance())
            .max(width_scatter(all, &keep, used_bins).unwrap_or(u128::MAX));
        // Structure: residuals of neighbouring bins that move together, or that jump like a
        // staircase, or bin means that scatter more than samples of bounded error can (four
        // times the largest variance a narrow bracket allows), or, where the samples do not
        // share reference counts (bins not aligned), more than 256 times what the instruments
        // let a sample scatter by: what moves them is not per-sample noise, and does not
        // average away. (Honest worlds keep that ratio below 4; the seven one-tick steps in
        // 20 ms that missed put it at 700–1 000. A reference coarser than the sampling
        // rounds in a pattern shared by the samples of a count, which is not a fault, and is
        // left out.)
        let beyond_samples = scatter > second.sample_max_var.saturating_mul(4);
        let beyond_noise = !self.align && scatter > instruments.saturating_mul(256);
        let (scatter, correlated) = inflate_for_correlation(scatter, &second.signed);
        let structured =
            correlated || beyond_samples || beyond_noise || steps_one_way(&second.signed);
        // Of the variance per sample: what the residuals show now, and showed at the previous
        // evaluation (the early stop looks at the bound again and again, and would otherwise
        // pick the look whose estimate came out low by chance), floored by what rounds in
        // every sample and by how much the latch can move with the bracket's width.
        let var = scatter.max(floor.var).max(instruments).max(1);

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
            // a fit partly absorbs, hence 4 rather than 3. A staircase the line absorbs
            // absorbs more: `k` evenly spread steps of δ bias the slope by about (k + 1)·δ/X
            // and leave a sawtooth of E = δ/2 whose sign changes about 2k + 1 times, so the
            // factor is at least the sign changes plus two (issue 27: four ACPI PM steps of a
            // tick, 66 ppm of error under a bound of 4E/X = 56 ppm).
            //
            // Bins smooth the sawtooth's corners (E falls below δ/2 with teeth a few bins
            // long), so where the bin means scatter far beyond the instruments (a staircase,
            // not the regimes of a read's duration, which QEMU's `aarch64-virt` shows in most
            // windows: there it doubled the calibration time and, looked at again and again
            // by the early stop, let 7 of 150 boots out) the staircase's own measure is used
            // too: the residuals' total
            // variation, a rise and a drop of δ a step (2kδ), above the bias `k(k + 2)/(k + 1)·δ`
            // of `k` evenly spread steps for every `k` (issue 27: six steps of five ticks, 463
            // ppm of error under a bound of F·E/X = 419 ppm).
            let factor = 4u128.max(u128::from(sign_changes(&second.signed)).saturating_add(2));
            let mut worst = second.max_abs_r.checked_mul(factor)?;
            if beyond_noise {
                worst = worst.max(second.total_variation);
            }
            let e_x = mul_div_ceil(worst, line.den, line.num)?; // reference ticks
            let sys = mul_div_ceil(e_x, 1_000_000_000, u128::from(self.x_last.max(1)))?;
            ppb = ppb.max(sys);
        }
        // The slope inside the bins, unless they are aligned to a coarse reference's counts:
        // then a bin holds a few whole counts and its
        // slope is their means' differences, whose rounding against the sampling cadence
        // scatters by ±0.5 % and is no check on the line (a 1 kHz tick: ±2 900 ppm for an
        // error of 15 ppm).
        if !self.align {
            if let Some(local) = within_bins(all, &keep, &line, k) {
                ppb = ppb.max(local);
            }
        }
        // At the counter's edges, the bias of ticks that alternate long and short.
        if self.scale > 1 {
            ppb = ppb.checked_add(parity_bias(&kept, &line)?)?;
        }
        Some(Fit {
            num: line.num,
            den: line.den,
            uncertainty_ppb: crate::scale::saturate_u64(ppb),
            used: kept.n,
            dropped,
            var: scatter,
            scale: self.scale,
        })
    }
}

/// The slope *inside* the bins, pooled, against the line's: where they disagree by more
/// than the pooled slope's expanded uncertainty (`k`/1000 of its standard deviation), the
/// bound that covers both (the gap plus that uncertainty), in ppb of the line's slope; `None` where they agree, or where too few
/// bins hold enough samples to tell (fewer than 16 kept bins of at least 8 samples).
///
/// Offsets that move between bins and stay put inside them — small steps of the reference
/// or the counter, each within a sample's tolerance, a few of them evenly spread — bias the
/// line's slope by about `k·δ/T` for `k` steps of `δ` over a window `T`, while its residuals
/// show a sawtooth of only `δ/2` (issue 27: four ACPI PM steps of one tick gave 66 ppm of
/// error under a 56 ppm bound). Inside each bin the slope is the true rate: pooled over the
/// bins (`Σ(x − x̄_b)(y − ȳ_b) / Σ(x − x̄_b)²`, the bin means removed), with the bins whose own
/// slope is an outlier by the median rule (a step inside them) left out, it is an estimate
/// that no such offset biases, of about `B` times the line's standard deviation. Its
/// variance per sample is taken from the bins' slopes themselves (the median of
/// `(β_b − β_w)²·Σ_b(x − x̄_b)²`, over 0.455, χ²₁'s median), so scatter between bins does not
/// inflate it.
fn within_bins(all: Bins<'_>, keep: &[bool; BINS + 1], line: &Line, k: u32) -> Option<u128> {
    // Per bin: Σ_b(x − x̄_b)² (u128) and Σ_b(x − x̄_b)(y − ȳ_b) (i128), for the kept bins of at
    // least 8 samples.
    let mut per: Bounded<(u128, i128), { BINS + 1 }> = Bounded::new();
    let kept = all
        .iter()
        .zip(keep.iter())
        .filter(|(b, k)| **k && b.n >= 8)
        .map(|(b, _)| b);
    for b in kept {
        let n = u128::from(b.n);
        let cxx = b.centred((0, b.sxx), b.sx, b.sx)?;
        let cxy = b.centred((0, b.sxy), b.sx, b.sy)?;
        if cxx.is_negative() || cxx.is_zero() {
            continue;
        }
        let (hi, lo) = cxx.magnitude();
        let wxx = div_wide(hi, lo, n)?.0;
        let (hi, lo) = cxy.magnitude();
        let wxy = i128::try_from(div_wide(hi, lo, n)?.0).ok()?;
        let wxy = if cxy.is_negative() {
            wxy.wrapping_neg()
        } else {
            wxy
        };
        per.push((wxx, wxy)).ok()?;
    }
    if per.len() < 16 {
        return None;
    }
    fn pooled<'a>(mut bins: impl Iterator<Item = &'a (u128, i128)>) -> Option<(u128, i128)> {
        bins.try_fold((0u128, 0i128), |(xx, xy), (a, b)| {
            Some((xx.checked_add(*a)?, xy.checked_add(*b)?))
        })
    }
    // Each bin's statistic (β_b − β_w)²·wxx_b = (wxy_b − β_w·wxx_b)²/wxx_b, against a slope
    // β_w = W_xy/W_xx.
    let stats = |w: (u128, i128)| -> Option<Bounded<u128, { BINS + 1 }>> {
        let mut out = Bounded::new();
        for (xx, xy) in per.iter() {
            let r = xy.checked_sub(mul_div_signed(w.1, *xx, w.0)?)?;
            out.push(mul_div_ceil(r.unsigned_abs(), r.unsigned_abs(), *xx)?)
                .ok()?;
        }
        Some(out)
    };
    let all_w = pooled(per.iter())?;
    if all_w.0 == 0 || all_w.1 <= 0 {
        return None;
    }
    let first = stats(all_w)?;
    let mut sorted = first;
    sorted.sort_unstable();
    let median = *sorted.get(sorted.len() / 2)?;
    let limit = median.saturating_mul(79);
    let outliers = first.iter().filter(|s| **s > limit).count();
    let w = if outliers > 0 && outliers.saturating_mul(4) <= per.len() {
        pooled(
            per.iter()
                .zip(first.iter())
                .filter(|(_, s)| **s <= limit)
                .map(|(b, _)| b),
        )?
    } else {
        all_w
    };
    if w.0 == 0 || w.1 <= 0 {
        return None;
    }
    let wxy = w.1.unsigned_abs();
    // The pooled slope, scaled to the line's denominator: q/den against num/den.
    let q = mul_div(wxy, line.den, w.0)?;
    let gap_ppb = mul_div_ceil(q.abs_diff(line.num), 1_000_000_000, line.num)?;
    // Its standard deviation, as in `Window::fit`: var = median/0.455 (×2^32 before the root
    // for precision), in reference ticks, over sqrt(W_xx).
    let var = mul_div_ceil(median, 1000, 455)?.max(1);
    let sd_fp = isqrt_ceil(var.checked_mul(1 << 32)?);
    let sd_x = mul_div_ceil(sd_fp, line.den, line.num)?;
    let se = mul_div_ceil(
        sd_x,
        u128::from(k).checked_mul(1_000_000)?,
        isqrt(w.0).max(1),
    )?
    .div_ceil(1 << 16);
    (gap_ppb > se).then(|| gap_ppb.saturating_add(se))
}

/// What ticks of alternating length bias the line's slope by, in ppb of it, over the kept
/// samples `kept` (at the counter's edges: see `Window::at_edges`), through `line`.
///
/// A counter whose prescaler's duty cycle is skewed ticks long, short, long, short: its odd
/// counts' edges all lie off the even ones' line by one offset `δ` (a fraction of a tick),
/// which no noise floor describes and which bins of an even number of edges average out of
/// their means, so the scatter does not show it either. Where the edges kept are not spread
/// evenly between the two parities over the window (the sampler skips edges, the window
/// starts and ends where it does) the line takes part of `δ` for a rate: exactly
/// `δ·C_xp/C_xx`, `C_xp = Σ(x − x̄)(p − p̄)` for `p` 1 at odd counts, 0 at even ones (issue
/// 27: 1.4–3 kHz counters skewed by 5–45 % against HPET, 19/500 outside their bound, p99
/// |error|/bound 1.13). `δ` is measured as the odd edges' mean residual less the even
/// ones'; `C_xp` is known exactly. A counter without skew has `δ` at the noise's level,
/// and the term is a small part of the bound.
fn parity_bias(kept: &Sums, line: &Line) -> Option<u128> {
    let (n, n_odd) = (kept.n, kept.n_odd);
    let n_even = n.checked_sub(n_odd)?;
    if n_odd == 0 || n_even == 0 {
        return Some(0);
    }
    let (no, ne, n) = (i128::from(n_odd), i128::from(n_even), i128::from(n));
    let (sx, sy) = (i128::try_from(kept.sx).ok()?, i128::try_from(kept.sy).ok()?);
    let (sxo, syo) = (
        i128::try_from(kept.sx_odd).ok()?,
        i128::try_from(kept.sy_odd).ok()?,
    );
    let (sxe, sye) = (sx.checked_sub(sxo)?, sy.checked_sub(syo)?);
    // δ·n_o·n_e = (n_e·Σy_o − n_o·Σy_e) − β·(n_e·Σx_o − n_o·Σx_e), in y units (each product
    // below 2^112 within the window's limits).
    let dy = ne.checked_mul(syo)?.checked_sub(no.checked_mul(sye)?)?;
    let dx = ne.checked_mul(sxo)?.checked_sub(no.checked_mul(sxe)?)?;
    let delta = dy.checked_sub(mul_div_signed(dx, line.num, line.den)?)?;
    // n·C_xp = n·Σx_o − n_o·Σx.
    let cxp = n.checked_mul(sxo)?.checked_sub(no.checked_mul(sx)?)?;
    // |Δβ|/β = |δ|·|C_xp|/(C_xx·β): δ in reference ticks (·n_o·n_e), times |n·C_xp|, over
    // n_o·n_e·n·C_xx.
    let delta_x = mul_div_ceil(delta.unsigned_abs(), line.den, line.num)?;
    let pairs = u128::try_from(no.checked_mul(ne)?).ok()?;
    let t = mul_div_ceil(delta_x, cxp.unsigned_abs(), pairs)?;
    let scale = u128::try_from(n).ok()?.checked_mul(line.sxx)?;
    mul_div_ceil(t, 1_000_000_000, scale)
}

/// How much the kept bins' mean bracket widths scatter, per sample (`Σ n_b·(w̄_b − w̄)²/(B − 1)`,
/// in `y` units², the widths in counter ticks): the floor for a latch that moves with the
/// read's duration in regimes (see the module docs). For widths that jitter from sample
/// to sample it is their variance; where they shift for milliseconds at a time (QEMU's
/// `aarch64-virt` after each host preemption) it is as large as those shifts, which move
/// whole bins together and do not average down with their samples.
fn width_scatter(all: Bins<'_>, keep: &[bool; BINS + 1], bins: usize) -> Option<u128> {
    let (mut n, mut sw, mut ratio) = (0u128, 0u128, 0u128);
    for (b, _) in all.iter().zip(keep.iter()).filter(|(b, k)| **k && b.n > 0) {
        let nb = u128::from(b.n);
        n = n.checked_add(nb)?;
        sw = sw.checked_add(b.sw)?;
        // Σ sw_b²/n_b, rounded down (sw_b < 2^63).
        ratio = ratio.checked_add(b.sw.checked_mul(b.sw)?.checked_div(nb)?)?;
    }
    // Σ sw_b²/n_b − (Σ sw)²/N, over B − 1.
    let (hi, lo) = mul_wide(sw, sw);
    let mean_part = div_wide(hi, lo, n.max(1))?.0;
    let between = ratio.saturating_sub(mean_part);
    between.checked_div(u128::try_from(bins.saturating_sub(1).max(1)).ok()?)
}

/// The bins of a window that hold samples: the full ones and the one being filled.
#[derive(Clone, Copy, Debug)]
struct Bins<'a>(&'a [Sums], Option<&'a Sums>);

impl<'a> Bins<'a> {
    fn len(&self) -> usize {
        self.0.len().saturating_add(usize::from(self.1.is_some()))
    }

    fn iter(&self) -> impl Iterator<Item = &'a Sums> {
        self.0.iter().chain(self.1)
    }
}

/// Per-bin residual statistics for one line.
#[derive(Clone, Debug)]
struct Residuals {
    line: Line,
    /// `n_b·r_b²` for every bin (in `y` units², rounded up).
    stats: Bounded<u128, { BINS + 1 }>,
    /// `n·n_b·r_b` for every bin, signed, 0 for bins not in use.
    signed: Bounded<i128, { BINS + 1 }>,
    /// The largest `|r_b|` of the bins in use, `y` units, rounded up.
    max_abs_r: u128,
    /// Sum of `stats` over the bins in use.
    stats_sum: u128,
    /// The instruments' own variance per sample, `y` units².
    floor_var: u128,
    /// The largest variance per sample a narrow bracket allows, `y` units²: the square of the
    /// most a sample can be off.
    sample_max_var: u128,
    /// `Σ |r_b − r_{b−1}|` over consecutive bins in use (across dropped ones), `y` units,
    /// rounded up.
    total_variation: u128,
}

impl Residuals {
    /// Fits `total` (the sums over the kept bins) and computes every bin's residual statistic;
    /// `keep` (if given) says which bins count in `stats_sum`.
    fn of(
        all: Bins<'_>,
        total: &Sums,
        keep: Option<&[bool; BINS + 1]>,
        floor: Floor,
        bin_len: u64,
        x_span: u64,
    ) -> Option<Self> {
        let line = fit_line(all, keep, total, bin_len)?;
        let (sxy, sxx) = (line.num, line.den);
        let n = u128::from(total.n);
        let n_i = i128::try_from(n).ok()?;
        let (sx_i, sy_i) = (
            i128::try_from(total.sx).ok()?,
            i128::try_from(total.sy).ok()?,
        );
        let mut stats = Bounded::new();
        let mut signed = Bounded::new();
        let mut max_abs_r = 0u128;
        let mut stats_sum = 0u128;
        let (mut total_variation, mut prev_r) = (0u128, None::<i128>);
        for (i, b) in all.iter().enumerate() {
            let nb = i128::from(b.n);
            // n·(n_b·r_b) = (n·Sy_b − n_b·Sy) − β·(n·Sx_b − n_b·Sx) − γ·n_b·(n·z_b − Σz): all
            // exact but the divisions by β's and γ's denominators (rounded toward zero).
            let centred = |sum_b: u128, sum: i128| {
                n_i.checked_mul(i128::try_from(sum_b).ok()?)?
                    .checked_sub(nb.checked_mul(sum)?)
            };
            let dy = centred(b.sy, sy_i)?;
            let dx = centred(b.sx, sx_i)?;
            let mut fitted = mul_div_signed(dx, sxy, sxx)?;
            if let Some(g) = line.width {
                let z = i128::try_from(b.width_regressor(g.bin_len)?).ok()?;
                let dz = n_i
                    .checked_mul(z)?
                    .checked_sub(i128::try_from(g.sum).ok()?)?;
                let g_fitted = mul_div_signed(dz, g.num, g.den)?.checked_mul(nb)?;
                fitted = if g.negative {
                    fitted.checked_sub(g_fitted)?
                } else {
                    fitted.checked_add(g_fitted)?
                };
            }
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
                let r_b = signed_r
                    .checked_div(i128::try_from(n.checked_mul(u128::from(b.n))?).ok()?.max(1))?;
                if let Some(p) = prev_r {
                    total_variation = total_variation
                        .checked_add(r_b.abs_diff(p))?
                        .checked_add(1)?;
                }
                prev_r = Some(r_b);
            } else {
                signed.push(0).ok()?;
            }
        }
        // Floor: what rounds independently in every sample and so cannot average below
        // `1/n`, at the least: the counter's rounding of its two reads (`2·1²/12` in y
        // units), and the reference's, of at least one of its ticks `q1` (`q1²/12`; its
        // step may be coarser, which the scatter then shows). Where several samples share a
        // tick, their roundings of it are one pattern that the bin means show, and its part
        // is `(q1/s)²/12` for `s` samples a tick. The latch's place in the bracket is the
        // measured scatter's to show (see the module docs).
        let w2 = u128::from(floor.min_width).checked_mul(2)?;
        let q1 = mul_div_ceil(1, sxy, sxx)?;
        let per_tick = u128::from(total.n)
            .checked_div(u128::from(x_span.max(1)))?
            .max(1);
        let q_own = q1.div_ceil(per_tick);
        // At the counter's edges (`Window::at_edges`) a sample's `y` is twice the count the
        // counter reached at its last edge. The sampler keeps a sample only where that count
        // is new since the previous sample's second counter read, so the edge came after that
        // read and at or before this sample's second counter read: within the interval `D_i`
        // between the two samples' second counter reads, which is the gap `G_i` between their
        // reference reads (give or take the reads' jitter; each gap is taken plus a step of
        // rounding). It cannot lie after this sample's reads. Where the edge falls evenly in
        // `D_i` (a sampling cadence not in step with the counter; the sampler's lockstep term
        // covers one that is), the counter's position at this sample's reference read is off
        // from `y` by `U·g_i` plus a constant, `U` uniform on `[0, 1]`, `g = G·β` in `y` units,
        // whose variance over the samples is `mean(g²)/3 − mean(g)²/4 = mean(g²)/12 +
        // var(g)/4`: the floor taken, `(mean((g + step)²) + 3·var(g))/12`
        // (`Floor::edge_gap_sq`), the means over the samples kept (longer gaps catch more
        // edges). It replaces a whole tick of rounding (`2/12`), which overstated such
        // samples' error 50–100 times (issue 27: a 1–10 kHz counter read against a 14.3 MHz
        // HPET every 0.5 µs had `|error|/bound` p99 0.015), and the earlier floor of an edge
        // anywhere in the gaps on both sides of the read (`mean(g²)/3`, twice the standard
        // deviation: p99 0.27); where the samples are not edges (the counter moved between
        // samples after a reference glitch) the sampler does not keep them. What else moves
        // the edges' errors (the latch's place in the read, the reads' jitter) the scatter
        // shows; a sample can be off by up to `2g` (`Floor::edge_gap`) where the structure
        // checks ask.
        let edge = match floor.edge_gap {
            0 => None,
            gap => Some(mul_div_ceil(u128::from(gap), sxy, sxx)?),
        };
        let counter_var = match edge {
            Some(_) => {
                let g2 = mul_div_ceil(floor.edge_gap_sq, sxy, sxx)?;
                mul_div_ceil(g2, sxy, sxx)?
            }
            None => 2,
        };
        let floor_var = q_own
            .checked_mul(q_own)?
            .checked_add(counter_var)?
            .div_ceil(12);
        // The most a narrow sample can be off: its bracket (at most 2w + 2 ticks, so a
        // midpoint off by at most 2w + 4 y units, its rounding included), or at the edges the
        // range `2g`, plus a reference step.
        let q = mul_div_ceil(u128::from(floor.step.max(1)), sxy, sxx)?;
        let worst = match edge {
            Some(g) => g.checked_mul(2)?,
            None => w2.checked_add(4)?,
        }
        .checked_add(q)?;
        let sample_max_var = worst.checked_mul(worst)?;
        Some(Residuals {
            line,
            stats,
            signed,
            max_abs_r,
            stats_sum,
            floor_var,
            sample_max_var,
            total_variation,
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

/// Whether consecutive bins' residuals jump like a staircase the line absorbed. A staircase
/// of `k` steps leaves a sawtooth: its `k` drops stand out of the small rises between them,
/// while its lag-1 correlation can stay low (teeth a few bins long). Either of two signs of
/// it, on the differences between consecutive bins in use (across dropped bins: the bins a
/// step falls in are the outliers the fit drops, and the step shows between their
/// neighbours):
///
/// - the second largest difference of one sign is more than twice the largest of the other
///   (white noise: about one window in 10 000, 32–64 bins);
/// - their skewness exceeds 1.2 in size (a sawtooth with teeth of six bins: about −1.7;
///   white noise: about one window in 200 at 32 bins, 1 in 10 000 at 64).
///
/// A false alarm only widens the bound.
fn steps_one_way(residuals: &[i128]) -> bool {
    let mut diffs: Bounded<i128, { BINS + 1 }> = Bounded::new();
    let mut prev = 0i128;
    for &r in residuals.iter().filter(|r| **r != 0) {
        if prev != 0 && diffs.push(r.saturating_sub(prev)).is_err() {
            return false;
        }
        prev = r;
    }
    if diffs.len() < 8 {
        return false;
    }
    // The two largest rises and drops.
    let (mut up, mut down) = ([0u128; 2], [0u128; 2]);
    for &d in diffs.iter() {
        let top = if d > 0 { &mut up } else { &mut down };
        let m = d.unsigned_abs();
        if m > top[0] {
            *top = [m, top[0]];
        } else if m > top[1] {
            top[1] = m;
        }
    }
    let lopsided = (down[1] > up[0].saturating_mul(2) && up[0] > 0)
        || (up[1] > down[0].saturating_mul(2) && down[0] > 0);
    // Skewness² = n·(Σd³)²/(Σd²)³ > 1.2², with the differences scaled to 16 bits so that
    // every sum fits (Σd² < 2^38, its cube < 2^114; (Σd³)²·n < 2^114; both times 144 < 2^122).
    let max = diffs.iter().map(|d| d.unsigned_abs()).max().unwrap_or(0);
    let shift = (128u32.wrapping_sub(max.leading_zeros())).saturating_sub(16);
    let (mut s2, mut s3) = (0i128, 0i128);
    for &d in diffs.iter() {
        let d = d >> shift.min(127);
        s2 = s2.saturating_add(d.saturating_mul(d));
        s3 = s3.saturating_add(d.saturating_mul(d).saturating_mul(d));
    }
    let n = diffs.len() as u128;
    let s2 = s2.unsigned_abs();
    let skewed = s3
        .unsigned_abs()
        .checked_mul(s3.unsigned_abs())
        .and_then(|v| v.checked_mul(n))
        .zip(s2.checked_mul(s2).and_then(|v| v.checked_mul(s2)))
        .is_some_and(|(num, den)| den > 0 && num.saturating_mul(100) > den.saturating_mul(144));
    lopsided || skewed
}

/// How often consecutive bins' residuals change sign (across dropped bins, 0).
fn sign_changes(residuals: &[i128]) -> u32 {
    let mut changes = 0u32;
    let mut prev = 0i128;
    for &r in residuals.iter().filter(|r| **r != 0) {
        if prev != 0 && (r < 0) != (prev < 0) {
            changes = changes.saturating_add(1);
        }
        prev = r;
    }
    changes
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
    let den = fit.den.checked_mul(2)?.checked_mul(u128::from(fit.scale))?;
    mul_div_round(fit.num, u128::from(ref_millihz), den)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_FLOOR: Floor = Floor {
        min_width: 0,
        step: 1,
        var: 0,
        edge_gap: 0,
        edge_gap_sq: 0,
    };

    fn window_of(points: impl Iterator<Item = (u64, u64)>) -> Window {
        let mut w = Window::new();
        for (x, y) in points {
            w.push(x, y, 0).unwrap();
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
        assert_eq!(w.push(X_LIMIT + 1, 0, 0), Err(()));
        assert_eq!(w.push(0, Y_LIMIT + 1, 0), Err(()));
        assert_eq!(w.push(0, 0, W_LIMIT + 1), Err(()));
        assert_eq!(w.push(X_LIMIT, Y_LIMIT, W_LIMIT), Ok(true));
        // Aligned to counts, a bin closes on the sample after it fills, where the reference
        // moved.
        let mut w = Window::new();
        w.align_to_counts();
        assert_eq!(w.push(5, 5, 0), Ok(false));
        assert_eq!(w.push(5, 7, 0), Ok(false));
        // Both moved: the first count's two samples are dropped (they may be a partial one).
        assert_eq!(w.push(6, 9, 0), Ok(false));
        assert_eq!(w.samples(), 1);
        assert_eq!(w.push(6, 11, 0), Ok(false));
        assert_eq!(w.push(7, 13, 0), Ok(true));
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

    /// Midpoints that shift with the bracket widths, regime by regime (issue 15: QEMU's
    /// `aarch64-virt`): three regimes whose reads are 0, 40 and 16 ticks slower, a quarter of
    /// it before the latch, and per-read jitter split evenly around it. The true rate is
    /// exactly 3 counter ticks per reference tick.
    fn regimes(widths: bool) -> Window {
        let mut w = Window::new();
        for i in 0..4096u64 {
            let extra = match i {
                0..=1499 => 0,
                1500..=2799 => 40,
                _ => 16,
            };
            let jitter = 2 * ((i * 7919) % 7);
            let before = 10 + extra / 4 + jitter / 2;
            let width = 20 + extra + jitter;
            let c0 = 300 * i + 1_000 - before;
            let y = 2 * c0 + width;
            w.push(i * 100, y, if widths { width } else { 0 }).unwrap();
        }
        w
    }

    #[test]
    fn midpoints_that_shift_with_the_widths_do_not_bias_the_rate() {
        let err_ppb = |fit: &Fit| {
            let rate = rate_millihz(fit, 1_000_000_000).unwrap();
            (rate as i128 - 3_000_000_000).unsigned_abs() * 1_000_000_000 / 3_000_000_000
        };
        // Without the widths the shifts are taken for a rate (here the residuals' structure
        // widens the bound over it; with two regimes a line fits any offset and nothing shows).
        let blind = regimes(false).fit(NO_FLOOR).unwrap();
        assert!(err_ppb(&blind) > 1_000, "{} ppb", err_ppb(&blind));
        // With them, the shifts are the widths' doing and the rate is right.
        let fit = regimes(true).fit(NO_FLOOR).unwrap();
        assert!(
            err_ppb(&fit) < 100 && err_ppb(&fit) as u64 <= fit.uncertainty_ppb,
            "{} ppb vs bound {}",
            err_ppb(&fit),
            fit.uncertainty_ppb
        );
    }

    #[test]
    fn widths_that_do_not_vary_leave_the_plain_line() {
        let w = window_of((0..1000u64).map(|i| (i * 5, 2 * (3 * i * 5 + 7))));
        let all = Bins(w.bins.as_slice(), Some(&w.current));
        let total = all
            .iter()
            .try_fold(Sums::default(), |a, b| a.merge(b))
            .unwrap();
        assert_eq!(fit_line(all, None, &total, w.bin_len).unwrap().width, None);
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
