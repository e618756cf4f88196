//! CNTVCT_EL0 (plain and ISB-ordered), CNTVCTSS_EL0 (FEAT_ECV) and the registers discovery reads.

use core::arch::asm;

use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, ID_AA64MMFR0_EL1, MIDR_EL1};

use crate::discover::Midr;
use crate::errata::{read_with, Erratum};
use baretime::Counter;

/// The generic timer's virtual count, CNTVCT_EL0.
///
/// The architecture guarantees the register at every exception level; EL0 access needs
/// CNTKCTL_EL1.EL0VCTEN, which Linux and every OS that offers a vDSO clock sets.
///
/// # Counter errata
///
/// On a part whose counter misreads, the [`Counter`] implementations read through the
/// selected [`Erratum`]'s workaround; the named reads (`read`, `read_ordered`,
/// `read_self_synchronized`) stay single instructions. [`GenericTimer::new`] selects
/// Cortex-A73 858921 by itself from MIDR_EL1; the others are SoC properties that only firmware
/// knows (the devicetree timer node, the ACPI GTDT), so the caller selects them ([`Erratum`]
/// says how):
///
/// ```no_run
/// use baretime_aarch64::{Erratum, GenericTimer};
///
/// // The devicetree's timer node has "fsl,erratum-a008585" (an NXP LS1043A).
/// let timer = GenericTimer::new().with_erratum(Erratum::FslA008585);
/// assert_eq!(timer.erratum(), Some(Erratum::FslA008585));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GenericTimer {
    ecv: bool,
    erratum: Option<Erratum>,
}

impl GenericTimer {
    /// The generic timer read the way that is right on every AArch64 core, without reading ID
    /// registers: `ISB; MRS CNTVCT_EL0` (no CNTVCTSS_EL0), through Cortex-A73 858921's
    /// workaround (one extra read; harmless on other cores, and what a counter read on any
    /// core of a big.LITTLE part needs: see [`Erratum`]). A `const fn`, for a clock in a
    /// `static`:
    ///
    /// ```no_run
    /// use baretime::Clock;
    /// use baretime_aarch64::GenericTimer;
    ///
    /// static CLOCK: Clock<GenericTimer> = Clock::uninit(GenericTimer::any_core());
    /// ```
    ///
    /// A SoC erratum is added with [`GenericTimer::with_erratum`] (also `const`; it replaces
    /// 858921); [`GenericTimer::without_erratum`] drops 858921 where no core is a Cortex-A73.
    /// [`GenericTimer::new`] instead reads this core's ID registers: CNTVCTSS_EL0 where the
    /// core has FEAT_ECV, 858921's workaround only on a Cortex-A73.
    pub const fn any_core() -> GenericTimer {
        GenericTimer {
            ecv: false,
            erratum: Some(Erratum::Arm858921),
        }
    }

    /// The virtual counter; checks ID_AA64MMFR0_EL1.ECV (bits 63:60) for CNTVCTSS_EL0, and
    /// MIDR_EL1 for a Cortex-A73, whose reads then go through the 858921 workaround
    /// ([`Erratum::for_midr`]; this core only: see [`Erratum`] on big.LITTLE, and
    /// [`GenericTimer::any_core`]).
    pub fn new() -> GenericTimer {
        let ecv = (read_id_aa64mmfr0_el1() >> 60) & 0xf != 0;
        let erratum = Erratum::for_midr(&Midr::from_bits(read_midr_el1()));
        GenericTimer { ecv, erratum }
    }

    /// This timer with `erratum`'s read workaround in its [`Counter`] implementations
    /// (replacing any other, 858921 included: the four errata belong to different parts, and
    /// none of the SoCs with the other three has Cortex-A73 cores).
    pub const fn with_erratum(self, erratum: Erratum) -> GenericTimer {
        GenericTimer {
            erratum: Some(erratum),
            ..self
        }
    }

    /// This timer with no erratum workaround: one counter read per [`Counter::ticks`]. Right
    /// only where no core that reads it has one of the [`Erratum`]s.
    pub const fn without_erratum(self) -> GenericTimer {
        GenericTimer {
            erratum: None,
            ..self
        }
    }

    /// The erratum whose workaround the [`Counter`] implementations apply, if any.
    pub const fn erratum(&self) -> Option<Erratum> {
        self.erratum
    }

    /// Whether [`GenericTimer::read_self_synchronized`] is available (FEAT_ECV).
    pub const fn has_self_synchronized(&self) -> bool {
        self.ecv
    }

    /// `MRS CNTVCT_EL0` with no barrier: the read may be performed speculatively, out of
    /// order with earlier instructions.
    #[inline(always)]
    pub fn read(&self) -> u64 {
        let v: u64;
        // Not `nomem` (aarch64-cpu's accessor is): a compiler barrier, so that the read stays
        // between the memory accesses around it in program order.
        // SAFETY: CNTVCT_EL0 exists on every AArch64 CPU and is readable wherever this crate
        // runs (see the type docs); the MRS writes only the declared output, no stack, no flags.
        unsafe { asm!("mrs {v}, cntvct_el0", v = out(reg) v, options(nostack, preserves_flags)) };
        v
    }

    /// `ISB; MRS CNTVCT_EL0`: the ISB makes the read happen after every earlier instruction,
    /// as the Arm ARM requires for an ordered counter read.
    #[inline(always)]
    pub fn read_ordered(&self) -> u64 {
        let v: u64;
        // SAFETY: as in `read`; ISB takes no operands. One asm block, so the compiler cannot
        // move memory accesses between the barrier and the read either.
        unsafe {
            asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v, options(nostack, preserves_flags))
        };
        v
    }

    /// `MRS CNTVCTSS_EL0`: the self-synchronised view of the counter (FEAT_ECV), ordered like
    /// [`GenericTimer::read_ordered`] without the cost of an ISB. `None` without FEAT_ECV.
    #[inline(always)]
    pub fn read_self_synchronized(&self) -> Option<u64> {
        if !self.ecv {
            return None;
        }
        let v: u64;
        // CNTVCTSS_EL0 is S3_3_C14_C0_6, read-only, readable wherever CNTVCT_EL0 is.
        // SAFETY: it exists: FEAT_ECV was read from ID_AA64MMFR0_EL1 in `new`; the MRS writes
        // only the declared output register, no stack, no flags.
        unsafe {
            asm!("mrs {v}, S3_3_C14_C0_6", v = out(reg) v, options(nostack, preserves_flags))
        };
        Some(v)
    }

    /// A [`Counter`] on the plain, unordered [`GenericTimer::read`].
    pub const fn unordered(self) -> GenericTimerUnordered {
        GenericTimerUnordered(self)
    }
}

impl Default for GenericTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Counter for GenericTimer {
    /// The ordered read: CNTVCTSS_EL0 where FEAT_ECV has it, else `ISB; MRS CNTVCT_EL0`;
    /// through the selected erratum's workaround, each of its reads ordered.
    #[inline(always)]
    fn ticks(&self) -> u64 {
        let ordered = || match self.read_self_synchronized() {
            Some(v) => v,
            None => self.read_ordered(),
        };
        match self.erratum {
            None => ordered(),
            Some(e) => read_with(e, ordered),
        }
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        64
    }
}

/// The generic timer as a [`Counter`] on the plain, unordered read: made by
/// [`GenericTimer::unordered`], from a timer and its erratum selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GenericTimerUnordered(GenericTimer);

impl Counter for GenericTimerUnordered {
    /// The plain read, through the selected erratum's workaround.
    #[inline(always)]
    fn ticks(&self) -> u64 {
        match self.0.erratum {
            None => self.0.read(),
            Some(e) => read_with(e, || self.0.read()),
        }
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        64
    }
}

/// CNTFRQ_EL0: the counter frequency *as firmware programmed it*, in Hz. Nothing checks it
/// against the real rate: calibration does.
pub(crate) fn read_cntfrq_el0() -> u64 {
    CNTFRQ_EL0.get()
}

/// MIDR_EL1: implementer, variant, architecture, part number, revision. (At EL0, Linux and
/// QEMU's user mode emulate the read.)
pub(crate) fn read_midr_el1() -> u64 {
    MIDR_EL1.get()
}

/// ID_AA64MMFR0_EL1: memory model features, ECV in bits 63:60. (At EL0, Linux and QEMU's
/// user mode emulate the read.)
pub(crate) fn read_id_aa64mmfr0_el1() -> u64 {
    ID_AA64MMFR0_EL1.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_advances_and_cntfrq_is_plausible() {
        let t = GenericTimer::new();
        let a = t.ticks();
        let mut b = t.ticks();
        for _ in 0..100_000 {
            if b > a {
                break;
            }
            b = t.ticks();
        }
        assert!(b > a, "CNTVCT_EL0 did not advance: {a} then {b}");
        assert!(t.read() >= a);
        let f = read_cntfrq_el0();
        assert!(f > 0, "CNTFRQ_EL0 is 0");
    }

    #[test]
    fn every_erratum_path_reads_the_real_counter_in_order() {
        let plain = GenericTimer::new().without_erratum();
        for e in Erratum::ALL {
            for c in [
                plain.with_erratum(e),
                GenericTimer::any_core().with_erratum(e),
            ] {
                assert_eq!(c.erratum(), Some(e));
                let mut last = plain.ticks();
                for _ in 0..10_000 {
                    let v = c.ticks();
                    assert!(v >= last, "{e}: {v} after {last}");
                    last = v;
                }
                // The plain read may be taken early, so only its path is exercised here.
                assert!(c.unordered().ticks() > 0);
                assert!(plain.ticks() >= last, "{e}: ahead of the plain read");
            }
        }
    }
}
