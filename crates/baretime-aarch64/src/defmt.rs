//! The hand-written `defmt::Format` impl (feature `defmt`): the feature bits (their names
//! would cost a string each in the binary).

use ::defmt::{write, Format, Formatter};

use crate::Aarch64Features;

/// The raw bits.
impl Format for Aarch64Features {
    fn format(&self, f: Formatter<'_>) {
        write!(f, "Aarch64Features({=u32:#x})", self.bits())
    }
}
