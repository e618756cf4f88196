//! What is this machine's counter, and how good is it?
//!
//! `cargo run --release --example report` prints a report for people;
//! `cargo run --release --example report -- --kv` prints `key=value` lines (DESIGN.md §2).
//!
//! It probes the counter, lists what the hardware claims about its frequency, calibrates it
//! against std's monotonic clock, verifies the claim, compares with the kernel's own figure
//! where Linux tells it, and measures read cost and monotonicity beside `std::time::Instant`,
//! `quanta` and `minstant`.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant as StdInstant};

use baretime::calibrate::{self, Config, Verdict};
use baretime::diag::{self, ReadStats};
use baretime::reference::StdReference;
use baretime::{Clock, Counter, Frequency};

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
}

#[cfg(target_arch = "x86_64")]
mod platform {
    use baretime::arch::x86_64::Tsc;
    use baretime::Frequency;

    pub type Ctr = Tsc;
    pub const COUNTER: &str = "tsc";

    pub fn counter() -> Tsc {
        Tsc::probe().expect("this x86_64 CPU reports no TSC")
    }

    /// (feature list, candidates, best claim)
    pub fn discover() -> (Vec<String>, Vec<Frequency>, Option<Frequency>) {
        let d = baretime::discover::x86::discover();
        let mut flags = vec![format!("vendor={}", d.vendor_str().unwrap_or("?"))];
        flags.push(format!("invariant_tsc={}", d.invariant_tsc()));
        flags.push(format!("hypervisor={}", d.hypervisor()));
        flags.push(format!("features={:?}", d.features));
        if let Some(b) = d.brand_str() {
            flags.push(format!("brand={}", b.trim()));
        }
        (flags, d.candidates().to_vec(), d.best())
    }
}

#[cfg(target_arch = "aarch64")]
mod platform {
    use baretime::arch::aarch64::GenericTimer;
    use baretime::Frequency;

    pub type Ctr = GenericTimer;
    pub const COUNTER: &str = "cntvct_el0";

    pub fn counter() -> GenericTimer {
        GenericTimer::new()
    }

    pub fn discover() -> (Vec<String>, Vec<Frequency>, Option<Frequency>) {
        let d = baretime::discover::aarch64::discover();
        let flags = vec![
            format!("cntfrq_el0={}", d.cntfrq),
            format!("midr_el1={:#x}", d.midr_raw),
            format!("ecv={}", d.ecv()),
        ];
        (flags, d.candidates().to_vec(), d.best())
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

fn mhz(millihz: u64) -> String {
    format!("{:.6} MHz", millihz as f64 / 1e9)
}

fn main() {
    let kv = std::env::args().any(|a| a == "--kv");
    let r = Report { kv };
    let counter: platform::Ctr = platform::counter();

    if !kv {
        println!("baretime report: this machine's counter and how good it is");
    }
    r.section("Counter");
    r.item("counter", platform::COUNTER, platform::COUNTER);
    let (flags, candidates, claim) = platform::discover();
    for f in &flags {
        if !kv {
            println!("  {f}");
        }
    }

    r.section("What the hardware claims");
    if !kv {
        if candidates.is_empty() {
            println!("  (no frequency candidate)");
        }
        for c in &candidates {
            println!("  candidate              {c}");
        }
    }
    match claim {
        Some(f) => {
            r.item("discovered_hz", f.as_hz(), format!("{f}"));
            r.item("discovered_source", f.source().token(), f.source().token());
        }
        None => {
            r.item("discovered_hz", "none", "none");
            r.item("discovered_source", "none", "none");
        }
    }

    r.section("Calibration against std's monotonic clock");
    let config = Config::new()
        .target_ppm(1)
        .max_duration(Duration::from_millis(20));
    let started = StdInstant::now();
    let verified = calibrate::calibrate_and_verify(counter, StdReference::new(), claim, config);
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    let mut clock_hz: Option<Frequency> = claim;
    match &verified {
        Ok(v) => {
            let cal = &v.calibration;
            let hz = cal.frequency.as_millihz() as f64 / 1e3;
            r.item(
                "calibrated_hz",
                format!("{hz:.3}"),
                mhz(cal.frequency.as_millihz()),
            );
            let ppm = cal.uncertainty_ppb as f64 / 1e3;
            r.item(
                "uncertainty_ppm",
                format!("{ppm:.3}"),
                format!("±{ppm:.3} ppm"),
            );
            r.item(
                "calibration_ms",
                format!("{:.3}", cal.duration.as_secs_f64() * 1e3),
                format!(
                    "{:.3} ms ({} samples used, {} rejected; {wall_ms:.1} ms wall)",
                    cal.duration.as_secs_f64() * 1e3,
                    cal.samples_used,
                    cal.samples_rejected
                ),
            );
            r.item("reference", cal.reference, cal.reference);
            r.item("samples_used", cal.samples_used, cal.samples_used);
            r.item(
                "samples_rejected",
                cal.samples_rejected,
                cal.samples_rejected,
            );
            r.item("met_target", cal.met_target, cal.met_target);
            match v.verdict.deviation_ppb() {
                Some(d) => r.item(
                    "agreement_ppm",
                    format!("{:.3}", d as f64 / 1e3),
                    format!("{:+.3} ppm (claim − measurement)", d as f64 / 1e3),
                ),
                None => r.item("agreement_ppm", "none", "none (no claim to check)"),
            }
            let verdict = match v.verdict {
                Verdict::Unclaimed => "unclaimed",
                _ if v.verdict.is_disagreement() => "claim_rejected",
                _ if v.chosen.source() == baretime::Source::Calibrated => {
                    "claim_confirmed_measurement_used"
                }
                _ => "claim_confirmed_and_kept",
            };
            r.item(
                "verdict",
                verdict,
                format!("{verdict}: clock runs on {}", v.chosen),
            );
            clock_hz = Some(v.chosen);
            if let Some((khz, src)) = common::kernel_tsc_hz() {
                let dev = (hz - khz) / khz * 1e6;
                r.item(
                    "kernel_hz",
                    format!("{khz:.0}"),
                    format!("{:.6} MHz ({src})", khz / 1e6),
                );
                r.item(
                    "kernel_deviation_ppm",
                    format!("{dev:.3}"),
                    format!("{dev:+.3} ppm (calibrated − kernel)"),
                );
            }
        }
        Err(e) => {
            r.item("calibrated_hz", "none", format!("calibration failed: {e}"));
            r.item("uncertainty_ppm", "none", "none");
            r.item(
                "calibration_ms",
                format!("{wall_ms:.3}"),
                format!("{wall_ms:.3} ms"),
            );
            r.item("reference", "std", "std");
            r.item("agreement_ppm", "none", "none");
        }
    }

    r.section("Read cost (ns per call, best of 7 rounds of 200k)");
    let freq = clock_hz.unwrap_or(Frequency::user_hz(1_000_000_000).expect("1 GHz"));
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
    r.item(
        "read_ns_raw",
        format!("{raw:.2}"),
        format!("{raw:.2} ns  raw counter, ordered read"),
    );
    r.item(
        "read_ns_raw_plain",
        format!("{raw_plain:.2}"),
        format!("{raw_plain:.2} ns  raw counter, plain read"),
    );
    r.item(
        "read_ns_now",
        format!("{now:.2}"),
        format!("{now:.2} ns  Clock::now ({:.2}× raw)", now / raw),
    );
    r.item(
        "read_ns_now_plain",
        format!("{now_plain:.2}"),
        format!(
            "{now_plain:.2} ns  Clock::now on the plain read ({:.2}× plain raw)",
            now_plain / raw_plain
        ),
    );
    r.item(
        "read_ns_raw_instant",
        format!("{rawi:.2}"),
        format!("{rawi:.2} ns  Clock::raw ({:.2}× raw)", rawi / raw),
    );
    r.item(
        "read_ns_std",
        format!("{std_ns:.2}"),
        format!("{std_ns:.2} ns  std::time::Instant::now"),
    );
    r.item(
        "read_ns_quanta",
        format!("{quanta_ns:.2}"),
        format!("{quanta_ns:.2} ns  quanta::Clock::now"),
    );
    r.item(
        "read_ns_minstant",
        format!("{minstant_ns:.2}"),
        format!("{minstant_ns:.2} ns  minstant::Instant::now"),
    );

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
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get() as u32)
        .min(8);
    let warp = diag::warp_check_threads(&counter, threads.max(2), 200_000);
    r.item("warp_threads", warp.participants, warp.participants);
    r.item(
        "warp_handovers",
        warp.handovers,
        format!("{} cross-thread handovers checked", warp.handovers),
    );
    r.item(
        "warps",
        warp.warps,
        format!(
            "{} warps (largest {} ticks)",
            warp.warps, warp.max_warp_ticks
        ),
    );
}
