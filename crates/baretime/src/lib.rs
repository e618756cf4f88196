#![doc = include_str!("../README.md")]
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
// Kernels cannot afford a panic: no unchecked arithmetic, indexing, unwrap or panic, and no
// floating point, anywhere in the library. The few places whose arithmetic is proven not to
// overflow (Scale's fixed point) allow it locally, next to the proof.
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::float_arithmetic
    )
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "std")]
extern crate std;

/// A [`Frequency`] known when the crate is compiled, for `const` items only: a rate outside
/// the range fails the build (the panic runs in the compiler), never a run. Outside a `const`
/// item the `clippy::panic` lint above rejects it.
#[allow(unused_macros)] // its user: `StdReference` (feature `std`)
macro_rules! const_frequency {
    (millihz: $millihz:expr, $source:expr, $accuracy:expr) => {
        match $crate::Frequency::from_millihz($millihz, $source, $accuracy) {
            Some(f) => f,
            None => panic!("a compile-time rate outside Frequency's range"),
        }
    };
}

mod alarm;
mod calibrate;
// The Clock needs 32-bit compare-and-swap and never a lock: the target's own, or (thumbv6m,
// riscv32imc) portable-atomic's, taken in a critical section or with interrupts off.
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
mod clock;
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
mod coarse;
mod counter;
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
mod deadline;
#[cfg(feature = "defmt")]
mod defmt;
mod delay;
mod extend;
mod frequency;
// The monotonic guard: a 64-bit compare-and-swap, only where the target has it (a lock-free
// one: portable-atomic's 64-bit fallback could take a lock).
#[cfg(all(not(loom), target_has_atomic = "64"))]
mod guard;
mod instant;
mod scale;
#[cfg_attr(
    not(any(loom, feature = "portable-atomic", target_has_atomic = "32")),
    allow(dead_code, unused_imports)
)]
mod sync;
// The time of day: wherever the Clock is (32-bit compare-and-swap); not under loom (its
// `const fn new`).
#[cfg(all(not(loom), any(feature = "portable-atomic", target_has_atomic = "32")))]
mod wall;
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
mod watchdog;

// Every module is private and each item has this one path (as embassy-time and quanta keep
// theirs): the list below is the whole API.
pub use alarm::Alarm;
#[cfg(feature = "std")]
pub use calibrate::StdReference;
pub use calibrate::{
    calibrate, calibrate_and_verify, verify, Calibration, CalibrationError, Config,
    CounterReference, Reference, Verdict, Verified, WithAccuracy,
};
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
pub use clock::{Clock, ClockError, ClockHealth, LAG_NS, MARK_GRANULE_NS};
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
pub use coarse::CoarseClock;
pub use counter::{Counter, FnCounter, Width};
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
pub use deadline::{Deadline, Wake};
pub use delay::Delay;
pub use extend::{ExtendedTimer, NarrowTimer};
pub use frequency::{Accuracy, Frequency, Source};
#[cfg(all(not(loom), target_has_atomic = "64"))]
pub use guard::MonotonicClock;
pub use instant::{Instant, RawInstant};
pub use scale::Scale;
#[cfg(all(not(loom), any(feature = "portable-atomic", target_has_atomic = "32")))]
pub use wall::{SecondsEdge, WallClock, WallError, WallHealth, MAX_SLEW_PPM};
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
pub use watchdog::{Unjudged, Watch, Watchdog, WatchdogHealth};

/// The interleaving test's hook (debug builds with `std` only; not part of the API).
#[cfg(all(debug_assertions, feature = "std", not(loom)))]
#[doc(hidden)]
pub use sync::{test_hook as __test_hook, Point as __HookPoint};
