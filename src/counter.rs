//! [`Counter`]: anything that returns a free-running tick count.
//!
//! The CPU counters ([`crate::arch`]) implement it, and so do the simulated counters of the
//! `sim` feature and any counter of the user's own: a Cortex-M DWT cycle counter, SysTick
//! extended in software, RISC-V `time`. Everything above this trait — [`crate::Scale`],
//! [`crate::Clock`], [`crate::Delay`], calibration — is portable integer code.

/// A free-running counter.
///
/// # Contract
///
/// - [`Counter::ticks`] returns the current count. It counts up at a constant (if unknown)
///   rate, and wraps from `2^bits - 1` to 0 when [`Counter::bits`] is below 64.
/// - Reading never fails and never blocks for long; it may be called from any context the
///   implementation documents (interrupt handlers, early boot).
/// - Whatever ordering the read has against surrounding memory accesses is the
///   implementation's to document (see [`crate::arch`] for the CPU counters' named reads).
///
/// Calibration and diagnostics *check* the "counts up" part rather than trust it: a counter
/// that is stuck or runs backwards yields a typed error there.
pub trait Counter {
    /// The current tick count.
    fn ticks(&self) -> u64;

    /// Width of the count in bits (1..=64): values wrap at `2^bits`. 64 for the CPU counters.
    fn bits(&self) -> u32 {
        64
    }

    /// `2^bits - 1`: mask that keeps a wrapping difference of two reads.
    fn mask(&self) -> u64 {
        mask_for_bits(self.bits())
    }
}

/// `2^bits - 1`, clamped to 1..=64 bits.
pub const fn mask_for_bits(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else if bits == 0 {
        1
    } else {
        (1u64 << bits).wrapping_sub(1) // bits in 1..=63: no wrap
    }
}

impl<C: Counter + ?Sized> Counter for &C {
    #[inline(always)]
    fn ticks(&self) -> u64 {
        (**self).ticks()
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        (**self).bits()
    }
}

/// A counter made from a function or closure: `FnCounter(|| my_timer_read())`.
#[derive(Clone, Copy, Debug)]
pub struct FnCounter<F: Fn() -> u64> {
    read: F,
    bits: u32,
}

impl<F: Fn() -> u64> FnCounter<F> {
    /// A 64-bit counter read by `read`.
    pub const fn new(read: F) -> Self {
        FnCounter { read, bits: 64 }
    }

    /// A counter of `bits` bits (clamped to 1..=64) read by `read`.
    pub const fn with_bits(read: F, bits: u32) -> Self {
        let bits = if bits == 0 {
            1
        } else if bits > 64 {
            64
        } else {
            bits
        };
        FnCounter { read, bits }
    }
}

/// Prints the width only: the closure has nothing to show.
#[cfg(feature = "defmt")]
impl<F: Fn() -> u64> defmt::Format for FnCounter<F> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "FnCounter {{ bits: {=u32} }}", self.bits)
    }
}

impl<F: Fn() -> u64> Counter for FnCounter<F> {
    #[inline(always)]
    fn ticks(&self) -> u64 {
        (self.read)()
    }
    fn bits(&self) -> u32 {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(mask_for_bits(64), u64::MAX);
        assert_eq!(mask_for_bits(32), 0xffff_ffff);
        assert_eq!(mask_for_bits(24), 0xff_ffff);
        assert_eq!(mask_for_bits(0), 1);
        assert_eq!(mask_for_bits(100), u64::MAX);
    }

    #[test]
    fn fn_counter_reads_and_clamps() {
        let c = FnCounter::with_bits(|| 42, 0);
        assert_eq!(c.ticks(), 42);
        assert_eq!(c.bits(), 1);
        assert_eq!(FnCounter::with_bits(|| 0, 99).bits(), 64);
        let by_ref: &dyn Fn(&FnCounter<_>) -> u64 = &|c| <&FnCounter<_> as Counter>::ticks(&c);
        assert_eq!(by_ref(&c), 42);
    }
}
