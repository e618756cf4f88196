//! [`StdReference`]: std's monotonic clock as a reference (feature `std`).

use std::time::Instant;

use super::Reference;
use crate::frequency::{Accuracy, Frequency, Source};

/// 1 GHz, checked at compile time.
const ONE_GHZ: Frequency = const_frequency!(
    millihz: 1_000_000_000_000,
    Source::Reference,
    Accuracy::Exact
);

/// [`std::time::Instant`] as a 1 GHz, 64-bit reference: nanoseconds since construction.
///
/// Its accuracy is declared [`Accuracy::Exact`]: a nanosecond is what it counts. Two caveats,
/// which a calibration against it inherits:
/// - On Linux `Instant` is `CLOCK_MONOTONIC`, which NTP may slew by up to 500 ppm while it
///   steers (toward true time, so a counter calibrated against a slewed clock is right in SI
///   seconds but may differ from the kernel's own raw figure by the slew).
/// - On a machine whose clock source *is* the counter being calibrated (Linux with
///   `clocksource=tsc`), the calibration recovers the kernel's own figure for it, nothing
///   more independent.
///
/// A read costs one `Instant::now()` (tens of ns through the vDSO); the calibrator brackets
/// it, so its cost only widens the brackets.
///
/// ```
/// use baretime::{calibrate, Config, FnCounter, StdReference};
/// use core::time::Duration;
/// use std::time::Instant;
///
/// // A counter to measure (on a host: baretime-x86's `Tsc`, say). Here a stand-in whose
/// // rate is known, std's own clock in 100 ns ticks: 10 MHz.
/// let start = Instant::now();
/// let counter = FnCounter::new(|| (start.elapsed().as_nanos() / 100) as u64, 64);
/// let config = Config::new().with_max_duration(Duration::from_millis(20));
/// let cal = calibrate(counter, StdReference::new(), config).expect("a working clock");
/// assert_eq!(cal.reference, "std");
/// assert!(cal.frequency.as_hz().abs_diff(10_000_000) < 1_000); // 10 MHz, to 100 ppm
/// ```
#[derive(Clone, Copy, Debug)]
pub struct StdReference {
    base: Instant,
}

impl StdReference {
    /// A reference counting from now.
    pub fn new() -> Self {
        StdReference {
            base: Instant::now(),
        }
    }
}

impl Default for StdReference {
    fn default() -> Self {
        Self::new()
    }
}

impl Reference for StdReference {
    #[inline]
    fn read(&mut self) -> u64 {
        // 2^64 ns is 584 years: the truncation never bites.
        self.base.elapsed().as_nanos() as u64
    }
    fn bits(&self) -> u32 {
        64
    }
    fn frequency(&self) -> Frequency {
        ONE_GHZ
    }
    fn name(&self) -> &'static str {
        "std"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nanoseconds_upward() {
        let mut r = StdReference::new();
        let a = r.read();
        let b = r.read();
        assert!(b >= a);
        assert_eq!(r.frequency().as_hz(), 1_000_000_000);
        assert_eq!(r.bits(), 64);
        assert_eq!(r.name(), "std");
    }
}
