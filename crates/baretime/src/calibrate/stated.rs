//! [`WithAccuracy`]: a reference whose rate is stated with the tolerance the caller knows.

use super::Reference;
use crate::frequency::{Accuracy, Frequency};

/// Wraps a [`Reference`] and replaces the [`Accuracy`] of its rate.
///
/// A calibration only knows what its reference tells it. The x86 hardware references of
/// baretime-x86 state a nominal tolerance by default (±100 ppm for the PIT and the ACPI PM
/// timer, ±500 ppm for the HPET): the PIT *is* 14.31818 MHz / 12 by definition, but the
/// crystal behind it is a board's. A kernel that
/// knows its board's tolerance better (a 20 ppm crystal, or an emulator's exact rate:
/// [`Accuracy::Exact`]) says so here, and the calibration adds that to its bound instead:
///
/// ```
/// use baretime::Reference;
/// use baretime::{CounterReference, WithAccuracy};
/// use baretime::{Accuracy, FnCounter, Frequency};
///
/// let timer = CounterReference::new(FnCounter::new(|| 0, 64), Frequency::exact_hz(1_193_182).unwrap());
/// let pit_like = WithAccuracy::new(timer, Accuracy::Nominal { tolerance_ppb: 100_000 });
/// assert_eq!(pit_like.frequency().accuracy().bound_ppb(), 100_000);
/// assert_eq!(pit_like.frequency().as_hz(), 1_193_182);
/// ```
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WithAccuracy<R: Reference> {
    inner: R,
    frequency: Frequency,
}

impl<R: Reference> WithAccuracy<R> {
    /// `inner`, its rate now stated with `accuracy` (same value and source).
    pub fn new(inner: R, accuracy: Accuracy) -> Self {
        let f = inner.frequency();
        WithAccuracy {
            frequency: f.with_provenance(f.source(), accuracy),
            inner,
        }
    }
}

impl<R: Reference> Reference for WithAccuracy<R> {
    fn read(&mut self) -> u64 {
        self.inner.read()
    }
    fn bits(&self) -> u32 {
        self.inner.bits()
    }
    fn frequency(&self) -> Frequency {
        self.frequency
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::{calibrate, Config};
    use crate::CounterReference;
    use crate::FnCounter;
    use core::cell::Cell;

    #[test]
    fn stated_tolerance_widens_the_bound() {
        // Counter at 1 GHz, reference at 1 MHz, both advancing with simulated time.
        let now = Cell::new(0u64);
        let counter = FnCounter::new(
            || {
                now.set(now.get() + 50);
                now.get()
            },
            64,
        );
        let reference = || {
            CounterReference::new(
                FnCounter::new(|| now.get() / 1000, 64),
                Frequency::exact_hz(1_000_000).unwrap(),
            )
        };
        let config = Config::new()
            .with_target_ppb(0)
            .with_max_duration(core::time::Duration::from_millis(5));
        let exact = calibrate(counter, reference(), config).unwrap();
        let loose = calibrate(
            counter,
            WithAccuracy::new(
                reference(),
                Accuracy::Nominal {
                    tolerance_ppb: 100_000,
                },
            ),
            config,
        )
        .unwrap();
        assert!(
            exact.frequency.accuracy().bound_ppb() < 100_000,
            "{exact:?}"
        );
        assert!(
            loose.frequency.accuracy().bound_ppb() >= 100_000,
            "{loose:?}"
        );
        assert_eq!(loose.reference, "counter");
    }
}
