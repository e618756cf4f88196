//! The hand-written `defmt::Format` impls, in one place (feature `defmt`).
//!
//! Every other public type derives `defmt::Format` where it is defined. These few cannot:
//! a closure, a counter behind a generic, a table too large to print, std's `Instant`, or
//! a simulation's interior cells. Each prints what a log line needs through the type's public
//! accessors, so this file depends on nothing private.

use ::defmt::{write, Format, Formatter};

use crate::counter::{Counter, FnCounter};
use crate::discover::aarch64::Aarch64Features;
use crate::discover::dump::Dump;
use crate::discover::x86::{X86Discovery, X86Features};

/// The raw bits: the flags' names would cost a string each in the binary.
impl Format for X86Features {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "X86Features({=u32:#x})", self.bits())
    }
}

/// Who the CPU is and what it claims (the raw leaves are left out).
impl Format for X86Discovery {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "X86Discovery {{ vendor: {=[u8]:a}, family: {=u32:#x}, model: {=u32:#x}, features: {}, hypervisors: {=[?]}, candidates: {=[?]} }}",
            &self.vendor[..],
            self.family,
            self.model,
            self.features,
            self.hypervisors(),
            self.candidates()
        )
    }
}

/// The progress so far, without waiting (formatting never blocks, even from an interrupt
/// handler that preempted a participant).
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
impl Format for crate::diag::warp::WarpCheck {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "WarpCheck {{ cpus: {=u32}, checks_per_pair: {=u32}, finished: {=u32}, report: {} }}",
            self.cpus(),
            self.checks_per_pair(),
            self.finished(),
            self.report()
        )
    }
}

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

/// The model and how often it has struck.
#[cfg(feature = "sim")]
impl Format for crate::arch::errata::FaultyRead {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "FaultyRead {{ erratum: {}, reads: {=u64}, glitches: {=u64} }}",
            self.erratum(),
            self.reads(),
            self.glitches()
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

/// The format and the number of records (a dump holds up to 256).
impl Format for Dump {
    fn format(&self, f: Formatter<'_>) {
        write!(
            f,
            "Dump {{ format: {}, entries: {=usize} }}",
            self.format(),
            self.entries().len()
        )
    }
}

impl Format for Aarch64Features {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "Aarch64Features({=u32:#x})", self.bits())
    }
}

/// Its origin is a `std::time::Instant`, which has no defmt form: the name only.
#[cfg(feature = "std")]
impl Format for crate::reference::StdReference {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "StdReference")
    }
}

#[cfg(feature = "sim")]
mod sim {
    use ::defmt::{write, Format, Formatter};

    use crate::reference::Reference;
    use crate::sim::{SimCounter, SimReference, SimWorld};

    impl Format for SimWorld {
        fn format(&self, f: Formatter<'_>) {
            write!(
                f,
                "SimWorld {{ now_ps: {=u64}, smis: {=u64} }}",
                self.now_ps(),
                self.smi_count()
            )
        }
    }

    impl Format for SimCounter<'_> {
        fn format(&self, f: Formatter<'_>) {
            write!(f, "SimCounter {{ timer: {} }}", self.timer())
        }
    }

    impl Format for SimReference<'_> {
        fn format(&self, f: Formatter<'_>) {
            write!(
                f,
                "SimReference {{ name: {=str}, timer: {}, accuracy: {} }}",
                self.name(),
                self.timer(),
                self.frequency().accuracy()
            )
        }
    }
}
