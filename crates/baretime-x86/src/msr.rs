//! Model-specific registers: `RDMSR` and `WRMSR`, which only ring 0 may execute.
//!
//! Two raw `unsafe` functions, as in the `x86_64` crate's `registers::model_specific`: the
//! caller proves the privilege level and that the MSR exists. Typed, checked access is built
//! on them ([`super::TscAdjust`]).

use core::arch::asm;

/// `IA32_TSC_ADJUST`: a signed offset added to the TSC of this CPU; a write to `IA32_TSC`
/// changes it by the same amount (Intel SDM vol. 3B, 18.17.3). Exists where
/// CPUID.(EAX=7, ECX=0):EBX bit 1 is set.
pub(crate) const IA32_TSC_ADJUST: u32 = 0x3B;

/// Reads model-specific register `msr` of the CPU this runs on.
///
/// # Safety
///
/// The caller runs at CPL 0 (ring 0): elsewhere `RDMSR` raises #GP, which a kernel turns
/// into a fault of the caller. `msr` must exist on this CPU (CPUID says which do): a
/// missing one raises #GP at CPL 0 too. Reading an MSR has no side effects for the MSRs this
/// crate names; for others, the caller answers for them.
#[inline]
pub(crate) unsafe fn rdmsr(msr: u32) -> u64 {
    let lo: u32;
    let hi: u32;
    // Not `nomem`: it also orders memory accesses for the compiler.
    // SAFETY: CPL 0 and an existing `msr` (the contract): RDMSR does not fault; it reads ECX and
    // writes only EDX:EAX (declared); no stack, no flags.
    unsafe {
        asm!("rdmsr", in("ecx") msr, out("eax") lo, out("edx") hi,
             options(nostack, preserves_flags))
    };
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Writes `value` to model-specific register `msr` of the CPU this runs on.
///
/// # Safety
///
/// As for [`rdmsr`] (CPL 0; `msr` exists), and `value` must be valid for `msr` (reserved
/// bits clear: a bad value raises #GP). The write's effect is the caller's to answer for:
/// an MSR can change how the CPU maps memory or handles interrupts. For [`IA32_TSC_ADJUST`]
/// and [`IA32_TSC`] every value is valid and the effect is that this CPU's TSC moves, which
/// every timestamp taken before and after it must allow for.
#[inline]
pub(crate) unsafe fn wrmsr(msr: u32, value: u64) {
    let lo = value as u32;
    let hi = (value >> 32) as u32;
    // It reads ECX and EDX:EAX only; no stack, no flags; not `nomem` (a compiler barrier).
    // SAFETY: CPL 0, `msr` exists and `value` is valid for it (the contract), so WRMSR does
    // not fault; the caller answers for its effect.
    unsafe {
        asm!("wrmsr", in("ecx") msr, in("eax") lo, in("edx") hi,
             options(nostack, preserves_flags))
    };
}
