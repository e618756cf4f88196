//! The hand-written `defmt::Format` impls, in one place (feature `defmt`).
//!
//! Every other public type derives `defmt::Format` where it is defined. These few cannot:
//! a closure, a counter behind a generic, a table too large to print, std's `Instant`, or
//! a simulation's interior cells. Each prints what a log line needs through the type's public
//! accessors, so this file depends on nothing private. (`diag::WarpCheck`,
//! `discover::x86::X86Features` and `X86Discovery` still keep theirs beside them.)

use ::defmt::{write, Format, Formatter};

use crate::counter::{Counter, FnCounter};
use crate::discover::aarch64::Aarch64Features;
use crate::discover::dump::Dump;

#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "64"))]
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
