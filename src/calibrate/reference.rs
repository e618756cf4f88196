//! [`Reference`]: a timer of known frequency that the caller injects instead of libc.

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
///   uncertainty, so a slow read costs precision, never correctness.
/// - Reads take `&mut self`: hardware references keep state (latches, gates, last value).
/// - Nothing is trusted blindly: a reference that stands still, runs backwards (beyond its
///   wrap), jumps, or runs at an implausible rate yields a typed calibration error
///   ([`crate::calibrate::Error`]).
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
