//! The hand-written `defmt::Format` impl (feature `defmt`).

#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
use ::defmt::{write, Format, Formatter};

/// The progress so far, without waiting (formatting never blocks, even from an interrupt
/// handler that preempted a participant).
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
impl Format for crate::WarpCheck {
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
