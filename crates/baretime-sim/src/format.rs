//! The hand-written `defmt::Format` impls (feature `defmt`): a simulation's interior cells.

use ::defmt::{write, Format, Formatter};

use baretime::Reference;

use crate::{FaultyRead, SimCounter, SimReference, SimWorld};

/// The model and how often it has struck.
impl Format for FaultyRead {
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
