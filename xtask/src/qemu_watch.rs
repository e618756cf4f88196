//! The watchdog and refinement scenarios (issue 28): `mode=watchdog` on both kernels
//! (`boot/src/watch.rs`), `mode=refine` on aarch64 (`boot/src/aarch64/watch.rs`). On
//! `virt` the generic timer and semihosting's elapsed time both follow the host's monotonic
//! clock under TCG without `-icount`, so the counter's true rate is exactly 62.5 MHz of the
//! reference's (as `aarch64-virt` relies on); on x86 (TCG) the TSC's true rate is the boot
//! calibration's, within its bound (`truth_bound_ppb`).
//!
//! | scenario | what is checked |
//! | --- | --- |
//! | `aarch64-watchdog` | the counter read through a scaling wrapper, +100 ppm from 5 s and +0.1 % from 10 s, checked every 0.5 s: each change reported within three accepted intervals (the docs' detection time: `detect1_accepted`, `detect2_accepted` ≤ 3), the clock recalibrated to within the reported bound of the new rate, `false_alarms=0`, `steps_back=0`, `jumps=0` (no reading ahead of the counter's ticks by more than promise 2's 20 µs margin and a granule) |
//! | `x86_64-watchdog-hpet`, `x86_64-watchdog-acpipm` | the same on the TSC against the HPET and the ACPI PM timer (24 bits, a 4.7 s wrap: unwrapped against the rate) |
//! | `x86_64-watchdog-delays` | as `aarch64-watchdog-delays`, against the HPET |
//! | `aarch64-watchdog-delays` | no change; one reference read in four delayed by up to 5 ms, plus the host's own stalls (no `-icount`): `false_alarms=0` |
//! | `aarch64-refine` | the clock from a 200 ms calibration refined for 10 s: the rate's bound and its true error after 1 and 10 s, the error within the bound each time. The 60 s figure (goal ≤ 20 ppb) takes a minute of wall time: by hand, `cargo xtask qemu refine-60` |

use std::path::Path;
use std::time::Duration;

use super::{boot_within, name, Arch, Line, TCG_ARGS};

/// Runs the picked x86 watchdog scenarios.
pub fn x86(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    for (name, cmdline) in [
        (name::X86_WATCHDOG_HPET, "mode=watchdog reference=hpet"),
        (name::X86_WATCHDOG_ACPIPM, "mode=watchdog reference=acpipm"),
        (
            name::X86_WATCHDOG_DELAYS,
            "mode=watchdog reference=hpet delays=1",
        ),
    ] {
        if wanted(name) {
            lines.push(watchdog(Arch::X86_64, kernel, name, cmdline));
        }
    }
    lines
}

/// Runs the picked aarch64 watchdog and refinement scenarios.
pub fn scenarios(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    for (name, cmdline) in [
        (name::AARCH64_WATCHDOG, "mode=watchdog"),
        (name::AARCH64_WATCHDOG_DELAYS, "mode=watchdog delays=1"),
    ] {
        if wanted(name) {
            lines.push(watchdog(Arch::Aarch64, kernel, name, cmdline));
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
    "truth_bound_ppb",
];

fn watchdog(arch: Arch, kernel: &Path, name: &'static str, cmdline: &str) -> Line {
    let mut line = Line::new(name);
    let changes = !cmdline.contains("delays=1");
    let qemu_args = if arch == Arch::X86_64 { TCG_ARGS } else { &[] };
    match boot_within(arch, kernel, qemu_args, cmdline, Duration::from_secs(60)) {
        Err(e) => line.fail(e),
        Ok(run) => {
            line.copy(&run, WATCH_KEYS);
            if let Some(why) = run.broken() {
                line.fail(why);
            }
            // `detect_ms`: the slower of the two detections.
            if changes {
                let d = [run.num("detect1_ms"), run.num("detect2_ms")];
                if let [Some(a), Some(b)] = d {
                    line.key("detect_ms", a.max(b));
                }
                for k in ["detect1_accepted", "detect2_accepted"] {
                    match run.num(k) {
                        Some(n) if n <= 3.0 => {}
                        n => line.fail(format!("{k}={n:?}: not within three accepted intervals")),
                    }
                }
                // The error is taken against the truth the kernel knows: exact on `virt`
                // (`truth_bound_ppb=0`), the boot calibration's figure on `pc`, itself good
                // only to its own bound, which widens what the check can judge.
                let truth = run.num("truth_bound_ppb").unwrap_or(0.0);
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
    line.print();
    line
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
                ["refine_s", "checks", "steady", "steers", "false_alarms"].map(String::from),
            );
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            line.copy(&run, &keys);
            if let Some(why) = run.broken() {
                line.fail(why);
            }
            for m in &marks {
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
