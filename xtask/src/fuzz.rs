//! `cargo xtask fuzz [SECONDS]`: every cargo-fuzz target in fuzz/ for SECONDS each (default
//! 60), installing the nightly toolchain and cargo-fuzz first if they are missing. Prints one
//! line per target — `fuzz target=<name> result=<PASS|FAIL> executions=<n> seconds=<s>` —
//! and fails if any target crashed, hung (10 s per input) or did not run.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::{have, root, run};

/// The targets, in fuzz/fuzz_targets/.
pub(crate) const TARGETS: &[&str] = &["dump_parser", "calibration", "clock"];

/// `rustup run nightly cargo …`, from the repository root, without the variables the outer
/// (stable) cargo set for xtask.
fn nightly_cargo() -> Command {
    let mut c = Command::new("rustup");
    c.args(["run", "nightly", "cargo"])
        .current_dir(root())
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("RUSTUP_TOOLCHAIN");
    c
}

/// The nightly toolchain and cargo-fuzz: installed if missing. Returns whether both are there.
fn install() -> bool {
    let nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !nightly
        && !run(
            "rustup toolchain install nightly",
            Command::new("rustup").args([
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
            ]),
        )
    {
        return false;
    }
    if have("cargo-fuzz") {
        return true;
    }
    run(
        "cargo install cargo-fuzz",
        Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]),
    )
}

/// Read-only seed corpora: fuzz/seeds/<target> where committed, and for the dump parser the
/// CPUID dumps the tests already replay (crates/baretime-x86/tests/data: every format, real CPUs, and garbage).
fn seeds(target: &str) -> Vec<PathBuf> {
    let mut dirs = vec![root().join("fuzz/seeds").join(target)];
    if target == "dump_parser" {
        dirs.push(root().join("crates/baretime-x86/tests/data"));
    }
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// What one target's run left in libFuzzer's output: executions, and the crash file if any.
fn parse(output: &str) -> (Option<u64>, Option<String>) {
    let mut executions = None;
    let mut crash = None;
    for line in output.lines() {
        if let Some(n) = line.strip_prefix("stat::number_of_executed_units:") {
            executions = n.trim().parse().ok();
        } else if let Some(rest) = line.strip_prefix("Done ") {
            // "Done 123456 runs in 61 second(s)"
            executions = executions.or_else(|| rest.split_whitespace().next()?.parse().ok());
        } else if let Some(i) = line.find("Test unit written to ") {
            crash = Some(line[i + "Test unit written to ".len()..].trim().to_string());
        }
    }
    (executions, crash)
}

/// Runs every target for `seconds`; `Ok(all passed)`, or why nothing could run.
pub(crate) fn fuzz(seconds: u64) -> Result<bool, String> {
    if !install() {
        return Err("needs the nightly toolchain and cargo-fuzz (see above)".into());
    }
    if !run("cargo fuzz build", nightly_cargo().args(["fuzz", "build"])) {
        return Err("the fuzz targets do not build".into());
    }
    let mut all = true;
    let mut lines = Vec::new();
    for target in TARGETS {
        // The working corpus (ignored by git) grows from the committed seeds, if any.
        let corpus = root().join("fuzz/corpus").join(target);
        let _ = std::fs::create_dir_all(&corpus);
        let mut c = nightly_cargo();
        c.args(["fuzz", "run", target]).arg(&corpus);
        for seeds in seeds(target) {
            c.arg(seeds);
        }
        c.args([
            "--",
            &format!("-max_total_time={seconds}"),
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ]);
        if *target == "dump_parser" {
            // The longest dumps are ~100 KB; their first CPU comes first.
            c.arg("-max_len=16384");
        }
        eprintln!("\n==> fuzz {target} for {seconds} s\n    {c:?}");
        let t = Instant::now();
        let out = c
            .output()
            .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let (executions, crash) = parse(&text);
        let ok = out.status.success() && crash.is_none() && executions.is_some_and(|n| n > 0);
        if !ok {
            // libFuzzer's report: the panic, the stack, the input.
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            for line in tail.iter().rev() {
                eprintln!("    {line}");
            }
            if let Some(path) = &crash {
                eprintln!(
                    "    the input: {path}\n    see it: cargo +nightly fuzz fmt {target} {path}\n    \
                     make it a test in crates/baretime/tests/fuzz_regressions.rs"
                );
            }
        }
        all &= ok;
        let line = format!(
            "fuzz target={target} result={} executions={} seconds={:.0}",
            if ok { "PASS" } else { "FAIL" },
            executions.map_or("none".into(), |n| n.to_string()),
            t.elapsed().as_secs_f64()
        );
        eprintln!("<== {line}");
        lines.push(line);
    }
    for line in &lines {
        println!("{line}");
    }
    Ok(all)
}
