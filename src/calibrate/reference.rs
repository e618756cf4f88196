//! [`Reference`]: a timer of known frequency that the caller injects instead of libc.

use crate::frequency::Frequency;

/// A reference timer: a counter whose rate is *known*, used to measure a [`crate::Counter`].
///
/// # Contract
///
/// - [`Reference::read`] returns the current reference tick count. It counts **up** at
///   [`Reference::frequency`] and wraps from `2^bits - 1` to 0 ([`Reference::bits`]); a
///   down-counting timer (the PIT) is inverted by its implementation. The calibrator unwraps
///   the count, so it must be read at least once per wrap period (the PIT's 16 bits wrap every
///   55 ms; calibration reads far more often than that).
/// - A read may be slow (port I/O takes about a microsecond): the calibrator brackets every
///   reference read between two counter reads and uses the bracket as that sample's
///   uncertainty, so a slow read costs precision, never correctness.
/// - Reads take `&mut self`: hardware references keep state (latches, gates, last value).
/// - Nothing is trusted blindly: a reference that stands still, runs backwards (beyond its
///   wrap) or at an implausible rate yields a typed calibration error.
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
