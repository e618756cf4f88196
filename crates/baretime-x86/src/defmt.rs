//! The hand-written `defmt::Format` impls (feature `defmt`): a table too large to print, and
//! the feature bits (their names would cost a string each in the binary).

use ::defmt::{write, Format, Formatter};

#[cfg(feature = "dump")]
use crate::Dump;
use crate::{X86Discovery, X86Features};

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
            &self.vendor()[..],
            self.family(),
            self.model(),
            self.features(),
            self.hypervisors(),
            self.candidates()
        )
    }
}

/// The format and the number of records (a dump holds up to 256).
#[cfg(feature = "dump")]
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
