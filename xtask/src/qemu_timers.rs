//! The x86 timer scenarios: embassy tasks sleeping on the local APIC timer through the
//! kernel's `Clock` (the kernel's `mode=timers`, `boot/src/x86_64/timers.rs`).
//!
//! | scenario | QEMU | alarm |
//! | --- | --- | --- |
//! | `timers-x86-tcg` | TCG (`qemu64`: no TSC-deadline in CPUID) | `ApicTimer` in one-shot mode, calibrated against the TSC; xAPIC MMIO |
//! | `timers-x86-kvm` | KVM, `-cpu host,...` | `ApicTimer` in TSC-deadline mode; x2APIC MSRs |
//!
//! The kernel runs embassy-executor with [`SLEEPERS`] tasks that sleep random durations
//! (10 µs – 100 ms, log-uniform by decade, seeded) until each has slept 2 s, and a task that
//! recalibrates the clock by +100 ppm and then by −100 ppm while they run. At each wake a task
//! compares `CLOCK.now()` with its deadline's instant (embassy ticks → ns, rounded up).
//!
//! PASS iff no wake came early, every task finished its sleeps (the kernel's count of wakes
//! equals the count its seeds imply, at least [`MIN_WAKES`]), both recalibrations ran, and the
//! alarm is the mode the scenario is for. Lateness p50 / p99 / max is reported against the
//! goals (p50 ≤ 50 µs under TCG, ≤ 10 µs under KVM), not judged: it measures the host as
//! much as the code.
//!
//! # What the host allows
//!
//! - **TCG**: QEMU's APIC timer is a `QEMU_CLOCK_VIRTUAL` timer: at expiry a host thread
//!   wakes, raises the interrupt and kicks the vCPU thread out of its translated code or its
//!   halt — host thread wake-ups, at the host scheduler's mercy. The guest's own path is short
//!   (the least lateness seen is 2–10 µs, and an arm, an emulated MMIO write, costs 6–17 µs).
//!   On this project's 2-vCPU KVM guest host (AMD EPYC family 25 model 1) with a load average
//!   of 3–4, the p50 was 39–86 µs over eight runs; a QEMU with its timer slack set to 1 ns (from
//!   the default 50 µs) was no better (59–74 µs, against 65–86 µs in the same minutes), and a
//!   guest that spins instead of halting no better either (39–43 µs against 53–55 µs), so
//!   the host's load, not QEMU's timer granularity, sets the figure; the tail (p99 0.1–6 ms) is
//!   preemption of QEMU's threads.
//! - **KVM**: with hardware virtualisation the in-kernel APIC's hrtimer fires within
//!   microseconds and TSC-deadline needs no conversion. This project's machine has no VMX/SVM:
//!   its KVM is `kvm_pvm`, a software KVM in a guest whose kernel ticks at `CONFIG_HZ=250`.
//!   There a WRMSR to `IA32_TSC_DEADLINE` costs 18–41 µs (`arm_mean_us`), an APIC register
//!   read about 0.5 ms, and the timer interrupt reaches the vCPU 0.4–0.7 ms late at best:
//!   p50 1.5–10 ms over seven runs, p99 8–45 ms. The 10 µs goal needs a host with hardware
//!   virtualisation; the scenario still checks what it must (no early wake) here.

use std::path::Path;

use super::{boot, kvm_usable, name, Arch, Line, Run, KVM_ARGS, TCG_ARGS};

/// The sleeping tasks the kernel runs (its `SLEEPERS`).
const SLEEPERS: u64 = 8;
/// The least number of wakes for a PASS: 8 tasks × 2 s at the mean of the log-uniform sleeps
/// (about 11 ms) would be about 1400; the kernel's seeds give 1116. Fewer means tasks did not
/// sleep what they were asked.
const MIN_WAKES: u64 = 800;
/// The recalibrations the kernel makes (+100 ppm, then −100 ppm).
const RECALIBRATIONS: u64 = 2;
const CMDLINE: &str = "mode=timers reference=hpet max_ms=100";

/// Runs the timer scenarios that `wanted` selects.
pub fn scenarios(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    if wanted(name::TIMERS_TCG) {
        let mut line = Line::new(name::TIMERS_TCG);
        match boot(Arch::X86_64, kernel, TCG_ARGS, CMDLINE) {
            Err(e) => line.fail(e),
            Ok(run) => check(&mut line, &run, "apic-oneshot", 50.0),
        }
        line.print();
        lines.push(line);
    }
    if wanted(name::TIMERS_KVM) {
        let line = match kvm_usable() {
            Err(why) => Line::skip(name::TIMERS_KVM, why),
            Ok(()) => {
                let mut line = Line::new(name::TIMERS_KVM);
                let cmdline = format!("{CMDLINE} apic=x2apic");
                match boot(Arch::X86_64, kernel, KVM_ARGS, &cmdline) {
                    Err(e) => line.fail(e),
                    Ok(run) => check(&mut line, &run, "apic-tsc-deadline", 10.0),
                }
                line
            }
        };
        line.print();
        lines.push(line);
    }
    lines
}

/// µs with one decimal from the kernel's ns value of `key`.
fn micros(run: &Run, key: &str) -> Option<f64> {
    run.num(key).map(|ns| ns / 1000.0)
}

fn check(line: &mut Line, run: &Run, alarm: &str, goal_p50_us: f64) {
    let num = |k: &str| run.num(k).map(|v| v as u64);
    let wakes = num("timers_wakes");
    let early = num("timers_early");
    if let Some(w) = wakes {
        line.key("wakes", w);
    }
    if let Some(e) = early {
        line.key("early", e);
    }
    for (key, from) in [
        ("lateness_p50_us", "lateness_p50_ns"),
        ("lateness_p99_us", "lateness_p99_ns"),
        ("lateness_max_us", "lateness_max_ns"),
        ("lateness_min_us", "lateness_min_ns"),
        ("arm_mean_us", "timers_arm_mean_ns"),
    ] {
        if let Some(us) = micros(run, from) {
            line.key(key, format!("{us:.1}"));
        }
    }
    for (key, from) in [
        ("recalibrations", "timers_recalibrations"),
        ("alarm", "timers_alarm"),
        ("apic", "timers_apic"),
        ("tsc_deadline_offered", "tsc_deadline_offered"),
        ("expected_wakes", "timers_expected_wakes"),
        ("tasks_done", "timers_tasks_done"),
        ("interrupts", "timers_interrupts"),
        ("arms", "timers_arms"),
        ("elapsed_ms", "timers_elapsed_ms"),
        ("chosen_hz", "chosen_hz"),
        ("chosen_source", "chosen_source"),
    ] {
        if let Some(v) = run.get(from) {
            line.key(key, v);
        }
    }
    line.key("wall_ms", run.wall.as_millis());
    if let Some(why) = run.broken() {
        line.fail(why);
        return;
    }
    if let Some(p50) = micros(run, "lateness_p50_ns") {
        line.key("goal_p50_us", goal_p50_us);
        line.key("goal_p50_met", p50 <= goal_p50_us);
    }
    match early {
        Some(0) => {}
        Some(n) => line.fail(format!("{n} wakes came before their deadline")),
        None => line.fail("no timers_early in the kernel's output"),
    }
    if num("timers_tasks_done") != Some(SLEEPERS) {
        line.fail(format!(
            "{} of {SLEEPERS} tasks finished their sleeps",
            num("timers_tasks_done").unwrap_or(0)
        ));
    }
    match (wakes, num("timers_expected_wakes")) {
        (Some(w), Some(x)) if w == x && w >= MIN_WAKES => {}
        (w, x) => line.fail(format!(
            "wakes {w:?}, expected {x:?} (and at least {MIN_WAKES})"
        )),
    }
    if num("timers_recalibrations") != Some(RECALIBRATIONS) {
        line.fail(format!("not {RECALIBRATIONS} recalibrations"));
    }
    if run.get("timers_alarm") != Some(alarm) {
        line.fail(format!(
            "the alarm was {:?}, not {alarm} (TSC-deadline offered: {})",
            run.get("timers_alarm").unwrap_or("none"),
            run.get("tsc_deadline_offered").unwrap_or("?")
        ));
    }
}
