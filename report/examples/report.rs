//! What is this machine's counter, and is it good to use as a clock?
//!
//! `cargo run --release --example report` prints a report for people: the bottom line first,
//! then the evidence, one `label  value  note` row per figure. `-- --details` adds what a
//! kernel author or a VM's owner needs (CPUID leaves, MSRs, hypervisor options, the
//! histogram of consecutive reads, each read's spread). `-- --kv` prints `key=value` lines
//! instead: the report's output contract, every key on every run, `none` where unknown
//! (README, "Report keys"). `--max-ms N` bounds the calibration (default 20 ms); `--max-ms 0`
//! makes it fail, which shows the report's failure path.
//!
//! It probes the counter, lists what the hardware states about its rate, calibrates it
//! against std's monotonic clock, verifies the stated rate, compares with the kernel's own
//! figure where Linux tells it, times the reads the way `suite/benches/read_ratio.rs` does
//! (interleaved rounds, the median of per-round ratios) beside `std::time::Instant`, `quanta`
//! and `minstant`, and checks monotonicity on one CPU and across CPUs.
//!
//! Frequencies in `--kv` are integers of Hz or Hz with three decimals from the millihertz,
//! and ppm figures come from integer ppb: no float rounding in either.

// Under `cargo test` only the helpers the tests reach are used.
#![cfg_attr(test, allow(dead_code))]

mod common;
// The bare floor, shared with `cargo bench --bench read_ratio`.
#[path = "common/floor.rs"]
mod floor;

use std::fmt::Display;
use std::hint::black_box;
use std::time::{Duration, Instant as StdInstant};

use baretime::StdReference;
use baretime::{calibrate_and_verify, CalibrationError, Config, Reference, Verdict, Verified};
use baretime::{Accuracy, Clock, Counter, Frequency, Source};
use baretime_diag::{self, ReadStats, ThreadedWarp, WarpVerdict};
use floor::Floor;

// ---------------------------------------------------------------------------------------------
// Output: one format for every line.

/// Width of the label column of a row.
const LABEL_WIDTH: usize = 18;
/// Width of the value column of a row.
const VALUE_WIDTH: usize = 22;
/// Where notes and paragraphs wrap.
const LINE_WIDTH: usize = 100;

/// Prints either `key=value` lines (`--kv`) or rows for people, never both.
struct Out {
    kv: bool,
    details: bool,
}

impl Out {
    /// A section title (people only).
    fn title(&self, title: &str) {
        if !self.kv {
            println!("\n{title}");
        }
    }

    /// A keyed figure: `key=value` with `--kv`, else the row `label  shown  note`.
    fn item(&self, key: &str, value: impl Display, label: &str, shown: impl Display, note: &str) {
        if self.kv {
            println!("{key}={value}");
        } else {
            self.row(label, shown, note);
        }
    }

    /// A keyed figure whose row people see only under `--details`.
    fn item_detail(
        &self,
        key: &str,
        value: impl Display,
        label: &str,
        shown: impl Display,
        note: &str,
    ) {
        if self.kv {
            println!("{key}={value}");
        } else if self.details {
            self.row(label, shown, note);
        }
    }

    /// A `key=value` line with no row of its own (its figure is in another row's note).
    fn key(&self, key: &str, value: impl Display) {
        if self.kv {
            println!("{key}={value}");
        }
    }

    /// A row for people: `label  value  note`, the note wrapped under its own column.
    fn row(&self, label: &str, value: impl Display, note: &str) {
        if self.kv {
            return;
        }
        let head = format!("  {label:<LABEL_WIDTH$} {value:<VALUE_WIDTH$} ");
        let column = 2 + LABEL_WIDTH + 1 + VALUE_WIDTH + 1;
        let first = LINE_WIDTH.saturating_sub(head.chars().count()).max(24);
        let lines = wrap(note, first, LINE_WIDTH - column);
        let mut lines = lines.iter();
        let first = format!("{head}{}", lines.next().map_or("", String::as_str));
        println!("{}", first.trim_end());
        for l in lines {
            println!("{:column$}{l}", "");
        }
    }

    /// A row for people under `--details` only.
    fn detail_row(&self, label: &str, value: impl Display, note: &str) {
        if self.details {
            self.row(label, value, note);
        }
    }

    /// Running text for people, wrapped, indented like the rows.
    fn paragraph(&self, text: &str) {
        if !self.kv {
            for l in wrap(text, LINE_WIDTH - 2, LINE_WIDTH - 2) {
                println!("  {l}");
            }
        }
    }
}

/// `text` in lines of at most `first` characters, then `rest` (a longer word stands alone).
/// A number stays with its unit and its digit groups ([`glued`]).
fn wrap(text: &str, first: usize, rest: usize) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text.split_whitespace() {
        match words.last_mut() {
            Some(prev) if glued(prev, w) => {
                prev.push(' ');
                prev.push_str(w);
            }
            _ => words.push(w.to_string()),
        }
    }
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in &words {
        let width = if lines.is_empty() { first } else { rest };
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Whether no line may break between `prev` and `next`: after `±`, before a unit, and
/// inside a number written in groups of three digits (`2 596 120 069`).
fn glued(prev: &str, next: &str) -> bool {
    let unit = next.trim_end_matches([',', ';', ':', '.', ')']);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let last = prev.rsplit(' ').next().unwrap_or(prev);
    prev.ends_with('±')
        || matches!(unit, "ppm" | "ms" | "µs" | "ns" | "Hz" | "ticks" | "%")
        || (digits(last) && last.len() <= 3 && unit.len() == 3 && digits(unit))
}

/// `a,b,c` for `--kv`, or `none` for an empty list.
fn list(items: &[impl AsRef<str>]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join(",")
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers: exact for `--kv`, grouped for people.

/// Millihertz as Hz with exactly three decimals: `2445403922.111`.
fn hz3(millihz: u64) -> String {
    format!("{}.{:03}", millihz / 1000, millihz % 1000)
}

/// `2596119917` as `2 596 119 917`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Millihertz as whole Hz (rounded), grouped: `2 596 119 917 Hz`.
fn hz_human(millihz: u64) -> String {
    format!("{} Hz", group(millihz.saturating_add(500) / 1000))
}

/// A signed ppb figure as ppm with exactly three decimals: `-0.032`.
fn ppm3(ppb: i64) -> String {
    let sign = if ppb < 0 { "-" } else { "" };
    let a = ppb.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// A signed ppb figure as ppm with two decimals (rounded) and its sign, for people: `+0.03`.
fn ppm_signed(ppb: i64) -> String {
    let sign = match ppb {
        0 => "",
        p if p < 0 => "−",
        _ => "+",
    };
    format!("{sign}{}", ppm2(ppb.unsigned_abs()))
}

/// An unsigned ppb figure as ppm with two decimals (rounded), `0.95`; whole ppm from
/// 100 ppm on, `1 000`.
fn ppm2(ppb: u64) -> String {
    if ppb >= 100_000 {
        return group(ppb.saturating_add(500) / 1000);
    }
    let centi = ppb.saturating_add(5) / 10;
    format!("{}.{:02}", centi / 100, centi % 100)
}

/// A duration in ms with exactly three decimals.
fn ms3(d: Duration) -> String {
    let us = d.as_micros();
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// A duration for people: `2.1 ms`, `73 ms`, `850 µs`.
fn duration_human(d: Duration) -> String {
    let us = d.as_micros();
    if us < 1000 {
        format!("{us} µs")
    } else if us < 10_000 {
        format!("{}.{} ms", us / 1000, us % 1000 / 100)
    } else {
        format!("{} ms", us / 1000)
    }
}

/// `ticks` at `rate` as a duration for people, or `None` without a rate.
fn ticks_human(ticks: u64, rate: Option<&Frequency>) -> Option<String> {
    let hz = rate?.as_hz().max(1);
    let ns = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
    Some(if ns < 10_000 {
        format!("{ns} ns")
    } else {
        duration_human(Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
    })
}

/// Where a stated rate comes from, in words.
fn source_words(s: Source) -> String {
    match s.token() {
        "cpuid_15h" => "the CPU: CPUID leaf 0x15, crystal × ratio".into(),
        "cpuid_15h_known_crystal" => {
            "the CPU: CPUID leaf 0x15's ratio, crystal from the model table".into()
        }
        "cpuid_15h_derived_crystal" => {
            "the CPU: CPUID leaf 0x15's ratio, crystal derived from leaf 0x16".into()
        }
        "cpuid_16h" => "the CPU's base frequency (CPUID leaf 0x16)".into(),
        "hypervisor_40000010h" => "the hypervisor (CPUID leaf 0x40000010)".into(),
        "xen_time_leaf" => "Xen (its CPUID time leaf)".into(),
        "brand_string" => "the CPU's name (brand string)".into(),
        "kvm_pvclock" => "KVM's pvclock".into(),
        "hyperv_tsc_frequency_msr" => "Hyper-V's TSC-frequency MSR".into(),
        "cntfrq_el0" => "the firmware (CNTFRQ_EL0)".into(),
        "calibrated" => "measured".into(),
        "user" => "the user".into(),
        other => other.into(),
    }
}

/// How far a rate can be trusted, in words: `exact as stated`, `± 0.95 ppm measured`.
fn accuracy_words(a: Accuracy) -> String {
    match a {
        Accuracy::Exact => "exact as stated".into(),
        Accuracy::Nominal { tolerance_ppb } => {
            format!("nominal, ± {} ppm", ppm2(tolerance_ppb))
        }
        Accuracy::Measured { uncertainty_ppb } => {
            format!("± {} ppm measured", ppm2(uncertainty_ppb))
        }
        other => format!("± {} ppm", ppm2(other.bound_ppb())),
    }
}

// ---------------------------------------------------------------------------------------------
// The platform: the counter, the CPU, what it and the hypervisor state.

/// What the platform module found about the machine.
struct Machine {
    /// `counter=` token: `tsc`, `cntvct_el0`.
    counter_key: &'static str,
    /// The counter's name for people.
    counter_name: &'static str,
    /// What the counter is, in words.
    counter_words: &'static str,
    /// CPU vendor (CPUID vendor string, or MIDR implementer).
    vendor: Option<String>,
    /// CPU name (brand string, or MIDR part).
    brand: Option<String>,
    /// x86: the invariant-TSC bit; `None` where the architecture has no such bit.
    invariant: Option<bool>,
    /// The hypervisor's signature (`Some` exactly when the CPU says it runs under one).
    hypervisor: Option<String>,
    candidates: Vec<Frequency>,
    claim: Option<Frequency>,
    /// What the hypervisor offers; empty off x86_64 or on bare metal.
    paravirt: Paravirt,
    /// Which read each read-cost row times.
    reads: Reads,
}

impl Machine {
    /// The CPU for people: `AMD EPYC [AuthenticAMD]`, or whichever half is known.
    fn cpu(&self) -> String {
        match (&self.brand, &self.vendor) {
            (Some(b), Some(v)) => format!("{b} [{v}]"),
            (Some(b), None) => b.clone(),
            (None, Some(v)) => v.clone(),
            (None, None) => "an unnamed CPU".into(),
        }
    }
}

/// The hypervisor's rate sources, in tokens for `--kv` and in words for people.
#[derive(Default)]
struct Paravirt {
    /// The hypervisor's name for people: `KVM`.
    name: Option<String>,
    /// `hypervisor_ranges=`: `base:kind`, comma-separated.
    ranges_kv: Vec<String>,
    /// The same ranges for people.
    ranges_human: Vec<String>,
    /// Source tokens the hypervisor offers a guest.
    offered: Vec<&'static str>,
    /// Those only a ring-0 kernel can read.
    ring0: Vec<&'static str>,
    /// Where a kernel using the crate would take its claim from.
    kernel_source: Option<Source>,
    /// `(label, value, note)` rows for `--details`: registers, feature bits.
    details: Vec<(String, String, String)>,
    /// `(label, value, note)` rows for `--details`: what a VM's owner can configure.
    howto: Vec<(String, String, String)>,
}

/// Which read each row of the read-cost table times, in words.
struct Reads {
    ordered: &'static str,
    plain: &'static str,
    quanta: &'static str,
    minstant: &'static str,
}

#[cfg(target_arch = "x86_64")]
mod platform {
    use super::{Machine, Paravirt, Reads};
    use baretime::Source;
    use baretime_x86::{self, HypervisorKind, Tsc, X86Features};

    pub type Ctr = Tsc;

    pub fn counter() -> Tsc {
        match Tsc::probe() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("no usable counter: this x86_64 CPU reports no TSC ({e})");
                std::process::exit(1);
            }
        }
    }

    /// Linux's own TSC figure in mHz, and where it came from.
    pub fn kernel_rate() -> Option<(u64, &'static str)> {
        crate::common::kernel_tsc_millihz()
    }

    pub fn machine(tsc: &Tsc) -> Machine {
        let d = baretime_x86::discover();
        let invariant = d.invariant_tsc();
        let hypervisor_bit = d.features().contains(X86Features::HYPERVISOR);
        // The hypervisor bit always gives range 0x40000000 (discovery records it).
        let hypervisor = d
            .hypervisors()
            .first()
            .filter(|_| hypervisor_bit)
            .map(|r| signature(&r.signature));
        Machine {
            counter_key: "tsc",
            counter_name: "TSC",
            counter_words: "the time-stamp counter (RDTSC)",
            vendor: std::str::from_utf8(d.vendor())
                .ok()
                .map(|v| v.trim().to_string()),
            brand: d
                .brand()
                .map(|b| b.trim().to_string())
                .filter(|b| !b.is_empty()),
            invariant: Some(invariant),
            paravirt: paravirt(&d),
            hypervisor,
            candidates: d.candidates().to_vec(),
            claim: d.best(),
            reads: Reads {
                ordered: "LFENCE;RDTSC",
                plain: "RDTSC",
                // quanta uses the TSC only with invariant TSC and RDTSCP, minstant only
                // where Linux's clocksource is the TSC.
                quanta: if invariant && tsc.has_rdtscp() {
                    "RDTSC, scaled"
                } else {
                    "the OS clock (no invariant TSC or no RDTSCP)"
                },
                minstant: if minstant::is_tsc_available() {
                    "RDTSC, scaled"
                } else {
                    "the OS clock (minstant does not trust this TSC)"
                },
            },
        }
    }

    /// CPUID 0x40000000 EBX,ECX,EDX as text: trailing NULs and spaces dropped, other
    /// non-printable bytes as `\xNN`; `unknown` when nothing is left.
    fn signature(raw: &[u8; 12]) -> String {
        let end = raw
            .iter()
            .rposition(|&b| b != 0 && b != b' ')
            .map_or(0, |i| i + 1);
        let s: String = raw[..end]
            .iter()
            .map(|&b| match b {
                b' '..=b'~' => char::from(b).to_string(),
                _ => format!("\\x{b:02x}"),
            })
            .collect();
        if s.is_empty() {
            "unknown".into()
        } else {
            s
        }
    }

    /// A hypervisor kind for people.
    fn kind_name(kind: HypervisorKind) -> &'static str {
        match kind.token() {
            "kvm" => "KVM",
            "xen" => "Xen",
            "hyperv" => "Hyper-V",
            "vmware" => "VMware",
            "tcg" => "QEMU without acceleration (TCG)",
            "acrn" => "ACRN",
            "bhyve" => "bhyve",
            _ => "an unknown hypervisor",
        }
    }

    /// The hypervisor's paravirtual TSC sources: which it offers, which only a ring-0 kernel
    /// can read, and what its owner can configure to expose more.
    fn paravirt(d: &baretime_x86::X86Discovery) -> Paravirt {
        let mut p = Paravirt {
            name: d
                .hypervisors()
                .first()
                .map(|h| kind_name(h.kind).to_string())
                .or_else(|| {
                    d.features()
                        .contains(X86Features::HYPERVISOR)
                        .then(|| "an unnamed hypervisor".to_string())
                }),
            ..Paravirt::default()
        };
        for h in d.hypervisors() {
            p.ranges_kv
                .push(format!("{:#x}:{}", h.base, h.kind.token()));
            let sig = String::from_utf8_lossy(&h.signature);
            p.ranges_human.push(format!(
                "{:#x}..={:#x} {:?} ({})",
                h.base,
                h.max_leaf,
                sig.trim_end_matches(['\0', ' ']),
                h.kind.token()
            ));
        }
        // What each range offers. CPUID is readable from user space; the MSRs are not.
        for h in d.hypervisors() {
            match h.kind {
                HypervisorKind::Kvm => {
                    let Some(kvm) = d.kvm_features().filter(|k| k.base() == h.base) else {
                        continue;
                    };
                    let features = kvm.bits();
                    if let Ok(msr) = kvm.clock_msr() {
                        p.offered.push(Source::KvmPvclock.token());
                        p.ring0.push(Source::KvmPvclock.token());
                        let stable = kvm.stable_bit();
                        p.details.push((
                            "kvm pvclock".into(),
                            format!("MSR {msr:#x}"),
                            format!(
                                "KVM at {:#x}, feature bits {features:#x}, stable bit {}: a \
                                 kernel registers a pvclock area with WRMSR and reads \
                                 tsc_to_system_mul/tsc_shift (baretime_x86::KvmPvclock)",
                                h.base,
                                if stable { "offered" } else { "not offered" }
                            ),
                        ));
                    }
                }
                HypervisorKind::HyperV if d.hyperv_tsc_frequency_msr() => {
                    p.offered.push(Source::HyperVTscFrequencyMsr.token());
                    p.ring0.push(Source::HyperVTscFrequencyMsr.token());
                    p.details.push((
                        "hyper-v msr".into(),
                        "MSR 0x40000022".into(),
                        format!(
                            "Hyper-V at {:#x}: HV_X64_MSR_TSC_FREQUENCY, the rate in Hz; a \
                             kernel reads it with RDMSR (baretime_x86::read_hyperv_tsc_frequency)",
                            h.base
                        ),
                    ));
                }
                _ => {}
            }
        }
        for c in d.candidates() {
            if matches!(c.source(), Source::HypervisorLeaf | Source::XenTimeLeaf) {
                p.offered.push(c.source().token());
                p.details.push((
                    "cpuid rate".into(),
                    format!("{} kHz", c.as_hz() / 1000),
                    format!(
                        "{}: any process reads it (discovery's candidate)",
                        c.source()
                    ),
                ));
            }
        }
        // A ring-0 kernel adds its claims ahead of CPUID's (X86Discovery::add_claim).
        p.kernel_source = [Source::HyperVTscFrequencyMsr, Source::KvmPvclock]
            .into_iter()
            .find(|s| p.ring0.contains(&s.token()))
            .or_else(|| d.best().map(|f| f.source()));
        if d.features().contains(X86Features::HYPERVISOR) {
            let has = |s: Source| p.offered.contains(&s.token());
            if !has(Source::HypervisorLeaf) && !has(Source::XenTimeLeaf) {
                let name = d.hypervisors().first().map(|h| h.kind.token());
                let (value, note) = match name {
                    Some("hyperv") => (
                        "hv-frequencies",
                        "Hyper-V states the TSC rate only in an MSR (QEMU: -cpu \
                         ...,hv-frequencies), which a program cannot read: programs \
                         measure it",
                    ),
                    Some("vmware") => (
                        "VM CPUID mask",
                        "VMware states the TSC rate in CPUID 0x40000010 unless the VM's \
                         CPUID is masked: check the VM's CPUID mask settings",
                    ),
                    _ => (
                        "-cpu host,+invtsc",
                        "QEMU/KVM states the TSC rate to every program in CPUID 0x40000010 \
                         with -cpu host,+invtsc,+vmware-cpuid-freq (add tsc-frequency=HZ \
                         where QEMU does not know the host's rate); where the VMM has no \
                         such option (Firecracker), a kernel's pvclock is the hypervisor's \
                         only statement of the rate",
                    ),
                };
                p.howto
                    .push(("to state the rate".into(), value.into(), note.into()));
            }
            if !has(Source::HyperVTscFrequencyMsr) && name_is_kvm(d) {
                p.howto.push((
                    "hyper-v msr".into(),
                    "-cpu ...,hv-frequencies".into(),
                    "adds Hyper-V's TSC-frequency MSR for a kernel (ring 0 only; needs a KVM \
                     with Hyper-V emulation)"
                        .into(),
                ));
            }
        }
        p
    }

    fn name_is_kvm(d: &baretime_x86::X86Discovery) -> bool {
        d.hypervisors()
            .iter()
            .any(|h| matches!(h.kind, HypervisorKind::Kvm))
    }
}

#[cfg(target_arch = "aarch64")]
mod platform {
    use super::{Machine, Paravirt, Reads};
    use baretime_aarch64::GenericTimer;

    pub type Ctr = GenericTimer;

    pub fn counter() -> GenericTimer {
        GenericTimer::new()
    }

    /// An implementer code of MIDR_EL1 for people.
    fn implementer(code: u8) -> String {
        match code {
            0x41 => "Arm".into(),
            0x42 => "Broadcom".into(),
            0x43 => "Cavium".into(),
            0x46 => "Fujitsu".into(),
            0x48 => "HiSilicon".into(),
            0x4e => "NVIDIA".into(),
            0x50 => "Applied Micro".into(),
            0x51 => "Qualcomm".into(),
            0x61 => "Apple".into(),
            0xc0 => "Ampere".into(),
            c => format!("implementer {c:#04x}"),
        }
    }

    /// Linux states no figure for the generic timer that the report reads (its `arch_timer`
    /// line in dmesg rounds to 10 kHz): none.
    pub fn kernel_rate() -> Option<(u64, &'static str)> {
        None
    }

    pub fn machine(timer: &GenericTimer) -> Machine {
        let d = baretime_aarch64::discover();
        Machine {
            counter_key: "cntvct_el0",
            counter_name: "CNTVCT_EL0",
            counter_words: "the generic timer's virtual count",
            vendor: Some(implementer(d.midr.implementer)),
            brand: Some(format!(
                "part {:#05x} r{}p{}",
                d.midr.part, d.midr.variant, d.midr.revision
            )),
            // The generic timer runs at one rate by architecture.
            invariant: None,
            // The generic timer has no CPUID-style hypervisor signature.
            hypervisor: None,
            candidates: d.candidates().to_vec(),
            claim: d.best(),
            paravirt: Paravirt::default(),
            reads: Reads {
                ordered: if timer.read_self_synchronized().is_some() {
                    "MRS CNTVCTSS_EL0"
                } else {
                    "ISB;MRS CNTVCT_EL0"
                },
                plain: "MRS CNTVCT_EL0",
                quanta: "MRS CNTVCT_EL0, scaled",
                minstant: "the OS clock (minstant reads no counter on aarch64)",
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Read cost, the way suite/benches/read_ratio.rs measures it.

/// Interleaved rounds per attempt (odd: the median is one round's figure).
const ROUNDS: usize = 101;
/// Calls per read per round: short batches (about 100 µs), so that few of them hold a
/// preemption on a busy machine.
const CALLS: u32 = 5_000;
/// Attempts at most: a noisy attempt is repeated, and the least noisy one kept.
const ATTEMPTS: u32 = 3;
/// A read whose per-round ratios spread (interquartile range over the median) further than
/// this is flagged `noisy`.
const SPREAD_LIMIT: f64 = 0.10;
/// Nothing reads the time faster than the plain counter read, and nothing built on the
/// ordered read is faster than it: a ratio below this against either is impossible.
const RATIO_FLOOR: f64 = 0.9;

/// The reads timed, in table order.
const RAW: usize = 0;
const PLAIN: usize = 1;
const NOW: usize = 2;
const NOW_PLAIN: usize = 3;
const RAW_INSTANT: usize = 4;
const STD: usize = 5;
const QUANTA: usize = 6;
const MINSTANT: usize = 7;
const FLOOR: usize = 8;
const FLOOR_PLAIN: usize = 9;
const READS: usize = 10;

/// `read_ns_*` keys, in table order.
const READ_KEYS: [&str; READS] = [
    "read_ns_raw",
    "read_ns_raw_plain",
    "read_ns_now",
    "read_ns_now_plain",
    "read_ns_raw_instant",
    "read_ns_std",
    "read_ns_quanta",
    "read_ns_minstant",
    "read_ns_floor",
    "read_ns_floor_plain",
];

/// Each read's base for its ratio: the ordered read for what is built on it, the plain read
/// for the rest (the ordered read's own base is the plain read, the plain read's the ordered).
const BASE: [usize; READS] = {
    let mut b = [PLAIN; READS];
    b[PLAIN] = RAW;
    b[NOW] = RAW;
    b[NOW_PLAIN] = PLAIN;
    b[RAW_INSTANT] = RAW;
    b[STD] = RAW;
    b[QUANTA] = PLAIN;
    b[MINSTANT] = PLAIN;
    b[FLOOR] = RAW;
    b[FLOOR_PLAIN] = PLAIN;
    b
};

/// One read's figures.
struct ReadFigure {
    /// Median ns per call over the rounds.
    ns: f64,
    /// Median of the per-round ratios to its base ([`BASE`]).
    ratio: f64,
    /// Interquartile range of those ratios over their median.
    spread: f64,
    /// Why the figure is not to be trusted, if it is not.
    noisy: Option<String>,
}

/// The read-cost table.
struct ReadCost {
    figures: Vec<ReadFigure>,
    /// `Clock::now` over the bare floor on the ordered and on the plain read: the medians of
    /// the per-round ratios (NaN when not measured).
    over_floor: [f64; 2],
    /// Which attempt was kept (1-based) and how many were made.
    attempt: u32,
    attempts: u32,
}

impl ReadCost {
    fn noisy_keys(&self) -> Vec<&'static str> {
        self.figures
            .iter()
            .zip(READ_KEYS)
            .filter(|(f, _)| f.noisy.is_some())
            .map(|(_, k)| k)
            .collect()
    }
}

/// Nanoseconds per call of `f` over `calls` calls.
#[inline(always)]
fn time<T>(calls: u32, mut f: impl FnMut() -> T) -> f64 {
    let t = StdInstant::now();
    for _ in 0..calls {
        black_box(f());
    }
    t.elapsed().as_nanos() as f64 / f64::from(calls)
}

/// The `q`-quantile of `v` (nearest rank), `v` sorted.
fn quantile(v: &[f64], q: f64) -> f64 {
    let i = ((v.len().saturating_sub(1)) as f64 * q).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Times every read in interleaved rounds (each round times all of them back to back,
/// starting one further each round, so load changes and position hit all alike) and
/// flags what cannot be trusted.
fn read_cost(counter: platform::Ctr, rate: Frequency) -> ReadCost {
    let clock = Clock::new(counter, rate);
    let plain = counter.unordered();
    let plain_clock = Clock::new(plain, rate);
    let floor = Floor::new(counter.ticks(), rate.as_hz());
    // The loops are monomorphized; only the call per round and read is dynamic.
    let mut timers: Vec<Box<dyn FnMut(u32) -> f64 + '_>> = vec![
        Box::new(|n| time(n, || counter.ticks())),
        Box::new(|n| time(n, || plain.ticks())),
        Box::new(|n| time(n, || clock.now())),
        Box::new(|n| time(n, || plain_clock.now())),
        Box::new(|n| time(n, || clock.raw())),
        Box::new(|n| time(n, StdInstant::now)),
        Box::new(|n| time(n, quanta::Instant::now)),
        Box::new(|n| time(n, minstant::Instant::now)),
        Box::new(|n| time(n, || floor.now(&counter))),
        Box::new(|n| time(n, || floor.now(&plain))),
    ];
    // Warm-up (quanta and minstant calibrate on first use), not counted.
    for t in &mut timers {
        t(CALLS);
    }
    let mut best: Option<ReadCost> = None;
    let mut made = 0;
    for attempt in 1..=ATTEMPTS {
        made = attempt;
        let mut ns: Vec<Vec<f64>> = (0..READS).map(|_| Vec::with_capacity(ROUNDS)).collect();
        for round in 0..ROUNDS {
            for k in 0..READS {
                let i = (round + k) % READS;
                let v = (timers[i])(CALLS);
                ns[i].push(v);
            }
        }
        let figures = judge(&ns);
        let over = |read: usize, fl: usize| {
            let v = sorted(ns[read].iter().zip(&ns[fl]).map(|(a, b)| a / b).collect());
            quantile(&v, 0.5)
        };
        let cost = ReadCost {
            figures,
            over_floor: [over(NOW, FLOOR), over(NOW_PLAIN, FLOOR_PLAIN)],
            attempt,
            attempts: attempt,
        };
        let flagged = cost.noisy_keys().len();
        let better = best
            .as_ref()
            .map_or(true, |b| flagged < b.noisy_keys().len());
        if better {
            best = Some(cost);
        }
        if flagged == 0 {
            break;
        }
    }
    let mut best = best.unwrap_or(ReadCost {
        figures: Vec::new(),
        over_floor: [f64::NAN; 2],
        attempt: 0,
        attempts: 0,
    });
    best.attempts = made;
    best
}

/// Medians, ratios and flags from `ns[read][round]`.
fn judge(ns: &[Vec<f64>]) -> Vec<ReadFigure> {
    let ratio_to = |i: usize, base: usize| -> Vec<f64> {
        sorted(ns[i].iter().zip(&ns[base]).map(|(a, b)| a / b).collect())
    };
    (0..READS)
        .map(|i| {
            let ratios = ratio_to(i, BASE[i]);
            let ratio = quantile(&ratios, 0.5);
            let spread = (quantile(&ratios, 0.75) - quantile(&ratios, 0.25)) / ratio;
            let vs_plain = quantile(&ratio_to(i, PLAIN), 0.5);
            let vs_ordered = quantile(&ratio_to(i, RAW), 0.5);
            let noisy = if i == RAW && vs_plain < RATIO_FLOOR {
                Some(format!(
                    "impossible: the plain read timed {:.2}× slower than this ordered one",
                    1.0 / vs_plain
                ))
            } else if i == PLAIN && vs_ordered > 1.0 / RATIO_FLOOR {
                Some(format!(
                    "impossible: this plain read timed {vs_ordered:.2}× the ordered one"
                ))
            } else if i != PLAIN && vs_plain < RATIO_FLOOR {
                Some(format!(
                    "impossible: {vs_plain:.2}× the plain counter read, which nothing beats"
                ))
            } else if matches!(i, NOW | RAW_INSTANT | FLOOR) && vs_ordered < RATIO_FLOOR {
                Some(format!(
                    "impossible: {vs_ordered:.2}× the ordered read it is built on"
                ))
            } else if spread.is_nan() || spread > SPREAD_LIMIT {
                Some(format!(
                    "rounds disagree: ratios spread {:.0} % (limit {:.0} %)",
                    spread * 100.0,
                    SPREAD_LIMIT * 100.0
                ))
            } else {
                None
            };
            ReadFigure {
                ns: quantile(&sorted(ns[i].clone()), 0.5),
                ratio,
                spread,
                noisy,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The warp check.

/// Cross-CPU handovers the report's warp check makes at least (every check is one).
const WARP_MIN_HANDOVERS: u64 = 100_000;
/// CPUs the report's warp check compares at most (pairs grow as n²; a kernel checks more).
const WARP_MAX_CPUS: u32 = 16;

/// Runs the crate's threaded warp check: one thread per CPU (up to [`WARP_MAX_CPUS`]),
/// pinned, with enough checks per ordered pair for [`WARP_MIN_HANDOVERS`] in all and never
/// fewer than the crate's minimum for a `consistent` verdict. A wait longer than 1 s ends it
/// (reported as a timeout; the verdict is then `inconclusive` unless a warp was seen).
fn warp_check<C: Counter + Sync>(counter: &C) -> ThreadedWarp {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get() as u32)
        .clamp(2, WARP_MAX_CPUS);
    let ordered_pairs = u64::from(threads) * u64::from(threads - 1);
    let per_pair = WARP_MIN_HANDOVERS
        .div_ceil(ordered_pairs)
        .max(u64::from(baretime_diag::CONSISTENT_MIN_CHECKS_PER_PAIR));
    baretime_diag::warp_check_threads(
        counter,
        threads,
        u32::try_from(per_pair).unwrap_or(u32::MAX),
        Duration::from_secs(1),
    )
}

// ---------------------------------------------------------------------------------------------
// The bottom line.

/// What makes the counter unfit as a clock (`problems`) or calls for care (`caveats`):
/// `(token, words)`.
struct Assessment {
    problems: Vec<(&'static str, String)>,
    caveats: Vec<(&'static str, String)>,
}

/// Everything measured, for the bottom line and the sections.
struct Findings {
    machine: Machine,
    verified: Result<Verified, CalibrationError>,
    /// Wall time the calibration took (to fail, on failure).
    wall: Duration,
    max_ms: u64,
    target_ppb: u64,
    reference: &'static str,
    kernel: Option<(u64, &'static str)>,
    /// The rate the clock runs on: verified, else the claim.
    rate: Option<Frequency>,
    cost: ReadCost,
    stats: ReadStats,
    warp: ThreadedWarp,
    warp_took: Duration,
}

fn assess(f: &Findings) -> Assessment {
    let mut problems = Vec::new();
    let mut caveats = Vec::new();
    if let Err(e) = &f.verified {
        problems.push((
            "calibration_failed",
            format!("its rate could not be measured ({e})"),
        ));
    }
    if f.machine.invariant == Some(false) {
        problems.push((
            "not_invariant",
            "its rate may change with the CPU's frequency and sleep states (the CPU does not \
             report an invariant TSC)"
                .to_string(),
        ));
    }
    if f.stats.backwards_steps > 0 {
        problems.push((
            "backwards",
            format!(
                "it went backwards {} times in {} reads on one CPU",
                f.stats.backwards_steps,
                group(u64::from(f.stats.reads))
            ),
        ));
    }
    let w = &f.warp.report;
    match w.verdict() {
        WarpVerdict::Warped { .. } => problems.push((
            "warp",
            format!(
                "times read on different CPUs do not compare: a read was {} behind another \
                 CPU's read just before it",
                ticks_human(w.max_warp_ticks, f.rate.as_ref())
                    .unwrap_or_else(|| format!("{} ticks", w.max_warp_ticks))
            ),
        )),
        WarpVerdict::Consistent => {}
        _ => caveats.push((
            "warp_inconclusive",
            format!(
                "the check across CPUs saw no warp but is inconclusive ({} of {} CPU pairs, \
                 {} checks per ordered pair, {} needed)",
                w.pairs_compared,
                w.pairs,
                w.min_checks_per_pair,
                baretime_diag::CONSISTENT_MIN_CHECKS_PER_PAIR
            ),
        )),
    }
    if let Ok(v) = &f.verified {
        if !v.calibration.met_target {
            caveats.push((
                "target_not_met",
                format!(
                    "the measurement reached ± {} ppm, not the ± {} ppm target, in the {} ms \
                     allowed (--max-ms allows longer)",
                    ppm2(v.calibration.measurement_ppb),
                    ppm2(f.target_ppb),
                    f.max_ms
                ),
            ));
        }
        if let Verdict::Disagrees {
            claim,
            deviation_ppb,
            ..
        } = v.verdict
        {
            caveats.push((
                "claim_rejected",
                format!(
                    "the rate stated by {} is off by {} ppm; the measured rate is used",
                    source_words(claim.source()),
                    ppm_signed(deviation_ppb)
                ),
            ));
        }
    }
    if f.cost.figures.get(NOW).is_some_and(|r| r.noisy.is_some()) {
        caveats.push((
            "read_cost_noisy",
            "the machine was too busy to time the reads reliably".to_string(),
        ));
    }
    Assessment { problems, caveats }
}

/// The bottom line as one paragraph.
fn bottom_line(f: &Findings, a: &Assessment) -> String {
    let m = &f.machine;
    let invariant = match m.invariant {
        Some(true) => ", invariant",
        Some(false) => ", not invariant",
        None => "",
    };
    let what = format!(
        "This machine's counter ({}, {}{invariant})",
        m.counter_name,
        m.cpu()
    );
    let rate = f.verified.as_ref().ok().map(|v| {
        format!(
            "{} ± {} ppm ({})",
            hz_human(v.chosen.as_millihz()),
            ppm2(v.chosen.accuracy().bound_ppb()),
            if v.chosen.source() == Source::Calibrated {
                "measured".to_string()
            } else {
                format!("stated by {}, confirmed", source_words(v.chosen.source()))
            }
        )
    });
    let read = f.cost.figures.get(NOW).map(|r| {
        format!(
            "Clock::now reads in {}{:.0} ns",
            if r.noisy.is_some() { "about " } else { "" },
            r.ns
        )
    });
    let w = &f.warp.report;
    let warp = match w.verdict() {
        WarpVerdict::Consistent => Some(format!("no warp across {} CPUs", w.cpus_covered)),
        WarpVerdict::Warped { .. } => None,
        _ => Some(format!("no warp seen across {} CPUs", w.cpus_covered)),
    };
    let facts: Vec<String> = [rate, read, warp].into_iter().flatten().collect();
    let mut s = if a.problems.is_empty() {
        format!("{what} is good to use as a clock: {}.", facts.join(", "))
    } else {
        let why: Vec<&str> = a.problems.iter().map(|(_, w)| w.as_str()).collect();
        let mut s = format!("{what} is not good to use as a clock: {}.", why.join("; "));
        if !facts.is_empty() {
            s.push_str(&format!(" Measured: {}.", facts.join(", ")));
        }
        s
    };
    if !a.caveats.is_empty() {
        let but: Vec<&str> = a.caveats.iter().map(|(_, w)| w.as_str()).collect();
        s.push_str(&format!(" But {}.", but.join("; ")));
    }
    s
}

// ---------------------------------------------------------------------------------------------

fn main() {
    let mut kv = false;
    let mut details = false;
    let mut max_ms = 20u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kv" => kv = true,
            "--details" => details = true,
            "--max-ms" => match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => max_ms = v,
                None => {
                    eprintln!("--max-ms needs a whole number of milliseconds");
                    std::process::exit(2);
                }
            },
            _ => {
                eprintln!("usage: report [--kv] [--details] [--max-ms N]");
                std::process::exit(2);
            }
        }
    }
    let out = Out { kv, details };
    let f = measure(max_ms);
    let a = assess(&f);

    if !kv {
        println!("baretime report: this machine's counter, and is it good to use as a clock?");
    }
    out.title("Bottom line");
    out.paragraph(&bottom_line(&f, &a));
    out.key("clock_usable", a.problems.is_empty());
    out.key(
        "clock_problems",
        list(&a.problems.iter().map(|(t, _)| *t).collect::<Vec<_>>()),
    );
    out.key(
        "clock_caveats",
        list(&a.caveats.iter().map(|(t, _)| *t).collect::<Vec<_>>()),
    );

    machine_section(&out, &f);
    paravirt_section(&out, &f);
    rate_section(&out, &f);
    read_section(&out, &f);
    monotonic_section(&out, &f);
    warp_section(&out, &f);
    if !kv && !details {
        println!("\n(--details adds registers, hypervisor options and histograms; --kv prints key=value lines)");
    }
}

/// Runs every measurement.
fn measure(max_ms: u64) -> Findings {
    let counter: platform::Ctr = platform::counter();
    let machine = platform::machine(&counter);
    let target_ppb = 1_000;
    let config = Config::new()
        .with_target_ppb(target_ppb)
        .with_max_duration(Duration::from_millis(max_ms));
    let reference = StdReference::new();
    let reference_name = reference.name();
    let started = StdInstant::now();
    let verified = calibrate_and_verify(counter, reference, machine.claim, config);
    let wall = started.elapsed();
    let kernel = platform::kernel_rate();
    let rate = verified.as_ref().ok().map(|v| v.chosen).or(machine.claim);
    // Without a rate, 1 GHz: the read costs are what matter there, not the times told.
    let stand_in = Frequency::from_hz(1_000_000_000, Source::User, Accuracy::Exact);
    let cost = match rate.or(stand_in) {
        Some(r) => read_cost(counter, r),
        None => ReadCost {
            figures: Vec::new(),
            over_floor: [f64::NAN; 2],
            attempt: 0,
            attempts: 0,
        },
    };
    let stats = ReadStats::measure(&counter, 1_000_000);
    let t = StdInstant::now();
    let warp = warp_check(&counter);
    let warp_took = t.elapsed();
    Findings {
        machine,
        verified,
        wall,
        max_ms,
        target_ppb,
        reference: reference_name,
        kernel,
        rate,
        cost,
        stats,
        warp,
        warp_took,
    }
}

fn machine_section(out: &Out, f: &Findings) {
    let m = &f.machine;
    out.title("This machine");
    out.item(
        "counter",
        m.counter_key,
        "counter",
        m.counter_name,
        m.counter_words,
    );
    out.item(
        "cpu_vendor",
        m.vendor.as_deref().unwrap_or("none"),
        "cpu",
        m.vendor.as_deref().unwrap_or("unknown vendor"),
        &format!(
            "{}: every figure below comes from this CPU",
            m.brand.as_deref().unwrap_or("(no name stated)")
        ),
    );
    out.key("cpu_brand", m.brand.as_deref().unwrap_or("none"));
    let inv = match m.invariant {
        Some(true) => (
            "true",
            "yes",
            "runs at one rate in every power state (CPUID invariant-TSC bit)",
        ),
        Some(false) => (
            "false",
            "no",
            "may change rate with the CPU's frequency or stop in sleep states",
        ),
        None => (
            "none",
            "by design",
            "the generic timer runs at one rate by architecture",
        ),
    };
    out.item("invariant_tsc", inv.0, "invariant", inv.1, inv.2);
}

fn paravirt_section(out: &Out, f: &Findings) {
    let m = &f.machine;
    let p = &m.paravirt;
    out.title("Virtual machine");
    let (shown, note) = match (&m.hypervisor, m.counter_key) {
        (Some(sig), _) => (
            format!("yes, {}", p.name.as_deref().unwrap_or("a hypervisor")),
            format!(
                "the CPU says a hypervisor runs it (signature {sig}); the counter is the \
                 host's, as the hypervisor presents it"
            ),
        ),
        (None, "tsc") => (
            "no".to_string(),
            "the CPU does not say it runs under a hypervisor".to_string(),
        ),
        (None, _) => (
            "unknown".to_string(),
            "this architecture has no hypervisor signature to read".to_string(),
        ),
    };
    out.item(
        "hypervisor",
        m.hypervisor.as_deref().unwrap_or("none"),
        "virtual machine",
        shown,
        &note,
    );
    let in_vm = m.hypervisor.is_some();
    let to_programs: Vec<&str> = p
        .offered
        .iter()
        .copied()
        .filter(|s| !p.ring0.contains(s))
        .collect();
    if in_vm {
        let measured = match &f.verified {
            Ok(v) => format!(
                " (this took {} for ± {} ppm)",
                duration_human(v.calibration.duration),
                ppm2(v.calibration.frequency.accuracy().bound_ppb())
            ),
            Err(_) => String::new(),
        };
        let (shown, note) = if to_programs.is_empty() {
            (
                "not stated",
                format!(
                    "programs in this VM learn the counter's rate only by measuring it, as \
                     this report did{measured}; the VM's owner can have the hypervisor state \
                     it (--details says how)"
                ),
            )
        } else {
            (
                "stated",
                "the hypervisor states the counter's rate where any program can read it: no \
                 measuring needed (the report still checks it)"
                    .to_string(),
            )
        };
        out.row("rate to programs", shown, &note);
        let kernel_only = p
            .ring0
            .iter()
            .map(|t| match *t {
                "kvm_pvclock" => "KVM pvclock",
                "hyperv_tsc_frequency_msr" => "Hyper-V MSR",
                other => other,
            })
            .collect::<Vec<_>>()
            .join(", ");
        if kernel_only.is_empty() {
            out.row(
                "rate to kernels",
                "nothing more",
                "the hypervisor offers a kernel no rate beyond what programs see",
            );
        } else {
            out.row(
                "rate to kernels",
                kernel_only,
                "a kernel built on baretime-x86 can read the rate from the hypervisor; a \
                 program like this one cannot (it needs ring 0)",
            );
        }
    }
    out.item_detail(
        "hypervisor_ranges",
        list(&p.ranges_kv),
        "hypervisor leaves",
        if p.ranges_human.is_empty() {
            "none".to_string()
        } else {
            p.ranges_human.join("; ")
        },
        if p.ranges_human.is_empty() {
            "not a guest, or the hypervisor hides itself"
        } else {
            ""
        },
    );
    out.item_detail(
        "paravirt_sources",
        list(&p.offered),
        "offered",
        list(&p.offered),
        "the hypervisor's rate sources (source tokens)",
    );
    out.item_detail(
        "ring0_only_sources",
        list(&p.ring0),
        "kernel only",
        list(&p.ring0),
        "MSRs: RDMSR/WRMSR need ring 0; this process names them but cannot read them",
    );
    let token = p.kernel_source.map_or("none", |s| s.token());
    let kernel_note = match p.kernel_source {
        Some(s) if p.ring0.contains(&s.token()) => {
            "the hypervisor's rate, which a program cannot read"
        }
        Some(_) => "no better source than this process has",
        None => "nothing states the rate: a kernel must measure it",
    };
    out.item_detail(
        "kernel_source",
        token,
        "a kernel would use",
        token,
        kernel_note,
    );
    for (label, value, note) in p.details.iter().chain(&p.howto) {
        out.detail_row(label, value, note);
    }
}

fn rate_section(out: &Out, f: &Findings) {
    let m = &f.machine;
    out.title("Rate");
    let claim = m.claim;
    out.key(
        "discovered_hz",
        claim.map_or("none".into(), |c| c.as_hz().to_string()),
    );
    for c in &m.candidates {
        let best = claim.is_some_and(|b| b.source() == c.source());
        out.row(
            "stated rate",
            hz_human(c.as_millihz()),
            &format!(
                "by {}, {}{}",
                source_words(c.source()),
                accuracy_words(c.accuracy()),
                if best {
                    "; the most trusted, checked below"
                } else {
                    ""
                }
            ),
        );
    }
    if m.candidates.is_empty() {
        out.row(
            "stated rate",
            "none",
            if m.hypervisor.is_some() {
                "neither the CPU nor the hypervisor states the counter's rate to programs"
            } else {
                "the CPU does not state its counter's rate"
            },
        );
    }
    out.key(
        "discovered_source",
        claim.map_or("none", |c| c.source().token()),
    );

    let none = || "none".to_string();
    let v = f.verified.as_ref().ok();
    let cal = v.map(|v| &v.calibration);
    out.item(
        "calibrated_hz",
        cal.map_or_else(none, |c| hz3(c.frequency.as_millihz())),
        "measured rate",
        cal.map_or("failed".into(), |c| hz_human(c.frequency.as_millihz())),
        &match cal {
            Some(c) => format!(
                "± {} ppm (at least 99 % sure), against {} in {}",
                ppm2(c.frequency.accuracy().bound_ppb()),
                reference_words(f.reference),
                duration_human(c.duration)
            ),
            None => format!("against {}", reference_words(f.reference)),
        },
    );
    out.key("reference", f.reference);
    out.key(
        "calibration_error",
        f.verified
            .as_ref()
            .err()
            .map_or("none", CalibrationError::token),
    );
    if let Err(e) = &f.verified {
        out.row("failure", e.token(), &e.to_string());
    }
    out.key(
        "uncertainty_ppm",
        cal.map_or_else(none, |c| ppm3(c.frequency.accuracy().bound_ppb() as i64)),
    );
    out.key(
        "measurement_ppm",
        cal.map_or_else(none, |c| ppm3(c.measurement_ppb as i64)),
    );
    out.key("target_ppm", ppm3(f.target_ppb as i64));
    // On success the calibration's own duration (reference time); on failure, the wall
    // time it took to fail.
    out.key("calibration_ms", ms3(cal.map_or(f.wall, |c| c.duration)));
    out.key("max_ms", f.max_ms);
    out.item(
        "met_target",
        cal.map_or_else(none, |c| c.met_target.to_string()),
        "target",
        match cal {
            Some(c) if c.met_target => "met",
            Some(_) => "not met",
            None => "none",
        },
        &match cal {
            Some(c) if c.met_target => format!(
                "± {} ppm from the measurement alone, within {} ms: reached (± {} ppm) \
                 after {}, which ended the measurement",
                ppm2(f.target_ppb),
                f.max_ms,
                ppm2(c.measurement_ppb),
                duration_human(c.duration)
            ),
            Some(c) => format!(
                "± {} ppm from the measurement alone, within {} ms: it reached ± {} ppm in \
                 {}{} (--max-ms allows longer)",
                ppm2(f.target_ppb),
                f.max_ms,
                ppm2(c.measurement_ppb),
                duration_human(c.duration),
                if c.duration > Duration::from_millis(f.max_ms) * 5 / 4 {
                    ", its last read late: the thread was descheduled past the limit"
                } else {
                    ""
                }
            ),
            None => format!(
                "± {} ppm within {} ms: no measurement ({} wall before failing)",
                ppm2(f.target_ppb),
                f.max_ms,
                duration_human(f.wall)
            ),
        },
    );
    // A calibration that found too few samples still says how many.
    let samples = match &f.verified {
        Ok(v) => Some((v.calibration.samples_used, v.calibration.samples_rejected)),
        Err(CalibrationError::TooFewSamples { used, rejected }) => Some((*used, *rejected)),
        Err(_) => None,
    };
    out.key(
        "samples_used",
        samples.map_or_else(none, |(u, _)| u.to_string()),
    );
    out.key(
        "samples_rejected",
        samples.map_or_else(none, |(_, j)| j.to_string()),
    );
    out.row(
        "samples",
        samples.map_or_else(none, |(u, _)| group(u)),
        &samples.map_or("none".into(), |(_, j)| {
            format!(
                "used by the fit; {} rejected (a read interrupted, a reference glitch)",
                group(j)
            )
        }),
    );
    let deviation = v.and_then(|v| v.verdict.deviation_ppb());
    out.key("agreement_ppm", deviation.map_or_else(none, ppm3));
    let verdict = match v {
        None => "none",
        Some(v) => match v.verdict {
            Verdict::Unclaimed => "unclaimed",
            _ if v.verdict.is_disagreement() => "claim_rejected",
            _ if v.chosen.source() == Source::Calibrated => "claim_confirmed_measurement_used",
            _ => "claim_confirmed_and_kept",
        },
    };
    let verdict_note = match (v, deviation) {
        (None, _) => "no measurement to check a stated rate against".to_string(),
        (Some(v), None) => format!(
            "measured, nothing stated to check; {}",
            accuracy_words(v.chosen.accuracy())
        ),
        (Some(v), Some(d)) => match v.verdict {
            Verdict::Disagrees { allowed_ppb, .. } => format!(
                "the stated rate is {} ppm off, more than the ± {} ppm allowed: the measured \
                 rate is used",
                ppm_signed(d),
                ppm2(allowed_ppb)
            ),
            _ if v.chosen.source() == Source::Calibrated => format!(
                "the stated rate agrees ({} ppm); the measured one is more precise and used",
                ppm_signed(d)
            ),
            _ => format!(
                "the stated rate agrees ({} ppm) and is kept: {}",
                ppm_signed(d),
                accuracy_words(v.chosen.accuracy())
            ),
        },
    };
    out.item(
        "verdict",
        verdict,
        "rate used",
        v.map_or("none".into(), |v| hz_human(v.chosen.as_millihz())),
        &verdict_note,
    );
    let kernel = f.kernel;
    let kernel_freq = kernel
        .and_then(|(mhz, _)| Frequency::from_millihz(mhz, Source::Reference, Accuracy::Exact));
    let kernel_dev = match (cal, kernel_freq) {
        (Some(c), Some(k)) => Some(c.frequency.deviation_ppb_from(&k)),
        _ => None,
    };
    out.item(
        "kernel_hz",
        kernel.map_or_else(none, |(mhz, _)| (mhz / 1000).to_string()),
        "Linux's figure",
        kernel.map_or("none".into(), |(mhz, _)| hz_human(mhz)),
        &match (kernel, kernel_dev) {
            (Some((_, src)), Some(d)) => {
                format!(
                    "Linux's own ({src}); the measured rate is {} ppm from it",
                    ppm_signed(d)
                )
            }
            (Some((_, src)), None) => format!("Linux's own ({src})"),
            (None, _) if f.machine.counter_key == "tsc" => {
                "Linux states none here (no sysfs tsc_freq_khz or dmesg line)".into()
            }
            (None, _) => "the report reads Linux's figure for the TSC only".into(),
        },
    );
    out.key("kernel_deviation_ppm", kernel_dev.map_or_else(none, ppm3));
}

/// A calibration reference's name in words.
fn reference_words(name: &str) -> String {
    match name {
        "std" => "std's monotonic clock (CLOCK_MONOTONIC on Linux)".into(),
        other => other.into(),
    }
}

fn read_section(out: &Out, f: &Findings) {
    let c = &f.cost;
    let r = &f.machine.reads;
    out.title(&format!(
        "Read cost (median of {ROUNDS} interleaved rounds of {} calls each)",
        group(u64::from(CALLS))
    ));
    let labels: [(&str, String); READS] = [
        (
            "raw, ordered",
            format!("{} (what Counter::ticks reads)", r.ordered),
        ),
        ("raw, plain", r.plain.to_string()),
        ("Clock::now", format!("on {}", r.ordered)),
        ("Clock::now, plain", format!("on {}", r.plain)),
        ("Clock::raw", format!("on {}", r.ordered)),
        (
            "std Instant::now",
            "clock_gettime(CLOCK_MONOTONIC) on Linux".to_string(),
        ),
        ("quanta Instant", r.quanta.to_string()),
        ("minstant Instant", r.minstant.to_string()),
        (
            "bare floor",
            format!("a one-slot seqlock read written here, on {}", r.ordered),
        ),
        ("bare floor, plain", format!("the same on {}", r.plain)),
    ];
    for (i, (label, what)) in labels.iter().enumerate() {
        let key = READ_KEYS[i];
        let ratio_key = key.replacen("read_ns_", "read_ratio_", 1);
        let Some(fig) = c.figures.get(i) else {
            out.item(key, "none", label, "none", "not measured");
            out.key(&ratio_key, "none");
            continue;
        };
        let base = if BASE[i] == RAW { "ordered" } else { "plain" };
        let mut note = format!("{what}: {:.2}× the {base} read", fig.ratio);
        if let Some(why) = &fig.noisy {
            note.push_str(&format!("; NOISY, {why}"));
        } else if out.details {
            note.push_str(&format!("; rounds spread {:.1} %", fig.spread * 100.0));
        }
        let shown = format!(
            "{:>7.2} ns{}",
            fig.ns,
            if fig.noisy.is_some() { " noisy" } else { "" }
        );
        out.item(key, format!("{:.2}", fig.ns), label, shown, &note);
        out.key(&ratio_key, format!("{:.3}", fig.ratio));
    }
    for (key, ratio) in ["read_floor_ratio_now", "read_floor_ratio_now_plain"]
        .iter()
        .zip(c.over_floor)
    {
        if ratio.is_nan() {
            out.key(key, "none");
        } else {
            out.key(key, format!("{ratio:.3}"));
        }
    }
    if !c.over_floor[0].is_nan() {
        out.row(
            "Clock::now / floor",
            format!("{:.2}× / {:.2}×", c.over_floor[0], c.over_floor[1]),
            "Clock::now over the bare floor on the same read, ordered / plain: what the \
             clock's protocol costs beyond the least one (median of the per-round ratios)",
        );
    }
    let noisy = c.noisy_keys();
    out.key("read_noisy", list(&noisy));
    out.key("read_rounds", ROUNDS);
    out.key("read_calls_per_round", CALLS);
    out.key("read_attempts", c.attempts);
    out.row(
        "trust",
        if noisy.is_empty() { "good" } else { "noisy" },
        &if noisy.is_empty() {
            format!(
                "every figure plausible, rounds agree within {:.0} % (attempt {} of at most {ATTEMPTS})",
                SPREAD_LIMIT * 100.0,
                c.attempt
            )
        } else {
            format!(
                "{} figure(s) flagged after {} attempts: this machine was too busy; run it \
                 again, or `cargo bench --bench read_ratio` for longer rounds",
                noisy.len(),
                c.attempts
            )
        },
    );
}

fn monotonic_section(out: &Out, f: &Findings) {
    let s = &f.stats;
    let rate = f.rate.as_ref();
    out.title(&format!(
        "One CPU ({} consecutive ordered reads)",
        group(u64::from(s.reads))
    ));
    out.item(
        "backwards_steps",
        s.backwards_steps,
        "steps back",
        s.backwards_steps,
        &if s.backwards_steps == 0 {
            "never below the read before".to_string()
        } else {
            format!("the largest {} ticks", s.max_backwards_ticks)
        },
    );
    out.item(
        "zero_deltas",
        s.zero_deltas,
        "equal reads",
        group(u64::from(s.zero_deltas)),
        "reads equal to the one before (a coarse or stuck counter)",
    );
    out.item(
        "min_delta_ticks",
        s.min_delta_ticks,
        "smallest step",
        format!("{} ticks", s.min_delta_ticks),
        &match ticks_human(s.min_delta_ticks, rate) {
            _ if s.min_delta_ticks == 0 => {
                "reads come faster than the counter ticks: its resolution, not its cost".into()
            }
            Some(t) => format!("{t}: one read and the loop around it"),
            None => String::new(),
        },
    );
    out.item(
        "max_delta_ticks",
        s.max_delta_ticks,
        "largest step",
        format!("{} ticks", group(s.max_delta_ticks)),
        &ticks_human(s.max_delta_ticks, rate).map_or(String::new(), |t| {
            format!("{t}: the thread was interrupted")
        }),
    );
    for (lo, hi, count) in s.histogram.nonzero() {
        out.detail_row(
            "step size",
            format!("{lo}..{hi} ticks"),
            &format!("{} reads", group(u64::from(count))),
        );
    }
}

fn warp_section(out: &Out, f: &Findings) {
    let run = &f.warp;
    let w = &run.report;
    out.title("Across CPUs (a token passed between threads pinned to each CPU)");
    let placed = match (run.pinned, run.pin_error) {
        (p, None) if p == w.cpus => "each thread pinned to its own CPU".to_string(),
        (p, e) => format!(
            "{p} of {} threads pinned (error {}): the OS placed the rest",
            w.cpus,
            e.map_or("none".to_string(), |e| e.to_string())
        ),
    };
    out.item(
        "warp_cpus",
        w.cpus_covered,
        "cpus",
        format!("{} of {}", w.cpus_covered, w.cpus),
        &placed,
    );
    out.item(
        "warp_pairs",
        w.pairs_compared,
        "pairs",
        format!("{} of {}", w.pairs_compared, w.pairs),
        "pairs of CPUs compared both ways",
    );
    out.item(
        "warp_checks",
        w.checks,
        "handovers",
        group(w.checks),
        &format!(
            "each compares a read with another CPU's read just before, in {} ({} per ordered \
             pair at least; {} needed)",
            duration_human(f.warp_took),
            group(u64::from(w.min_checks_per_pair)),
            group(u64::from(baretime_diag::CONSISTENT_MIN_CHECKS_PER_PAIR))
        ),
    );
    out.item(
        "warps",
        w.warps,
        "warps",
        w.warps,
        "reads behind the other CPU's read just before",
    );
    out.item(
        "warp_max_ticks",
        w.max_warp_ticks,
        "largest warp",
        format!("{} ticks", w.max_warp_ticks),
        &match (w.warp_pair, ticks_human(w.max_warp_ticks, f.rate.as_ref())) {
            (Some((a, b)), Some(t)) => format!("{t}, CPU {a} → CPU {b}"),
            (Some((a, b)), None) => format!("CPU {a} → CPU {b}"),
            (None, _) => "no step back across CPUs".to_string(),
        },
    );
    let verdict = w.verdict();
    let why = match verdict {
        WarpVerdict::Warped { .. } => "times read on different CPUs do not compare".to_string(),
        WarpVerdict::Consistent => "times read on different CPUs compare".to_string(),
        _ => format!(
            "no warp seen, but too few checks to be sure{}",
            run.error.map_or(String::new(), |e| format!(" ({e})"))
        ),
    };
    out.item(
        "warp_verdict",
        verdict.token(),
        "verdict",
        verdict.token(),
        &why,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ns[read][round]`: every read at `base` ns in every round, times `jitter(read, round)`.
    fn rounds(base: [f64; READS], jitter: impl Fn(usize, usize) -> f64) -> Vec<Vec<f64>> {
        (0..READS)
            .map(|i| (0..ROUNDS).map(|r| base[i] * jitter(i, r)).collect())
            .collect()
    }

    /// Plausible costs: ordered 15.5, plain 9.4, Clock::now 17.8, ...
    const GOOD: [f64; READS] = [15.5, 9.4, 17.8, 9.5, 15.5, 22.0, 9.5, 9.4, 17.0, 9.5];

    fn flagged(figures: &[ReadFigure]) -> Vec<usize> {
        (0..figures.len())
            .filter(|&i| figures[i].noisy.is_some())
            .collect()
    }

    #[test]
    fn steady_plausible_rounds_are_not_flagged() {
        // A load that slows whole rounds alike (a quarter of them twice as slow) moves no
        // per-round ratio.
        let ns = rounds(GOOD, |_, r| if r % 4 == 0 { 2.0 } else { 1.0 });
        let f = judge(&ns);
        assert_eq!(flagged(&f), Vec::<usize>::new());
        assert!((f[NOW].ratio - 17.8 / 15.5).abs() < 1e-9);
        assert!((f[QUANTA].ratio - 9.5 / 9.4).abs() < 1e-9);
    }

    #[test]
    fn a_plain_read_slower_than_the_ordered_one_is_impossible() {
        let mut costs = GOOD;
        costs[PLAIN] = 20.0;
        let f = judge(&rounds(costs, |_, _| 1.0));
        assert!(f[PLAIN]
            .noisy
            .as_deref()
            .is_some_and(|w| w.contains("impossible")));
        assert!(f[RAW]
            .noisy
            .as_deref()
            .is_some_and(|w| w.contains("impossible")));
    }

    #[test]
    fn clock_now_faster_than_the_read_it_is_built_on_is_impossible() {
        let mut costs = GOOD;
        costs[NOW] = 12.0; // 0.77× the ordered read, above the plain one
        costs[RAW_INSTANT] = 5.0; // below the plain read too
        let f = judge(&rounds(costs, |_, _| 1.0));
        assert_eq!(flagged(&f), vec![NOW, RAW_INSTANT]);
    }

    #[test]
    fn rounds_that_disagree_are_flagged() {
        // One read preempted in 40 % of the rounds: its per-round ratios spread.
        let ns = rounds(GOOD, |i, r| if i == STD && r % 5 < 2 { 3.0 } else { 1.0 });
        let f = judge(&ns);
        assert_eq!(flagged(&f), vec![STD]);
        assert!(f[STD].spread > SPREAD_LIMIT);
    }

    #[test]
    fn numbers_stay_whole_across_line_breaks() {
        let text = "a rate of 2 596 120 069 Hz ± 0.95 ppm measured in 2.1 ms, 1 000 needed";
        let never = [
            ("2", "596"),
            ("596", "120"),
            ("120", "069"),
            ("069", "Hz"),
            ("±", "0.95"),
            ("0.95", "ppm"),
            ("2.1", "ms,"),
            ("1", "000"),
        ];
        for width in 1..=text.len() {
            let lines = wrap(text, width, width);
            assert_eq!(lines.join(" "), text);
            for pair in lines.windows(2) {
                let end = pair[0].rsplit(' ').next().unwrap();
                let start = pair[1].split(' ').next().unwrap();
                assert!(!never.contains(&(end, start)), "{width}: {end} | {start}");
            }
        }
        assert_eq!(wrap(text, 100, 100), vec![text.to_string()]);
    }

    #[test]
    fn figures_for_people() {
        assert_eq!(group(2_596_120_069), "2 596 120 069");
        assert_eq!(group(999), "999");
        assert_eq!(hz_human(2_596_120_069_499), "2 596 120 069 Hz");
        assert_eq!(ppm2(947), "0.95");
        assert_eq!(ppm2(1_000_000), "1 000");
        assert_eq!(ppm_signed(-32), "−0.03");
        assert_eq!(ppm3(-32), "-0.032");
        assert_eq!(hz3(2_445_403_922_111), "2445403922.111");
    }
}
