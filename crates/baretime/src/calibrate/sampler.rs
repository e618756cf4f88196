//! The sampling loop: brackets, unwrapping, sanity checks, early stop.

use core::time::Duration;

use super::fit::{self, Floor, Window};
use super::wide::{mul_div, mul_div_ceil};
use super::{Calibration, CalibrationError, Config, Reference};
use crate::counter::{Counter, Width};
use crate::frequency::{Accuracy, Frequency, Source};
use crate::scale::saturate_u64;

/// Warm-up: at least this many samples...
const WARMUP_SAMPLES: u32 = 8;
/// ...and a reference span of at least this many of its observed steps, before the rate is
/// known well enough (±3 %) to unwrap against and to check steps with.
const WARMUP_STEPS: u64 = 32;
/// This many reference steps in a row that the counter cannot explain are an error.
const INCONSISTENT_LIMIT: u32 = 8;
/// If neither count moves for this many samples, the counter is reported stuck.
const SAME_READS_LIMIT: u32 = 1 << 20;

/// Measures how fast `counter` runs against `reference`, says how sure the measurement is
/// ([`Calibration`]), and never returns a silently wrong rate ([`CalibrationError`]).
///
/// ```text
///  counter ─┐   ┌─ read counter ─┬─ read reference ─┬─ read counter ─┐  one sample: the
///           └──►│      c0        │        r         │       c1       │  reference read lies
///               └────────────────┴──────────────────┴────────────────┘  inside [c0, c1]
/// ```
///
/// Pass the counter by reference (`&tsc`) and the reference by `&mut` to keep them; both
/// traits are implemented for references. The loop reads each about once per sample and
/// runs until the reference has advanced by [`Config::max_duration`] or the target is met.
/// To check what the hardware claims against the measurement as well, call
/// [`calibrate_and_verify`](crate::calibrate_and_verify).
///
/// For a trustworthy result, keep the calling CPU from migrating (pin the thread, or call it
/// before other CPUs run) and, in a kernel, with interrupts enabled or not as you like:
/// interrupts only cost rejected samples.
///
/// # Errors
///
/// Every [`CalibrationError`] variant but the config-dependent ones can come from faulty
/// hardware; none comes from noise alone except [`CalibrationError::TooFewSamples`].
///
/// # How it works
///
/// 1. **Brackets.** Each sample reads the counter, the reference, the counter. The reference
///    was read somewhere inside the bracket `[c0, c1]`, so its width is that sample's timing
///    uncertainty. A bracket much wider than the narrowest seen (wider than `2·w_min + 2`
///    ticks) had an SMI, an interrupt, a preemption or a VM exit land in it and is rejected.
///    Whatever happens *between* samples costs nothing: each sample stands on its own.
/// 2. **Unwrapping and sanity.** Both counts are unwrapped to 64 bits. A reference narrower
///    than 64 bits (the PIT's 16) is unwrapped against the rate measured so far, so even a
///    stall longer than a whole wrap period is counted right; a reference step that the
///    counter cannot explain is rejected as a glitch, and a run of them is an error
///    ([`CalibrationError::Discontinuity`]). Steps
///    backwards, counts that stand still, and rates outside the plausible range are typed
///    [`CalibrationError`]s, never a silently wrong frequency.
/// 3. **The fit.** A least-squares line through every accepted bracket midpoint, over the
///    whole window, robust to outliers, with an uncertainty from the scatter of the data
///    *and* a floor from the bracket widths and the reference's resolution (argued in the
///    fit's source, `src/calibrate/fit.rs`: exact integer sums in 32–64 bins, outlier bins
///    dropped by a median rule, variance from the bin means so correlated noise is not
///    mistaken for averaging). The
///    fit also takes each bin's mean bracket width as a regressor: where the midpoints shift
///    with the widths for a while (a read whose slow part falls on one side of the latch,
///    as semihosting's under QEMU after each host preemption), that shift is not taken for
///    a rate.
/// 4. **Time** is measured by the reference itself: the loop ends when the reference has
///    advanced by [`Config::max_duration`], or earlier, as soon as the measurement
///    uncertainty reaches [`Config::target_ppb`] with at least [`Config::min_samples`]
///    samples. No sleeping, no other clock.
///
/// Everything is integer arithmetic (`u64`/`u128`, 256-bit products where needed), with no
/// allocation and no panics, so it runs in early boot on bare metal, soft-float targets
/// included.
///
/// # The uncertainty
///
/// The bound, [`Accuracy::bound_ppb`] of the [`Calibration::frequency`] it returns
/// (`cal.frequency.accuracy().bound_ppb()`), is an *expanded* uncertainty meant to contain
/// the true error at least 99 % of the time (coverage factor ≥ 3 on the standard
/// uncertainty; the simulation tests, over baretime-sim, check the 99 % over 1000 seeded
/// runs). It is the sum of the measurement's own uncertainty ([`Calibration::measurement_ppb`]), the reference's stated accuracy
/// ([`Accuracy::bound_ppb`] of [`Reference::frequency`]) and the rounding to millihertz.
/// The target and [`Calibration::met_target`] concern the measurement part only: waiting
/// longer cannot shrink the reference's own tolerance. The early stop and `met_target`
/// judge the same figure, `measurement_ppb`, so a run that stops early has met its target.
///
/// The bound rests on one assumption about the reference (see [`Reference`]'s contract):
/// where in its read the count is latched may scatter, and may move with how long the read
/// takes, but does not drift inside brackets of unchanged width during the calibration. A
/// latch point that drifts by `δ` over a calibration of length `T` biases the rate by `δ/T`
/// and nothing in the data shows it.
///
/// Measured where the truth is exact (QEMU's `aarch64-virt`, whose counter runs at exactly
/// 62.5 MHz of the semihosting reference), `cargo xtask coverage` counts the boots outside
/// their bound (the README's "Tests" quotes a run).
///
/// # Target not met
///
/// If the target is not reached within the maximum duration, calibration still returns
/// `Ok` with the best estimate and its honest (larger) bound, and `met_target == false`.
/// It returns [`CalibrationError::TooFewSamples`] only when noise left too few accepted
/// samples for a fit at all (fewer than [`Config::min_samples`], or fewer than three bins).
///
/// # Example
///
/// ```
/// use baretime::{calibrate, Config, CounterReference, FnCounter, Frequency};
/// use core::cell::Cell;
/// use core::time::Duration;
///
/// // A toy world: a 1 MHz reference and a counter at exactly 3 ticks per reference tick,
/// // advancing on every read.
/// let t = Cell::new(0u64);
/// let counter = FnCounter::new(|| { t.set(t.get() + 1); t.get() }, 64);
/// let reference = CounterReference::new(
///     FnCounter::new(|| { t.set(t.get() + 1); t.get() / 3 }, 64),
///     Frequency::exact_hz(1_000_000).unwrap(),
/// );
/// let config = Config::new().with_target_ppb(10_000).with_max_duration(Duration::from_millis(50));
/// let cal = calibrate(&counter, reference, config).unwrap();
/// assert_eq!(cal.frequency.as_hz(), 3_000_000);
/// assert!(cal.met_target);
/// // The bound, in ppb: the measurement's, within the target (the reference is exact).
/// assert!(cal.frequency.accuracy().bound_ppb() <= 10_000);
/// ```
pub fn calibrate<C: Counter, R: Reference>(
    counter: C,
    mut reference: R,
    config: Config,
) -> Result<Calibration, CalibrationError> {
    let mut engine = Engine::new(&counter, &reference, config);
    loop {
        let c0 = counter.ticks();
        let r = reference.read();
        let c1 = counter.ticks();
        match engine.step(c0, r, c1)? {
            Step::Continue => {}
            Step::Done => break,
        }
    }
    engine.finish(reference.frequency(), reference.name())
}

/// How a reference read fits the rate seen so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unwrapped {
    /// Consistent: at this unwrapped position.
    At(u64),
    /// A step the counter cannot explain.
    Glitch,
    /// The reference has not moved although it should have (coarse, or stuck).
    ReferenceStill,
    /// The counter has not moved although the reference has (slow, or stuck): here.
    CounterStill(u64),
}

/// A fit's rate and the measurement's uncertainty (see `Engine::rated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rated {
    /// The counter's rate, in mHz.
    millihz: u64,
    /// The fit's uncertainty plus the rounding to mHz, in ppb.
    measurement_ppb: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Continue,
    Done,
}

/// A consistent sample, kept as the anchor for unwrapping the next ones.
#[derive(Clone, Copy, Debug)]
struct Anchor {
    raw: u64,
    x: u64,
    y: u64,
    width: u64,
}

/// The sampler's state; `step` is fed raw reads, so it is testable without hardware.
#[derive(Clone, Debug)]
struct Engine {
    cfg: Config,
    cw: Width,
    rw: Width,
    /// Maximum duration, in reference ticks.
    max_x: u64,
    /// A counter standing still for this many reference ticks is stuck.
    stuck_x: u64,
    /// A reference standing still for this many counter ticks is stuck (judged at the highest
    /// plausible rate).
    stuck_c: u64,
    /// Before the rate is measured: a reference standing still for this many counter ticks
    /// is stuck, judged at the rate hint's highest rate (twice [`Config::stuck_after`]).
    hint_stuck_c: Option<u64>,
    /// The reference's stated rate, in mHz.
    ref_millihz: u64,

    started: bool,
    c_raw: u64,
    c_ext: u64,
    r_raw: u64,
    /// Counter (c1, unwrapped) when the reference last changed.
    ref_moved_at_c: u64,
    /// Reference x when the counter last changed.
    counter_moved_at_x: u64,
    same_reads: u32,

    /// The rate origin: the first sample, or a later one if the first had a wide bracket.
    first: Anchor,
    /// The last consistent narrow sample: the rate so far is measured from `first` to here.
    rate_end: Anchor,
    /// The last consistent sample.
    anchor: Anchor,
    /// The last consistent sample at which the reference had moved (for the stuck check: a
    /// still reference must not dilute the rate it is judged by).
    moved: Anchor,
    warm: bool,
    warmup_samples: u32,
    inconsistent_run: u32,
    /// Smallest non-zero reference step seen (its resolution, or better).
    step_seen: u64,
    min_width: u64,

    /// (x, y) of the first fitted sample.
    origin: (u64, u64),
    window: Window,
    rejected: u64,
    last_eval_span: u64,
    met: bool,
}

impl Engine {
    fn new<C: Counter, R: Reference>(counter: &C, reference: &R, cfg: Config) -> Self {
        let rmillihz = u128::from(reference.frequency().as_millihz());
        let to_ref_ticks = |ns: u64| {
            mul_div(u128::from(ns), rmillihz, 1_000_000_000_000).map_or(u64::MAX, saturate_u64)
        };
        let ticks_in_stuck_after = |hz: u64| {
            mul_div(
                u128::from(cfg.stuck_after_ns),
                u128::from(hz),
                1_000_000_000,
            )
            .map_or(u64::MAX, saturate_u64)
        };
        let stuck_c = ticks_in_stuck_after(cfg.max_counter_hz);
        // The hint's highest rate (its value plus its stated bound), kept inside the plausible
        // range: a counter claimed slower than the slowest plausible one is judged at that.
        let hint_stuck_c = cfg.rate_hint.map(|hint| {
            let hi = mul_div(
                u128::from(hint.as_hz()).saturating_add(1),
                1_000_000_000u128.saturating_add(u128::from(hint.accuracy().bound_ppb())),
                1_000_000_000,
            )
            .map_or(u64::MAX, saturate_u64)
            .clamp(cfg.min_counter_hz, cfg.max_counter_hz);
            ticks_in_stuck_after(hi).saturating_mul(2).max(2)
        });
        let zero = Anchor {
            raw: 0,
            x: 0,
            y: 0,
            width: 0,
        };
        Engine {
            cfg,
            cw: Width::of(counter),
            rw: Width::new(reference.bits()),
            max_x: to_ref_ticks(cfg.max_duration_ns),
            stuck_x: to_ref_ticks(cfg.stuck_after_ns).max(2),
            stuck_c: stuck_c.max(2),
            hint_stuck_c,
            ref_millihz: reference.frequency().as_millihz(),
            started: false,
            c_raw: 0,
            c_ext: 0,
            r_raw: 0,
            ref_moved_at_c: 0,
            counter_moved_at_x: 0,
            same_reads: 0,
            first: zero,
            rate_end: zero,
            anchor: zero,
            moved: zero,
            warm: false,
            warmup_samples: 0,
            inconsistent_run: 0,
            step_seen: u64::MAX,
            min_width: u64::MAX,
            origin: (0, 0),
            window: Window::new(),
            rejected: 0,
            last_eval_span: 0,
            met: false,
        }
    }

    /// Unwraps a counter read against the previous one (half-range rule).
    fn unwrap_counter(&mut self, raw: u64) -> Result<u64, CalibrationError> {
        let Some(d) = self.cw.elapsed(self.c_raw, raw) else {
            return Err(CalibrationError::CounterBackwards {
                by_ticks: self.cw.backwards_by(self.c_raw, raw),
            });
        };
        self.c_raw = raw;
        // Capacity is checked by the window long before 2^64.
        self.c_ext = self.c_ext.saturating_add(d);
        Ok(self.c_ext)
    }

    fn step(&mut self, c0_raw: u64, r_raw: u64, c1_raw: u64) -> Result<Step, CalibrationError> {
        if !self.started {
            self.started = true;
            self.c_raw = self.cw.value(c0_raw);
            self.r_raw = self.rw.value(r_raw);
            let c1 = self.unwrap_counter(c1_raw)?;
            let s = Anchor {
                raw: self.r_raw,
                x: 0,
                y: c1,
                width: c1,
            };
            self.first = s;
            self.rate_end = s;
            self.anchor = s;
            self.moved = s;
            self.ref_moved_at_c = c1;
            self.min_width = c1;
            self.warmup_samples = 1;
            return Ok(Step::Continue);
        }
        let c_before = self.c_ext;
        let c0 = self.unwrap_counter(c0_raw)?;
        let c1 = self.unwrap_counter(c1_raw)?;
        let width = c1.saturating_sub(c0);
        let y = c0.saturating_add(c1);
        let r_raw = self.rw.value(r_raw);

        // Stuck and resolution bookkeeping, on raw reads.
        let ref_moved = r_raw != self.r_raw;
        if let Some(fwd) = self.rw.elapsed(self.r_raw, r_raw).filter(|_| ref_moved) {
            self.step_seen = self.step_seen.min(fwd);
        }
        self.r_raw = r_raw;
        let counter_moved = c1 != c_before;
        if ref_moved {
            self.ref_moved_at_c = c1;
        } else if self.reference_stuck(c1) {
            return Err(CalibrationError::ReferenceStuck);
        }
        if ref_moved || counter_moved {
            self.same_reads = 0;
        } else {
            self.same_reads = self.same_reads.saturating_add(1);
            if self.same_reads >= SAME_READS_LIMIT {
                return Err(CalibrationError::CounterStuck);
            }
        }

        // Unwrap the reference.
        let x = if self.warm {
            match self.unwrap_by_rate(r_raw, y, width)? {
                Unwrapped::At(x) => x,
                Unwrapped::Glitch => {
                    self.rejected = self.rejected.saturating_add(1);
                    self.inconsistent_run = self.inconsistent_run.saturating_add(1);
                    if self.inconsistent_run >= INCONSISTENT_LIMIT {
                        return Err(CalibrationError::Discontinuity);
                    }
                    return Ok(Step::Continue);
                }
                Unwrapped::ReferenceStill => {
                    // A coarse or stuck reference: the stuck check above decides.
                    self.rejected = self.rejected.saturating_add(1);
                    return Ok(Step::Continue);
                }
                Unwrapped::CounterStill(x) => {
                    self.rejected = self.rejected.saturating_add(1);
                    if x.saturating_sub(self.counter_moved_at_x) > self.stuck_x {
                        return Err(CalibrationError::CounterStuck);
                    }
                    return Ok(Step::Continue);
                }
            }
        } else {
            let Some(d) = self.rw.elapsed(self.anchor.raw, r_raw) else {
                return Err(CalibrationError::ReferenceBackwards {
                    by_ticks: self.rw.backwards_by(self.anchor.raw, r_raw),
                });
            };
            self.anchor.x.saturating_add(d)
        };
        self.inconsistent_run = 0;
        if x != self.anchor.x {
            self.moved = Anchor {
                raw: r_raw,
                x,
                y,
                width,
            };
        }
        self.anchor = Anchor {
            raw: r_raw,
            x,
            y,
            width,
        };
        self.min_width = self.min_width.min(width);

        if counter_moved {
            self.counter_moved_at_x = x;
        } else if x.saturating_sub(self.counter_moved_at_x) > self.stuck_x {
            return Err(CalibrationError::CounterStuck);
        }

        let narrow = width <= self.min_width.saturating_mul(2).saturating_add(2);
        let mut completed_bin = false;
        if !self.warm {
            self.warmup_samples = self.warmup_samples.saturating_add(1);
            if width.saturating_mul(4) < self.first.width {
                // The first sample had a stall in its bracket: measure the rate from here.
                self.first = self.anchor;
            }
            // The rate is good to a few % once the span covers 32 reference steps and is 16
            // times the two end brackets' widths (each midpoint is uncertain by its width in
            // y units).
            let steps = self.step_seen.saturating_mul(WARMUP_STEPS);
            let brackets = self.first.width.saturating_add(width).saturating_mul(16);
            if self.warmup_samples >= WARMUP_SAMPLES
                && narrow
                && x.saturating_sub(self.first.x) >= steps
                && y.saturating_sub(self.first.y) > brackets
            {
                self.warm = true;
                self.rate_end = self.anchor;
                self.origin = (x, y);
                completed_bin = self.accept(x, y, width)?;
            }
        } else if narrow {
            self.rate_end = self.anchor;
            completed_bin = self.accept(x, y, width)?;
        } else {
            self.rejected = self.rejected.saturating_add(1);
        }
        if self.met {
            return Ok(Step::Done);
        }
        if x >= self.max_x {
            return Ok(Step::Done);
        }
        if completed_bin {
            self.maybe_stop(x);
        }
        Ok(if self.met { Step::Done } else { Step::Continue })
    }

    /// Adds a sample (with its bracket's width) to the window; `Ok(true)` if it completed a
    /// bin. A full window ends the calibration (by setting `met` only if the target is met;
    /// see `finish`).
    fn accept(&mut self, x: u64, y: u64, width: u64) -> Result<bool, CalibrationError> {
        let (x0, y0) = self.origin;
        match self
            .window
            .push(x.saturating_sub(x0), y.saturating_sub(y0), width)
        {
            Ok(done) => Ok(done),
            Err(()) => {
                // Out of room (hours of samples): stop here and fit what we have.
                self.max_x = x;
                Ok(false)
            }
        }
    }

    /// Evaluates the fit when the window has grown by 1/16 since the last evaluation (so the
    /// cost stays a small fraction of sampling), and stops once the target is met.
    fn maybe_stop(&mut self, x: u64) {
        if self.cfg.target_ppb == 0 || self.window.samples() < self.cfg.min_samples.max(3) {
            return;
        }
        let span = x.saturating_sub(self.origin.0);
        if span < self.last_eval_span.saturating_add(self.last_eval_span / 16) {
            return;
        }
        self.last_eval_span = span;
        let rated = self
            .window
            .fit(self.floor())
            .and_then(|fit| self.rated(&fit));
        if let Some(Rated {
            measurement_ppb, ..
        }) = rated
        {
            // The quantity `finish` reports and `met_target` judges.
            if measurement_ppb <= self.cfg.target_ppb {
                self.met = true;
            }
        }
    }

    /// The counter's rate from `fit`, and the measurement's uncertainty: the fit's own plus
    /// the rounding to mHz. `None` if the rate does not fit in a `u64` of mHz.
    fn rated(&self, fit: &fit::Fit) -> Option<Rated> {
        let rate = fit::rate_millihz(fit, self.ref_millihz)?;
        let millihz = u64::try_from(rate).ok()?;
        // Rounding to the nearest mHz: at most 0.5 mHz, in ppb of the rate.
        let rounding = 500_000_000u64.div_ceil(millihz.max(1));
        Some(Rated {
            millihz,
            measurement_ppb: fit.uncertainty_ppb.saturating_add(rounding),
        })
    }

    /// Whether a reference that last moved at counter value `ref_moved_at_c` has stood still
    /// too long by `c1`: for [`Config::stuck_after`] judged by the counter's rate measured so
    /// far (with a factor 2 of margin, once the reference has made 4 steps), or, before that,
    /// by the rate hint's highest rate (with the same factor 2), and always at the highest
    /// plausible rate. Without the first two rules a slow counter would take `max_hz / hz`
    /// times `stuck_after` to notice: 4 s for a 24 MHz CNTVCT with the defaults, 28 hours
    /// for a 1 kHz timer.
    ///
    /// The hint is not used once the rate is measured: a wrong claim (which `verify` is there
    /// to catch) then cannot make a working reference look stuck.
    fn reference_stuck(&self, c1: u64) -> bool {
        let still_c = c1.saturating_sub(self.ref_moved_at_c);
        if still_c > self.stuck_c {
            return true;
        }
        let (f, a) = (self.first, self.moved);
        let big_r = a.x.saturating_sub(f.x);
        let big_m = a.y.saturating_sub(f.y);
        if self.step_seen == u64::MAX || big_r < self.step_seen.saturating_mul(4) || big_m == 0 {
            return self.hint_stuck_c.is_some_and(|limit| still_c > limit);
        }
        // Reference ticks the counter says have passed: still_c counter ticks are 2·still_c
        // y units, at R reference ticks per M y units.
        let expected = mul_div(
            u128::from(still_c).saturating_mul(2),
            u128::from(big_r),
            u128::from(big_m),
        )
        .unwrap_or(u128::MAX);
        let limit = self.stuck_x.max(self.step_seen.saturating_mul(4));
        expected > u128::from(limit).saturating_mul(2)
    }

    fn floor(&self) -> Floor {
        Floor {
            min_width: self.min_width,
            step: if self.step_seen == u64::MAX {
                1
            } else {
                self.step_seen
            },
        }
    }

    /// After warm-up: unwraps `r_raw` against the anchor, choosing the number of wraps that
    /// best matches the rate seen so far.
    fn unwrap_by_rate(
        &self,
        r_raw: u64,
        y: u64,
        width: u64,
    ) -> Result<Unwrapped, CalibrationError> {
        let a = self.anchor;
        let (f, e) = (self.first, self.rate_end);
        // Rate so far: R reference ticks per M y-units (2 × counter ticks), between narrow
        // samples.
        let big_r = u128::from(e.x.saturating_sub(f.x));
        let big_m = u128::from(e.y.saturating_sub(f.y)).max(1);
        let dy = u128::from(y.saturating_sub(a.y));
        let expected = mul_div(dy, big_r, big_m).unwrap_or(u128::MAX);
        let d = u128::from(self.rw.delta(a.raw, r_raw));
        let wrap = u128::from(self.rw.mask()).saturating_add(1);
        // Forward candidate with the best number of whole wraps added.
        let wraps = expected
            .saturating_sub(d)
            .saturating_add(wrap / 2)
            .checked_div(wrap)
            .unwrap_or(0);
        let forward = d.saturating_add(wraps.saturating_mul(wrap));
        let forward_miss = forward.abs_diff(expected);
        // Backward candidate: d - wrap (a step back by wrap - d).
        let back_by = wrap.saturating_sub(d);
        let back_miss = back_by.saturating_add(expected);
        if d != 0 && back_miss < forward_miss {
            return Err(CalibrationError::ReferenceBackwards {
                by_ticks: saturate_u64(back_by),
            });
        }
        // Tolerance: a quarter of the expected step (the rate is known to a few %), both
        // brackets and a tick of counter resolution each converted to reference ticks, two
        // steps of reference resolution, and rounding.
        let widths = u128::from(width.saturating_add(a.width).saturating_add(2)).saturating_mul(2);
        let tol = (expected / 4)
            .saturating_add(mul_div_ceil(widths, big_r, big_m).unwrap_or(u128::MAX))
            .saturating_add(u128::from(self.floor().step).saturating_mul(2))
            .saturating_add(2);
        let x = saturate_u64(u128::from(a.x).saturating_add(forward));
        if dy == 0 && d != 0 {
            // The reference moved and the counter did not: never chain such a sample, or a
            // stopped counter would creep along with the reference one tolerance at a time.
            Ok(Unwrapped::CounterStill(x))
        } else if forward_miss <= tol {
            Ok(Unwrapped::At(x))
        } else if d == 0 {
            Ok(Unwrapped::ReferenceStill)
        } else {
            Ok(Unwrapped::Glitch)
        }
    }

    fn finish(
        &self,
        ref_freq: Frequency,
        name: &'static str,
    ) -> Result<Calibration, CalibrationError> {
        let too_few = CalibrationError::TooFewSamples {
            used: self.window.samples(),
            rejected: self.rejected,
        };
        if self.window.samples() < self.cfg.min_samples.max(3) {
            return Err(too_few);
        }
        let fit = self.window.fit(self.floor()).ok_or(too_few)?;
        let ref_millihz = ref_freq.as_millihz();
        let Some(Rated {
            millihz,
            measurement_ppb,
        }) = self.rated(&fit)
        else {
            return Err(CalibrationError::ImplausibleRate {
                counter_millihz: u64::MAX,
            });
        };
        let implausible = CalibrationError::ImplausibleRate {
            counter_millihz: millihz,
        };
        let lo = self.cfg.min_counter_hz.saturating_mul(1000);
        let hi = self.cfg.max_counter_hz.saturating_mul(1000);
        if millihz < lo || millihz > hi {
            return Err(implausible);
        }
        let uncertainty_ppb = measurement_ppb.saturating_add(ref_freq.accuracy().bound_ppb());
        let frequency = Frequency::from_millihz(
            millihz,
            Source::Calibrated,
            Accuracy::Measured { uncertainty_ppb },
        )
        .ok_or(implausible)?;
        let duration_ns = mul_div(
            u128::from(self.anchor.x),
            1_000_000_000_000,
            u128::from(ref_millihz.max(1)),
        )
        .map_or(u64::MAX, saturate_u64);
        Ok(Calibration {
            frequency,
            measurement_ppb,
            samples_used: fit.used,
            samples_rejected: self.rejected.saturating_add(fit.dropped),
            duration: Duration::from_nanos(duration_ns),
            met_target: self.cfg.target_ppb > 0 && measurement_ppb <= self.cfg.target_ppb,
            reference: name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FnCounter;

    struct Fake {
        bits: u32,
        hz: u64,
    }
    impl Reference for Fake {
        fn read(&mut self) -> u64 {
            0
        }
        fn bits(&self) -> u32 {
            self.bits
        }
        fn frequency(&self) -> Frequency {
            Frequency::from_hz(self.hz, Source::Reference, Accuracy::Exact).unwrap()
        }
        fn name(&self) -> &'static str {
            "fake"
        }
    }

    fn engine(bits: u32, cfg: Config) -> Engine {
        Engine::new(
            &FnCounter::new(|| 0, 64),
            &Fake {
                bits,
                hz: 1_000_000,
            },
            cfg,
        )
    }

    /// The engine's result against the 1 MHz fake reference.
    fn finish(e: &Engine) -> Calibration {
        let reference = Fake {
            bits: 64,
            hz: 1_000_000,
        };
        e.finish(reference.frequency(), reference.name()).unwrap()
    }

    /// Feeds samples of an ideal 3-ticks-per-reference-tick world; `mangle` may alter the
    /// reference read of sample `i`.
    fn run(
        e: &mut Engine,
        n: u64,
        mangle: impl Fn(u64, u64) -> u64,
    ) -> Result<Step, CalibrationError> {
        let mut last = Step::Continue;
        for i in 0..n {
            let t = 1_000 + i * 30;
            let r = mangle(i, (t + 1) / 3);
            last = e.step(t, r, t + 2)?;
            if last == Step::Done {
                break;
            }
        }
        Ok(last)
    }

    #[test]
    fn ideal_samples_fit_exactly() {
        let mut e = engine(
            64,
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(1)),
        );
        assert_eq!(run(&mut e, 1_000_000, |_, r| r), Ok(Step::Done));
        let cal = finish(&e);
        assert_eq!(cal.frequency.as_hz(), 3_000_000);
        assert_eq!(cal.samples_rejected, 0);
        assert_eq!(cal.duration, Duration::from_millis(1));
        assert!(!cal.met_target);
    }

    #[test]
    fn narrow_reference_wraps_are_unwrapped_even_across_gaps() {
        let mut e = engine(
            8,
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(20)),
        );
        // 8 bits at 1 MHz wrap every 256 µs; samples are 10 µs apart, and after sample 100
        // comes a 10 ms stall: ~39 wraps that no read saw.
        let mut last = Step::Continue;
        for i in 0..2000u64 {
            let gap = if i >= 100 { 10_000 } else { 0 };
            let t = 1_000 + i * 30 + gap * 3;
            last = e.step(t, ((t + 1) / 3) & 0xff, t + 2).unwrap();
            if last == Step::Done {
                break;
            }
        }
        assert_eq!(last, Step::Done);
        let cal = finish(&e);
        assert_eq!(cal.frequency.as_hz(), 3_000_000);
    }

    #[test]
    fn faults_are_typed() {
        // Samples are 10 reference ticks apart: a persistent step back of 15 is 5 behind.
        let cfg = Config::new()
            .with_target_ppb(0)
            .with_plausible_counter_hz(1_000, 10_000_000);
        let mut e = engine(16, cfg);
        assert_eq!(
            run(&mut e, 100, |i, r| if i >= 50 {
                r.wrapping_sub(15) & 0xffff
            } else {
                r & 0xffff
            }),
            Err(CalibrationError::ReferenceBackwards { by_ticks: 5 })
        );
        let mut e = engine(64, cfg);
        assert_eq!(
            run(&mut e, 10, |i, r| if i >= 3 { r - 12 } else { r }),
            Err(CalibrationError::ReferenceBackwards { by_ticks: 2 })
        );
        let mut e = engine(64, cfg);
        assert_eq!(
            run(&mut e, 100, |i, r| if i >= 50 {
                r + 1000 * (i - 49)
            } else {
                r
            }),
            Err(CalibrationError::Discontinuity)
        );
        let mut e = engine(64, cfg);
        assert_eq!(
            run(&mut e, 1_000_000, |i, r| if i >= 50 { 833 } else { r }),
            Err(CalibrationError::ReferenceStuck)
        );
        let mut e = engine(64, cfg);
        assert_eq!(
            run(&mut e, 1_000_000, |i, r| if i >= 10 { 433 } else { r }),
            Err(CalibrationError::ReferenceStuck)
        );
        let mut e = engine(64, cfg);
        assert_eq!(e.step(100, 0, 101), Ok(Step::Continue));
        assert_eq!(
            e.step(99, 0, 100),
            Err(CalibrationError::CounterBackwards { by_ticks: 2 })
        );
    }

    #[test]
    fn a_single_glitch_is_rejected_not_fatal() {
        let mut e = engine(
            64,
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(1)),
        );
        assert_eq!(
            run(&mut e, 1_000_000, |i, r| if i == 50 { r + 777 } else { r }),
            Ok(Step::Done)
        );
        let cal = finish(&e);
        assert_eq!(
            (cal.frequency.as_hz(), cal.samples_rejected),
            (3_000_000, 1),
            "{cal:?}"
        );
    }
}
