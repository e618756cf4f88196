//! The paravirtual scenarios: the TSC rate a hypervisor tells a ring-0 guest, confirmed by
//! calibration (the kernel's `mode=paravirt`, `boot/src/x86_64/paravirt.rs`).
//!
//! | scenario | QEMU `-cpu` | what is checked |
//! | --- | --- | --- |
//! | `x86_64-kvm-pvclock` | `host,+invtsc,-vmware-cpuid-freq` (no leaf 0x40000010) | the kernel registers a KVM pvclock area, derives the rate from `tsc_to_system_mul`/`tsc_shift`, and calibration against the HPET confirms it |
//! | `x86_64-kvm-hyperv` | the same with `hv-frequencies` | the kernel finds Hyper-V's leaves (0x40000000, KVM moved to 0x40000100), reads `HV_X64_MSR_TSC_FREQUENCY`, and calibration confirms it |
//!
//! Both need KVM: SKIP without a usable /dev/kvm. `hv-frequencies` needs no other `hv-`
//! flag (QEMU's docs/system/i386/hyperv.rst lists no dependency), but it needs a KVM with
//! Hyper-V emulation: where `KVM_CHECK_EXTENSION(KVM_CAP_HYPERV)` is 0, QEMU drops every
//! `hv-` flag without a word and the guest sees plain KVM. That host lacks the thing, so the
//! scenario SKIPs — with the guest's own view (its hypervisor leaf ranges) as evidence.
//! Where the capability is there and the guest still sees no Hyper-V, or sees it and the
//! read or the confirmation fails, it FAILs.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;

use super::{boot, calibrated, host_tsc, kvm_usable, name, ppm, Arch, Line, Run, CAL_KEYS};

/// `-vmware-cpuid-freq`: QEMU turns the timing leaf 0x40000010 on by default with invtsc;
/// off, pvclock is the only rate the hypervisor states.
const PVCLOCK_CPU: &str = "host,+invtsc,-vmware-cpuid-freq,-arch-capabilities";
const HYPERV_CPU: &str = "host,+invtsc,-vmware-cpuid-freq,hv-frequencies,-arch-capabilities";
const CMDLINE: &str = "mode=paravirt reference=hpet max_ms=1000";

/// Keys of the paravirtual read that both scenarios report.
const PV_KEYS: &[&str] = &[
    "hypervisor_ranges",
    "hv_0x40000000",
    "hv_0x40000100",
    "kvm_base",
    "kvm_features",
    "pvclock_msr",
    "pvclock_version",
    "tsc_to_system_mul",
    "tsc_shift",
    "pvclock_stable",
    "pvclock_hz",
    "pvclock_tolerance_ppb",
    "pvclock_error",
    "hyperv_base",
    "hyperv_frequency_msrs",
    "hyperv_tsc_hz",
    "hyperv_error",
    "candidates",
    "disagreements",
];

/// Runs the paravirtual scenarios (`name::KVM_PVCLOCK`, `name::KVM_HYPERV`) that `wanted` selects.
pub fn scenarios(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    if wanted(name::KVM_PVCLOCK) {
        lines.push(pvclock(kernel));
    }
    if wanted(name::KVM_HYPERV) {
        lines.push(hyperv(kernel));
    }
    lines
}

fn kvm_args(cpu: &'static str) -> [&'static str; 4] {
    ["-accel", "kvm", "-cpu", cpu]
}

/// Checks that the claim from `source` was discovered first, confirmed and chosen.
fn check_confirmed(line: &mut Line, run: &Run, source: &str) {
    if run.get("discovered_source") != Some(source) {
        line.fail(format!(
            "the best claim was {:?}, not {source}",
            run.get("discovered_source").unwrap_or("none")
        ));
    }
    if run.get("verdict") != Some("confirmed") {
        line.fail(format!(
            "calibration did not confirm the {source} figure (verdict {:?})",
            run.get("verdict").unwrap_or("none")
        ));
    }
    if run.get("chosen_source") != Some(source) {
        line.fail(format!("the {source} figure was not chosen"));
    }
}

fn pvclock(kernel: &Path) -> Line {
    let name = name::KVM_PVCLOCK;
    let line = match kvm_usable() {
        Err(why) => Line::skip(name, why),
        Ok(()) => {
            let mut line = Line::new(name);
            match boot(Arch::X86_64, kernel, &kvm_args(PVCLOCK_CPU), CMDLINE) {
                Err(e) => line.fail(e),
                Ok(run) => {
                    line.copy(&run, CAL_KEYS);
                    line.copy(&run, PV_KEYS);
                    if calibrated(&mut line, &run).is_some() {
                        if let Some(e) = run.get("pvclock_error") {
                            line.fail(format!("pvclock: {e}"));
                        }
                        if run.get("pvclock_hz").is_none() {
                            line.fail("the kernel read no pvclock rate");
                        }
                        if run
                            .get("candidates")
                            .is_some_and(|c| c.contains("hypervisor_40000010h"))
                        {
                            line.fail(
                                "leaf 0x40000010 is present: the scenario must run without it",
                            );
                        }
                        check_confirmed(&mut line, &run, "kvm_pvclock");
                        compare_claim_with_host(&mut line, &run, "pvclock_hz");
                    }
                }
            }
            line
        }
    };
    line.print();
    line
}

fn hyperv(kernel: &Path) -> Line {
    let name = name::KVM_HYPERV;
    if let Err(why) = kvm_usable() {
        let line = Line::skip(name, why);
        line.print();
        return line;
    }
    let mut line = Line::new(name);
    let cap = kvm_cap_hyperv();
    match boot(Arch::X86_64, kernel, &kvm_args(HYPERV_CPU), CMDLINE) {
        Err(e) => line.fail(e),
        Ok(run) => {
            line.copy(&run, CAL_KEYS);
            line.copy(&run, PV_KEYS);
            line.key(
                "kvm_cap_hyperv",
                cap.as_ref()
                    .map_or_else(|e| format!("unknown({e})"), |c| c.to_string()),
            );
            if run.get("hyperv_base").is_none() && run.broken().is_none() {
                // The guest saw no Hyper-V: the host's doing, or ours.
                match cap {
                    Ok(0) => {
                        line = Line {
                            result: "SKIP",
                            reason: Some(format!(
                                "this host's KVM has no Hyper-V emulation (KVM_CAP_HYPERV = 0): \
                                 QEMU dropped hv-frequencies and the guest saw only {}",
                                run.get("hv_0x40000000").unwrap_or("no hypervisor leaves")
                            )),
                            ..line
                        };
                    }
                    _ => line.fail(
                        "the guest found no Hyper-V leaf range although KVM offers Hyper-V emulation",
                    ),
                }
            } else if calibrated(&mut line, &run).is_some() {
                if run.get("hyperv_frequency_msrs") != Some("true") {
                    line.fail("Hyper-V's leaf 0x40000003 does not offer the frequency MSRs");
                }
                if let Some(e) = run.get("hyperv_error") {
                    line.fail(format!("HV_X64_MSR_TSC_FREQUENCY: {e}"));
                }
                if run.get("hyperv_tsc_hz").is_none() {
                    line.fail("the kernel read no HV_X64_MSR_TSC_FREQUENCY");
                }
                check_confirmed(&mut line, &run, "hyperv_tsc_frequency_msr");
                compare_claim_with_host(&mut line, &run, "hyperv_tsc_hz");
            }
        }
    }
    line.print();
    line
}

/// A sharper check than the guest's own (whose HPET reads under KVM cost microseconds, so
/// its bound is tens of ppm): the hypervisor's figure against the host's measurement of the
/// same TSC (KVM without TSC scaling gives the guest the host's TSC). Allowed: the host's
/// expanded uncertainty plus 1 ppm for a figure written in whole kHz (verification's own
/// margin). Without a host measurement the line says so and the guest's verdict stands.
fn compare_claim_with_host(line: &mut Line, run: &Run, key: &str) {
    let Some(claim) = run.num(key) else { return };
    match host_tsc() {
        Err(e) => line.key("vs_host", format!("none({})", e.replace(' ', "_"))),
        Ok(h) => {
            let dev = ppm(claim, h.hz);
            let bound = h.uncertainty_ppm + 1.0;
            line.key("host_hz", format!("{:.3}", h.hz));
            line.key("host_uncertainty_ppm", format!("{:.3}", h.uncertainty_ppm));
            line.key("claim_vs_host_ppm", format!("{dev:+.3}"));
            line.key("claim_vs_host_bound_ppm", format!("{bound:.3}"));
            if dev.abs() > bound {
                line.fail(format!(
                    "the hypervisor's {key} is {dev:+.3} ppm off the host's measurement (bound {bound:.3})"
                ));
            }
        }
    }
}

/// `KVM_CHECK_EXTENSION(KVM_CAP_HYPERV)` on /dev/kvm: > 0 when KVM emulates Hyper-V.
fn kvm_cap_hyperv() -> Result<i32, String> {
    extern "C" {
        // libc's ioctl(2); std links libc on Linux, so no crate is needed for one call.
        fn ioctl(fd: i32, request: u64, ...) -> i32;
    }
    const KVM_CHECK_EXTENSION: u64 = 0xAE03; // _IO(KVMIO = 0xAE, 0x03)
    const KVM_CAP_HYPERV: u64 = 44;
    let kvm = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| e.to_string())?;
    // SAFETY: a valid open fd for the call's duration; KVM_CHECK_EXTENSION takes an integer
    // argument by value and writes no memory.
    let r = unsafe { ioctl(kvm.as_raw_fd(), KVM_CHECK_EXTENSION, KVM_CAP_HYPERV) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(r)
}
