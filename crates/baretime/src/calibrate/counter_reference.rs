//! [`CounterReference`]: a [`Counter`] of known frequency used as a reference.

use super::Reference;
use crate::frequency::Frequency;
use crate::Counter;

/// Adapts any [`Counter`] whose [`Frequency`] is known into a [`Reference`].
///
/// Use it to calibrate one counter against another: the aarch64 generic timer against an
/// external timer of known rate, or the other way round, the CPU counter as the reference to
/// check a firmware's CNTFRQ. The reference's width is the counter's [`Counter::bits`] and
/// its accuracy is whatever `frequency` says (an [`crate::Accuracy::Exact`] figure adds
/// nothing to the calibration's uncertainty; a nominal one adds its tolerance).
///
/// ```
/// use baretime::{CounterReference, Reference};
/// use baretime::{Accuracy, FnCounter, Frequency, Source};
///
/// # fn rtc_read() -> u32 { 12_345 }
/// // A 32.768 kHz RTC counter, 32 bits, whose crystal is good to ±20 ppm.
/// let rtc = FnCounter::new(|| u64::from(rtc_read()), 32);
/// let rate = Frequency::from_hz(32_768, Source::Reference, Accuracy::Nominal { tolerance_ppb: 20_000 });
/// let mut reference = CounterReference::new(rtc, rate.unwrap()).with_name("rtc");
/// assert_eq!(reference.bits(), 32); // the counter's width: the calibrator unwraps it
/// assert_eq!(reference.name(), "rtc");
/// assert_eq!(reference.frequency().accuracy().bound_ppb(), 20_000); // added to the bound
/// assert_eq!(reference.read(), 12_345);
/// ```
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CounterReference<C: Counter> {
    counter: C,
    frequency: Frequency,
    name: &'static str,
}

impl<C: Counter> CounterReference<C> {
    /// `counter`, ticking at `frequency`, named `counter` in reports.
    pub const fn new(counter: C, frequency: Frequency) -> Self {
        CounterReference {
            counter,
            frequency,
            name: "counter",
        }
    }

    /// The same with another name for reports (`cntvct`, `tsc`, `dwt`, …).
    pub fn with_name(self, name: &'static str) -> Self {
        CounterReference { name, ..self }
    }
}

impl<C: Counter> Reference for CounterReference<C> {
    #[inline]
    fn read(&mut self) -> u64 {
        self.counter.ticks()
    }
    fn bits(&self) -> u32 {
        self.counter.bits()
    }
    fn frequency(&self) -> Frequency {
        self.frequency
    }
    fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::{Accuracy, Source};
    use crate::FnCounter;

    #[test]
    fn forwards_the_counter() {
        let f = Frequency::from_hz(
            24_000_000,
            Source::Cntfrq,
            Accuracy::Nominal {
                tolerance_ppb: 20_000,
            },
        )
        .unwrap();
        let mut r = CounterReference::new(FnCounter::new(|| 77, 56), f).with_name("cntvct");
        assert_eq!(r.read(), 77);
        assert_eq!(r.bits(), 56);
        assert_eq!(r.frequency(), f);
        assert_eq!(r.name(), "cntvct");
    }
}
