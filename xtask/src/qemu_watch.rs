//! The watchdog and refinement scenarios (issue 28): `mode=watchdog` on both kernels
//! (`boot/src/watch.rs`), `mode=refine` on aarch64 (`boot/src/aarch64/watch.rs`).
//!
//! The truth is the counter's rate as the reference counts it (what the watchdog's
//! `bound_ppb` bounds), and it is exact in every scenario with a change:
//!
//! - on `virt` the generic timer and semihosting's elapsed time both follow the host's
//!   monotonic clock under TCG without `-icount`, so the counter runs at exactly 62.5 MHz of
//!   the reference (as `aarch64-virt` relies on);
//! - on `pc` the two change scenarios run under TCG `-icount shift=4` (16 ns an instruction:
//!   14 s of guest time in about a second): the TSC is then QEMU's virtual clock in ns
//!   (1 GHz) and the HPET (100 MHz) and ACPI PM timer (3 579 545 Hz) are computed from that
//!   same clock, so the TSC's rate as the reference counts it is exactly
//!   10^9 × declared / emulated Hz (the kernel gets `truth_counter_hz=`,
//!   `truth_reference_hz=`; `coverage.rs` relies on the same). The scaling wrapper's rates
//!   are exact too (a 32.32 fixed-point factor).
//!
//! Each check's report (`report=N … error_ppb=E bound_ppb=B judged=J`) is judged here:
//! `|E| ≤ B` at every judged report (all but those between a change and its detection,
//! where the watchdog's docs say the bound does not hold). The line carries
//! `errors_ppb=` and `bounds_ppb=` (every report's, in order), `bound_misses`,
//! `max_error_over_bound` (over the judged reports; the truth's own bound added to the
//! bound where it is not exact).
//!
//! `BARETIME_WATCH_CHANGES=P1,P2` sets the two changes (ppm of the counter's own rate,
//! from 5 s and from 10 s; 100 and 1 000 unless set; each within 12.5 % of the rate before
//! it). A change of 20 ppm or more from the rate before is held to the detection time below;
//! a smaller one (under an interval's threshold, seen by refinement's window) must be
//! detected before the run ends.
//!
//! | scenario | what is checked |
//! | --- | --- |
//! | `aarch64-watchdog` | the counter read through a scaling wrapper, +100 ppm from 5 s and +0.1 % from 10 s, checked every 0.5 s: each change reported within the docs' detection time (three accepted intervals, `detect1_accepted`, `detect2_accepted` ≤ 3), the clock's rate within `bound_ppb` of the truth at every judged report (`bound_misses=0`) and at the end, `false_alarms=0`, `steps_back=0`, `jumps=0` (no reading ahead of the counter's ticks by more than promise 2's 20 µs margin and a granule) |
//! | `x86_64-watchdog-hpet`, `x86_64-watchdog-acpipm`, `x86_64-watchdog-pit` | the same on the TSC against the HPET, the ACPI PM timer (24 bits, a 4.7 s wrap) and the PIT (16 bits, a 54.9 ms wrap; both unwrapped against the rate), under `-icount`: also each detection within the docs' time in ms, `(3 + disturbed checks) × period_ms` |
//! | `x86_64-watchdog-delays` | as `aarch64-watchdog-delays`, against the HPET, TCG without `-icount` (the host's load stalls reads too). Its truth is measured: QEMU's TSC is then the host's TSC and its HPET the host's monotonic clock, so xtask measures the host's TSC against `Instant` before the boot (`truth_counter_hz`, good to `truth_bound_ppb`) and over the run (`host_drift_ppb`: how far the run's rate and each ≥ 4 s stretch's strayed from it); reports are judged against that truth, good to the larger of `truth_bound_ppb` and `host_drift_ppb`; a boot calibration that missed it is told apart (`calibration_covered=false`, `corrections`, as in `aarch64-refine`). Off an x86_64 host: the boot calibration's figure, misses shown, not judged |
//! | `aarch64-watchdog-delays` | no change; one reference read in four delayed by up to 5 ms, plus the host's own stalls (no `-icount`): `false_alarms=0` and the bound at every report |
//! | `aarch64-refine` | the clock from a 200 ms calibration refined for 10 s: the rate's bound and its true error after 1 and 10 s, the error within the bound each time. The 60 s figure (goal ≤ 20 ppb) takes a minute of wall time: by hand, `cargo xtask qemu refine-60` |

use std::path::Path;
use std::time::Duration;

use super::coverage::{QEMU_HPET_HZ, QEMU_PM_HZ};

/// QEMU's PIT: 1 193 182 Hz of its virtual clock (`PIT_FREQ`), declared by the crate as
/// 1 193 181.818 Hz (the NTSC-derived figure).
const QEMU_PIT_HZ: f64 = 1_193_182.0;
use super::{boot_within, name, Arch, Line, Run, TCG_ARGS};

/// TCG with the guest's time from its instruction count (16 ns an instruction): the TSC is
/// QEMU's virtual clock, as the HPET and the PM timer are.
const ICOUNT: &[&str] = &["-accel", "tcg", "-icount", "shift=4"];

/// Runs the picked x86 watchdog scenarios.
pub fn x86(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let exact = |reference: &str, hz: f64| {
        format!(
            "mode=watchdog reference={reference} truth_counter_hz=1000000000 truth_reference_hz={}",
            hz as u64
        )
    };
    let mut lines = Vec::new();
    for (name, qemu_args, cmdline) in [
        (name::X86_WATCHDOG_HPET, ICOUNT, exact("hpet", QEMU_HPET_HZ)),
        (
            name::X86_WATCHDOG_ACPIPM,
            ICOUNT,
            exact("acpipm", QEMU_PM_HZ),
        ),
        (name::X86_WATCHDOG_PIT, ICOUNT, exact("pit", QEMU_PIT_HZ)),
        (
            name::X86_WATCHDOG_DELAYS,
            TCG_ARGS,
            "mode=watchdog reference=hpet delays=1".to_string(),
        ),
    ] {
        if !wanted(name) {
            continue;
        }
        if name == name::X86_WATCHDOG_DELAYS {
            lines.push(host_measured(kernel, name, qemu_args, &cmdline));
        } else {
            lines.push(watchdog(Arch::X86_64, kernel, name, qemu_args, &cmdline));
        }
    }
    lines
}

/// Slack added to the truth measured on the host before the boot (ppb), beyond its two
/// readings' bracket widths, for the host's own rate over the run (a TSC against an
/// NTP-disciplined monotonic clock), which the sampler checks after it.
const HOST_SLACK_PPB: f64 = 10.0;

/// `x86_64-watchdog-delays` with the truth measured on the host (module docs): the host's
/// TSC rate against its monotonic clock before the boot, passed to the kernel; a sampler
/// thread meanwhile, whose figures say whether that rate held over the run.
fn host_measured(kernel: &Path, name: &'static str, qemu_args: &[&str], cmdline: &str) -> Line {
    let Some((hz, uncertain_ppb)) = host_tsc::rate_hz(Duration::from_secs(1)) else {
        return watchdog(Arch::X86_64, kernel, name, qemu_args, cmdline);
    };
    let cmdline = format!(
        "{cmdline} truth_counter_hz={} truth_reference_hz={} truth_bound_ppb={}",
        hz.round() as u64,
        QEMU_HPET_HZ as u64,
        (uncertain_ppb + HOST_SLACK_PPB).ceil() as u64
    );
    let sampler = host_tsc::Sampler::start(Duration::from_millis(250));
    let run = boot_within(
        Arch::X86_64,
        kernel,
        qemu_args,
        &cmdline,
        Duration::from_secs(60),
    );
    // Without the sampler's figures, the truth is taken as good to no better than a ppm.
    let drift = sampler.finish(hz, Duration::from_secs(4));
    let mut line = judge_watch(name, &cmdline, run, drift.unwrap_or(1_000.0));
    line.key("host_truth_uncertain_ppb", format!("{uncertain_ppb:.1}"));
    line.key("host_tsc_hz", format!("{hz:.0}"));
    match drift {
        Some(ppb) => line.key("host_drift_ppb", format!("{ppb:.1}")),
        None => line.key("host_drift_ppb", "unknown"),
    }
    line.print();
    line
}

/// The host's TSC against its monotonic clock (`Instant`): what QEMU's TSC and HPET follow
/// under TCG without `-icount`.
mod host_tsc {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    /// One reading: the TSC at the middle of the narrowest of 16 brackets around an
    /// `Instant`, half that bracket's width (ticks), and that instant.
    fn reading() -> Option<(f64, f64, Instant)> {
        #[cfg(target_arch = "x86_64")]
        {
            let mut best: Option<(u64, f64, Instant)> = None;
            for _ in 0..16 {
                // SAFETY: RDTSC has no preconditions on x86_64 (user mode may read it
                // unless CR4.TSD is set, which Linux does not do).
                let a = unsafe { core::arch::x86_64::_rdtsc() };
                let t = Instant::now();
                // SAFETY: as above.
                let b = unsafe { core::arch::x86_64::_rdtsc() };
                let w = b.wrapping_sub(a);
                if best.map_or(true, |(bw, _, _)| w < bw) {
                    best = Some((w, a as f64 + w as f64 / 2.0, t));
                }
            }
            best.map(|(w, mid, t)| (mid, w as f64 / 2.0, t))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// The TSC's rate in Hz of the monotonic clock, over `window`, and how far the two
    /// readings' brackets let it be off (ppb).
    pub fn rate_hz(window: Duration) -> Option<(f64, f64)> {
        let (a, wa, ta) = reading()?;
        std::thread::sleep(window);
        let (b, wb, tb) = reading()?;
        let s = tb.duration_since(ta).as_secs_f64();
        (s > 0.0 && b > a).then(|| ((b - a) / s, (wa + wb) / (b - a) * 1e9))
    }

    /// Readings every `every` on a thread of their own, until `finish`.
    pub struct Sampler {
        stop: Arc<AtomicBool>,
        readings: Arc<Mutex<Vec<(f64, f64, Instant)>>>,
        thread: JoinHandle<()>,
    }

    impl Sampler {
        pub fn start(every: Duration) -> Sampler {
            let stop = Arc::new(AtomicBool::new(false));
            let readings = Arc::new(Mutex::new(Vec::new()));
            let (s, r) = (stop.clone(), readings.clone());
            let thread = std::thread::spawn(move || {
                while !s.load(Ordering::SeqCst) {
                    if let (Some(x), Ok(mut v)) = (reading(), r.lock()) {
                        v.push(x);
                    }
                    std::thread::sleep(every);
                }
            });
            Sampler {
                stop,
                readings,
                thread,
            }
        }

        /// The largest departure (ppb) from `hz` of the rate over the whole run and over
        /// each stretch of at least `stretch` between readings (each reading good to its
        /// bracket: tens of ns over seconds, a few ppb); `None` without two readings.
        pub fn finish(self, hz: f64, stretch: Duration) -> Option<f64> {
            self.stop.store(true, Ordering::SeqCst);
            let _ = self.thread.join();
            let v = self.readings.lock().ok()?.clone();
            let rate = |i: usize, j: usize| -> f64 {
                let s = v[j].2.duration_since(v[i].2).as_secs_f64();
                (v[j].0 - v[i].0) / s
            };
            let (first, last) = (0, v.len().checked_sub(1)?);
            if last == 0 {
                return None;
            }
            let mut worst = ((rate(first, last) - hz) / hz * 1e9).abs();
            let mut j = 0;
            for i in 0..v.len() {
                while j < v.len() && v[j].2.duration_since(v[i].2) < stretch {
                    j += 1;
                }
                if j == v.len() {
                    break;
                }
                worst = worst.max(((rate(i, j) - hz) / hz * 1e9).abs());
            }
            Some(worst)
        }
    }
}

/// Runs the picked aarch64 watchdog and refinement scenarios.
pub fn scenarios(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    for (name, cmdline) in [
        (name::AARCH64_WATCHDOG, "mode=watchdog"),
        (name::AARCH64_WATCHDOG_DELAYS, "mode=watchdog delays=1"),
    ] {
        if wanted(name) {
            lines.push(watchdog(Arch::Aarch64, kernel, name, &[], cmdline));
        }
    }
    // The 60 s run only when a filter picks it and not the CI-sized one (`refine-60`):
    // neither the whole suite nor `refine` runs it.
    if wanted(name::AARCH64_REFINE) {
        lines.push(refine(kernel, name::AARCH64_REFINE, 10));
    } else if wanted(name::AARCH64_REFINE_60) {
        lines.push(refine(kernel, name::AARCH64_REFINE_60, 60));
    }
    lines
}

const WATCH_KEYS: &[&str] = &[
    "period_ms",
    "checks",
    "steady",
    "changed",
    "no_verdict",
    "wide",
    "delayed_reads",
    "false_alarms",
    "steps_back",
    "jumps",
    "max_jump_ns",
    "steers",
    "change1_ppm",
    "detect1_ms",
    "detect1_accepted",
    "rate1_error_ppb",
    "change2_ppm",
    "detect2_ms",
    "detect2_accepted",
    "rate2_error_ppb",
    "end_error_ppb",
    "end_bound_ppb",
    "truth",
    "truth_bound_ppb",
    "calibration_covered",
    "corrections",
];

fn watchdog(
    arch: Arch,
    kernel: &Path,
    name: &'static str,
    qemu_args: &[&str],
    cmdline: &str,
) -> Line {
    let cmdline = match changes(cmdline) {
        Ok(c) => c,
        Err(why) => {
            let mut line = Line::new(name);
            line.fail(why);
            line.print();
            return line;
        }
    };
    let run = boot_within(arch, kernel, qemu_args, &cmdline, Duration::from_secs(60));
    let line = judge_watch(name, &cmdline, run, 0.0);
    line.print();
    line
}

/// The environment variable that sets the two rate changes of the change scenarios:
/// `BARETIME_WATCH_CHANGES=P1,P2` (ppm of the counter's own rate, negative: slower; from
/// 5 s and from 10 s). Each must stay within 12.5 % of the rate before it, where the
/// watchdog's docs call a change a rate change rather than a jump.
const CHANGES_VAR: &str = "BARETIME_WATCH_CHANGES";
/// Changes at least this far (ppm) from the rate before are held to the three accepted
/// intervals of the docs' detection time: every scenario's interval threshold is under
/// 10 ppm (4.3 ppm against the HPET at 0.5 s with brackets of 1 µs; the scenarios' brackets
/// are narrower). Smaller ones must be detected before the run ends.
const THRESHOLD_HELD_PPM: i64 = 20;

/// `cmdline` with the changes `CHANGES_VAR` names, for a change scenario.
fn changes(cmdline: &str) -> Result<String, String> {
    let Ok(v) = std::env::var(CHANGES_VAR) else {
        return Ok(cmdline.to_string());
    };
    if cmdline.contains("delays=1") {
        return Ok(cmdline.to_string());
    }
    let bad =
        || format!("{CHANGES_VAR}={v:?}: not P1,P2 in ppm, each within 12.5 % of the rate before");
    let (a, b) = v.split_once(',').ok_or_else(bad)?;
    let (p1, p2): (i64, i64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    // Rates relative to the counter's own: 1 + p/10^6; each change's distance from the
    // rate before it, in ppm of that rate, under 12.5 %.
    let within = |from: i64, to: i64| {
        let (f, t) = (1e6 + from as f64, 1e6 + to as f64);
        f > 0.0 && t > 0.0 && ((t - f) / f).abs() < 0.125
    };
    if !(within(0, p1) && within(p1, p2)) || p1 == 0 || p2 == p1 {
        return Err(bad());
    }
    Ok(format!("{cmdline} change1_ppm={p1} change2_ppm={p2}"))
}

/// The two changes' distances from the rate before each (ppm), from the cmdline.
fn change_steps_ppm(cmdline: &str) -> [i64; 2] {
    let word = |k: &str| {
        cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse::<i64>().ok())
    };
    let p1 = word("change1_ppm").unwrap_or(100);
    let p2 = word("change2_ppm").unwrap_or(1_000);
    [p1, p2 - p1]
}

/// Judges a watchdog run; `host_drift_ppb`: how far the host's rate strayed from a measured
/// truth (added to the truth's bound where larger).
fn judge_watch(
    name: &'static str,
    cmdline: &str,
    run: Result<Run, String>,
    host_drift_ppb: f64,
) -> Line {
    let mut line = Line::new(name);
    let changes = !cmdline.contains("delays=1");
    match run {
        Err(e) => line.fail(e),
        Ok(run) => {
            line.copy(&run, WATCH_KEYS);
            if let Some(why) = run.broken() {
                line.fail(why);
            }
            // The truth the kernel judged against: exact (`truth_bound_ppb=0`), measured on
            // the host (good to `truth_bound_ppb`, or to how far the host's rate strayed),
            // or the boot calibration's figure, good only to its own bound.
            let Some(truth) = run.num("truth_bound_ppb") else {
                line.fail("no truth_bound_ppb in the kernel's output");
                return line;
            };
            let truth = if run.get("truth") == Some("measured") {
                truth.max(host_drift_ppb)
            } else {
                truth
            };
            // Known: exact, measured, or given exactly (aarch64 `virt`: `truth_bound_ppb=0`).
            let known = run.get("truth") != Some("given") || truth == 0.0;
            judge_reports(&mut line, &run, truth, known);
            if changes {
                // `detect_ms`: the slower of the two detections.
                let d = [run.num("detect1_ms"), run.num("detect2_ms")];
                if let [Some(a), Some(b)] = d {
                    line.key("detect_ms", a.max(b));
                }
                let period = run.num("period_ms").unwrap_or(f64::NAN);
                let steps = change_steps_ppm(cmdline);
                for (k, step) in ["1", "2"].into_iter().zip(steps) {
                    let accepted = run.num(&format!("detect{k}_accepted"));
                    if step.abs() < THRESHOLD_HELD_PPM {
                        // Under the held threshold: seen by the window, in seconds.
                        if accepted.is_none() {
                            line.fail(format!("change {k} ({step} ppm) never detected"));
                        }
                        continue;
                    }
                    match accepted {
                        Some(n) if n <= 3.0 => {}
                        n => line.fail(format!(
                            "detect{k}_accepted={n:?}: not within three accepted intervals"
                        )),
                    }
                    // The docs' time: three periods, and one more per disturbed check. Exact
                    // under `-icount` (the hook's periods are the virtual clock's); elsewhere
                    // a host stall delays the check that sees it.
                    let checks = run.num(&format!("detect{k}_checks"));
                    let ms = run.num(&format!("detect{k}_ms"));
                    if run.get("truth") == Some("exact") {
                        match (ms, checks, accepted) {
                            (Some(ms), Some(c), Some(a)) if ms <= (3.0 + c - a) * period => {}
                            _ => line.fail(format!(
                                "detect{k}_ms={ms:?} beyond (3 + {checks:?} - {accepted:?}) x {period} ms"
                            )),
                        }
                    }
                }
                match (run.num("end_error_ppb"), run.num("end_bound_ppb")) {
                    (Some(e), Some(b)) if e <= b + truth => {}
                    (e, b) => line.fail(format!(
                        "the clock's rate error {e:?} ppb outside its bound {b:?} plus the truth's {truth} ppb"
                    )),
                }
            }
            for k in ["false_alarms", "steps_back", "jumps"] {
                match run.num(k) {
                    Some(0.0) => {}
                    n => line.fail(format!("{k}={n:?}")),
                }
            }
        }
    }
    line
}

/// Judges each `report=` line: the clock's true rate error within the watchdog's
/// `bound_ppb` at every judged report (`judged=1`), with `truth_ppb` added for a truth known
/// only to that; a miss fails only where the truth is `known` (exact or measured), not where
/// it is the boot calibration's own figure.
fn judge_reports(line: &mut Line, run: &Run, truth_ppb: f64, known: bool) {
    let (mut errors, mut bounds) = (Vec::new(), Vec::new());
    let (mut judged, mut misses, mut worst) = (0u64, Vec::new(), 0f64);
    for text in run.stdout.lines().filter(|l| l.starts_with("report=")) {
        let kv = super::parse_kv(text);
        let num = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok());
        let (Some(e), Some(b)) = (num("error_ppb"), num("bound_ppb")) else {
            line.fail(format!("a report without error_ppb/bound_ppb: {text:?}"));
            return;
        };
        errors.push(e.to_string());
        bounds.push(b.to_string());
        if num("judged") != Some(1.0) {
            continue;
        }
        judged += 1;
        worst = worst.max(e.abs() / (b + truth_ppb).max(1.0));
        if e.abs() > b + truth_ppb {
            misses.push(kv.get("report").cloned().unwrap_or_default());
        }
    }
    line.key("reports", errors.len());
    line.key("judged", judged);
    line.key("bound_misses", misses.len());
    line.key("max_error_over_bound", format!("{worst:.3}"));
    line.key("errors_ppb", errors.join(","));
    line.key("bounds_ppb", bounds.join(","));
    if errors.is_empty() {
        line.fail("no report= lines in the kernel's output");
    }
    if !misses.is_empty() && known {
        line.fail(format!(
            "the clock's true rate error beyond bound_ppb at reports {}",
            misses.join(",")
        ));
    }
}

fn refine(kernel: &Path, name: &'static str, seconds: u64) -> Line {
    let mut line = Line::new(name);
    let cmdline = format!("mode=refine refine_s={seconds}");
    let timeout = Duration::from_secs(seconds + 40);
    match boot_within(Arch::Aarch64, kernel, &[], &cmdline, timeout) {
        Err(e) => line.fail(e),
        Ok(run) => {
            let marks: Vec<u64> = [1, 10, 60].into_iter().filter(|&m| m <= seconds).collect();
            let mut keys = vec![
                "calibrated_error_ppb".to_string(),
                "calibrated_bound_ppb".to_string(),
            ];
            for m in &marks {
                keys.push(format!("bound_ppb_{m}s"));
                keys.push(format!("error_ppb_{m}s"));
            }
            keys.extend(
                [
                    "refine_s",
                    "checks",
                    "steady",
                    "steers",
                    "false_alarms",
                    "calibration_covered",
                    "corrections",
                ]
                .map(String::from),
            );
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            line.copy(&run, &keys);
            if let Some(why) = run.broken() {
                line.fail(why);
            }
            for m in &marks {
                // Before the watchdog corrected a calibration that missed the exact truth
                // (the boot says `judged_{m}s=false`), the bound is not promised.
                if run.get(&format!("judged_{m}s")) == Some("false") {
                    line.key(&format!("judged_{m}s"), false);
                    continue;
                }
                match (
                    run.num(&format!("error_ppb_{m}s")),
                    run.num(&format!("bound_ppb_{m}s")),
                ) {
                    (Some(e), Some(b)) if e <= b => {}
                    (e, b) => line.fail(format!("after {m} s: error {e:?} ppb, bound {b:?}")),
                }
            }
            if seconds >= 60 {
                let goal = run.num("bound_ppb_60s").is_some_and(|b| b <= 20.0);
                line.key("goal_20ppb_met", goal);
            }
            if run.num("false_alarms") != Some(0.0) {
                line.fail("false alarms while refining");
            }
        }
    }
    line.print();
    line
}
