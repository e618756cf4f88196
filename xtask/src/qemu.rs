//! `cargo xtask qemu`: the bare-metal scenarios.
//!
//! Builds the `boot` kernels, boots each scenario under QEMU with a timeout, reads the
//! `key=value` results the kernel prints on its serial port, checks them, and prints one line
//! per scenario (the output contract that acceptance checks read):
//!
//! ```text
//! scenario=<name> result=<PASS|FAIL|SKIP> key=value... [reason="..."]
//! ```
//!
//! | scenario | machine | what is checked |
//! | --- | --- | --- |
//! | `x86_64-tcg-pit`, `-hpet`, `-acpipm` | TCG | the TSC calibrated against each reference agrees with the other two and with the host's own measurement (below) |
//! | `x86_64-kvm` | KVM, `-cpu host,+invtsc,+vmware-cpuid-freq` | the hypervisor leaf's exact kHz figure is confirmed by calibration against the HPET |
//! | `x86_64-lying-cpuid` | TCG | discovery fed a leaf 0x15 that claims 25/24 of the real rate: verification rejects it and uses the measurement |
//! | `x86_64-kvm-pvclock`, `x86_64-kvm-hyperv` | KVM | the hypervisor's paravirtual TSC rate (pvclock, Hyper-V's MSR) read in ring 0 and confirmed: see `qemu_hv.rs` |
//! | `x86_64-tcg-delay` | TCG | a 10 ms `Delay` measured by the HPET lasts at least 10 ms and not much more |
//! | `x86_64-icount` | TCG, `-icount shift=0..3` (see `coverage.rs`) | 8 calibrations of a TSC whose truth is exact (1 GHz of QEMU's virtual clock, as the HPET and PM timer are): each within its own bound; misses, coverage and \|error\|/bound reported (`cargo xtask coverage x86_64` for many boots) |
//! | `aarch64-virt` | `virt`, TCG | CNTFRQ_EL0 (62.5 MHz) is confirmed by calibration against semihosting's elapsed time |
//! | `aarch64-bad-cntfrq` | `virt`, TCG | after the kernel writes a wrong CNTFRQ_EL0 (24 MHz) verification rejects it |
//! | `aarch64-delay` | `virt`, TCG | as the x86 delay, measured by semihosting's elapsed time |
//! | `timers-aarch64` | `virt` (GICv2), TCG | embassy-executor tasks sleeping 10 µs–100 ms on the EL1 virtual timer through the embassy-time driver while the clock is recalibrated ±100 ppm (`boot/src/aarch64/timers.rs`): no early wake by the clock, every task finished with exactly the wakes its seed plans (≥ 160), both recalibrations; lateness p50 / p99 / max (and the interrupt's own share) reported against the 50 µs p50 goal |
//! | `aarch64-errata` | `virt`, TCG | each counter erratum's faulty-read model over the real CNTVCT_EL0 (`boot/src/aarch64/errata.rs`): with its workaround no step back, no untrue value, no read at the retry bound, a `Clock` never ahead of the true count and 1 ms delays at least 1 ms; without it, the same reads show the model's glitches |
//! | `cortex-m4-an386`, `cortex-m3-an385`, `cortex-m0-microbit` with each atomic feature | `mps2-an386`, `mps2-an385`, `microbit` (see `qemu_cortexm.rs`) | firmware reading `static` clocks in thread mode and in interrupts at three priorities, `update()` from interrupts, `recalibrate()` from thread mode, a SysTick / 16-bit timer extended by `ExtendedTimer`: no step back, no late update, no short delay, no hang |
//! | `timers-m4` (also picked by `cortex-m`: it answers to `cortex-m4-an386-timers` too) | `mps2-an386` (see `qemu_cortexm.rs`) | embassy-executor tasks sleeping random durations (10 µs – 100 ms) for 2.5 s through an embassy-time driver over a `static` Clock, a CMSDK timer as the alarm, the clock recalibrated ±100 ppm midway: no early wake, every task finished, lateness p50 / p99 / max reported |
//! | `rtic-m4` (also picked by `cortex-m`: it answers to `cortex-m4-an386-rtic` too) | `mps2-an386` (see `qemu_cortexm.rs`) | the same on RTIC 2: 12 tasks (8 below the alarm's priority, 4 above) sleeping through baretime-rtic's monotonic, `Mono::delay` and `Mono::delay_until`: no early wake by the clock or by `Mono::now()`, every task finished, lateness p50 / p99 / max reported |
//! | `cost-m4`, `cost-m0` | `mps2-an386`, `microbit`, `-icount shift=0` (see `qemu_cortexm.rs`) | what each clock call costs in instructions (`raw`, `floor`, `now`, `update`, `deadline`, the embassy driver's longest interrupts-off stretch, …), timed by a second hardware timer: FAIL when a run did not finish or missed the issue's targets (`now` ≤ 2 × `floor`; on the M4 `deadline` ≤ 150, `update` ≤ 300, `irq_off_max` ≤ 250) |
//! | `timers-x86-tcg`, `timers-x86-kvm` | TCG (APIC one-shot), KVM (TSC-deadline) (see `qemu_timers.rs`) | embassy tasks sleeping random durations on the local APIC timer through the `Clock`, recalibrated ±100 ppm midway: no early wake; lateness p50 / p99 / max |
//! | `wall-x86`, `wall-aarch64` | `pc`, `virt`, TCG `-icount shift=4`; `-rtc base=2031-03-14T15:09:26,clock=vm` (see `qemu_wall.rs`) | the boot's time of day from the CMOS RTC / PL031 at its seconds edge: within 5 ms of the truth (goal 1 ms); a slew of +0.5 s at 250 000 ppm ends on time, absorbs exactly 0.5 s, and on every read neither the wall time nor the monotonic clock goes back or jumps |
//! | `aarch64-watchdog`, `aarch64-watchdog-delays`, `aarch64-refine` (`aarch64-refine-60` by hand), `x86_64-watchdog-hpet`, `-acpipm`, `-delays` | `virt`, `pc`, TCG; `x86_64-watchdog-hpet`, `-acpipm` under `-icount shift=4` (see `qemu_watch.rs`) | a rate change midway (+100 ppm, then +0.1 %) detected within the docs' time and recalibrated with no step back or jump; the clock's true rate error within the watchdog's `bound_ppb` at every report (exact truth: `virt`, and `pc` under `-icount`); delayed reference reads (no `-icount`) with no false alarm; refinement's bound and true error after 1, 10 (and 60) s |
//! | `x86_64-smp`, `x86_64-smp-kvm`, `x86_64-smp-tsc-skew`, `x86_64-smp-tsc-skew-sim`, `x86_64-calibration-fault`, `aarch64-smp` | `-smp 4` (see `qemu_smp.rs`) | one `Clock` read on every CPU while CPU 0 recalibrates; the warp check; a skewed TSC; a failing reference |
//!
//! # The agreement bound
//!
//! Under TCG the guest's TSC is the host's TSC (QEMU reads RDTSC on the host), and QEMU's
//! PIT, HPET and ACPI PM timer are computed from the host's monotonic clock, the same clock
//! the host-side measurement (`cargo run --example report -- --kv`, the crate
//! calibrating against std's monotonic clock) uses. So all four measure one quantity. Two of
//! them, `a` and `b`, agree when
//!
//! `|a − b| ≤ U_a + U_b + S_a + S_b (+ D for the host)`
//!
//! - `U` is each calibration's expanded uncertainty, which the crate reports as a bound that
//!   holds at least 99 % of the time, so the sum holds at least 98 % of the time even for
//!   fully correlated errors, and far more often for independent ones;
//! - `S` is the reference's known systematic offset under QEMU: QEMU emulates the PIT at
//!   1 193 182 Hz (the crate assumes 1 193 181.818 Hz: +0.153 ppm) and the PM timer at
//!   3 579 545 Hz (crate: 3 579 545.455 Hz: −0.127 ppm); the HPET states its own period;
//! - `D` is how much the host's own figure moved between the measurement before and after the
//!   guests ran (NTP steering of the monotonic clock shows up here).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::{cargo, have};

/// The Cortex-M firmware on MPS2 and the micro:bit.
#[path = "qemu_cortexm.rs"]
mod cortexm;
/// `cargo xtask coverage`: the `aarch64-virt` calibration booted many times.
#[path = "coverage.rs"]
pub(crate) mod coverage;
#[path = "qemu_hv.rs"]
mod hv;
/// The SMP scenarios (`x86_64-smp`, `aarch64-smp`, the TSC skew, the calibration fault).
#[path = "qemu_smp.rs"]
mod smp;
/// The x86 timer scenarios (`timers-x86-tcg`, `timers-x86-kvm`).
#[path = "qemu_timers.rs"]
mod timers;
/// The time-of-day scenarios (`wall-x86`, `wall-aarch64`).
#[path = "qemu_wall.rs"]
mod wall;
/// The watchdog and refinement scenarios (`aarch64-watchdog`, `aarch64-refine`).
#[path = "qemu_watch.rs"]
mod watch;

/// Longest a scenario may run before it is killed and fails.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The wrong leaf-0x15 claim, as a fraction of the real rate: the 24 vs 25 MHz crystal mix-up.
const LIE_NUM: f64 = 25.0;
const LIE_DEN: f64 = 24.0;
/// The wrong CNTFRQ_EL0 the bad-firmware scenario writes (a common crystal, not QEMU's rate).
const BAD_CNTFRQ_HZ: u64 = 24_000_000;
/// QEMU's generic timer rate on `virt` (a 16 ns period from its virtual clock).
const QEMU_CNTFRQ_HZ: u64 = 62_500_000;
/// The delay the delay scenarios ask for.
const DELAY_NS: u64 = 10_000_000;
/// How far past the asked delay the *best* of five delays may end. The delay loop itself
/// overshoots by a counter read or two (here: 0.4–5 µs); the rest is QEMU: the first runs of
/// freshly translated code take 10–60 µs longer under TCG, and a host preemption of the vCPU
/// thread adds milliseconds to any run it lands in — on a busy 2-core host, to most of them
/// (seen: 10.07, 11.08, 11.91, 11.95, 10.00 ms). A delay that overshoots by itself overshoots
/// in every run, so the least disturbed run is the one that measures the delay, not the host.
const DELAY_SLACK_NS: u64 = 200_000;

/// Every scenario's name, written once: the runners, and `run`'s lists of what each kernel
/// runs, use these.
pub(crate) mod name {
    pub const TCG_PIT: &str = "x86_64-tcg-pit";
    pub const TCG_HPET: &str = "x86_64-tcg-hpet";
    pub const TCG_ACPIPM: &str = "x86_64-tcg-acpipm";
    pub const KVM: &str = "x86_64-kvm";
    pub const LYING_CPUID: &str = "x86_64-lying-cpuid";
    pub const TCG_DELAY: &str = "x86_64-tcg-delay";
    pub const KVM_PVCLOCK: &str = "x86_64-kvm-pvclock";
    pub const KVM_HYPERV: &str = "x86_64-kvm-hyperv";
    pub const SMP: &str = "x86_64-smp";
    pub const SMP_KVM: &str = "x86_64-smp-kvm";
    pub const SMP_TSC_SKEW: &str = "x86_64-smp-tsc-skew";
    pub const SMP_TSC_SKEW_SIM: &str = "x86_64-smp-tsc-skew-sim";
    pub const CALIBRATION_FAULT: &str = "x86_64-calibration-fault";
    pub const X86_ICOUNT: &str = "x86_64-icount";
    pub const TIMERS_TCG: &str = "timers-x86-tcg";
    pub const TIMERS_KVM: &str = "timers-x86-kvm";
    pub const AARCH64_VIRT: &str = "aarch64-virt";
    pub const AARCH64_BAD_CNTFRQ: &str = "aarch64-bad-cntfrq";
    pub const AARCH64_DELAY: &str = "aarch64-delay";
    pub const AARCH64_ERRATA: &str = "aarch64-errata";
    pub const AARCH64_SMP: &str = "aarch64-smp";
    pub const TIMERS_AARCH64: &str = "timers-aarch64";
    pub const X86_WATCHDOG_HPET: &str = "x86_64-watchdog-hpet";
    pub const X86_WATCHDOG_ACPIPM: &str = "x86_64-watchdog-acpipm";
    pub const X86_WATCHDOG_PIT: &str = "x86_64-watchdog-pit";
    pub const X86_WATCHDOG_DELAYS: &str = "x86_64-watchdog-delays";
    pub const AARCH64_WATCHDOG: &str = "aarch64-watchdog";
    pub const AARCH64_WATCHDOG_DELAYS: &str = "aarch64-watchdog-delays";
    pub const AARCH64_REFINE: &str = "aarch64-refine";
    /// By hand only (`cargo xtask qemu refine-60`): a minute of wall time.
    pub const AARCH64_REFINE_60: &str = "aarch64-refine-60";
    pub const CM4: &str = "cortex-m4-an386";
    pub const CM4_PA: &str = "cortex-m4-an386-portable-atomic";
    pub const CM4_PA_CS: &str = "cortex-m4-an386-portable-atomic-cs";
    pub const CM3: &str = "cortex-m3-an385";
    pub const CM3_PA: &str = "cortex-m3-an385-portable-atomic";
    pub const CM3_PA_CS: &str = "cortex-m3-an385-portable-atomic-cs";
    pub const CM0_PA_CS: &str = "cortex-m0-microbit-portable-atomic-cs";
    pub const CM0_PA_SINGLE_CORE: &str = "cortex-m0-microbit-portable-atomic-single-core";
    pub const TIMERS_M4: &str = "timers-m4";
    /// A second name `timers-m4` answers to, so that the filters that pick the Cortex-M
    /// scenarios (`cortex-m`, `cortex-m4`, `an386`) pick it too.
    pub const TIMERS_M4_ALIAS: &str = "cortex-m4-an386-timers";
    pub const RTIC_M4: &str = "rtic-m4";
    /// Likewise for `rtic-m4`.
    pub const RTIC_M4_ALIAS: &str = "cortex-m4-an386-rtic";
    pub const COST_M4: &str = "cost-m4";
    pub const COST_M0: &str = "cost-m0";
    pub const WALL_X86: &str = "wall-x86";
    pub const WALL_AARCH64: &str = "wall-aarch64";

    /// Whether a filter picks `name`: by itself, or for `timers-m4` and `rtic-m4` by their
    /// aliases.
    pub fn picked(name: &str, wanted: &dyn Fn(&str) -> bool) -> bool {
        wanted(name)
            || (name == TIMERS_M4 && wanted(TIMERS_M4_ALIAS))
            || (name == RTIC_M4 && wanted(RTIC_M4_ALIAS))
    }

    /// The scenarios of the x86_64 kernel, in the order they run.
    pub const X86_64: &[&str] = &[
        TCG_PIT,
        TCG_HPET,
        TCG_ACPIPM,
        KVM,
        LYING_CPUID,
        TCG_DELAY,
        X86_ICOUNT,
        KVM_PVCLOCK,
        KVM_HYPERV,
        SMP,
        SMP_KVM,
        SMP_TSC_SKEW,
        SMP_TSC_SKEW_SIM,
        CALIBRATION_FAULT,
        TIMERS_TCG,
        TIMERS_KVM,
        WALL_X86,
        X86_WATCHDOG_HPET,
        X86_WATCHDOG_ACPIPM,
        X86_WATCHDOG_PIT,
        X86_WATCHDOG_DELAYS,
    ];
    /// The scenarios of the aarch64 kernel, in the order they run.
    pub const AARCH64: &[&str] = &[
        AARCH64_VIRT,
        AARCH64_BAD_CNTFRQ,
        AARCH64_DELAY,
        AARCH64_ERRATA,
        AARCH64_SMP,
        TIMERS_AARCH64,
        WALL_AARCH64,
        AARCH64_WATCHDOG,
        AARCH64_WATCHDOG_DELAYS,
        AARCH64_REFINE,
        AARCH64_REFINE_60,
    ];
    /// The Cortex-M firmware's scenarios (`qemu_cortexm.rs`), in the order they run.
    pub const CORTEX_M: &[&str] = &[
        CM4,
        CM4_PA,
        CM4_PA_CS,
        CM3,
        CM3_PA,
        CM3_PA_CS,
        CM0_PA_CS,
        CM0_PA_SINGLE_CORE,
        TIMERS_M4,
        RTIC_M4,
        COST_M4,
        COST_M0,
    ];
}

/// QEMU options of the single-CPU TCG scenarios.
const TCG_ARGS: &[&str] = &["-accel", "tcg"];

/// QEMU options of the KVM scenario. `-arch-capabilities`: some KVM implementations (the
/// software `kvm_pvm` this project's machine has) refuse the IA32_ARCH_CAPABILITIES MSR that
/// `-cpu host` would set, and QEMU then aborts; the guest needs nothing from that MSR.
const KVM_ARGS: &[&str] = &[
    "-accel",
    "kvm",
    "-cpu",
    "host,+invtsc,+vmware-cpuid-freq,-arch-capabilities",
];

/// Systematic offset of a reference under QEMU, in ppm (see the module docs).
fn systematic_ppm(reference: &str) -> f64 {
    match reference {
        "pit" => 0.153,
        "acpi_pm" => 0.127,
        _ => 0.0,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    fn target(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-none",
            Arch::Aarch64 => "aarch64-unknown-none",
        }
    }
    fn qemu(self) -> &'static str {
        match self {
            Arch::X86_64 => "qemu-system-x86_64",
            Arch::Aarch64 => "qemu-system-aarch64",
        }
    }
}

/// `key=value` pairs the kernel printed (later ones win).
type Kv = BTreeMap<String, String>;

fn parse_kv(text: &str) -> Kv {
    let mut kv = Kv::new();
    for line in text.lines() {
        for token in line.split_whitespace() {
            if let Some((k, v)) = token.split_once('=') {
                kv.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
    }
    kv
}

/// What one QEMU run gave.
struct Run {
    kv: Kv,
    stdout: String,
    stderr: String,
    wall: Duration,
    timed_out: bool,
    timeout: Duration,
}

impl Run {
    fn get(&self, key: &str) -> Option<&str> {
        self.kv.get(key).map(String::as_str)
    }
    fn num(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(|v| v.parse().ok())
    }
    /// Why the run as a whole is unusable, if it is.
    fn broken(&self) -> Option<String> {
        if self.timed_out {
            return Some(format!("timed out after {}s", self.timeout.as_secs()));
        }
        if let Some(p) = self.get("panic") {
            return Some(format!("kernel panicked: {p}"));
        }
        if let Some(e) = self.get("error") {
            return Some(format!("kernel reported error: {e}"));
        }
        if self.get("done") != Some("1") {
            let tail: String = self
                .stderr
                .lines()
                .last()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            let out: String = self
                .stdout
                .lines()
                .last()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            return Some(format!(
                "kernel did not finish (last output: {out:?}; qemu: {tail:?})"
            ));
        }
        None
    }
}

/// Boots `kernel` with `qemu_args` and the kernel command line `cmdline`.
fn boot(arch: Arch, kernel: &Path, qemu_args: &[&str], cmdline: &str) -> Result<Run, String> {
    boot_within(arch, kernel, qemu_args, cmdline, TIMEOUT)
}

/// [`boot`] with a timeout of its own.
fn boot_within(
    arch: Arch,
    kernel: &Path,
    qemu_args: &[&str],
    cmdline: &str,
    timeout: Duration,
) -> Result<Run, String> {
    let mut cmd = Command::new(arch.qemu());
    cmd.args([
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
        "-m",
        "128",
    ]);
    match arch {
        Arch::X86_64 => {
            cmd.args([
                "-M",
                "pc",
                "-device",
                "isa-debug-exit,iobase=0xf4,iosize=0x04",
            ]);
        }
        Arch::Aarch64 => {
            cmd.args(["-M", "virt", "-cpu", "cortex-a72"]);
            cmd.args(["-semihosting-config", "enable=on,target=native"]);
        }
    }
    cmd.args(qemu_args);
    cmd.arg("-kernel").arg(kernel).args(["-append", cmdline]);
    let Finished {
        stdout,
        stderr,
        wall,
        timed_out,
    } = run_qemu(&mut cmd, arch.qemu(), timeout)?;
    Ok(Run {
        kv: parse_kv(&stdout),
        stdout,
        stderr,
        wall,
        timed_out,
        timeout,
    })
}

/// What a QEMU run printed, how long it took, and whether it was killed at its timeout.
pub(crate) struct Finished {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) wall: Duration,
    pub(crate) timed_out: bool,
}

/// Runs `cmd` (a QEMU, named `name` in errors) with no stdin, reading its stdout (carriage
/// returns dropped) and stderr, and kills it if it is still running after `timeout`.
pub(crate) fn run_qemu(
    cmd: &mut Command,
    name: &str,
    timeout: Duration,
) -> Result<Finished, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let mut out = child.stdout.take().ok_or("no stdout")?;
    let mut err = child.stderr.take().ok_or("no stderr")?;
    let out_reader = thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        String::from_utf8_lossy(&s).replace('\r', "")
    });
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut timed_out = false;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > timeout => {
                timed_out = true;
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for qemu: {e}")),
        }
    }
    Ok(Finished {
        wall: start.elapsed(),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
        timed_out,
    })
}

/// Builds the kernel for `arch`; returns the path of the ELF.
fn build_kernel(arch: Arch) -> Result<PathBuf, String> {
    let out = cargo()
        .args([
            "build",
            "--release",
            "-p",
            "boot",
            "--target",
            arch.target(),
        ])
        .args(["--message-format", "json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("building the {} kernel failed", arch.target()));
    }
    // The artifact message of the `boot` binary names the executable.
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter(|l| {
            l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"name\":\"boot\"")
        })
        .find_map(|l| {
            let at = l.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = l[at..].find('"')?;
            Some(PathBuf::from(&l[at..at + end]))
        })
        .ok_or_else(|| format!("cargo did not report the {} kernel", arch.target()))
}

/// The host's TSC frequency as the crate measures it on the host.
#[derive(Clone, Copy, Debug)]
struct HostTsc {
    hz: f64,
    uncertainty_ppm: f64,
}

/// Runs the `report` example with `--kv` and reads its calibration of the host's TSC.
///
/// The example runs in the dev profile: `cargo test` has already built it and its
/// dependencies there, while a release build of every dev-dependency costs a fresh machine
/// minutes. Calibration brackets every reference read, so a slower build only costs samples;
/// the bound it reports stays honest.
fn host_tsc() -> Result<HostTsc, String> {
    let out = cargo()
        .args(["run", "--quiet", "--example", "report", "--", "--kv"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run the report example: {e}"))?;
    let kv = parse_kv(&String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        return Err("the report example failed".into());
    }
    let num = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok());
    match (num("calibrated_hz"), num("uncertainty_ppm")) {
        (Some(hz), Some(u)) => Ok(HostTsc {
            hz,
            uncertainty_ppm: u,
        }),
        _ => Err("the report example printed no calibrated_hz/uncertainty_ppm".into()),
    }
}

/// Whether this process can open /dev/kvm for reading and writing (what QEMU needs).
fn kvm_usable() -> Result<(), String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map(|_| ())
        .map_err(|e| format!("/dev/kvm not usable: {e}"))
}

/// A guest's measurement: Hz, uncertainty in ppm, reference name.
type Measured = (f64, f64, String);

/// Checks a guest's TSC figure against the host's, with the bound of the module docs.
fn compare_with_host(line: &mut Line, hz: f64, u: f64, reference: &str, h: &HostTsc, drift: f64) {
    let dev = ppm(hz, h.hz);
    let bound = u + h.uncertainty_ppm + systematic_ppm(reference) + drift;
    line.key("host_hz", format!("{:.3}", h.hz));
    line.key("host_uncertainty_ppm", format!("{:.3}", h.uncertainty_ppm));
    line.key("host_drift_ppm", format!("{drift:.3}"));
    line.key("vs_host_ppm", format!("{dev:+.3}"));
    line.key("vs_host_bound_ppm", format!("{bound:.3}"));
    if dev.abs() > bound {
        line.fail(format!(
            "disagrees with the host by {dev:+.3} ppm (bound {bound:.3})"
        ));
    }
}

/// `(a − b) / b` in ppm.
fn ppm(a: f64, b: f64) -> f64 {
    (a - b) / b * 1e6
}

/// One scenario's result line.
struct Line {
    name: &'static str,
    result: &'static str,
    keys: Vec<(String, String)>,
    reason: Option<String>,
}

impl Line {
    fn new(name: &'static str) -> Line {
        Line {
            name,
            result: "PASS",
            keys: Vec::new(),
            reason: None,
        }
    }
    fn key(&mut self, k: &str, v: impl ToString) {
        self.keys.push((k.to_string(), v.to_string()));
    }
    /// Copies the kernel's values of `keys`, where present, and the run's wall time once.
    fn copy(&mut self, run: &Run, keys: &[&str]) {
        for k in keys {
            if let Some(v) = run.get(k) {
                self.key(k, v);
            }
        }
        if !self.keys.iter().any(|(k, _)| k == "wall_ms") {
            self.key("wall_ms", run.wall.as_millis());
        }
    }
    fn fail(&mut self, why: impl Into<String>) {
        if self.result != "FAIL" {
            self.result = "FAIL";
            self.reason = Some(why.into());
        } else if let Some(r) = &mut self.reason {
            r.push_str("; ");
            r.push_str(&why.into());
        }
    }
    fn skip(name: &'static str, why: impl Into<String>) -> Line {
        Line {
            name,
            result: "SKIP",
            keys: Vec::new(),
            reason: Some(why.into()),
        }
    }
    fn print(&self) {
        let mut s = format!("scenario={} result={}", self.name, self.result);
        for (k, v) in &self.keys {
            s.push_str(&format!(" {k}={v}"));
        }
        if let Some(r) = &self.reason {
            s.push_str(&format!(" reason=\"{}\"", r.replace('"', "'")));
        }
        println!("{s}");
    }
}

/// Keys of a calibration that every calibrating scenario reports.
const CAL_KEYS: &[&str] = &[
    "attempts",
    "reference",
    "discovered_hz",
    "discovered_source",
    "calibrated_hz",
    "uncertainty_ppm",
    "samples",
    "rejected",
    "calibration_ms",
    "verdict",
    "deviation_ppm",
    "allowed_ppm",
    "chosen_hz",
    "chosen_source",
];

/// Checks that `line`'s run calibrated, and returns (hz, U ppm).
fn calibrated(line: &mut Line, run: &Run) -> Option<(f64, f64)> {
    if let Some(why) = run.broken() {
        line.fail(why);
        return None;
    }
    match (run.num("calibrated_hz"), run.num("uncertainty_ppm")) {
        (Some(hz), Some(u)) => Some((hz, u)),
        _ => {
            line.fail("no calibrated_hz/uncertainty_ppm in the kernel's output");
            None
        }
    }
}

/// Boots `kernel` in delay mode (`extra` adds command-line words), checks and prints the run.
fn delay_scenario(
    name: &'static str,
    arch: Arch,
    kernel: &Path,
    qemu_args: &[&str],
    extra: &str,
) -> Line {
    let mut line = Line::new(name);
    match boot(
        arch,
        kernel,
        qemu_args,
        &format!("mode=delay {extra} delay_ns={DELAY_NS}"),
    ) {
        Err(e) => line.fail(e),
        Ok(run) => check_delay(&mut line, &run),
    }
    line.print();
    line
}

/// Checks a delay run: every delay lasted at least the asked time (less the calibration's
/// uncertainty and one reference tick, which is all a reference can resolve), and the best
/// one ended within [`DELAY_SLACK_NS`] (the median is reported).
fn check_delay(line: &mut Line, run: &Run) {
    if let Some(why) = run.broken() {
        line.fail(why);
        return;
    }
    line.copy(
        run,
        &[
            "attempts",
            "reference",
            "chosen_hz",
            "chosen_source",
            "uncertainty_ppm",
            "delay_ns",
        ],
    );
    let measured: Vec<u64> = run
        .get("delay_measured_ns")
        .unwrap_or("")
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    let Some(allowance) = run.num("delay_allowance_ns") else {
        line.fail("no delay_allowance_ns in the kernel's output");
        return;
    };
    if measured.is_empty() {
        line.fail("no delay_measured_ns in the kernel's output");
        return;
    }
    let mut sorted = measured.clone();
    sorted.sort_unstable();
    let min = sorted[0];
    let median = sorted[sorted.len() / 2];
    line.key("runs", measured.len());
    line.key("measured_ns", run.get("delay_measured_ns").unwrap_or(""));
    line.key("measured_min_ns", min);
    line.key("measured_median_ns", median);
    line.key("allowance_ns", allowance);
    if (min as f64) + allowance < DELAY_NS as f64 {
        line.fail(format!("a {DELAY_NS} ns delay measured only {min} ns"));
    }
    if min > DELAY_NS + DELAY_SLACK_NS {
        line.fail(format!(
            "even the best {DELAY_NS} ns delay took {min} ns (> +{DELAY_SLACK_NS} ns)"
        ));
    }
}

/// Runs the scenarios whose names contain one of `filters` (all when empty). `Ok(true)` when
/// none failed.
pub fn run(filters: &[String]) -> Result<bool, String> {
    let wanted =
        |name: &str| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()));
    let mut lines: Vec<Line> = Vec::new();

    // Each architecture: its scenario names, and the runner that boots its kernel.
    type Runner = fn(&Path, &dyn Fn(&str) -> bool) -> Vec<Line>;
    let arches: [(Arch, &[&str], Runner); 2] = [
        (Arch::X86_64, name::X86_64, x86_scenarios),
        (Arch::Aarch64, name::AARCH64, aarch64_scenarios),
    ];
    for (arch, names, scenarios) in arches {
        if !names.iter().any(|n| wanted(n)) {
            continue;
        }
        if have(arch.qemu()) {
            let kernel = build_kernel(arch)?;
            lines.extend(scenarios(&kernel, &wanted));
        } else {
            let why = format!("{} is not installed (cargo xtask setup)", arch.qemu());
            for n in names.iter().filter(|n| wanted(n)) {
                lines.push(Line::skip(n, &why));
            }
        }
    }

    if name::CORTEX_M.iter().any(|n| name::picked(n, &wanted)) {
        if have("qemu-system-arm") {
            lines.extend(cortexm::scenarios(&wanted));
        } else {
            let why = "qemu-system-arm is not installed (cargo xtask setup)";
            for n in name::CORTEX_M.iter().filter(|n| name::picked(n, &wanted)) {
                lines.push(Line::skip(n, why));
            }
        }
    }

    let failed = lines.iter().filter(|l| l.result == "FAIL").count();
    let passed = lines.iter().filter(|l| l.result == "PASS").count();
    let skipped = lines.iter().filter(|l| l.result == "SKIP").count();
    eprintln!("xtask qemu: {passed} passed, {failed} failed, {skipped} skipped");
    Ok(failed == 0)
}

/// Boots and prints a line as soon as it is known (the TCG trio waits for all three).
fn x86_scenarios(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let (mut lines, host) = tcg_trio(kernel, wanted);
    if wanted(name::KVM) {
        lines.push(kvm_timing_leaf(kernel, &host));
    }
    if wanted(name::LYING_CPUID) {
        lines.push(lying_cpuid(kernel, &host));
    }
    if wanted(name::TCG_DELAY) {
        lines.push(delay_scenario(
            name::TCG_DELAY,
            Arch::X86_64,
            kernel,
            TCG_ARGS,
            "reference=hpet",
        ));
    }
    if wanted(name::X86_ICOUNT) {
        lines.push(coverage::scenario(kernel));
    }
    lines.extend(hv::scenarios(kernel, wanted));
    lines.extend(smp::x86(kernel, wanted));
    lines.extend(timers::scenarios(kernel, wanted));
    if wanted(name::WALL_X86) {
        lines.push(wall::scenario(Arch::X86_64, kernel));
    }
    lines.extend(watch::x86(kernel, wanted));
    lines
}

/// The host's TSC rate (the mean of a measurement before and after the guests) and how far
/// the two measurements drifted apart (ppm).
type HostFigure = Result<(HostTsc, f64), String>;

/// The TCG trio (PIT, HPET, ACPI PM timer), each against the host and against each other,
/// and the host's figure for the scenarios after it. Prints the trio's lines once all three
/// are known.
fn tcg_trio(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> (Vec<Line>, HostFigure) {
    let mut lines = Vec::new();

    // The host's own figure, before and after the guests (see the module docs).
    let trio = [
        (name::TCG_PIT, "pit"),
        (name::TCG_HPET, "hpet"),
        (name::TCG_ACPIPM, "acpipm"),
    ];
    let need_host =
        trio.iter().any(|(n, _)| wanted(n)) || wanted(name::LYING_CPUID) || wanted(name::KVM);
    let host_before = if need_host { Some(host_tsc()) } else { None };

    let mut trio_runs: Vec<(&'static str, Result<Run, String>)> = Vec::new();
    for (name, reference) in trio {
        if wanted(name) {
            trio_runs.push((
                name,
                boot(
                    Arch::X86_64,
                    kernel,
                    TCG_ARGS,
                    &format!("mode=calibrate reference={reference}"),
                ),
            ));
        }
    }
    let host_after = if need_host { Some(host_tsc()) } else { None };
    let host = match (&host_before, &host_after) {
        (Some(Ok(a)), Some(Ok(b))) => Ok((
            HostTsc {
                hz: (a.hz + b.hz) / 2.0,
                uncertainty_ppm: a.uncertainty_ppm.max(b.uncertainty_ppm),
            },
            ppm(a.hz, b.hz).abs(),
        )),
        (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e.clone()),
        _ => Err("no host measurement".to_string()),
    };

    // Each of the trio against the host, then against each other.
    let mut results: Vec<(Line, Option<Measured>)> = Vec::new();
    for (name, run) in trio_runs {
        let mut line = Line::new(name);
        let mut value = None;
        match run {
            Err(e) => line.fail(e),
            Ok(run) => {
                line.copy(&run, CAL_KEYS);
                if let Some((hz, u)) = calibrated(&mut line, &run) {
                    let reference = run.get("reference").unwrap_or("").to_string();
                    value = Some((hz, u, reference));
                }
            }
        }
        results.push((line, value));
    }
    for i in 0..results.len() {
        let Some((hz, u, reference)) = results[i].1.clone() else {
            continue;
        };
        match &host {
            Ok((h, drift)) => compare_with_host(&mut results[i].0, hz, u, &reference, h, *drift),
            Err(e) => results[i]
                .0
                .fail(format!("no host measurement to compare with: {e}")),
        }
        for j in 0..results.len() {
            let Some((hz2, u2, ref2)) = results[j].1.clone() else {
                continue;
            };
            if i == j {
                continue;
            }
            let dev = ppm(hz, hz2);
            let bound = u + u2 + systematic_ppm(&reference) + systematic_ppm(&ref2);
            let line = &mut results[i].0;
            line.key(&format!("vs_{ref2}_ppm"), format!("{dev:+.3}"));
            if dev.abs() > bound {
                line.fail(format!(
                    "disagrees with {ref2} by {dev:+.3} ppm (bound {bound:.3})"
                ));
            }
        }
    }
    for (line, _) in results {
        line.print();
        lines.push(line);
    }
    (lines, host)
}

/// `x86_64-kvm`: the hypervisor leaf's exact figure, confirmed.
fn kvm_timing_leaf(kernel: &Path, host: &HostFigure) -> Line {
    let name = name::KVM;
    let line = match kvm_usable() {
        Err(why) => Line::skip(name, why),
        Ok(()) => {
            let mut line = Line::new(name);
            let cmdline = "mode=calibrate reference=hpet max_ms=1000";
            match boot(Arch::X86_64, kernel, KVM_ARGS, cmdline) {
                Err(e) => line.fail(e),
                Ok(run) => {
                    line.copy(&run, CAL_KEYS);
                    line.copy(&run, &["invariant_tsc"]);
                    if let Some((hz, u)) = calibrated(&mut line, &run) {
                        if run.get("discovered_source") != Some("hypervisor_40000010h") {
                            line.fail("discovery did not find the hypervisor timing leaf");
                        }
                        if run.get("verdict") != Some("confirmed") {
                            line.fail("calibration did not confirm the hypervisor's figure");
                        }
                        if run.get("chosen_source") != Some("hypervisor_40000010h") {
                            line.fail("the hypervisor's exact figure was not chosen");
                        }
                        if let Ok((h, drift)) = host {
                            compare_with_host(&mut line, hz, u, "hpet", h, *drift);
                        }
                    }
                }
            }
            line
        }
    };
    line.print();
    line
}

/// `x86_64-lying-cpuid`: leaf 0x15 claims 25/24 of the host's measured rate.
fn lying_cpuid(kernel: &Path, host: &HostFigure) -> Line {
    let name = name::LYING_CPUID;
    let mut line = Line::new(name);
    match host {
        Err(e) => line.fail(format!("no host measurement to build the lie from: {e}")),
        Ok((h, drift)) => {
            // Whole kHz: the lying leaf encodes the claim as crystal × ratio to the kHz.
            let lie = (h.hz * LIE_NUM / LIE_DEN / 1000.0).round() as u64 * 1000;
            match boot(
                Arch::X86_64,
                kernel,
                TCG_ARGS,
                &format!("mode=calibrate reference=hpet lie_hz={lie}"),
            ) {
                Err(e) => line.fail(e),
                Ok(run) => {
                    line.copy(&run, CAL_KEYS);
                    if let Some((hz, u)) = calibrated(&mut line, &run) {
                        line.key("lie_hz", lie);
                        if run.get("discovered_source") != Some("cpuid_15h")
                            || run.num("discovered_hz") != Some(lie as f64)
                        {
                            line.fail(
                                "discovery did not take the lying leaf 0x15 as its best claim",
                            );
                        }
                        if run.get("verdict") != Some("disagrees") {
                            line.fail("verification did not catch the lie");
                        }
                        if run.get("chosen_source") != Some("calibrated") {
                            line.fail("the measurement was not chosen");
                        }
                        compare_with_host(&mut line, hz, u, "hpet", h, *drift);
                    }
                }
            }
        }
    }
    line.print();
    line
}

fn aarch64_scenarios(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    for (name, cmdline, bad) in [
        (name::AARCH64_VIRT, "mode=calibrate".to_string(), None),
        (
            name::AARCH64_BAD_CNTFRQ,
            format!("mode=calibrate cntfrq={BAD_CNTFRQ_HZ}"),
            Some(BAD_CNTFRQ_HZ),
        ),
    ] {
        if !wanted(name) {
            continue;
        }
        let mut line = Line::new(name);
        match boot(Arch::Aarch64, kernel, &[], &cmdline) {
            Err(e) => line.fail(e),
            Ok(run) => {
                line.copy(&run, CAL_KEYS);
                if let Some((hz, u)) = calibrated(&mut line, &run) {
                    let claimed = bad.unwrap_or(QEMU_CNTFRQ_HZ);
                    if run.get("discovered_source") != Some("cntfrq_el0")
                        || run.num("discovered_hz") != Some(claimed as f64)
                    {
                        line.fail(format!("discovery did not report CNTFRQ_EL0 = {claimed}"));
                    }
                    let verdict = run.get("verdict").unwrap_or("");
                    match bad {
                        None if verdict != "confirmed" && verdict != "consistent" => {
                            line.fail("calibration did not confirm CNTFRQ_EL0")
                        }
                        Some(_) if verdict != "disagrees" => {
                            line.fail("verification did not catch the wrong CNTFRQ_EL0")
                        }
                        Some(_) if run.get("chosen_source") != Some("calibrated") => {
                            line.fail("the measurement was not chosen")
                        }
                        _ => {}
                    }
                    // QEMU's counter really runs at 62.5 MHz of the host's monotonic clock, the
                    // clock semihosting's elapsed time comes from: hold the measurement to the
                    // verification policy's own margin around it.
                    let dev = ppm(hz, QEMU_CNTFRQ_HZ as f64);
                    let bound = u + (u / 2.0).max(1.0);
                    line.key("vs_62500000_ppm", format!("{dev:+.3}"));
                    if dev.abs() > bound {
                        line.fail(format!("measured {hz} Hz, {dev:+.3} ppm off QEMU's 62.5 MHz (bound {bound:.3})"));
                    }
                }
            }
        }
        line.print();
        lines.push(line);
    }
    if wanted(name::AARCH64_DELAY) {
        lines.push(delay_scenario(
            name::AARCH64_DELAY,
            Arch::Aarch64,
            kernel,
            &[],
            "",
        ));
    }
    if wanted(name::AARCH64_ERRATA) {
        lines.push(errata_scenario(kernel));
    }
    lines.extend(smp::aarch64(kernel, wanted));
    if wanted(name::TIMERS_AARCH64) {
        lines.push(timers_scenario(kernel));
    }
    if wanted(name::WALL_AARCH64) {
        lines.push(wall::scenario(Arch::Aarch64, kernel));
    }
    lines.extend(watch::scenarios(kernel, wanted));
    lines
}

/// The fewest wakes `timers-aarch64` accepts: 8 sleepers whose sleeps add up to 2 s, each at
/// most 100 ms, wake at least 20 times each whatever the draws (they average about 15 ms:
/// the kernel's seeds give about 1100).
const TIMERS_MIN_WAKES: f64 = 160.0;
/// The lateness goal (issue 17): p50 at most 50 µs under TCG. Reported, not enforced: under
/// TCG most of it is the host's, as the kernel's `irq_latency_*` keys show (how far the count
/// was past the compare value when the IRQ handler ran).
///
/// What QEMU allows (QEMU 7.2 TCG on a 2-vCPU KVM guest of an AMD EPYC, loaded): QEMU sets its
/// own timer slack to 1 ns (`/proc/<pid>/timerslack_ns`), but one host timer wake-up (a
/// `ppoll` of 10–110 µs) still overshoots by 16–17 µs p50 there. The virtual timer's
/// interrupt then needs QEMU's main loop to run the timer, raise the PPI through the GIC and
/// kick the halted vCPU thread out of WFI: `irq_latency_p50_us` 26–48 µs (22–28 with
/// `idle=spin`, which saves the kick and costs a host CPU). The kernel's own path from the
/// interrupt to the task (the driver's `on_alarm`, the executor's poll) is about 1100 guest
/// instructions (`-icount shift=0,sleep=off`: lateness p50 1.1 µs), 11–20 µs of TCG time. So
/// the p50 lands at 40–65 µs run to run; arming 30 µs early and spinning to the tick in the
/// handler (KVM's `lapic_timer_advance_ns` technique; not done here) brings it to 14 µs.
const TIMERS_GOAL_P50_US: f64 = 50.0;

/// `timers-aarch64`: `mode=timers` (see `boot/src/aarch64/timers.rs`). PASS iff no wake came
/// before its deadline by the clock (`early=0`), every task finished (the 8 sleepers and
/// the recalibrator), both recalibrations were accepted, and the wakes were exactly the ones
/// the kernel's seeds plan (`expected_wakes`), at least [`TIMERS_MIN_WAKES`].
fn timers_scenario(kernel: &Path) -> Line {
    let mut line = Line::new(name::TIMERS_AARCH64);
    match boot(Arch::Aarch64, kernel, &[], "mode=timers") {
        Err(e) => line.fail(e),
        Ok(run) => {
            if let Some(why) = run.broken() {
                line.fail(why);
            }
            line.copy(
                &run,
                &[
                    "wakes",
                    "early",
                    "lateness_p50_us",
                    "lateness_p99_us",
                    "lateness_max_us",
                    "recalibrations",
                    "alarm",
                    "gic",
                    "expected_wakes",
                    "tasks",
                    "tasks_finished",
                    "min_task_wakes",
                    "irqs",
                    "irq_latency_p50_us",
                    "irq_latency_p99_us",
                    "irq_latency_max_us",
                    "early_max_ns",
                    "tick_hz",
                    "run_ms",
                ],
            );
            match run.num("early") {
                Some(0.0) => {}
                Some(e) => line.fail(format!(
                    "{e} wakes came before their deadline (by up to {} ns)",
                    run.get("early_max_ns").unwrap_or("?")
                )),
                None => line.fail("no early= in the kernel's output"),
            }
            match (run.num("tasks"), run.num("tasks_finished")) {
                (Some(t), Some(f)) if t == f && t >= 9.0 => {}
                (t, f) => line.fail(format!("tasks finished: {f:?} of {t:?} (9 expected)")),
            }
            if run.num("recalibrations") != Some(2.0) {
                line.fail("the clock was not recalibrated twice (+100 ppm, -100 ppm)");
            }
            match (run.num("wakes"), run.num("expected_wakes")) {
                (Some(w), Some(x)) if w == x && w >= TIMERS_MIN_WAKES => {}
                (w, x) => line.fail(format!(
                    "wakes {w:?}, expected {x:?} (and at least {TIMERS_MIN_WAKES})"
                )),
            }
            if let Some(p50) = run.num("lateness_p50_us") {
                line.key("goal_p50_us", TIMERS_GOAL_P50_US);
                line.key("goal_p50_met", p50 <= TIMERS_GOAL_P50_US);
            }
        }
    }
    line.print();
    line
}

/// The errata the aarch64 kernel's `mode=errata` runs, by their tokens.
const ERRATA: &[&str] = &[
    "fsl_a008585",
    "hisilicon_161010101",
    "arm_858921",
    "sun50i_unknown1",
];

/// `aarch64-errata`: for each erratum, the kernel's figures with the workaround (`on_*`) and
/// without it (`off_*`), checked: with it the model struck (else nothing was tested) and no
/// read went back, was untrue or hit the retry bound, the `Clock` was never ahead of the
/// true count (beyond the conversion's rounding, 2 ns), and the shortest delay lasted the time asked (less one slowed tick, the true
/// count's resolution); without it the model's glitches showed as steps back or untrue
/// values.
fn errata_scenario(kernel: &Path) -> Line {
    let mut line = Line::new(name::AARCH64_ERRATA);
    match boot(Arch::Aarch64, kernel, &[], "mode=errata") {
        Err(e) => line.fail(e),
        Ok(run) => {
            if let Some(why) = run.broken() {
                line.fail(why);
            }
            line.copy(
                &run,
                &[
                    "midr_erratum",
                    "errata_shift",
                    "errata_slow_tick_ns",
                    "errata_calls",
                    "errata_delay_ns",
                    "errata_lead_rounding_ns",
                ],
            );
            let tick_ns = run.num("errata_slow_tick_ns").unwrap_or(0.0);
            let delay_ns = run.num("errata_delay_ns").unwrap_or(f64::INFINITY);
            let rounding_ns = run.num("errata_lead_rounding_ns").unwrap_or(0.0);
            for e in ERRATA {
                let key = |k: &str| format!("{e}_{k}");
                let mut num = |k: &str| {
                    let v = run.num(&key(k));
                    if let Some(v) = v {
                        line.key(&key(k), v);
                    }
                    v
                };
                let on = [
                    num("on_glitches"),
                    num("on_back"),
                    num("on_untrue"),
                    num("on_unsettled"),
                    num("on_clock_lead_ns"),
                    num("on_delay_min_ns"),
                ];
                // What the workaround costs: raw reads per read.
                num("on_raw_reads");
                let off = [num("off_glitches"), num("off_back"), num("off_untrue")];
                // What the bug does to time, reported only.
                num("off_clock_lead_ns");
                num("off_delay_min_ns");
                let (
                    Some(on_glitches),
                    Some(back),
                    Some(untrue),
                    Some(unsettled),
                    Some(lead),
                    Some(delay),
                ) = (on[0], on[1], on[2], on[3], on[4], on[5])
                else {
                    line.fail(format!(
                        "{e}: the kernel printed no figures with the workaround"
                    ));
                    continue;
                };
                let (Some(off_glitches), Some(off_back), Some(off_untrue)) =
                    (off[0], off[1], off[2])
                else {
                    line.fail(format!(
                        "{e}: the kernel printed no figures without the workaround"
                    ));
                    continue;
                };
                if on_glitches == 0.0 {
                    line.fail(format!(
                        "{e}: the model never struck while the workaround ran"
                    ));
                }
                if back + untrue + unsettled > 0.0 {
                    line.fail(format!(
                        "{e}: with the workaround {back} steps back, {untrue} untrue values, {unsettled} reads at the bound"
                    ));
                }
                if lead > rounding_ns {
                    line.fail(format!(
                        "{e}: the clock ran {lead} ns ahead of the true count"
                    ));
                }
                if delay + tick_ns < delay_ns {
                    line.fail(format!("{e}: a {delay_ns} ns delay lasted {delay} ns"));
                }
                if off_glitches == 0.0 || off_back + off_untrue == 0.0 {
                    line.fail(format!(
                        "{e}: without the workaround the model showed no bug"
                    ));
                }
            }
        }
    }
    line.print();
    line
}
