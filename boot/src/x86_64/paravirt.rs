//! `mode=paravirt`: the TSC rate the hypervisor tells a ring-0 guest, as a kernel on
//! QEMU/KVM, Firecracker or Hyper-V would read it at boot.
//!
//! 1. Take the hypervisor leaf ranges discovery walked (0x40000000, 0x40000100, …):
//!    with Hyper-V enlightenments QEMU puts Hyper-V at 0x40000000 and KVM at 0x40000100.
//! 2. Hyper-V with the frequency MSRs (leaf base+3: EAX bit 11 and EDX bit 8): read
//!    `HV_X64_MSR_TSC_FREQUENCY`.
//! 3. KVM with a clock source (leaf base+1 EAX bit 3 or 0, as discovery read it:
//!    `X86Discovery::kvm_features`): register the pvclock area, a
//!    `static` here (the kernel is identity-mapped: its address is its physical address),
//!    read the scale under the version protocol, derive the rate, and end the registration.
//! 4. Add the claims to discovery (`X86Discovery::add_claim`: at their trust position,
//!    ahead of the CPUID claims); its best is the claim calibration verifies.

use core::fmt::Write;

use baretime::Frequency;
use baretime_x86::{self as hw, KvmPvclock, PvclockArea};
use baretime_x86::{HypervisorKind, X86Discovery};

use super::Serial;
use crate::scenario::Hz;

/// The pvclock area KVM writes: 32 bytes, 32-byte aligned, in the kernel's `.bss`.
static PVCLOCK: PvclockArea = PvclockArea::new();

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

/// Reads every paravirtual TSC rate this guest offers, prints the figures, adds them to
/// `discovery`, and returns its most trusted claim.
pub fn claim(out: &mut Serial, discovery: &mut X86Discovery) -> Option<Frequency> {
    let mut found: [Option<(u32, u32, HypervisorKind)>; 4] = [None; 4];
    let _ = write!(out, "hypervisor_ranges={}", discovery.hypervisors().len());
    for (slot, r) in found.iter_mut().zip(discovery.hypervisors()) {
        let _ = write!(out, " hv_{:#x}=", r.base);
        signature_token(&r.signature, out);
        let _ = write!(out, ":{:#x}", r.max_leaf);
        *slot = Some((r.base, r.max_leaf, r.kind));
    }
    let _ = writeln!(out);

    // Discovery decoded the feature leaves of the first Hyper-V range (base + 3) and the first
    // KVM range (base + 1) reaching them.
    let hyperv_msr = discovery.hyperv_tsc_frequency_msr();
    let kvm_features = discovery.kvm_features();
    let mut hyperv_seen = false;
    let mut pvclock = false;
    for (base, max, kind) in found.into_iter().flatten() {
        if kind == HypervisorKind::HyperV && max >= base + 3 && !hyperv_seen {
            hyperv_seen = true;
            let available = hyperv_msr;
            let _ = writeln!(
                out,
                "hyperv_base={base:#x} hyperv_frequency_msrs={available}"
            );
            if available {
                // Said first, so that a #GP (a triple fault: there is no IDT) leaves evidence.
                let _ = writeln!(out, "hyperv_msr_read=0x40000022");
                // SAFETY: ring 0; this Hyper-V range's feature leaf says the frequency MSRs
                // are readable, which is the function's contract.
                match unsafe { hw::read_hyperv_tsc_frequency() } {
                    Ok(freq) => {
                        let _ = writeln!(out, "hyperv_tsc_hz={}", Hz(freq.as_millihz()));
                        discovery.add_claim(freq);
                    }
                    Err(e) => {
                        let _ = writeln!(out, "hyperv_error=\"{e}\"");
                    }
                }
            }
        }
        let kvm = kvm_features.filter(|k| kind == HypervisorKind::Kvm && k.base() == base);
        if let Some(kvm) = kvm {
            let _ = write!(
                out,
                "kvm_base={base:#x} kvm_features={:#x} kvm_stable_bit_offered={}",
                kvm.bits(),
                kvm.stable_bit()
            );
            let msr = match kvm.clock_msr() {
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
            // SAFETY: ring 0 under KVM, whose feature leaf (read on this CPU) offers `msr`; the
            // kernel is identity-mapped, so PVCLOCK's address is its guest-physical address,
            // in RAM (.bss); this kernel registers no other area, and the area is `'static`.
            let reg = match unsafe { KvmPvclock::register(&PVCLOCK, phys, kvm) } {
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
                            discovery.add_claim(freq);
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
    for (i, c) in discovery.candidates().iter().enumerate() {
        let _ = write!(out, "{}{}", if i == 0 { "" } else { "," }, c.source());
    }
    if discovery.candidates().is_empty() {
        let _ = write!(out, "none");
    }
    let _ = write!(out, " disagreements=");
    let mut any = false;
    for d in discovery.disagreements() {
        let _ = write!(out, "{}{}/{}", if any { "," } else { "" }, d.a, d.b);
        any = true;
    }
    let _ = writeln!(out, "{}", if any { "" } else { "none" });
    discovery.best()
}
