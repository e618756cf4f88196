//! `cargo xtask`: the project's task runner.
//!
//! - `cargo xtask test`: every test — host suite, loom model check, the suite on aarch64 under
//!   qemu-user, the no_std builds, and the bare-metal QEMU matrix. Sets up what it can first.
//! - `cargo xtask qemu`: the bare-metal scenarios only (`scenario=… result=…` lines).
//! - `cargo xtask setup`: installs rustup targets and (as root, with apt) Debian packages.
//! - `cargo xtask bench`: the read-cost benchmark and the accuracy comparison.
//! - `cargo xtask fuzz [SECONDS]`: each cargo-fuzz target in fuzz/ for SECONDS (default 60).
//! - `cargo xtask coverage [aarch64|x86_64] [BOOTS]`: the `aarch64-virt` calibration (or the
//!   x86 TSC under TCG `-icount`) booted BOOTS times (default 400): how often the bound holds
//!   where the truth is exact.
//! - `cargo xtask sweep`: the calibration's bound over simulated families of worlds
//!   (`suite/tests/sim_sweep.rs`, 400 runs a family): misses/N and |error|/bound per family.

mod fuzz;
mod qemu;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// Bare targets the library must build for, with the feature sets to check.
/// The published crates besides the core, built for every bare-metal target below.
const PLATFORM_CRATES: &[&str] = &[
    "baretime-x86",
    "baretime-aarch64",
    "baretime-diag",
    "baretime-sim",
    "baretime-embassy",
    "baretime-rtic",
];

/// The core crate's bare-metal builds: (target, features).
const NO_STD_BUILDS: &[(&str, &str)] = &[
    ("x86_64-unknown-none", ""),
    ("x86_64-unknown-none", "defmt,embedded-hal"),
    ("aarch64-unknown-none", ""),
    ("aarch64-unknown-none", "defmt,embedded-hal"),
    ("aarch64-unknown-none-softfloat", ""),
    ("aarch64-unknown-none-softfloat", "defmt,embedded-hal"),
    // 32-bit compare-and-swap, no 64-bit atomics (Cortex-M3/M4/M7): the Clock with core's
    // atomics alone; the portable-atomic features change nothing there (README, "Features").
    ("thumbv7em-none-eabihf", ""),
    ("thumbv7em-none-eabihf", "defmt,embedded-hal"),
    ("thumbv7em-none-eabihf", "portable-atomic"),
    ("thumbv7em-none-eabihf", "portable-atomic-critical-section"),
    (
        "thumbv7em-none-eabihf",
        "portable-atomic,portable-atomic/unsafe-assume-single-core",
    ),
    ("thumbv7m-none-eabi", ""),
    (
        "riscv32imc-unknown-none-elf",
        "portable-atomic,portable-atomic/unsafe-assume-single-core",
    ),
    // No compare-and-swap (Cortex-M0/M0+, RISC-V without A): without the feature, everything
    // but the Clock and WarpCheck; with it, those too.
    ("thumbv6m-none-eabi", ""),
    ("thumbv6m-none-eabi", "portable-atomic-critical-section"),
    ("riscv32imc-unknown-none-elf", ""),
    (
        "riscv32imc-unknown-none-elf",
        "portable-atomic-critical-section",
    ),
];

const RUST_TARGETS: &[&str] = &[
    "x86_64-unknown-none",
    "aarch64-unknown-none",
    "aarch64-unknown-none-softfloat",
    "aarch64-unknown-linux-gnu",
    "thumbv7em-none-eabihf",
    "thumbv7m-none-eabi",
    "thumbv6m-none-eabi",
    "riscv32imc-unknown-none-elf",
];

/// Debian packages and the command each provides.
const DEBIAN: &[(&str, &str)] = &[
    ("qemu-system-x86", "qemu-system-x86_64"),
    ("qemu-system-arm", "qemu-system-aarch64"),
    ("qemu-user", "qemu-aarch64"),
    ("gcc-aarch64-linux-gnu", "aarch64-linux-gnu-gcc"),
    ("libc6-dev-arm64-cross", ""),
];

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub(crate) fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// `cargo` (the one that runs xtask), from the repository root.
pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs a command, echoing it; returns whether it succeeded.
fn run(what: &str, cmd: &mut Command) -> bool {
    eprintln!("\n==> {what}\n    {cmd:?}");
    let t = Instant::now();
    let ok = cmd.status().is_ok_and(|s| s.success());
    eprintln!(
        "<== {what}: {} in {:.1}s",
        if ok { "ok" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    ok
}

/// Installs what can be installed; returns a list of what is still missing.
fn setup() -> Vec<String> {
    let mut missing = Vec::new();
    if have("rustup") {
        let mut c = Command::new("rustup");
        c.args(["target", "add"]).args(RUST_TARGETS);
        if !run("rustup targets", &mut c) {
            missing.push(format!("rustup target add {}", RUST_TARGETS.join(" ")));
        }
    } else {
        missing.push(format!(
            "rustup target add {} (no rustup found)",
            RUST_TARGETS.join(" ")
        ));
    }
    let absent: Vec<&str> = DEBIAN
        .iter()
        .filter(|(pkg, cmd)| {
            if cmd.is_empty() {
                !Path::new("/usr/aarch64-linux-gnu/lib/libc.so.6").exists() && !pkg.is_empty()
            } else {
                !have(cmd)
            }
        })
        .map(|(pkg, _)| *pkg)
        .collect();
    if absent.is_empty() {
        return missing;
    }
    // Debian's QEMU 7.2 conflicts with a newer qemu-utils from backports: downgrade it with them.
    let mut pkgs: Vec<&str> = absent.clone();
    let downgrade = Command::new("sh")
        .args([
            "-c",
            "dpkg-query -W -f='${Version}' qemu-utils 2>/dev/null | grep -q bpo",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if downgrade {
        pkgs.push("qemu-utils/bookworm");
    }
    let install = format!(
        "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades {}",
        pkgs.join(" ")
    );
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    if is_root && have("apt-get") {
        if !run("apt-get install", Command::new("sh").args(["-c", &install])) {
            missing.push(install);
        }
    } else {
        missing.push(format!("sudo sh -c '{install}'"));
    }
    missing
}

struct Tally {
    passed: Vec<String>,
    failed: Vec<String>,
}

impl Tally {
    fn record(&mut self, name: &str, ok: bool) {
        if ok {
            self.passed.push(name.into());
        } else {
            self.failed.push(name.into());
        }
    }
}

/// Runs `cargo test` for aarch64-unknown-linux-gnu under qemu-user and prints the test count.
fn aarch64_user_tests() -> bool {
    let mut c = cargo();
    c.args(["test", "--target", "aarch64-unknown-linux-gnu"]);
    // Every test runs here too, the largest sampled ones at a smaller size: a case costs
    // about 30 times as much under emulation, and the host run above samples them whole.
    // Whole, this run's tests took 1 235 s on a loaded 2-vCPU machine, about 21 of CI's 55
    // minutes; the three knobs took 433 s off: adversary_rebase's two sampled sweeps (228 s)
    // and its 3 000 random cases (97 s) → 56 s, adversary_round4's brute force over 61
    // widths (146 s) → 33 s, extend's 20 000 schedules (108 s) → 7 s. Interleave's default
    // is 1 000 schedules, as set here.
    c.env("PROPTEST_CASES", "256")
        .env("SWEEP_STRIDE", "4")
        .env("SCHEDULES", "1000");
    eprintln!("\n==> aarch64-linux tests under qemu-user\n    {c:?}");
    let t = Instant::now();
    let out = match c.output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("<== aarch64-linux: cannot run cargo: {e}");
            return false;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let (mut passed, mut failed) = (0u64, 0u64);
    for line in stdout.lines().filter(|l| l.starts_with("test result:")) {
        let num = |key: &str| -> u64 {
            line.split(';')
                .find(|p| p.contains(key))
                .and_then(|p| {
                    p.split_whitespace()
                        .rev()
                        .nth(1)
                        .and_then(|n| n.parse().ok())
                })
                .unwrap_or(0)
        };
        passed += num(" passed");
        failed += num(" failed");
    }
    let ok = out.status.success();
    eprintln!(
        "<== aarch64-linux (qemu-user): {passed} tests passed, {failed} failed, {} in {:.1}s",
        if ok { "ok" } else { "FAILED" },
        t.elapsed().as_secs_f64()
    );
    println!("aarch64-linux-gnu tests under qemu-user: {passed} passed, {failed} failed");
    ok && passed > 0
}

fn test_all() -> bool {
    let missing = setup();
    for m in &missing {
        eprintln!("setup: could not install; run: {m}");
    }
    let mut tally = Tally {
        passed: vec![],
        failed: vec![],
    };

    tally.record(
        "fmt",
        run(
            "cargo fmt --check",
            cargo().args(["fmt", "--all", "--", "--check"]),
        ),
    );
    tally.record(
        "host tests",
        run(
            "host tests (every crate, the report and the suite, which turns on std, defmt and embedded-hal; xtask's own)",
            cargo().args(["test"]).args(["--workspace", "--exclude", "firmware", "--exclude", "boot", "--exclude", "loom-model"]),
        ),
    );
    tally.record(
        "doc tests",
        run("doc tests", cargo().args(["test", "--doc"])),
    );
    tally.record(
        "interleavings",
        run(
            "interleaving test: 100 000 schedules per counter width (1, 2, 3, 8, 16, 24, 31, 32, 33, 48, 63, 64 bits)",
            cargo()
                .args(["test", "-p", "baretime", "--features", "std", "--test", "interleave"])
                .args(["--", "--skip", "resets_and_glitches"])
                .env("SCHEDULES", "100000"),
        ),
    );
    // The widest environment (64-bit counters reset to anywhere, glitched reads) at a fixed
    // seed, so that a run here is the run anyone repeats: fresh seeds are surveyed by hand
    // (the test's docs), and what they find becomes a `found_*` schedule.
    tally.record(
        "interleavings with resets and glitches",
        run(
            "interleaving test, 64-bit counters with resets and glitched reads: 100 000 schedules, seed 101",
            cargo()
                .args(["test", "-p", "baretime", "--features", "std", "--test", "interleave"])
                .arg("resets_and_glitches")
                .env("SCHEDULES", "100000")
                .env("PROPTEST_RNG_SEED", "101"),
        ),
    );
    tally.record(
        "loom",
        run(
            "loom model check of the Clock, the CoarseClock's 32-bit word and the WallClock's reads against its writers (loom-model: their sources on loom's atomics)",
            cargo()
                .args([
                    "test",
                    "--release",
                    "-p",
                    "loom-model",
                    "--test",
                    "loom_clock",
                    "--test",
                    "loom_coarse",
                    "--test",
                    "loom_wall",
                ])
                .env("RUSTFLAGS", "--cfg loom")
                .env("LOOM_MAX_PREEMPTIONS", "2")
                .env("CARGO_TARGET_DIR", root().join("target/loom")),
        ),
    );
    tally.record(
        "stress",
        run(
            "stress: Clock on the real counter, readers on every CPU against a busy writer (3 s)",
            cargo().args(["run", "--release", "--example", "stress", "--", "3"]),
        ),
    );
    // The core crate with each feature set; then, once per target, the platform crates,
    // plain and with defmt (their features are the core's, passed through).
    let mut targets: Vec<&str> = vec![];
    for (target, features) in NO_STD_BUILDS {
        let mut c = cargo();
        c.args(["build", "--lib", "-p", "baretime", "--target", target]);
        if !features.is_empty() {
            c.args(["--features", features]);
        }
        let name = format!("no_std build baretime {target} [{features}]");
        tally.record(&name, run(&name, &mut c));
        if !targets.contains(target) {
            targets.push(target);
        }
    }
    for target in targets {
        for features in ["", "defmt"] {
            let mut c = cargo();
            c.args(["build", "--lib", "--target", target]);
            for p in PLATFORM_CRATES {
                c.args(["-p", p]);
            }
            // The embassy driver and the RTIC monotonic need the Clock, which a core without 32-bit
            // compare-and-swap has only through portable-atomic (README, "Features").
            let features = match (target, features) {
                ("thumbv6m-none-eabi" | "riscv32imc-unknown-none-elf", "") => {
                    "baretime/portable-atomic-critical-section".to_string()
                }
                ("thumbv6m-none-eabi" | "riscv32imc-unknown-none-elf", f) => {
                    format!("{f},baretime/portable-atomic-critical-section")
                }
                (_, f) => f.to_string(),
            };
            if !features.is_empty() {
                c.args(["--features", &features]);
            }
            let name = format!("no_std build platform crates {target} [{features}]");
            tally.record(&name, run(&name, &mut c));
        }
    }
    if have("qemu-aarch64") && have("aarch64-linux-gnu-gcc") {
        tally.record("aarch64-linux tests (qemu-user)", aarch64_user_tests());
    } else {
        tally.failed.push(
            "aarch64-linux tests (qemu-user): qemu-aarch64 or the cross linker is missing".into(),
        );
    }
    eprintln!("\n==> bare-metal QEMU scenarios");
    match qemu::run(&[]) {
        Ok(true) => tally.passed.push("qemu scenarios".into()),
        Ok(false) => tally.failed.push("qemu scenarios".into()),
        Err(e) => tally.failed.push(format!("qemu scenarios: {e}")),
    }

    println!("\nxtask test summary:");
    for p in &tally.passed {
        println!("  ok      {p}");
    }
    for f in &tally.failed {
        println!("  FAILED  {f}");
    }
    println!(
        "xtask: {} passed, {} failed",
        tally.passed.len(),
        tally.failed.len()
    );
    tally.failed.is_empty()
}

fn bench() -> bool {
    let a = run(
        "read-cost benchmark",
        cargo().args(["bench", "--bench", "read_cost"]),
    );
    let b = run(
        "accuracy comparison",
        cargo().args(["run", "--release", "--example", "accuracy"]),
    );
    a && b
}

/// The long simulation sweep of the calibration's bound (`suite/tests/sim_sweep.rs`).
fn sweep() -> bool {
    run(
        "calibration sweep",
        cargo().args([
            "test",
            "--release",
            "-p",
            "suite",
            "--test",
            "sim_sweep",
            "--",
            "--ignored",
            "--nocapture",
        ]),
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ok = match args.first().map(String::as_str) {
        Some("test") => test_all(),
        Some("qemu") => {
            let missing = setup();
            for m in &missing {
                eprintln!("setup: could not install; run: {m}");
            }
            match qemu::run(&args[1..]) {
                Ok(ok) => ok,
                Err(e) => {
                    eprintln!("xtask qemu: {e}");
                    false
                }
            }
        }
        Some("setup") => {
            let missing = setup();
            for m in &missing {
                println!("still missing; run: {m}");
            }
            missing.is_empty()
        }
        Some("bench") => bench(),
        Some("sweep") => sweep(),
        Some("fuzz") => match args.get(1).map(|s| s.parse::<u64>()) {
            None => fuzz::fuzz(60),
            Some(Ok(seconds)) if seconds > 0 => fuzz::fuzz(seconds),
            Some(_) => Err("usage: cargo xtask fuzz [SECONDS]".into()),
        }
        .unwrap_or_else(|e| {
            eprintln!("xtask fuzz: {e}");
            false
        }),
        Some("coverage") => {
            use qemu::coverage::Target;
            let (target, rest) = match args.get(1).map(String::as_str) {
                Some("x86_64") => (Target::X86Icount, args.get(2)),
                Some("aarch64") => (Target::Aarch64Virt, args.get(2)),
                _ => (Target::Aarch64Virt, args.get(1)),
            };
            match rest.map(|s| s.parse::<u64>()) {
                None => qemu::coverage::run(target, 400),
                Some(Ok(boots)) if boots > 0 => qemu::coverage::run(target, boots),
                Some(_) => Err("usage: cargo xtask coverage [aarch64|x86_64] [BOOTS]".into()),
            }
            .unwrap_or_else(|e| {
                eprintln!("xtask coverage: {e}");
                false
            })
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <test|qemu|setup|bench|fuzz [SECONDS]|coverage [aarch64|x86_64] [BOOTS]|sweep>"
            );
            false
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
