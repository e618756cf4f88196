//! [`Counter`]: anything that returns a free-running tick count, and [`Width`]: the one place
//! where wrapping tick arithmetic is done.
//!
//! The CPU counters (baretime-x86's `Tsc`, baretime-aarch64's `GenericTimer`) implement it,
//! and so do baretime-sim's simulated counters and any counter of the user's own: a Cortex-M
//! DWT cycle counter, SysTick extended in software, RISC-V `time`. Everything above this
//! trait — [`crate::Scale`], [`crate::Clock`], [`crate::Delay`], calibration — is portable
//! integer code.

/// A free-running counter.
///
/// # Contract
///
/// - [`Counter::ticks`] returns the current count. It counts up at a constant (if unknown)
///   rate, and wraps from `2^bits - 1` to 0, where `bits` is [`Counter::bits`].
/// - Every counter states its width: there is no default, so a 32-bit register cannot be
///   mistaken for a 64-bit count (which would make time jump back by a whole wrap period
///   when it wraps). A wrapper must forward it, and forgetting is a compile error:
///
/// ```compile_fail
/// struct Dwt;
/// impl baretime::Counter for Dwt {
///     fn ticks(&self) -> u64 { 0 }
///     // error[E0046]: not all trait items implemented, missing: `bits`
/// }
/// ```
/// - Reading never fails and never blocks for long; it may be called from any context the
///   implementation documents (interrupt handlers, early boot).
/// - Whatever ordering the read has against surrounding memory accesses is the
///   implementation's to document (the platform crates' CPU counters offer a plain and an
///   ordered read, each named for what it does).
///
/// Calibration and diagnostics *check* the "counts up" part rather than trust it: a counter
/// that is stuck or runs backwards yields a typed error there.
pub trait Counter {
    /// The current tick count, below `2^bits`.
    fn ticks(&self) -> u64;

    /// Width of the count in bits (1..=64; values outside are clamped): values wrap at
    /// `2^bits`. 64 for the CPU counters.
    fn bits(&self) -> u32;
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

/// The width of a wrapping counter, and the arithmetic on its values.
///
/// Two readings `a` (earlier) and `b` of a counter that wraps at `2^bits` are `b − a (mod
/// 2^bits)` ticks apart — or, if the counter went back (another CPU's counter lags, a faulty
/// counter), `a − b` ticks behind. The two cannot be told apart in general; this type splits
/// the circle in half, as FreeBSD's `tc_delta()` and every other consumer of a wrapping
/// counter does: a forward distance up to [`Width::half`] is progress, anything more is a
/// step back. [`crate::Clock::delta`] and [`crate::Delay`] judge readings by the same rule.
///
/// ```
/// use baretime::Width;
/// let w = Width::new(16);
/// assert_eq!(w.delta(0xfff0, 0x0010), 0x20); // wrapped, 32 ticks later
/// assert_eq!(w.elapsed(0xfff0, 0x0010), Some(0x20)); // forward: progress
/// assert_eq!(w.elapsed(0x0010, 0x000f), None); // one tick behind
/// assert_eq!(w.delta(0x000f, 0x0010), 1); // by how much: the distance the other way
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Width {
    mask: u64,
}

impl Width {
    /// The width of a `bits`-bit counter (clamped to 1..=64).
    pub const fn new(bits: u32) -> Width {
        let mask = if bits >= 64 {
            u64::MAX
        } else if bits == 0 {
            1
        } else {
            (1u64 << bits).wrapping_sub(1) // bits in 1..=63: no wrap
        };
        Width { mask }
    }

    /// The width `counter` states.
    #[inline(always)]
    pub fn of<C: Counter + ?Sized>(counter: &C) -> Width {
        Width::new(counter.bits())
    }

    /// 64 bits: no wrap within any machine's lifetime.
    #[cfg_attr(
        not(any(loom, feature = "portable-atomic", target_has_atomic = "32")),
        allow(dead_code) // its users: the Clock's modules
    )]
    pub(crate) const FULL: Width = Width::new(64);

    /// `2^bits − 1`.
    #[inline(always)]
    pub const fn mask(self) -> u64 {
        self.mask
    }

    /// The longest forward distance told apart from a step back: `mask / 2`.
    #[inline(always)]
    pub const fn half(self) -> u64 {
        self.mask >> 1
    }

    /// `raw` reduced to the counter's width.
    #[inline(always)]
    pub const fn value(self, raw: u64) -> u64 {
        raw & self.mask
    }

    /// Ticks from `from` forward to `to`, modulo the wrap: in `0..=mask`.
    #[inline(always)]
    pub const fn delta(self, from: u64, to: u64) -> u64 {
        to.wrapping_sub(from) & self.mask
    }

    /// `at` moved forward by `ticks`, modulo the wrap.
    #[inline(always)]
    #[cfg_attr(
        not(any(loom, feature = "portable-atomic", target_has_atomic = "32")),
        allow(dead_code) // its users: the Clock's modules
    )]
    pub(crate) const fn add(self, at: u64, ticks: u64) -> u64 {
        at.wrapping_add(ticks) & self.mask
    }

    /// Ticks from `from` to `to` if `to` is not behind `from` (at most [`Width::half`]
    /// forward, modulo the wrap); `None` if it is behind: then `delta(to, from)` says by how
    /// much.
    #[inline(always)]
    pub const fn elapsed(self, from: u64, to: u64) -> Option<u64> {
        let d = self.delta(from, to);
        if d > self.half() {
            None
        } else {
            Some(d)
        }
    }

    /// How far `to` is behind `from`, modulo the wrap (the step back of a reading `to` that
    /// came after `from`); meaningful when [`Width::elapsed`] says it is behind.
    #[inline(always)]
    pub(crate) const fn backwards_by(self, from: u64, to: u64) -> u64 {
        from.wrapping_sub(to) & self.mask
    }
}

/// A counter made from a function or closure, with the width it counts in.
///
/// ```
/// use baretime::{Counter, FnCounter};
/// # fn dwt_cyccnt() -> u32 { 7 }
/// // A Cortex-M DWT cycle counter is a 32-bit register.
/// let dwt = FnCounter::new(|| u64::from(dwt_cyccnt()), 32);
/// assert_eq!(dwt.bits(), 32);
/// assert_eq!(dwt.ticks(), 7);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FnCounter<F: Fn() -> u64> {
    read: F,
    bits: u32,
}

impl<F: Fn() -> u64> FnCounter<F> {
    /// A counter of `bits` bits (clamped to 1..=64) read by `read`.
    pub const fn new(read: F, bits: u32) -> Self {
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

impl<F: Fn() -> u64> Counter for FnCounter<F> {
    #[inline(always)]
    fn ticks(&self) -> u64 {
        (self.read)()
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(Width::new(64).mask(), u64::MAX);
        assert_eq!(Width::new(32).mask(), 0xffff_ffff);
        assert_eq!(Width::new(24).mask(), 0xff_ffff);
        assert_eq!(Width::new(0).mask(), 1);
        assert_eq!(Width::new(100).mask(), u64::MAX);
    }

    #[test]
    fn wrapping_arithmetic() {
        let w = Width::new(8);
        assert_eq!(w.delta(250, 4), 10);
        assert_eq!(w.add(250, 10), 4);
        assert_eq!(w.elapsed(250, 4), Some(10));
        assert_eq!(w.elapsed(0, 127), Some(127));
        assert_eq!(w.elapsed(0, 128), None);
        assert_eq!(w.backwards_by(4, 250), 10);
        let f = Width::FULL;
        assert_eq!(f.delta(u64::MAX, 1), 2);
        assert_eq!(f.elapsed(1_000_000, 999_999), None);
        assert_eq!(f.backwards_by(1_000_000, 999_999), 1);
    }

    #[test]
    fn fn_counter_reads_and_clamps() {
        let c = FnCounter::new(|| 42, 0);
        assert_eq!(c.ticks(), 42);
        assert_eq!(c.bits(), 1);
        assert_eq!(FnCounter::new(|| 0, 99).bits(), 64);
        let by_ref: &dyn Fn(&FnCounter<_>) -> u64 = &|c| <&FnCounter<_> as Counter>::ticks(&c);
        assert_eq!(by_ref(&c), 42);
    }

    /// A wrapper cannot lose the width: `&C` reports what `C` states.
    #[test]
    fn references_keep_the_width() {
        struct Narrow;
        impl Counter for Narrow {
            fn ticks(&self) -> u64 {
                0
            }
            fn bits(&self) -> u32 {
                16
            }
        }
        assert_eq!(Width::of(&&Narrow).mask(), 0xffff);
    }
}
