//! The SMP scenarios of `cargo xtask qemu` (a child module of `qemu`, so it shares its
//! `boot`, `Line` and `Run`).
//!
//! | scenario | machine | what is checked |
//! | --- | --- | --- |
//! | `aarch64-smp` | `virt -smp 4`, MTTCG | 4 CPUs up (PSCI CPU_ON); every CPU reads one `Clock` while CPU 0 makes ≥ 1000 recalibrations (±50 ppm) and ≥ 1000 updates: no read below the same CPU's last, none below a read another CPU had finished; the warp check across the 4 CPUs finds no warp |
//! | `x86_64-smp` | `pc -smp 4`, MTTCG | the same with APs started by INIT-SIPI-SIPI |
//! | `x86_64-smp-kvm` | `pc -smp 4`, KVM | the same under KVM (SKIP without /dev/kvm) |
//! | `x86_64-smp-tsc-skew` | `pc -smp 4`, KVM | one AP moves its TSC 1 ms ahead through IA32_TSC_ADJUST (and reads its TSC across the write to show it moved): with the monotonic guard the order check sees no inversion; the warp check finds the CPU and the size within 10 %; after writing CPU 0's TSC_ADJUST back, no warp; without the guard the order check sees inversions (so it can fail) |
//! | `x86_64-smp-tsc-skew-sim` | `pc -smp 4`, MTTCG | the same with the skew simulated under the clock (a per-CPU offset added to the TSC, found through GS), for hosts whose TSC cannot be moved |
//! | `x86_64-calibration-fault` | `pc`, TCG | calibration against a PIT that sticks, then one that steps back, mid-way: `ReferenceStuck` and `ReferenceBackwards`, each within the configured bound |
//!
//! The real skew needs KVM: QEMU's TCG has no IA32_TSC_ADJUST and ignores writes to
//! IA32_TSC for RDTSC (the kernel tries and the TSC does not move: 0 ticks across the
//! write). The software KVM of this project's machine (`kvm_pvm`) reports TSC_ADJUST, keeps
//! the value written, and does not move the TSC either (seen: 48 908 080 ticks written, the
//! TSC moved 560 878 ticks, the write's own time, across it); there `x86_64-smp-tsc-skew`
//! is skipped with that evidence (SKIP, as where /dev/kvm is missing: the host lacks what the
//! scenario needs), and `x86_64-smp-tsc-skew-sim` checks everything above the
//! counter.

use std::path::Path;
use std::time::Duration;

use super::{boot_within, kvm_usable, name, Arch, Line, Run, KVM_ARGS, TCG_ARGS};

/// CPUs in every TCG scenario. The KVM ones use at most as many vCPUs as the host has CPUs
/// (KVM's own recommendation, and QEMU warns beyond it): on an oversubscribed host every
/// warp-check handover waits for the host to schedule the other vCPU thread (seen with 4
/// vCPUs on 2 CPUs: 16 ms per handover, and the whole check past a minute).
const CPUS: u32 = 4;
/// Recalibrations and updates CPU 0 must make (each).
const WRITES: u32 = 1000;
/// µs worth of ticks the skew scenarios move their AP by (the issue asks for at least 100):
/// 1 ms, so that the size is found within 10 % even where the fastest handover between two
/// vCPUs takes tens of µs (the warp seen is the skew less that handover).
const SKEW_US: u64 = 1000;
/// The TCG runs take 10–20 s on a busy 2-core host (most of it the warp check: 12 000
/// handovers between vCPU threads at 1–5 ms each); KVM here (a software KVM, 4 vCPUs on 2
/// host CPUs, every TSC read a trap) minutes.
const TCG_TIMEOUT: Duration = Duration::from_secs(180);
const KVM_TIMEOUT: Duration = Duration::from_secs(600);

/// The largest forward step between two reads of one CPU that a busy host explains.
///
/// Not hypothetical: with a counter warped across CPUs by more than `baretime::LAG_NS`
/// (here the simulated skew of 200 µs and 1 ms, the plain clock, no guard), `Clock::now`
/// has been seen to jump ahead by exactly 2^62 ticks (1.886 × 10^18 ns at 2.445 GHz: the
/// timeline's end set at its deadline, and the write reporting `Late`): once in about ten
/// kernel runs, and in 3 of 16 three-second host runs of the same workload on threads. The
/// guard does not hide a forward jump. The `Clock` documents that such a warp breaks its
/// assumption; this check says when it happened.
const MAX_STEP_NS: f64 = 10e9;

/// Keys every SMP run reports, copied to the result line.
const SMP_KEYS: &[&str] = &[
    "cpus",
    "cpus_online",
    "online_ms",
    "reads",
    "reads_per_cpu",
    "recalibrations",
    "updates",
    "busy",
    "behind_writes",
    "write_errors",
    "own_inversions",
    "cross_inversions",
    "inversions",
    "max_back_ns",
    "max_step_ns",
    "read_ms",
    "warp_ms",
    "warp_cpus",
    "warp_pairs",
    "warp_checks",
    "warp_min_checks_per_pair",
    "warp_warps",
    "warp_max_ticks",
    "warp_max_ns",
    "warp_from",
    "warp_to",
    "warp_verdict",
    "warp_error",
    "warp_timed_out_waiting_for",
];

/// The x86_64 SMP scenarios `wanted` selects.
pub fn x86(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    let kvm_cpus = std::thread::available_parallelism()
        .map_or(2, |n| u32::try_from(n.get()).unwrap_or(CPUS))
        .clamp(2, CPUS);
    let (tcg_smp, kvm_smp) = (CPUS.to_string(), kvm_cpus.to_string());
    let tcg = ["-smp", &tcg_smp, "-accel", "tcg,thread=multi"];
    let kvm: Vec<&str> = ["-smp", &kvm_smp]
        .into_iter()
        .chain(KVM_ARGS.iter().copied())
        .collect();
    let cmdline = format!("mode=smp cpus={CPUS} writes={WRITES}");
    let kvm_cmdline = format!("mode=smp cpus={kvm_cpus} writes={WRITES} max_ms=1000");

    if wanted(name::SMP) {
        let mut line = Line::new(name::SMP);
        let run = boot_within(Arch::X86_64, kernel, &tcg, &cmdline, TCG_TIMEOUT);
        check_run(&mut line, run, |line, run| check_smp(line, run, CPUS));
        line.print();
        lines.push(line);
    }
    if wanted(name::SMP_KVM) {
        let line = match kvm_usable() {
            Err(why) => Line::skip(name::SMP_KVM, why),
            Ok(()) => {
                let mut line = Line::new(name::SMP_KVM);
                let run = boot_within(Arch::X86_64, kernel, &kvm, &kvm_cmdline, KVM_TIMEOUT);
                check_run(&mut line, run, |line, run| check_smp(line, run, kvm_cpus));
                line
            }
        };
        line.print();
        lines.push(line);
    }
    if wanted(name::SMP_TSC_SKEW) {
        let name = name::SMP_TSC_SKEW;
        let line = match kvm_usable() {
            Err(why) => Line::skip(name, why),
            Ok(()) => skew(name, kernel, &kvm, &kvm_cmdline, kvm_cpus, KVM_TIMEOUT),
        };
        line.print();
        lines.push(line);
    }
    if wanted(name::SMP_TSC_SKEW_SIM) {
        let name = name::SMP_TSC_SKEW_SIM;
        let cmdline = format!("{cmdline} skew_method=simulated");
        let line = skew(name, kernel, &tcg, &cmdline, CPUS, TCG_TIMEOUT);
        line.print();
        lines.push(line);
    }
    if wanted(name::CALIBRATION_FAULT) {
        let mut line = Line::new(name::CALIBRATION_FAULT);
        let run = boot_within(
            Arch::X86_64,
            kernel,
            TCG_ARGS,
            "mode=calfault max_ms=200",
            TCG_TIMEOUT,
        );
        check_run(&mut line, run, check_calfault);
        line.print();
        lines.push(line);
    }
    lines
}

/// The aarch64 SMP scenario, if `wanted`.
pub fn aarch64(kernel: &Path, wanted: &dyn Fn(&str) -> bool) -> Vec<Line> {
    let mut lines = Vec::new();
    if wanted(name::AARCH64_SMP) {
        let mut line = Line::new(name::AARCH64_SMP);
        let cpus = CPUS.to_string();
        let args = ["-smp", &cpus, "-accel", "tcg,thread=multi"];
        let cmdline = format!("mode=smp cpus={CPUS} writes={WRITES}");
        let run = boot_within(Arch::Aarch64, kernel, &args, &cmdline, TCG_TIMEOUT);
        check_run(&mut line, run, |line, run| check_smp(line, run, CPUS));
        line.print();
        lines.push(line);
    }
    lines
}

/// Fails `line` if the run could not start or is unusable, else checks it with `check`.
fn check_run(line: &mut Line, run: Result<Run, String>, check: impl FnOnce(&mut Line, &Run)) {
    match run {
        Err(e) => line.fail(e),
        Ok(run) => match run.broken() {
            Some(why) => {
                line.copy(&run, SMP_KEYS);
                line.fail(why);
            }
            None => check(line, &run),
        },
    }
}

/// The checks of a run without a fault: all CPUs up and reading, enough writes, no
/// inversion, no warp.
fn check_smp(line: &mut Line, run: &Run, cpus: u32) {
    line.copy(run, SMP_KEYS);
    check_workload(line, run, "", cpus);
    // Counters in step: CPU 0's reading is never behind what another CPU was handed out.
    if run.num("behind_writes") != Some(0.0) {
        line.fail("a write said Behind on counters that do not warp");
    }
    if run.num("warp_warps") != Some(0.0) {
        line.fail(format!(
            "the warp check found {} warps (largest {} ticks)",
            run.get("warp_warps").unwrap_or("?"),
            run.get("warp_max_ticks").unwrap_or("?")
        ));
    }
    match run.get("warp_verdict") {
        Some("consistent") => {}
        v => line.fail(format!("warp verdict {v:?}, not consistent")),
    }
}

/// CPUs, reads, writes, inversions of the read phase (keys prefixed by `label`).
fn check_workload(line: &mut Line, run: &Run, label: &str, cpus: u32) {
    let num = |k: &str| run.num(&format!("{label}{k}"));
    if run.num("cpus_online") != Some(f64::from(cpus)) || num("cpus") != Some(f64::from(cpus)) {
        line.fail(format!("not all {cpus} CPUs came online and read"));
    }
    let per_cpu: Vec<u64> = run
        .get(&format!("{label}reads_per_cpu"))
        .unwrap_or("")
        .split(',')
        .filter_map(|v| v.parse().ok())
        .collect();
    if per_cpu.len() != cpus as usize || per_cpu.contains(&0) {
        line.fail(format!("a CPU made no reads: {per_cpu:?}"));
    }
    let writes = f64::from(WRITES);
    if num("recalibrations").unwrap_or(0.0) < writes || num("updates").unwrap_or(0.0) < writes {
        line.fail(format!(
            "CPU 0 made fewer than {WRITES} recalibrations or updates"
        ));
    }
    if num("write_errors") != Some(0.0) {
        line.fail("a recalibration or update returned an error other than Busy or Behind");
    }
    // A reader preempted by the host sees the time its vCPU lost (hundreds of ms on a busy
    // host); a clock that jumps by more than this has left its timeline.
    if num("max_step_ns").unwrap_or(0.0) > MAX_STEP_NS {
        line.fail(format!(
            "the clock jumped forward by {} ns between two reads of one CPU",
            num("max_step_ns").unwrap_or(f64::NAN)
        ));
    }
    if num("inversions") != Some(0.0) {
        line.fail(format!(
            "{} inversions (own {}, cross-CPU {}), up to {} ns back",
            num("inversions").unwrap_or(f64::NAN),
            num("own_inversions").unwrap_or(f64::NAN),
            num("cross_inversions").unwrap_or(f64::NAN),
            num("max_back_ns").unwrap_or(f64::NAN),
        ));
    }
}

/// `x86_64-smp-tsc-skew` (KVM, the TSC moved through IA32_TSC_ADJUST) and
/// `x86_64-smp-tsc-skew-sim` (TCG, a per-CPU software offset under the clock): one boot with
/// the monotonic guard (no inversion; the warp check finds the CPU and the size; the repair
/// removes the warp), one without (the fault must show as inversions, so the order check
/// can fail). On a machine whose hypervisor does not move the TSC the first boot says so and
/// the scenario is skipped with that evidence (a property of the host).
fn skew(
    name: &'static str,
    kernel: &Path,
    qemu: &[&str],
    cmdline: &str,
    cpus: u32,
    timeout: Duration,
) -> Line {
    let mut line = Line::new(name);
    let simulated = cmdline.contains("skew_method=simulated");
    // The AP that moves its TSC: one in the middle (not the last one started).
    let skew_cpu = cpus / 2;
    let fault = format!("{cmdline} skew_cpu={skew_cpu} skew_us={SKEW_US}");
    line.key("skew_cpu", skew_cpu);
    line.key("skew_us", SKEW_US);

    // 1. With the guard: the full check.
    let guarded = boot_within(
        Arch::X86_64,
        kernel,
        qemu,
        &format!("{fault} guard=1"),
        timeout,
    );
    let mut moved = false;
    check_run(&mut line, guarded, |line, run| {
        moved = check_skewed(line, run, cpus, skew_cpu, simulated);
    });
    if !moved {
        return line;
    }

    // 2. Without the guard: the plain clock on the warped counter must show inversions.
    match boot_within(
        Arch::X86_64,
        kernel,
        qemu,
        &format!("{fault} guard=0"),
        timeout,
    ) {
        Err(e) => line.fail(format!("unguarded run: {e}")),
        Ok(run) => match run.broken() {
            Some(why) => line.fail(format!("unguarded run: {why}")),
            None => {
                let inv = run.num("inversions").unwrap_or(0.0);
                line.key("unguarded_inversions", inv);
                line.key(
                    "unguarded_max_back_ns",
                    run.get("max_back_ns").unwrap_or("?"),
                );
                if inv == 0.0 {
                    line.fail("without the guard the skew caused no inversion: the order check could not have failed");
                }
            }
        },
    }
    line
}

/// The guarded run of a skew scenario: false (after failing `line`) when the TSC did not
/// move, so that nothing else can be judged.
fn check_skewed(line: &mut Line, run: &Run, cpus: u32, skew_cpu: u32, simulated: bool) -> bool {
    line.copy(run, SMP_KEYS);
    line.copy(
        run,
        &[
            "guard",
            "skew_method",
            "skew_ticks",
            "skew_observed_ticks",
            "tsc_adjust",
            "tsc_adjust_unequal",
            "tsc_adjust_worst_cpu",
            "repaired_tsc_adjust",
            "repaired_tsc_adjust_unequal",
            "repaired_tsc_adjust_unfixed",
            "repaired_warp_pairs",
            "repaired_warp_checks",
            "repaired_warp_warps",
            "repaired_warp_max_ticks",
            "repaired_warp_verdict",
        ],
    );
    let skew_ticks = run.num("skew_ticks").unwrap_or(0.0);
    if !simulated {
        if run.get("skew_method") != Some("tsc_adjust") {
            line.fail("the AP could not use IA32_TSC_ADJUST");
        }
        // The AP reads its TSC just before and after the write: it must have jumped.
        let observed = run.num("skew_observed_ticks").unwrap_or(0.0);
        if observed < skew_ticks * 0.9 {
            // A property of the host, not of the crate: its hypervisor keeps the guest TSC
            // where it was (this project's kvm_pvm). SKIP with the evidence, unless something
            // else already failed; the -sim scenario checks everything above the counter.
            if line.result != "FAIL" {
                line.result = "SKIP";
                line.reason = Some(format!(
                    "the hypervisor did not move the TSC: {} wrote {skew_ticks} ticks, the TSC moved {observed} across the write (x86_64-smp-tsc-skew-sim checks the rest)",
                    run.get("skew_method").unwrap_or("?")
                ));
            }
            return false;
        }
        if run.get("tsc_adjust_worst_cpu") != Some(&skew_cpu.to_string()) {
            line.fail("TSC_ADJUST did not single out the skewed CPU");
        }
    }
    if run.get("guard") != Some("1") {
        line.fail("the kernel did not read through the guard");
    }
    check_workload(line, run, "", cpus);
    let found = run.num("warp_max_ticks").unwrap_or(0.0);
    if run.get("warp_verdict") != Some("warp") {
        line.fail(format!(
            "the warp check did not find the warp (verdict {:?})",
            run.get("warp_verdict")
        ));
    } else if (found - skew_ticks).abs() > skew_ticks / 10.0 {
        line.fail(format!(
            "the warp found ({found} ticks) is not within 10 % of the skew ({skew_ticks})"
        ));
    }
    // A CPU ahead of the others shows as the earlier read of a warped pair.
    if run.get("warp_from") != Some(&skew_cpu.to_string()) {
        line.fail(format!(
            "the warp check blamed CPU {:?}, not {skew_cpu}",
            run.get("warp_from")
        ));
    }
    if !simulated && run.get("repaired_tsc_adjust_unequal") != Some("0") {
        line.fail("TSC_ADJUST still differs across CPUs after the repair");
    }
    if run.get("repaired_warp_verdict") != Some("consistent") {
        line.fail(format!(
            "after the repair the warp check says {:?}",
            run.get("repaired_warp_verdict")
        ));
    }
    true
}

/// `x86_64-calibration-fault`: each fault ends in its typed error within the bound the
/// calibrator documents for a stuck reference (`max_duration + 2 × stuck_after`).
fn check_calfault(line: &mut Line, run: &Run) {
    line.copy(
        run,
        &[
            "max_ms",
            "stuck_ms",
            "fault_after_reads",
            "fault_stuck_error",
            "fault_stuck_elapsed_ms",
            "fault_backwards_error",
            "fault_backwards_detail",
            "fault_backwards_elapsed_ms",
        ],
    );
    let bound = run.num("max_ms").unwrap_or(0.0) + 2.0 * run.num("stuck_ms").unwrap_or(0.0);
    line.key("bound_ms", bound);
    for (fault, want) in [
        ("stuck", "reference_stuck"),
        ("backwards", "reference_backwards"),
    ] {
        let got = run
            .get(&format!("fault_{fault}_error"))
            .unwrap_or("missing");
        if got != want {
            line.fail(format!("the {fault} reference ended in {got}, not {want}"));
        }
        let ms = run
            .num(&format!("fault_{fault}_elapsed_ms"))
            .unwrap_or(f64::MAX);
        if ms > bound {
            line.fail(format!(
                "the {fault} reference took {ms} ms to fail (bound {bound} ms)"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run whose kernel printed `text` (and `done=1`).
    fn run(text: &str) -> Run {
        let stdout = format!("{text}\ndone=1\n");
        Run {
            kv: super::super::parse_kv(&stdout),
            stdout,
            stderr: String::new(),
            wall: Duration::from_secs(1),
            timed_out: false,
            timeout: TCG_TIMEOUT,
        }
    }

    /// What `aarch64-smp` printed in a passing run (abridged to the keys checked).
    const GOOD_SMP: &str = "cpus_online=4 online_ms=39\n\
        reads_per_cpu=368307,485319,450714,460212\n\
        cpus=4 reads=1764552 recalibrations=1000 updates=1013 busy=14 behind_writes=0 write_errors=0 own_inversions=0 cross_inversions=0 inversions=0 max_back_ns=0 max_step_ns=72020284\n\
        warp_cpus=4 warp_pairs=6/6 warp_checks=12000 warp_min_checks_per_pair=1000 warp_warps=0 warp_max_ticks=0 warp_max_ns=0 warp_from=-1 warp_to=-1 warp_verdict=consistent";

    fn smp_result(text: &str) -> Line {
        let mut line = Line::new("test");
        check_smp(&mut line, &run(text), 4);
        line
    }

    #[test]
    fn a_good_smp_run_passes() {
        let line = smp_result(GOOD_SMP);
        assert_eq!(line.result, "PASS", "{:?}", line.reason);
    }

    #[test]
    fn every_broken_figure_fails_the_smp_run() {
        for (from, to) in [
            (
                "cross_inversions=0 inversions=0",
                "cross_inversions=1 inversions=1",
            ),
            (
                "own_inversions=0 cross_inversions=0 inversions=0",
                "own_inversions=2 cross_inversions=0 inversions=2",
            ),
            ("cpus_online=4", "cpus_online=3"),
            ("460212", "0"),
            ("recalibrations=1000", "recalibrations=999"),
            ("updates=1013", "updates=12"),
            ("write_errors=0", "write_errors=1"),
            ("max_step_ns=72020284", "max_step_ns=1885950753745000"),
            ("warp_warps=0", "warp_warps=3"),
            ("warp_verdict=consistent", "warp_verdict=inconclusive"),
        ] {
            assert!(GOOD_SMP.contains(from), "{from}");
            let line = smp_result(&GOOD_SMP.replace(from, to));
            assert_eq!(line.result, "FAIL", "{to} passed");
        }
    }

    /// What the guarded run of `x86_64-smp-tsc-skew-sim` printed (abridged).
    const GOOD_SKEW: &str = "cpus_online=4\n\
        reads_per_cpu=398579,527676,566692,689903\n\
        cpus=4 reads=2182850 recalibrations=1000 updates=1025 busy=26 write_errors=0 own_inversions=0 cross_inversions=0 inversions=0 max_back_ns=0 max_step_ns=282848470\n\
        guard=1\n\
        skew_cpu=2 skew_us=1000 skew_ticks=2445403 skew_method=simulated skew_observed_ticks=0\n\
        warp_cpus=4 warp_pairs=6/6 warp_checks=12000 warp_min_checks_per_pair=1000 warp_warps=2989 warp_max_ticks=2445305 warp_max_ns=999960 warp_from=2 warp_to=1 warp_verdict=warp\n\
        repaired_tsc_adjust_unequal=0\n\
        repaired_warp_pairs=6/6 repaired_warp_checks=12000 repaired_warp_warps=0 repaired_warp_verdict=consistent";

    fn skew_result(text: &str, simulated: bool) -> (Line, bool) {
        let mut line = Line::new("test");
        let moved = check_skewed(&mut line, &run(text), 4, 2, simulated);
        (line, moved)
    }

    #[test]
    fn a_good_skew_run_passes() {
        let (line, moved) = skew_result(GOOD_SKEW, true);
        assert!(moved);
        assert_eq!(line.result, "PASS", "{:?}", line.reason);
    }

    #[test]
    fn the_skew_checks_can_fail() {
        for (from, to) in [
            // The guard let an inversion through.
            (
                "cross_inversions=0 inversions=0",
                "cross_inversions=5 inversions=5",
            ),
            // The warp check blamed the wrong CPU, missed the warp, or misjudged its size.
            ("warp_from=2", "warp_from=1"),
            ("warp_verdict=warp", "warp_verdict=consistent"),
            ("warp_max_ticks=2445305", "warp_max_ticks=2000000"),
            // The repair did not remove the warp.
            (
                "repaired_warp_warps=0 repaired_warp_verdict=consistent",
                "repaired_warp_warps=7 repaired_warp_verdict=warp",
            ),
            ("guard=1", "guard=0"),
        ] {
            assert!(GOOD_SKEW.contains(from), "{from}");
            let (line, _) = skew_result(&GOOD_SKEW.replace(from, to), true);
            assert_eq!(line.result, "FAIL", "{to} passed");
        }
    }

    #[test]
    fn a_tsc_that_did_not_move_skips_the_real_skew_with_its_evidence() {
        // This project's kvm_pvm: TSC_ADJUST written, the TSC moved only by the write's time.
        let text = GOOD_SKEW.replace(
            "skew_method=simulated skew_observed_ticks=0",
            "skew_method=tsc_adjust skew_observed_ticks=819256",
        ) + "\ntsc_adjust=0,0,2445403,0 tsc_adjust_unequal=1 tsc_adjust_worst_cpu=2";
        let (line, moved) = skew_result(&text, false);
        assert!(!moved);
        assert_eq!(line.result, "SKIP");
        assert!(line
            .reason
            .unwrap_or_default()
            .contains("did not move the TSC"));
        // Where it does move, the same run passes.
        let text = text.replace("skew_observed_ticks=819256", "skew_observed_ticks=2445990");
        let (line, moved) = skew_result(&text, false);
        assert!(moved);
        assert_eq!(line.result, "PASS", "{:?}", line.reason);
    }

    const GOOD_CALFAULT: &str = "max_ms=200 stuck_ms=10 fault_after_reads=2000\n\
        fault_stuck_error=reference_stuck fault_stuck_detail=0 fault_stuck_elapsed_ms=44.767 fault_stuck_reads=4072\n\
        fault_backwards_error=reference_backwards fault_backwards_detail=1907 fault_backwards_elapsed_ms=15.518 fault_backwards_reads=2001";

    #[test]
    fn the_calibration_fault_checks_can_fail() {
        let mut line = Line::new("test");
        check_calfault(&mut line, &run(GOOD_CALFAULT));
        assert_eq!(line.result, "PASS", "{:?}", line.reason);
        for (from, to) in [
            (
                "fault_stuck_error=reference_stuck",
                "fault_stuck_error=none",
            ),
            (
                "fault_backwards_error=reference_backwards",
                "fault_backwards_error=discontinuity",
            ),
            (
                "fault_stuck_elapsed_ms=44.767",
                "fault_stuck_elapsed_ms=220.001",
            ),
        ] {
            let mut line = Line::new("test");
            check_calfault(&mut line, &run(&GOOD_CALFAULT.replace(from, to)));
            assert_eq!(line.result, "FAIL", "{to} passed");
        }
    }
}
