//! The hand-written `defmt::Format` impls, in one place (feature `defmt`).
//!
//! Every other public type derives `defmt::Format` where it is defined. These few cannot:
//! a closure, a counter behind a generic, or std's `Instant`. Each prints what a log line
//! needs through the type's public accessors, so this file depends on nothing private.

use ::defmt::{write, Format, Formatter};

use crate::counter::{Counter, FnCounter};

/// The high-water mark: the latest time any CPU was given.
#[cfg(all(not(loom), target_has_atomic = "64"))]
impl<C: Counter> Format for crate::MonotonicClock<'_, C> {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "MonotonicClock {{ high_water_ns: {=u64} }}",
            self.high_water().as_nanos()
        )
    }
}

#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
impl<C: Counter + Format> Format for crate::Clock<C> {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "Clock {{ counter: {}, scale: {} }}",
            self.counter(),
            self.scale()
        )
    }
}

/// Prints the width only: the closure has nothing to show.
impl<F: Fn() -> u64> Format for FnCounter<F> {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "FnCounter {{ bits: {=u32} }}", self.bits())
    }
}

/// Its origin is a `std::time::Instant`, which has no defmt form: the name only.
#[cfg(feature = "std")]
impl Format for crate::StdReference {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "StdReference")
    }
}

/// The coarse time, in ns.
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
impl Format for crate::CoarseClock {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "CoarseClock {{ now_ns: {=u64} }}", self.now().as_nanos())
    }
}

/// The time of day and the slew still to run.
#[cfg(all(not(loom), target_has_atomic = "64"))]
impl<C: Counter> Format for crate::WallClock<'_, C> {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "WallClock {{ unix_ns: {}, slew_remaining_ns: {=i64} }}",
            self.unix_ns(),
            self.slew_remaining_ns()
        )
    }
}
