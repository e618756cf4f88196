//! `mode=paravirt`: the TSC rate the hypervisor tells a ring-0 guest, as a kernel on
//! QEMU/KVM, Firecracker or Hyper-V would read it at boot.
//!
//! 1. Walk the hypervisor leaf ranges (0x40000000, 0x40000100, … as Linux's
//!    `hypervisor_cpuid_base` does): with Hyper-V enlightenments QEMU puts Hyper-V at
//!    0x40000000 and KVM at 0x40000100.
//! 2. Hyper-V with the frequency MSRs (leaf base+3: EAX bit 11 and EDX bit 8): read
//!    `HV_X64_MSR_TSC_FREQUENCY`.
//! 3. KVM with a clock source (leaf base+1 EAX bit 3 or 0): register the pvclock area, a
//!    `static` here (the kernel is identity-mapped: its address is its physical address),
//!    read the scale under the version protocol, derive the rate, and end the registration.
//! 4. Put the claims into discovery's candidate list at their trust position; the first is
//!    the claim calibration verifies.

use core::fmt::Write;

use baretime::arch::x86_64::paravirt::{self as hw, KvmPvclock, PvclockArea};
use baretime::discover::paravirt::{self, KVM_FEATURE_CLOCKSOURCE_STABLE_BIT};
use baretime::discover::x86::X86Discovery;
use baretime::discover::Candidates;
use baretime::Frequency;
use raw_cpuid::{CpuIdReader, CpuIdReaderNative};

use super::Serial;
use crate::scenario::Hz;

/// The pvclock area KVM writes: 32 bytes, 32-byte aligned, in the kernel's `.bss`.
static PVCLOCK: PvclockArea = PvclockArea::new();

/// One hypervisor leaf range: its base leaf, its maximum leaf, its signature.
#[derive(Clone, Copy)]
struct Range {
    base: u32,
    max: u32,
    signature: [u8; 12],
}

/// The hypervisor leaf ranges present, at most four (QEMU offers two at most).
fn walk_ranges() -> ([Option<Range>; 4], usize) {
    let mut ranges = [None; 4];
    let mut n = 0;
    for base in (0x4000_0000u32..0x4001_0000).step_by(0x100) {
        let r = CpuIdReaderNative.cpuid2(base, 0);
        let mut signature = [0u8; 12];
        for (chunk, reg) in signature.chunks_exact_mut(4).zip([r.ebx, r.ecx, r.edx]) {
            chunk.copy_from_slice(&reg.to_le_bytes());
        }
        // A range exists when its maximum leaf lies inside it (Hyper-V and KVM both report
        // at least base + 1) and it has a signature.
        if r.eax >= base && r.eax < base + 0x100 && signature != [0; 12] {
            if let Some(slot) = ranges.get_mut(n) {
                *slot = Some(Range {
                    base,
                    max: r.eax,
                    signature,
                });
                n += 1;
            }
        }
    }
    (ranges, n)
}

/// The signature as one token: printable ASCII kept, everything else (NUL padding, spaces)
/// dropped or turned into `_`.
fn signature_token(sig: &[u8; 12], out: &mut Serial) {
    let end = sig
        .iter()
        .rposition(|&b| b != 0 && b != b' ')
        .map_or(0, |i| i + 1);
    for &b in &sig[..end] {
        let c = if b.is_ascii_alphanumeric() { b } else { b'_' };
        let _ = out.write_char(char::from(c));
    }
}

/// Reads every paravirtual TSC rate this guest offers, prints the figures, and returns the
/// most trusted claim of discovery's candidates with the paravirtual ones put in place.
pub fn claim(out: &mut Serial, discovery: &X86Discovery) -> Option<Frequency> {
    let mut list = Candidates::new();
    let _ = list.extend_from_slice(discovery.candidates());

    let (ranges, n) = walk_ranges();
    let _ = write!(out, "hypervisor_ranges={n}");
    for r in ranges.iter().flatten() {
        let _ = write!(out, " hv_{:#x}=", r.base);
        signature_token(&r.signature, out);
        let _ = write!(out, ":{:#x}", r.max);
    }
    let _ = writeln!(out);

    let mut hyperv_msr = false;
    let mut pvclock = false;
    for r in ranges.iter().flatten() {
        if &r.signature == b"Microsoft Hv" && r.max >= r.base + 3 {
            let f = CpuIdReaderNative.cpuid2(r.base + 3, 0);
            let available = paravirt::hyperv_frequency_msrs_available(f.eax, f.edx);
            let _ = writeln!(
                out,
                "hyperv_base={:#x} hyperv_features_eax={:#x} hyperv_features_edx={:#x} hyperv_frequency_msrs={available}",
                r.base, f.eax, f.edx
            );
            if available && !hyperv_msr {
                hyperv_msr = true;
                // Said first, so that a #GP (a triple fault: there is no IDT) leaves evidence.
                let _ = writeln!(out, "hyperv_msr_read=0x40000022");
                // SAFETY: ring 0; this Hyper-V range's feature leaf says the frequency MSRs
                // are readable, which is the function's contract.
                match unsafe { hw::hyperv_tsc_frequency() } {
                    Ok(freq) => {
                        let _ = writeln!(out, "hyperv_tsc_hz={}", Hz(freq.as_millihz()));
                        paravirt::insert_claim(&mut list, freq);
                    }
                    Err(e) => {
                        let _ = writeln!(out, "hyperv_error=\"{e}\"");
                    }
                }
            }
        }
        if &r.signature == b"KVMKVMKVM\0\0\0" && r.max > r.base {
            let features = CpuIdReaderNative.cpuid2(r.base + 1, 0).eax;
            let _ = write!(
                out,
                "kvm_base={:#x} kvm_features={features:#x} kvm_stable_bit_offered={}",
                r.base,
                features & KVM_FEATURE_CLOCKSOURCE_STABLE_BIT != 0
            );
            let msr = match paravirt::kvm_clock_msr(features) {
                Ok(msr) => msr,
                Err(e) => {
                    let _ = writeln!(out, " pvclock_error=\"{e}\"");
                    continue;
                }
            };
            let _ = writeln!(out, " pvclock_msr={msr:#x}");
            if pvclock {
                continue;
            }
            pvclock = true;
            let phys = core::ptr::addr_of!(PVCLOCK) as u64;
            // SAFETY: ring 0 under KVM, whose feature leaf offers `msr`; the kernel is
            // identity-mapped, so PVCLOCK's address is its guest-physical address, in RAM
            // (.bss); this kernel registers no other area, and the area is `'static`.
            let reg = match unsafe { KvmPvclock::register(&PVCLOCK, phys, msr) } {
                Ok(reg) => reg,
                Err(e) => {
                    let _ = writeln!(out, "pvclock_error=\"{e}\"");
                    continue;
                }
            };
            match reg.read() {
                Ok(info) => {
                    let _ = write!(
                        out,
                        "pvclock_area={phys:#x} pvclock_version={} tsc_to_system_mul={:#x} tsc_shift={} pvclock_flags={:#x} pvclock_stable={}",
                        info.version,
                        info.tsc_to_system_mul,
                        info.tsc_shift,
                        info.flags,
                        info.tsc_stable()
                    );
                    match info.tsc_frequency() {
                        Ok(freq) => {
                            let _ = writeln!(
                                out,
                                " pvclock_hz={} pvclock_tolerance_ppb={}",
                                Hz(freq.as_millihz()),
                                freq.accuracy().bound_ppb()
                            );
                            paravirt::insert_claim(&mut list, freq);
                        }
                        Err(e) => {
                            let _ = writeln!(out, " pvclock_error=\"{e}\"");
                        }
                    }
                }
                Err(e) => {
                    let _ = writeln!(out, "pvclock_error=\"{e}\"");
                }
            }
            // This kernel reads the rate once: KVM need not keep writing the area.
            reg.disable();
            let _ = writeln!(out, "pvclock_disabled=1");
        }
    }
    let _ = write!(out, "candidates=");
    for (i, c) in list.iter().enumerate() {
        let _ = write!(out, "{}{}", if i == 0 { "" } else { "," }, c.source());
    }
    if list.is_empty() {
        let _ = write!(out, "none");
    }
    let _ = writeln!(out);
    list.first().copied()
}
