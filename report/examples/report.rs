//! What is this machine's counter, and how good is it?
//!
//! `cargo run --release --example report` prints a report for people;
//! `cargo run --release --example report -- --kv` prints `key=value` lines (the report's
//! output contract: every key, always present, listed in the README's "Report keys").
//! `--max-ms N` bounds the calibration (default 20 ms); `--max-ms 0` makes it fail, which
//! shows the report's failure path.
//!
//! It probes the counter, lists what the hardware claims about its frequency, calibrates it
//! against std's monotonic clock, verifies the claim, compares with the kernel's own figure
//! where Linux tells it, and measures read cost and monotonicity beside `std::time::Instant`,
//! `quanta` and `minstant`.
//!
//! Every key is printed on every run, `none` where unknown, so a failed calibration gives the
//! same key set as a good one. Frequencies are integers of Hz or Hz with three decimals from
//! the millihertz, and ppm figures come from integer ppb: no float rounding in either.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant as StdInstant};

use baretime::StdReference;
use baretime::{calibrate_and_verify, CalibrationError, Config, Reference, Verdict};
use baretime::{Accuracy, Clock, Counter, Frequency, Source};
use baretime_diag::{self, ReadStats, WarpVerdict};

/// One line of output: a key, a machine value, and a human rendering.
struct Report {
    kv: bool,
}

impl Report {
    fn section(&self, title: &str) {
        if !self.kv {
            println!("\n{title}");
        }
    }
    fn item(&self, key: &str, value: impl std::fmt::Display, human: impl std::fmt::Display) {
        if self.kv {
            println!("{key}={value}");
        } else {
            println!("  {:<22} {human}", key.replace('_', " "));
        }
    }
    /// A line for people only.
    fn note(&self, line: impl std::fmt::Display) {
        if !self.kv {
            println!("  {line}");
        }
    }
}

/// Millihertz as Hz with exactly three decimals: `2445403922.111`.
fn hz3(millihz: u64) -> String {
    format!("{}.{:03}", millihz / 1000, millihz % 1000)
}

/// A signed ppb figure as ppm with exactly three decimals: `-0.032`.
fn ppm3(ppb: i64) -> String {
    let sign = if ppb < 0 { "-" } else { "" };
    let a = ppb.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// [`ppm3`] with a `+` on positive figures, for people.
fn ppm3_signed(ppb: i64) -> String {
    if ppb > 0 {
        format!("+{}", ppm3(ppb))
    } else {
        ppm3(ppb)
    }
}

/// A duration in ms with exactly three decimals.
fn ms3(d: Duration) -> String {
    let us = d.as_micros();
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// `2445403922.111 Hz (calibrated, ±0.951 ppm measured)`: the rate and its provenance.
fn describe(f: &Frequency) -> String {
    let accuracy = match f.accuracy() {
        Accuracy::Exact => "exact".to_string(),
        Accuracy::Nominal { tolerance_ppb } => {
            format!("±{} ppm nominal", ppm3(tolerance_ppb as i64))
        }
        Accuracy::Measured { uncertainty_ppb } => {
            format!("±{} ppm measured", ppm3(uncertainty_ppb as i64))
        }
        _ => format!("±{} ppm", ppm3(f.accuracy().bound_ppb() as i64)),
    };
    format!("{} Hz ({}, {accuracy})", hz3(f.as_millihz()), f.source())
}

/// What the platform module found.
struct Discovered {
    flags: Vec<String>,
    candidates: Vec<Frequency>,
    claim: Option<Frequency>,
    /// The hypervisor's signature (`Some` exactly when the CPU says it runs under one).
    hypervisor: Option<String>,
    /// What to tell a VM's owner when it states no rate (a VM without a candidate).
    hint: Option<&'static str>,
    /// x86_64: the invariant-TSC bit (quanta trusts the TSC only with it).
    invariant_tsc: bool,
}

/// Which read each line of the read-cost table times.
struct Reads {
    ordered: &'static str,
    plain: &'static str,
    quanta: &'static str,
    minstant: &'static str,
}

#[cfg(target_arch = "x86_64")]
mod platform {
    use super::{Discovered, Reads};
    use baretime_x86::{Tsc, X86Features};

    pub type Ctr = Tsc;
    pub const COUNTER: &str = "tsc";

    pub fn counter() -> Tsc {
        Tsc::probe().expect("this x86_64 CPU reports no TSC")
    }

    pub fn discover() -> Discovered {
        let d = baretime_x86::discover();
        let hypervisor_bit = d.features().contains(X86Features::HYPERVISOR);
        let vendor = std::str::from_utf8(d.vendor()).unwrap_or("?");
        let mut flags = vec![format!("vendor={vendor}")];
        flags.push(format!("invariant_tsc={}", d.invariant_tsc()));
        flags.push(format!("hypervisor_bit={hypervisor_bit}"));
        flags.push(format!("features={:?}", d.features()));
        if let Some(b) = d.brand() {
            flags.push(format!("brand={b}"));
        }
        // The hypervisor bit always gives range 0x40000000 (discovery records it).
        let hypervisor = d
            .hypervisors()
            .first()
            .filter(|_| hypervisor_bit)
            .map(|r| signature(&r.signature));
        let hint = match &hypervisor {
            Some(sig) if d.candidates().is_empty() => Some(vm_hint(sig)),
            _ => None,
        };
        Discovered {
            flags,
            candidates: d.candidates().to_vec(),
            claim: d.best(),
            hypervisor,
            hint,
            invariant_tsc: d.invariant_tsc(),
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

    /// How to make this hypervisor state the TSC rate where discovery can read it.
    fn vm_hint(signature: &str) -> &'static str {
        match signature {
            "KVMKVMKVM" | "TCGTCGTCGTCG" => {
                "hint: QEMU/KVM states the TSC rate in CPUID 0x40000010 with -cpu host,+invtsc (vmware-cpuid-freq is on by default; add tsc-frequency=HZ where the host's rate is unknown)"
            }
            "Microsoft Hv" => {
                "hint: Hyper-V states the TSC rate only in an MSR (QEMU: hv-frequencies), which CPUID discovery cannot read: calibration is the source here"
            }
            "VMwareVMware" => {
                "hint: VMware states the TSC rate in CPUID 0x40000010 unless the VM's CPUID is masked: check the VM's CPUID mask settings"
            }
            _ => {
                "hint: this hypervisor states no TSC rate; expose CPUID 0x40000010 (QEMU/KVM: -cpu host,+invtsc,vmware-cpuid-freq=on or tsc-frequency=HZ) or leaf 0x15"
            }
        }
    }

    pub fn reads(counter: &Tsc, invariant_tsc: bool) -> Reads {
        Reads {
            ordered: "LFENCE;RDTSC (ordered)",
            plain: "RDTSC (plain)",
            // quanta uses the TSC only with invariant TSC and RDTSCP, minstant only where
            // Linux's clocksource is the TSC.
            quanta: if invariant_tsc && counter.has_rdtscp() {
                "RDTSC (plain), scaled"
            } else {
                "the OS monotonic clock (no invariant TSC or RDTSCP)"
            },
            minstant: if minstant::is_tsc_available() {
                "RDTSC (plain), scaled"
            } else {
                "SystemTime::now (minstant does not trust this TSC)"
            },
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod platform {
    use super::{Discovered, Reads};
    use baretime_aarch64::GenericTimer;

    pub type Ctr = GenericTimer;
    pub const COUNTER: &str = "cntvct_el0";

    pub fn counter() -> GenericTimer {
        GenericTimer::new()
    }

    pub fn discover() -> Discovered {
        let d = baretime_aarch64::discover();
        let flags = vec![
            format!("cntfrq_el0={}", d.cntfrq),
            format!("midr_el1={:#x}", d.midr_raw),
            format!("ecv={}", d.ecv()),
        ];
        Discovered {
            flags,
            candidates: d.candidates().to_vec(),
            claim: d.best(),
            // The generic timer has no CPUID-style hypervisor signature.
            hypervisor: None,
            hint: None,
            invariant_tsc: false,
        }
    }

    pub fn reads(counter: &GenericTimer, _invariant_tsc: bool) -> Reads {
        Reads {
            ordered: if counter.read_self_synchronized().is_some() {
                "MRS CNTVCTSS_EL0 (self-synchronized)"
            } else {
                "ISB;MRS CNTVCT_EL0 (ordered)"
            },
            plain: "MRS CNTVCT_EL0 (plain)",
            quanta: "MRS CNTVCT_EL0 (plain), scaled",
            minstant: "SystemTime::now (minstant reads no counter on aarch64)",
        }
    }
}

/// Nanoseconds per call of `f`, the best of several rounds (the least disturbed).
fn ns_per_call<T>(mut f: impl FnMut() -> T) -> f64 {
    const N: u32 = 200_000;
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = StdInstant::now();
        for _ in 0..N {
            black_box(f());
        }
        best = best.min(t.elapsed().as_nanos() as f64 / f64::from(N));
    }
    best
}

/// Cross-CPU handovers the report's warp check makes at least (every check is one).
const WARP_MIN_HANDOVERS: u64 = 100_000;
/// CPUs the report's warp check compares at most (pairs grow as n²; a kernel checks more).
const WARP_MAX_CPUS: u32 = 16;

/// Runs the crate's threaded warp check: one thread per CPU (up to [`WARP_MAX_CPUS`]),
/// pinned, with enough checks per ordered pair for [`WARP_MIN_HANDOVERS`] in all and never
/// fewer than the crate's minimum for a `consistent` verdict. A wait longer than 1 s ends it
/// (reported as a timeout; the verdict is then `inconclusive` unless a warp was seen).
fn warp_check<C: Counter + Sync>(counter: &C) -> baretime_diag::ThreadedWarp {
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

fn main() {
    let mut kv = false;
    let mut max_ms = 20u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kv" => kv = true,
            "--max-ms" => match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => max_ms = v,
                None => {
                    eprintln!("--max-ms needs a whole number of milliseconds");
                    std::process::exit(2);
                }
            },
            _ => {
                eprintln!("usage: report [--kv] [--max-ms N]");
                std::process::exit(2);
            }
        }
    }
    let r = Report { kv };
    let counter: platform::Ctr = platform::counter();

    if !kv {
        println!("baretime report: this machine's counter and how good it is");
    }
    r.section("Counter");
    r.item("counter", platform::COUNTER, platform::COUNTER);
    let found = platform::discover();
    for f in &found.flags {
        r.note(f);
    }
    let hv = found.hypervisor.as_deref().unwrap_or("none");
    r.item(
        "hypervisor",
        hv,
        match &found.hypervisor {
            Some(sig) => format!("{sig} (CPUID 0x40000000 signature)"),
            None => "none".into(),
        },
    );

    paravirt::section(&r);

    r.section("What the hardware claims");
    if found.candidates.is_empty() {
        r.note("(no frequency candidate)");
    }
    for c in &found.candidates {
        r.note(format!("candidate              {}", describe(c)));
    }
    if let Some(hint) = found.hint {
        r.note(hint);
    }
    let claim = found.claim;
    r.item(
        "discovered_hz",
        claim.map_or("none".into(), |f| f.as_hz().to_string()),
        claim.map_or("none".into(), |f| describe(&f)),
    );
    let src = claim.map_or("none", |f| f.source().token());
    r.item("discovered_source", src, src);

    r.section("Calibration against std's monotonic clock");
    let config = Config::new()
        .with_target_ppb(1_000)
        .with_max_duration(Duration::from_millis(max_ms));
    let reference = StdReference::new();
    let reference_name = reference.name();
    let started = StdInstant::now();
    let verified = calibrate_and_verify(counter, reference, claim, config);
    let wall = started.elapsed();
    let kernel = common::kernel_tsc_millihz();
    let none = || "none".to_string();
    let v = verified.as_ref().ok();
    let cal = v.map(|v| &v.calibration);
    r.item(
        "calibrated_hz",
        cal.map_or_else(none, |c| hz3(c.frequency.as_millihz())),
        cal.map_or("none (calibration failed: see below)".into(), |c| {
            format!("{} Hz", hz3(c.frequency.as_millihz()))
        }),
    );
    r.item(
        "calibration_error",
        verified
            .as_ref()
            .err()
            .map_or("none", CalibrationError::token),
        verified
            .as_ref()
            .err()
            .map_or("none".into(), |e| format!("{} ({e})", e.token())),
    );
    r.item(
        "uncertainty_ppm",
        cal.map_or_else(none, |c| ppm3(c.uncertainty_ppb as i64)),
        cal.map_or_else(none, |c| format!("±{} ppm", ppm3(c.uncertainty_ppb as i64))),
    );
    // On success the calibration's own duration (reference time); on failure, the wall
    // time it took to fail.
    let ms = cal.map_or(wall, |c| c.duration);
    r.item(
        "calibration_ms",
        ms3(ms),
        match cal {
            Some(c) => format!(
                "{} ms ({} ms wall, at most {max_ms} ms allowed)",
                ms3(c.duration),
                ms3(wall)
            ),
            None => format!(
                "{} ms wall before failing (at most {max_ms} ms allowed)",
                ms3(wall)
            ),
        },
    );
    r.item("reference", reference_name, reference_name);
    // A calibration that found too few samples still says how many.
    let samples = match &verified {
        Ok(v) => Some((v.calibration.samples_used, v.calibration.samples_rejected)),
        Err(CalibrationError::TooFewSamples { used, rejected }) => Some((*used, *rejected)),
        Err(_) => None,
    };
    let used = samples.map_or_else(none, |(u, _)| u.to_string());
    r.item("samples_used", &used, &used);
    let rejected = samples.map_or_else(none, |(_, j)| j.to_string());
    r.item("samples_rejected", &rejected, &rejected);
    r.item(
        "met_target",
        cal.map_or_else(none, |c| c.met_target.to_string()),
        cal.map_or_else(none, |c| c.met_target.to_string()),
    );
    let deviation = v.and_then(|v| v.verdict.deviation_ppb());
    r.item(
        "agreement_ppm",
        deviation.map_or_else(none, ppm3),
        match (deviation, v) {
            (Some(d), _) => format!("{} ppm (claim − measurement)", ppm3_signed(d)),
            (None, Some(_)) => "none (no claim to check)".into(),
            (None, None) => "none (no measurement)".into(),
        },
    );
    let verdict = match v {
        None => "none",
        Some(v) => match v.verdict {
            Verdict::Unclaimed => "unclaimed",
            _ if v.verdict.is_disagreement() => "claim_rejected",
            _ if v.chosen.source() == Source::Calibrated => "claim_confirmed_measurement_used",
            _ => "claim_confirmed_and_kept",
        },
    };
    r.item(
        "verdict",
        verdict,
        match v {
            Some(v) => format!("{verdict}: clock runs on {}", describe(&v.chosen)),
            None => "none (no measurement to verify against)".into(),
        },
    );
    r.item(
        "kernel_hz",
        kernel.map_or_else(none, |(m, _)| (m / 1000).to_string()),
        kernel.map_or(
            "none (no sysfs tsc_freq_khz or dmesg line)".into(),
            |(m, src)| format!("{} Hz ({src})", hz3(m)),
        ),
    );
    let kernel_freq =
        kernel.and_then(|(m, _)| Frequency::from_millihz(m, Source::Reference, Accuracy::Exact));
    let kernel_dev = match (cal, kernel_freq) {
        (Some(c), Some(k)) => Some(c.frequency.deviation_ppb_from(&k)),
        _ => None,
    };
    r.item(
        "kernel_deviation_ppm",
        kernel_dev.map_or_else(none, ppm3),
        kernel_dev.map_or_else(none, |d| {
            format!("{} ppm (calibrated − kernel)", ppm3_signed(d))
        }),
    );

    r.section("Read cost (ns per call, best of 7 rounds of 200k)");
    // No verified rate after a failed calibration: the claim, else 1 GHz (the costs are what
    // matter here, not the times the clocks tell).
    let freq = v
        .map(|v| v.chosen)
        .or(claim)
        .unwrap_or(Frequency::user_hz(1_000_000_000).expect("1 GHz"));
    let reads = platform::reads(&counter, found.invariant_tsc);
    let clock = Clock::new(counter, freq);
    let plain = counter.unordered();
    let raw = ns_per_call(|| counter.ticks());
    let raw_plain = ns_per_call(|| plain.ticks());
    let now = ns_per_call(|| clock.now());
    let rawi = ns_per_call(|| clock.raw());
    let plain_clock = Clock::new(plain, freq);
    let now_plain = ns_per_call(|| plain_clock.now());
    let std_ns = ns_per_call(StdInstant::now);
    let q = quanta::Clock::new();
    let quanta_ns = ns_per_call(|| q.now());
    let minstant_ns = ns_per_call(minstant::Instant::now);
    let rows: [(&str, f64, String); 8] = [
        (
            "read_ns_raw",
            raw,
            format!("raw counter: {}", reads.ordered),
        ),
        (
            "read_ns_raw_plain",
            raw_plain,
            format!("raw counter: {}", reads.plain),
        ),
        (
            "read_ns_now",
            now,
            format!("Clock::now on {} ({:.2}× raw)", reads.ordered, now / raw),
        ),
        (
            "read_ns_now_plain",
            now_plain,
            format!(
                "Clock::now on {} ({:.2}× plain raw)",
                reads.plain,
                now_plain / raw_plain
            ),
        ),
        (
            "read_ns_raw_instant",
            rawi,
            format!("Clock::raw on {} ({:.2}× raw)", reads.ordered, rawi / raw),
        ),
        (
            "read_ns_std",
            std_ns,
            "std::time::Instant::now (clock_gettime(CLOCK_MONOTONIC) on Linux)".into(),
        ),
        (
            "read_ns_quanta",
            quanta_ns,
            format!("quanta::Clock::now: {}", reads.quanta),
        ),
        (
            "read_ns_minstant",
            minstant_ns,
            format!("minstant::Instant::now: {}", reads.minstant),
        ),
    ];
    for (key, ns, what) in rows {
        r.item(key, format!("{ns:.2}"), format!("{ns:>7.2} ns  {what}"));
    }

    r.section("Monotonicity (1M consecutive reads)");
    let stats = ReadStats::measure(&counter, 1_000_000);
    r.item(
        "backwards_steps",
        stats.backwards_steps,
        format!(
            "{} backwards steps (largest {} ticks)",
            stats.backwards_steps, stats.max_backwards_ticks
        ),
    );
    r.item(
        "zero_deltas",
        stats.zero_deltas,
        format!("{} reads equal to the previous one", stats.zero_deltas),
    );
    r.item(
        "min_delta_ticks",
        stats.min_delta_ticks,
        stats.min_delta_ticks,
    );
    r.item(
        "max_delta_ticks",
        stats.max_delta_ticks,
        format!("{} ticks (an interruption)", stats.max_delta_ticks),
    );
    if !kv {
        println!("  consecutive-read deltas (ticks):");
        for (lo, hi, count) in stats.histogram.nonzero() {
            println!("    {lo:>10} ..{hi:>10}  {count}");
        }
    }

    r.section(
        format!(
            "Warp check across CPUs (token passed between pinned threads, every check a \
             cross-CPU handover; `consistent` needs ≥ {} checks of every ordered pair)",
            baretime_diag::CONSISTENT_MIN_CHECKS_PER_PAIR
        )
        .as_str(),
    );
    let t = StdInstant::now();
    let run = warp_check(&counter);
    let took = t.elapsed();
    let w = run.report;
    let placed = match (run.pinned, run.pin_error) {
        (p, None) if p == w.cpus => "each pinned to its own CPU".to_string(),
        (p, e) => format!(
            "{p} of {} pinned (error {}): the OS placed the rest",
            w.cpus,
            e.map_or("none".to_string(), |e| e.to_string())
        ),
    };
    r.item(
        "warp_cpus",
        w.cpus_covered,
        format!(
            "{} of {} CPUs compared; threads {placed}",
            w.cpus_covered, w.cpus
        ),
    );
    r.item(
        "warp_pairs",
        w.pairs_compared,
        format!(
            "{} of {} pair(s) of CPUs compared both ways",
            w.pairs_compared, w.pairs
        ),
    );
    r.item(
        "warp_checks",
        w.checks,
        format!(
            "{} cross-CPU handovers in {} ms ({} per ordered pair at least)",
            w.checks,
            ms3(took),
            w.min_checks_per_pair
        ),
    );
    r.item(
        "warps",
        w.warps,
        format!("{} reads behind the other CPU's read just before", w.warps),
    );
    r.item(
        "warp_max_ticks",
        w.max_warp_ticks,
        format!(
            "{} ticks ({} ns), the largest step back across CPUs{}",
            w.max_warp_ticks,
            w.max_warp_ns(&freq),
            w.warp_pair
                .map_or(String::new(), |(a, b)| format!(", CPU {a} → CPU {b}"))
        ),
    );
    let verdict = w.verdict();
    let why = match verdict {
        WarpVerdict::Warped { .. } => {
            "timestamps from different CPUs do not compare".to_string()
        }
        WarpVerdict::Consistent => "no warp".to_string(),
        _ => format!(
            "no warp, but coverage too low ({} of {} pairs, {} checks per ordered pair, {} needed){}",
            w.pairs_compared,
            w.pairs,
            w.min_checks_per_pair,
            baretime_diag::CONSISTENT_MIN_CHECKS_PER_PAIR,
            run.error.map_or(String::new(), |e| format!("; {e}"))
        ),
    };
    r.item(
        "warp_verdict",
        verdict.token(),
        format!(
            "{}: {why}; {} CPU(s), {} pair(s), {} cross-CPU handovers",
            verdict.token(),
            w.cpus_covered,
            w.pairs_compared,
            w.checks
        ),
    );
}

/// The hypervisor's paravirtual TSC sources: which it offers, which only a ring-0 kernel can
/// read, and what to configure to expose more. Keys: `hypervisor_ranges`,
/// `paravirt_sources`, `ring0_only_sources`, `kernel_source` (README, "Report keys").
#[cfg(target_arch = "x86_64")]
mod paravirt {
    use super::Report;
    use baretime::Source;
    use baretime_x86::{self, HypervisorKind};

    /// `a,b,c`, or `none` for an empty list.
    fn list(items: &[String]) -> String {
        if items.is_empty() {
            "none".into()
        } else {
            items.join(",")
        }
    }

    pub fn section(r: &Report) {
        let d = baretime_x86::discover();
        r.section("Paravirtual sources (what the hypervisor tells a guest kernel)");
        let ranges: Vec<String> = d
            .hypervisors()
            .iter()
            .map(|h| format!("{:#x}:{}", h.base, h.kind.token()))
            .collect();
        r.item(
            "hypervisor_ranges",
            list(&ranges),
            if d.hypervisors().is_empty() {
                "none (not a guest, or the hypervisor hides itself)".to_string()
            } else {
                d.hypervisors()
                    .iter()
                    .map(|h| {
                        let sig = String::from_utf8_lossy(&h.signature);
                        let sig = sig.trim_end_matches(['\0', ' ']);
                        format!(
                            "{:#x}..={:#x} {sig:?} ({})",
                            h.base,
                            h.max_leaf,
                            h.kind.token()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        );

        // What each range offers. CPUID is readable from user space; the MSRs are not.
        let mut offered: Vec<String> = Vec::new();
        let mut ring0: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        for h in d.hypervisors() {
            match h.kind {
                HypervisorKind::Kvm if d.kvm_features().is_some_and(|k| k.base() == h.base) => {
                    let Some(kvm) = d.kvm_features() else {
                        continue;
                    };
                    let features = kvm.bits();
                    if let Ok(msr) = kvm.clock_msr() {
                        offered.push(Source::KvmPvclock.token().into());
                        ring0.push(Source::KvmPvclock.token().into());
                        notes.push(format!(
                            "KVM at {:#x} offers pvclock (feature bits {features:#x}: clock MSR {msr:#x}, stable bit {}): a kernel registers a pvclock area through WRMSR and reads tsc_to_system_mul/tsc_shift (baretime_x86::KvmPvclock)",
                            h.base,
                            if kvm.stable_bit() { "offered" } else { "not offered" }
                        ));
                    }
                }
                HypervisorKind::HyperV if d.hyperv_tsc_frequency_msr() => {
                    offered.push(Source::HyperVTscFrequencyMsr.token().into());
                    ring0.push(Source::HyperVTscFrequencyMsr.token().into());
                    notes.push(format!(
                        "Hyper-V at {:#x} offers HV_X64_MSR_TSC_FREQUENCY (0x40000022, Hz): a kernel reads it with RDMSR (baretime_x86::read_hyperv_tsc_frequency)",
                        h.base
                    ));
                }
                _ => {}
            }
        }
        for c in d.candidates() {
            if matches!(c.source(), Source::HypervisorLeaf | Source::XenTimeLeaf) {
                offered.push(c.source().token().into());
                notes.push(format!(
                    "{} states {} kHz in CPUID: any process reads it (discovery's candidate)",
                    c.source(),
                    c.as_hz() / 1000
                ));
            }
        }
        // A ring-0 kernel adds its claims ahead of CPUID's (X86Discovery::add_claim).
        let kernel = [Source::HyperVTscFrequencyMsr, Source::KvmPvclock]
            .into_iter()
            .find(|s| ring0.iter().any(|t| t == s.token()))
            .or_else(|| d.best().map(|f| f.source()));
        r.item("paravirt_sources", list(&offered), list(&offered));
        r.item(
            "ring0_only_sources",
            list(&ring0),
            if ring0.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} (RDMSR/WRMSR need CPL 0: this process cannot read them)",
                    ring0.join(", ")
                )
            },
        );
        let token = kernel.map_or("none", |s| s.token());
        r.item(
            "kernel_source",
            token,
            match kernel {
                Some(s) if ring0.iter().any(|t| t == s.token()) => format!(
                    "{token}: a kernel here would take the hypervisor's rate from {token}, which a user process cannot read"
                ),
                Some(_) => format!("{token}: a kernel here has no better source than this process"),
                None => "none: nothing states the rate; a kernel must calibrate".into(),
            },
        );
        for n in &notes {
            r.note(n);
        }
        if !d.hypervisors().is_empty() {
            let has = |s: Source| offered.iter().any(|t| t == s.token());
            if !has(Source::HypervisorLeaf) && !has(Source::XenTimeLeaf) {
                r.note("to expose the rate to every process: QEMU/KVM -cpu host,+invtsc,+vmware-cpuid-freq (CPUID 0x40000010; add tsc-frequency=HZ where QEMU does not know the host's rate); where the VMM has no such option (Firecracker), a kernel's pvclock is the hypervisor's only statement of the rate");
            }
            if !has(Source::HyperVTscFrequencyMsr) {
                r.note("QEMU/KVM -cpu ...,hv-frequencies adds Hyper-V's TSC-frequency MSR (ring 0 only; needs a KVM with Hyper-V emulation)");
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod paravirt {
    use super::Report;

    /// No paravirtual TSC sources off x86_64: the keys say `none`.
    pub fn section(r: &Report) {
        r.section("Paravirtual sources (what the hypervisor tells a guest kernel)");
        for key in [
            "hypervisor_ranges",
            "paravirt_sources",
            "ring0_only_sources",
            "kernel_source",
        ] {
            r.item(key, "none", "none (x86_64 only)");
        }
    }
}
