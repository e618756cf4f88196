//! Reference timers: the [`Reference`] trait (a timer of known rate that the caller injects
//! instead of libc) and its implementations. [`crate::calibrate`] re-exports the trait, since
//! its functions take one.
//!
//! - `StdReference` (feature `std`): std's monotonic clock, as a 1 GHz 64-bit count.
//! - [`CounterReference`]: any [`crate::Counter`] whose frequency is known.
//! - [`WithAccuracy`]: any of them, with the rate's tolerance the caller knows (a board's
//!   crystal), which calibration then adds to its bound.
//!
//! The x86 hardware references state their rate with a nominal tolerance
//! ([`crate::Accuracy::Nominal`]): [`PIT_TOLERANCE_PPB`], [`ACPI_PM_TOLERANCE_PPB`],
//! [`HPET_TOLERANCE_PPB`]. Their rates are defined exactly, but the oscillators behind them
//! are not: calibration adds the tolerance to its bound, so a measurement against a crystal
//! that is a few dozen ppm off neither claims ppb-level accuracy nor overrules an exact
//! CPUID claim. A kernel that knows its board's crystal states it with [`WithAccuracy`].

use crate::frequency::Frequency;

/// A reference timer: a counter whose rate is *known*, used to measure a [`crate::Counter`].
///
/// # Contract
///
/// - [`Reference::read`] returns the current reference tick count. It counts **up** at
///   [`Reference::frequency`] and wraps from `2^bits - 1` to 0 ([`Reference::bits`]); a
///   down-counting timer (the PIT) is inverted by its implementation. The calibrator unwraps
///   the count: during its short warm-up (32 reference steps) by the half-wrap rule, so reads
///   must then come at least every half wrap period (the PIT's 16 bits wrap every 55 ms;
///   calibration reads every few µs); after it, against the rate measured so far, so even a
///   stall longer than a whole wrap is counted right.
/// - The count must be *latched*: one read, one instant. A value torn between two instants
///   (an unlatched multi-byte read) is at best a rejected glitch, at worst a step back, which
///   is an error. The stated [`Reference::frequency`]'s [`crate::Accuracy`] is added to every
///   calibration's uncertainty: state a crystal's tolerance honestly.
/// - A read may be slow (port I/O takes about a microsecond): the calibrator brackets every
///   reference read between two counter reads and uses the bracket as that sample's
///   uncertainty, so a slow read costs precision, not correctness, **as long as where in
///   the read the count is latched does not drift during the calibration**. That is the
///   assumption the bound rests on. Latch points that scatter from read to read are noise
///   the fit measures; latch points that move with the read's duration (a read whose slow
///   part comes before or after the latch, for milliseconds at a time) are measured too,
///   through the bracket widths (the `calibrate` fit's width term). But a latch point that
///   drifts by `δ` inside brackets of unchanged width over a calibration of length `T`
///   biases the rate by `δ/T` without a trace in the data (they are what a counter at the
///   biased rate would give): 1 µs over 100 ms is 10 ppm, against a bound of about 0.13 ppm
///   for a 1 µs read. A reference whose read path changes during the calibration (a bus
///   that retimes, a hypervisor that starts emulating the timer differently) can do that;
///   `tests/hostile_references.rs` shows where the bound and [`crate::verify`]
///   stop holding.
/// - Reads take `&mut self`: hardware references keep state (latches, gates, last value).
/// - Nothing is trusted blindly: a reference that stands still, runs backwards (beyond its
///   wrap), jumps, or runs at an implausible rate yields a typed calibration error
///   ([`crate::CalibrationError`]).
pub trait Reference {
    /// The current count, in reference ticks, wrapping at `2^bits`.
    fn read(&mut self) -> u64;

    /// Width of the count in bits (1..=64).
    fn bits(&self) -> u32;

    /// The reference's known rate (with its provenance: a PIT's crystal, an HPET's period).
    fn frequency(&self) -> Frequency;

    /// A short stable name for reports (`std`, `pit`, `hpet`, `acpi_pm`, `semihosting`, …).
    fn name(&self) -> &'static str;
}

impl<R: Reference + ?Sized> Reference for &mut R {
    fn read(&mut self) -> u64 {
        (**self).read()
    }
    fn bits(&self) -> u32 {
        (**self).bits()
    }
    fn frequency(&self) -> Frequency {
        (**self).frequency()
    }
    fn name(&self) -> &'static str {
        (**self).name()
    }
}
