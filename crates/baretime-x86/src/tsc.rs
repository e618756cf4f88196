//! The time-stamp counter: RDTSC, LFENCE;RDTSC and RDTSCP.

use core::arch::asm;

use crate::cpuid::{CpuidSource, NativeCpuid};
use crate::CounterUnavailable;

use baretime::Counter;

/// The time-stamp counter of this CPU. Holding a `Tsc` proves that RDTSC exists (and records
/// whether RDTSCP does), so every read is safe.
///
/// The one safe way to get one is [`Tsc::probe`]. A clock in a `static` needs a `Tsc` in a
/// `const`, before anything has run: [`Tsc::new_unchecked`] is that, `unsafe`, with the
/// probe as its contract.
///
/// Whether the TSC is *invariant* (constant rate in every P-/C-state) and synchronised across
/// CPUs is a separate question: see [`crate::discover`] for the invariant-TSC flag and
/// `baretime-diag` for the cross-CPU warp check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Tsc {
    rdtscp: bool,
}

impl Tsc {
    /// The TSC without asking CPUID: RDTSC and LFENCE;RDTSC, and no RDTSCP
    /// ([`Tsc::read_with_aux`] returns `None`). A `const fn`, for a clock in a `static`
    /// ([`baretime::Clock::uninit`]), which reads its counter only once it has started:
    ///
    /// ```
    /// # #[cfg(target_arch = "x86_64")] {
    /// use baretime::{Clock, Frequency};
    /// use baretime_x86::Tsc;
    ///
    /// // SAFETY: the clock reads the TSC only after `start`, and boot starts it only once
    /// // `Tsc::probe` has succeeded.
    /// static CLOCK: Clock<Tsc> = Clock::uninit(unsafe { Tsc::new_unchecked() });
    ///
    /// if Tsc::probe().is_ok() {
    ///     CLOCK.start(Frequency::exact_hz(2_400_000_000).unwrap()).unwrap();
    /// }
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// RDTSC must be usable wherever the returned value (or a copy) is read: CPUID says the
    /// TSC exists (leaf 1 EDX bit 4: what [`Tsc::probe`] checks; no x86_64 CPU lacks it, a
    /// hypervisor can hide it) and the code runs at CPL 0 or with CR4.TSD clear. Otherwise a
    /// read raises #UD or #GP.
    pub const unsafe fn new_unchecked() -> Tsc {
        Tsc { rdtscp: false }
    }

    /// Checks CPUID for the TSC (leaf 1 EDX bit 4) and RDTSCP (leaf 0x8000_0001 EDX bit 27).
    ///
    /// [`CounterUnavailable::NoTsc`] if there is no TSC; what a kernel does then is in
    /// [`CounterUnavailable`]'s docs. A TSC that is not invariant is still returned:
    /// discovery reports that flag.
    ///
    /// ```
    /// # #[cfg(target_arch = "x86_64")] {
    /// use baretime_x86::Tsc;
    ///
    /// let tsc = Tsc::probe().expect("every x86_64 CPU has a TSC");
    /// let plain = tsc.read(); // RDTSC: cheapest, no ordering
    /// let ordered = tsc.read_ordered(); // LFENCE;RDTSC: after every earlier instruction
    /// assert!(ordered >= plain);
    /// if let Some((ticks, aux)) = tsc.read_with_aux() {
    ///     // RDTSCP: `aux` is IA32_TSC_AUX, the CPU number on Linux
    ///     let _ = (ticks, aux);
    /// }
    /// # }
    /// ```
    pub fn probe() -> Result<Tsc, CounterUnavailable> {
        Tsc::from_cpuid(&NativeCpuid)
    }

    fn from_cpuid<S: CpuidSource + ?Sized>(cpuid: &S) -> Result<Tsc, CounterUnavailable> {
        let max_basic = cpuid.cpuid(0, 0).eax;
        let has_tsc = max_basic >= 1 && cpuid.cpuid(1, 0).edx & (1 << 4) != 0;
        if !has_tsc {
            return Err(CounterUnavailable::NoTsc);
        }
        let max_extended = cpuid.cpuid(0x8000_0000, 0).eax;
        let rdtscp = (0x8000_0001..=0x8000_FFFF).contains(&max_extended)
            && cpuid.cpuid(0x8000_0001, 0).edx & (1 << 27) != 0;
        Ok(Tsc { rdtscp })
    }

    /// Whether [`Tsc::read_with_aux`] is available.
    pub const fn has_rdtscp(&self) -> bool {
        self.rdtscp
    }

    /// `RDTSC`: the cheapest read, with no ordering. The CPU may execute it before earlier
    /// instructions have completed or after later ones have started, so it can time-stamp a
    /// point a few dozen cycles away from where it appears in the program.
    #[inline(always)]
    pub fn read(&self) -> u64 {
        let lo: u32;
        let hi: u32;
        // RDTSC is allowed at CPL 0 always, and at CPL 3 unless CR4.TSD is set, which no OS
        // this crate targets sets while it hands out the TSC. Not `nomem`: a compiler barrier.
        // SAFETY: RDTSC exists (`probe` checked CPUID, or `new_unchecked`'s caller vouched for
        // it); it writes only EDX:EAX (declared), touches no stack and no flags.
        unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nostack, preserves_flags)) };
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// `LFENCE; RDTSC`: the counter is read only after every earlier instruction has completed
    /// locally (Intel SDM; on AMD, LFENCE is dispatch-serialising on every CPU Linux supports
    /// for it, which sets the MSR that makes it so on older families). Later instructions may
    /// still start before the read. This is what Linux's `rdtsc_ordered()` does.
    #[inline(always)]
    pub fn read_ordered(&self) -> u64 {
        let lo: u32;
        let hi: u32;
        // SAFETY: as in `read`; LFENCE exists on every x86_64 CPU (SSE2 is baseline) and has
        // no operands or side effects beyond ordering.
        unsafe {
            asm!("lfence", "rdtsc", out("eax") lo, out("edx") hi, options(nostack, preserves_flags))
        };
        (u64::from(hi) << 32) | u64::from(lo)
    }

    /// `RDTSCP`: the counter, read after every earlier instruction has executed, together
    /// with `IA32_TSC_AUX` (which Linux and most kernels set to the CPU/node number), so a
    /// caller can tell that two reads came from the same CPU. `None` without RDTSCP.
    #[inline(always)]
    pub fn read_with_aux(&self) -> Option<(u64, u32)> {
        if !self.rdtscp {
            return None;
        }
        let lo: u32;
        let hi: u32;
        let aux: u32;
        // SAFETY: RDTSCP exists (`self.rdtscp` came from CPUID in `probe`). It writes only
        // EDX:EAX and ECX (declared), no stack, no flags.
        unsafe {
            asm!("rdtscp", out("eax") lo, out("edx") hi, out("ecx") aux,
                 options(nostack, preserves_flags))
        };
        Some(((u64::from(hi) << 32) | u64::from(lo), aux))
    }

    /// A [`Counter`] on the plain, unordered [`Tsc::read`].
    pub const fn unordered(self) -> TscUnordered {
        TscUnordered { tsc: self }
    }
}

impl Counter for Tsc {
    /// The ordered read, [`Tsc::read_ordered`].
    #[inline(always)]
    fn ticks(&self) -> u64 {
        self.read_ordered()
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        64
    }
}

/// The TSC as a [`Counter`] on the plain, unordered `RDTSC` ([`Tsc::read`]): made from a
/// [`Tsc`] with [`Tsc::unordered`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TscUnordered {
    tsc: Tsc,
}

impl Counter for TscUnordered {
    #[inline(always)]
    fn ticks(&self) -> u64 {
        self.tsc.read()
    }
    #[inline(always)]
    fn bits(&self) -> u32 {
        64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_reads_advance() {
        let tsc = Tsc::probe().expect("every x86_64 CPU has a TSC");
        let a = tsc.read_ordered();
        let mut b = tsc.read_ordered();
        for _ in 0..1000 {
            if b > a {
                break;
            }
            b = tsc.read_ordered();
        }
        assert!(b > a, "TSC did not advance: {a} then {b}");
        assert!(tsc.read() >= a);
        if let Some((t, _aux)) = tsc.read_with_aux() {
            assert!(t >= b);
        }
        assert!(tsc.unordered().ticks() >= a);
    }

    /// A CPUID with leaf 1 (and leaf 0x8000_0001) whose EDX is `edx`; `max` is the top leaf.
    fn cpuid(max: u32, edx: u32) -> impl Fn(u32, u32) -> crate::CpuidRegs {
        move |leaf: u32, _sub: u32| {
            let r = |eax, edx| crate::CpuidRegs {
                eax,
                ebx: 0,
                ecx: 0,
                edx,
            };
            match leaf {
                0 => r(max, 0),
                1 if max >= 1 => r(0, edx),
                0x8000_0000 => r(0x8000_0001, 0),
                0x8000_0001 => r(0, edx),
                _ => r(0, 0),
            }
        }
    }

    #[test]
    fn no_tsc_bit_is_a_typed_outcome() {
        assert_eq!(
            Tsc::from_cpuid(&cpuid(1, 0)),
            Err(CounterUnavailable::NoTsc)
        );
        // No leaf 1 at all: no feature bits to read, so no TSC either.
        assert_eq!(
            Tsc::from_cpuid(&cpuid(0, 1 << 4)),
            Err(CounterUnavailable::NoTsc)
        );
        let tsc = Tsc::from_cpuid(&cpuid(1, 1 << 4)).unwrap();
        assert!(!tsc.has_rdtscp());
        let tsc = Tsc::from_cpuid(&cpuid(1, (1 << 4) | (1 << 27))).unwrap();
        assert!(tsc.has_rdtscp());
        assert_eq!(CounterUnavailable::NoTsc.token(), "no_tsc");
    }
}
