//! Calibration: measure how fast a [`Counter`] runs against a [`Reference`] timer, say how
//! sure the measurement is, and check what the hardware claims against it.
//!
//! ```text
//!  counter ─┐   ┌─ read counter ─┬─ read reference ─┬─ read counter ─┐  one sample: the
//!           └──►│      c0        │        r         │       c1       │  reference read lies
//!               └────────────────┴──────────────────┴────────────────┘  inside [c0, c1]
//! ```
//!
//! The method, the meaning of the bound and an example are on [`calibrate`]'s docs (this
//! module is private; they render there).
//!
//! [`Counter`]: crate::Counter

mod bounded;
mod counter_reference;
mod fit;
mod reference;
mod sampler;
mod stated;
#[cfg(feature = "std")]
mod std_reference;
mod verify;
pub(crate) mod wide;

use core::fmt;
use core::time::Duration;

use crate::frequency::{Frequency, Mhz, Milli};
use crate::instant::duration_ns;
use crate::scale::saturate_u64;

pub use counter_reference::CounterReference;
pub use reference::Reference;
pub use sampler::calibrate;
pub use stated::WithAccuracy;
#[cfg(feature = "std")]
pub use std_reference::StdReference;
pub use verify::{calibrate_and_verify, verify, Verdict, Verified};

/// How long and how hard to calibrate. Build with [`Config::new`] and the `const` setters.
///
/// Defaults: target 1 ppm, at most 100 ms of reference time, at least 64 samples, a plausible
/// counter between 1 kHz and 10 GHz, a count that has not moved for 10 ms is stuck, and no
/// rate hint.
///
/// ```
/// use baretime::Config;
/// use core::time::Duration;
///
/// // Early boot: 10 ppm is plenty, and boot must not wait more than 20 ms.
/// const BOOT: Config = Config::new()
///     .with_target_ppb(10_000)
///     .with_max_duration(Duration::from_millis(20))
///     .with_min_samples(32);
/// assert_eq!(BOOT.target_ppb(), 10_000);
/// assert_eq!(BOOT.max_duration(), Duration::from_millis(20));
/// assert_eq!(BOOT.min_samples(), 32);
/// assert_eq!(BOOT.stuck_after(), Config::new().stuck_after()); // untouched: the default
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    target_ppb: u64,
    max_duration_ns: u64,
    min_samples: u64,
    min_counter_hz: u64,
    max_counter_hz: u64,
    stuck_after_ns: u64,
    rate_hint: Option<Frequency>,
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// The defaults (see [`Config`]).
    pub const fn new() -> Self {
        Config {
            target_ppb: 1_000,
            max_duration_ns: 100_000_000,
            min_samples: 64,
            min_counter_hz: 1_000,
            max_counter_hz: 10_000_000_000,
            stuck_after_ns: 10_000_000,
            rate_hint: None,
        }
    }

    /// Stop as soon as the measurement uncertainty is at most `ppb` parts per billion.
    /// 0 means "never stop early": calibrate for the whole [`Config::max_duration`].
    pub const fn with_target_ppb(mut self, ppb: u64) -> Self {
        self.target_ppb = ppb;
        self
    }

    /// Calibrate for at most this long, as measured by the reference.
    ///
    /// A reference that runs slower than it declares by a factor `F` stretches this by `F`
    /// in true time, unless the counter then seems implausibly fast: the calibration ends
    /// with [`CalibrationError::ImplausibleRate`] as soon as the counter has *provably* run
    /// faster than 9/8 of the highest plausible rate ([`Config::with_plausible_counter_hz`],
    /// plus the reference's stated tolerance), judged at each step of the reference. A
    /// counter at `f` that would seem to run at `F·f` > 2¼ × the highest plausible rate is
    /// told at the reference's second step after the first sample, two of its (slow) steps
    /// of true time (a 1 kHz reference declared as 100 GHz: 2 ms; an HPET 1 000 times
    /// slower than declared: 140 µs); closer to the range, at step `k + 1` where
    /// `k/(k + 1)·F·f` passes 9/8 of it. A slowness that leaves the counter's rate
    /// plausible cannot be told from a right reference: [`crate::verify`] checks the result
    /// against a claim.
    pub const fn with_max_duration(mut self, d: Duration) -> Self {
        self.max_duration_ns = duration_ns(d);
        self
    }

    /// Never stop early on fewer accepted samples than this (at least 3 are always needed).
    /// At [`Config::max_duration`] the calibration ends whatever the count: fewer samples
    /// give a wider bound, not an error.
    pub const fn with_min_samples(mut self, n: u64) -> Self {
        self.min_samples = n;
        self
    }

    /// The counter rates to accept, in Hz: a measurement outside, by more than its own bound,
    /// is [`CalibrationError::ImplausibleRate`] (a reference running at the wrong speed, or a
    /// wrong reference frequency). A counter at the range's edge measured just outside it,
    /// within its bound, is accepted; one below [`Frequency::MIN_HZ`] (or above
    /// [`Frequency::MAX_HZ`]) is reported at that edge, its bound widened by the distance. Also sets how long a reference may stand still (see
    /// [`Config::stuck_after`]). Clamped to [`Frequency::MIN_HZ`]..=[`Frequency::MAX_HZ`].
    pub const fn with_plausible_counter_hz(mut self, min_hz: u64, max_hz: u64) -> Self {
        self.min_counter_hz = clamp_hz(min_hz);
        self.max_counter_hz = clamp_hz(max_hz);
        if self.max_counter_hz < self.min_counter_hz {
            self.max_counter_hz = self.min_counter_hz;
        }
        self
    }

    /// A count that does not move for this long is stuck. Must exceed the reference's
    /// resolution.
    ///
    /// - The counter is judged by the reference's time.
    /// - The reference can only be judged by the counter, whose rate is what is being
    ///   measured. Once the reference has made four steps, by the rate measured so far: stuck
    ///   after twice this time (or eight reference steps if longer). Before that, by the rate
    ///   hint ([`Config::with_rate_hint`], or the claim [`calibrate_and_verify`] checks) at its
    ///   highest (value plus stated bound): stuck after twice this time. And always at the
    ///   highest plausible rate ([`Config::with_plausible_counter_hz`]): stuck after
    ///   `stuck_after × max_hz` counter ticks, with the defaults 10 ms × 10 GHz = 10^8.
    ///
    /// So a reference that dies, from the start or part-way, ends the calibration with
    /// [`CalibrationError::ReferenceStuck`]:
    ///
    /// - **with a rate hint** that is right within its stated bound (up to 20 %), within
    ///   `max_duration + 3 × stuck_after` of true time at any counter rate, 1 kHz to 10 GHz
    ///   (typically `+ 2 × stuck_after`; the third covers a rate measured from only four
    ///   reference steps, and the hint's tolerance);
    /// - **without one**, the same once the reference has made four steps; if it dies before,
    ///   only after `stuck_after × max_hz` counter ticks, which is `stuck_after × max_hz / f`
    ///   of true time for a counter at `f`. With the defaults: 10 ms at 10 GHz, 0.4 s at
    ///   2.4 GHz, 4.2 s at 24 MHz, 100 s at 1 MHz, 28 hours at 1 kHz. A firmware that knows
    ///   its counter's rate roughly passes a hint, or narrows the plausible range (a range
    ///   ending at `100 × f` ends it within a second).
    ///
    /// ```
    /// use baretime::Config;
    /// use baretime::{Accuracy, Frequency, Source};
    ///
    /// // Firmware calibrating its 1 MHz timer against an RTC that may be dead. Either say
    /// // what the timer should run at (±2 %): a dead RTC costs at most 2 × 10 ms, or 3 ×
    /// // once it had moved …
    /// let nominal = Accuracy::Nominal { tolerance_ppb: 20_000_000 };
    /// let timer = Frequency::from_hz(1_000_000, Source::Reference, nominal).unwrap();
    /// let hinted = Config::new().with_rate_hint(timer);
    /// // … or bound the rates to believe: 10 ms × 100 MHz = 10^6 timer ticks, one second.
    /// let bounded = Config::new().with_plausible_counter_hz(100_000, 100_000_000);
    /// # let _ = (hinted, bounded);
    /// ```
    pub const fn with_stuck_after(mut self, d: Duration) -> Self {
        self.stuck_after_ns = duration_ns(d);
        self
    }

    /// What the counter's rate is believed to be (a CPUID or CNTFRQ claim, a board's known
    /// crystal), with its [`crate::Accuracy`]: used only to tell a dead reference in known
    /// time (see [`Config::with_stuck_after`]) before the reference has moved enough for the
    /// rate to be measured. Never used for the measurement itself, nor after it has begun.
    ///
    /// A hint that is too *low* by a factor `F` can make a reference coarser than
    /// `2 × stuck_after / F` look stuck in those first steps: an error, never a wrong rate.
    /// [`calibrate_and_verify`] passes its claim as the hint unless the config has one.
    ///
    /// ```
    /// use baretime::Config;
    /// use baretime::{Accuracy, Frequency, Source};
    ///
    /// let cntfrq = Frequency::from_hz(24_000_000, Source::Cntfrq, Accuracy::Exact).unwrap();
    /// let config = Config::new().with_rate_hint(cntfrq);
    /// assert_eq!(config.rate_hint(), Some(cntfrq));
    /// assert_eq!(Config::new().rate_hint(), None);
    /// ```
    pub const fn with_rate_hint(mut self, hint: Frequency) -> Self {
        self.rate_hint = Some(hint);
        self
    }

    /// The target measurement uncertainty, in ppb (0: none).
    pub const fn target_ppb(&self) -> u64 {
        self.target_ppb
    }

    /// The maximum duration.
    pub const fn max_duration(&self) -> Duration {
        Duration::from_nanos(self.max_duration_ns)
    }

    /// The minimum number of accepted samples.
    pub const fn min_samples(&self) -> u64 {
        self.min_samples
    }

    /// The plausible counter rates, in Hz: `(min, max)`.
    pub const fn plausible_counter_hz(&self) -> (u64, u64) {
        (self.min_counter_hz, self.max_counter_hz)
    }

    /// How long a count may stand still.
    pub const fn stuck_after(&self) -> Duration {
        Duration::from_nanos(self.stuck_after_ns)
    }

    /// The rate hint, if any (see [`Config::with_rate_hint`]).
    pub const fn rate_hint(&self) -> Option<Frequency> {
        self.rate_hint
    }
}

const fn clamp_hz(v: u64) -> u64 {
    if v < Frequency::MIN_HZ {
        Frequency::MIN_HZ
    } else if v > Frequency::MAX_HZ {
        Frequency::MAX_HZ
    } else {
        v
    }
}

/// The result of a calibration: the counter's measured rate and how far to trust it.
///
/// The bound is the rate's own accuracy, `cal.frequency.accuracy().bound_ppb()`: the
/// expanded uncertainty (≥ 99 % coverage, see [`calibrate`]) in ppb, the measurement's part
/// ([`Calibration::measurement_ppb`]) plus the reference's stated tolerance. A `Frequency`
/// carries it wherever it goes: to [`verify`](crate::verify), to a `Clock`, to a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Calibration {
    /// The measured rate: source [`crate::Source::Calibrated`], accuracy
    /// [`crate::Accuracy::Measured`] with the expanded uncertainty (≥ 99 % coverage) in ppb:
    /// the measurement's part (mHz rounding included) plus the reference's stated tolerance.
    /// Read it with [`crate::Accuracy::bound_ppb`].
    pub frequency: Frequency,
    /// The measurement's own part of the uncertainty, in ppb (what the target is compared to).
    pub measurement_ppb: u64,
    /// Samples the fit used.
    pub samples_used: u64,
    /// Samples rejected: wide brackets, reference glitches, outlier bins. (The few warm-up
    /// samples that establish the narrowest bracket and a first rate count in neither.)
    pub samples_rejected: u64,
    /// How long the calibration took, in reference time (warm-up included).
    pub duration: Duration,
    /// Whether [`Calibration::measurement_ppb`] reached the configured target.
    pub met_target: bool,
    /// The reference's name ([`Reference::name`]).
    pub reference: &'static str,
}

impl fmt::Display for Calibration {
    /// `2596.118004 MHz ±0.012 ppm (183422 samples, 1042 rejected, 2.013 ms against std)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Whole µs: u64 holds 584 000 years of them.
        let us = saturate_u64(self.duration.as_micros());
        write!(
            f,
            "{} MHz ±{} ppm ({} samples, {} rejected, {} ms against {}{})",
            Mhz(self.frequency.as_millihz()),
            Milli(self.frequency.accuracy().bound_ppb()),
            self.samples_used,
            self.samples_rejected,
            Milli(us),
            self.reference,
            if self.met_target {
                ""
            } else {
                ", target not met"
            }
        )
    }
}

/// Why a calibration failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CalibrationError {
    /// The reference did not move while the counter ran for [`Config::stuck_after`] (see
    /// there for how the counter's time is judged, and how soon this comes).
    ReferenceStuck,
    /// The reference went backwards (beyond any wrap) by this many ticks.
    ReferenceBackwards {
        /// Size of the step back, in reference ticks.
        by_ticks: u64,
    },
    /// The counter and the reference disagreed about elapsed time for eight samples in a
    /// row, by more than the brackets and the resolution allow: one of them jumped, skipped,
    /// or changed its rate. (Which one cannot be told: each is measured by the other.)
    Discontinuity,
    /// The counter did not move for [`Config::stuck_after`] of reference time (or neither
    /// count moved for 2^20 samples).
    CounterStuck,
    /// The counter went backwards by this many ticks (between or within samples).
    CounterBackwards {
        /// Size of the step back, in counter ticks.
        by_ticks: u64,
    },
    /// The measured counter rate is outside [`Config::plausible_counter_hz`] by more than
    /// its bound, or the counter provably ran faster than 9/8 of the range's top part-way
    /// (see [`Config::with_max_duration`]): either the counter or the reference (or its
    /// stated frequency) is not what it should be.
    ImplausibleRate {
        /// The rate measured (part-way: the rate so far), in mHz (saturated).
        counter_millihz: u64,
    },
    /// Too few samples survived for a fit at all (fewer than three bins): noise rejected
    /// nearly every bracket, or the duration was too short for more than a couple.
    TooFewSamples {
        /// Samples accepted.
        used: u64,
        /// Samples rejected.
        rejected: u64,
    },
}

impl CalibrationError {
    /// A stable snake_case name of the variant, for `key=value` output and logs
    /// (`reference_stuck`, `counter_backwards`, …): the same style as [`Source::token`].
    ///
    /// ```
    /// use baretime::CalibrationError;
    /// assert_eq!(CalibrationError::ReferenceBackwards { by_ticks: 3 }.token(), "reference_backwards");
    /// ```
    ///
    /// [`Source::token`]: crate::Source::token
    pub const fn token(&self) -> &'static str {
        match self {
            CalibrationError::ReferenceStuck => "reference_stuck",
            CalibrationError::ReferenceBackwards { .. } => "reference_backwards",
            CalibrationError::Discontinuity => "discontinuity",
            CalibrationError::CounterStuck => "counter_stuck",
            CalibrationError::CounterBackwards { .. } => "counter_backwards",
            CalibrationError::ImplausibleRate { .. } => "implausible_rate",
            CalibrationError::TooFewSamples { .. } => "too_few_samples",
        }
    }
}

impl fmt::Display for CalibrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CalibrationError::ReferenceStuck => f.write_str("reference timer does not advance"),
            CalibrationError::ReferenceBackwards { by_ticks } => {
                write!(f, "reference timer went backwards by {by_ticks} ticks")
            }
            CalibrationError::Discontinuity => f.write_str(
                "counter and reference disagree about elapsed time: one of them jumped or changed rate",
            ),
            CalibrationError::CounterStuck => f.write_str("counter does not advance"),
            CalibrationError::CounterBackwards { by_ticks } => {
                write!(f, "counter went backwards by {by_ticks} ticks")
            }
            CalibrationError::ImplausibleRate { counter_millihz } => write!(
                f,
                "implausible rate: the counter would run at {} Hz against this reference",
                Milli(*counter_millihz)
            ),
            CalibrationError::TooFewSamples { used, rejected } => {
                write!(
                    f,
                    "too few usable samples for a fit ({used} used, {rejected} rejected)"
                )
            }
        }
    }
}

impl core::error::Error for CalibrationError {}
