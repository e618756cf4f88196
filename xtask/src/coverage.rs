//! `cargo xtask coverage [BOOTS]`: how often the calibration's bound holds where the truth is
//! known exactly.
//!
//! On QEMU's `aarch64-virt` the generic timer and semihosting's elapsed time both come from
//! the host's one monotonic clock, so the counter runs at exactly 62.5 MHz of the reference.
//! This boots the aarch64 kernel's `aarch64-virt` calibration (`mode=calibrate`: 1 ppm
//! target, at most 200 ms) BOOTS times (default 400), one after another, and counts the
//! boots whose `calibrated_hz` is further from 62.5 MHz than their own `uncertainty_ppm`
//! (the expanded bound, promised to hold at least 99 % of the time). It prints one line per
//! boot, then the misses, the coverage and the distribution of the calibration time, and
//! fails if more than 1 % of the usable boots missed (or none was usable).
//!
//! A boot takes a quarter to half a second on a 2-core host; 400 boots about 3 minutes.
//! `cargo xtask test` does not run it: the `aarch64-virt` scenario of `cargo xtask qemu`
//! boots it once.

use std::time::Instant;

use super::{boot, build_kernel, have, name, ppm, Arch, QEMU_CNTFRQ_HZ};

/// What one boot reported.
struct Boot {
    /// Deviation from 62.5 MHz, ppm.
    error_ppm: f64,
    /// The calibration's expanded bound, ppm.
    bound_ppm: f64,
    /// Calibration time (reference time), ms.
    ms: f64,
}

/// Runs `boots` boots; `Ok(true)` when at most 1 % of the usable ones missed.
pub fn run(boots: u64) -> Result<bool, String> {
    let arch = Arch::Aarch64;
    if !have(arch.qemu()) {
        return Err(format!(
            "{} is not installed (cargo xtask setup)",
            arch.qemu()
        ));
    }
    let kernel = build_kernel(arch)?;
    let start = Instant::now();
    let (mut results, mut broken) = (Vec::new(), 0u64);
    for i in 0..boots {
        let run = boot(arch, &kernel, &[], "mode=calibrate")?;
        if let Some(why) = run.broken() {
            broken += 1;
            println!("boot={i} result=BROKEN reason={why:?}");
            continue;
        }
        let (Some(hz), Some(u), Some(ms)) = (
            run.num("calibrated_hz"),
            run.num("uncertainty_ppm"),
            run.num("calibration_ms"),
        ) else {
            broken += 1;
            println!(
                "boot={i} result=BROKEN reason=\"no calibrated_hz/uncertainty_ppm/calibration_ms\""
            );
            continue;
        };
        let b = Boot {
            error_ppm: ppm(hz, QEMU_CNTFRQ_HZ as f64),
            bound_ppm: u,
            ms,
        };
        let miss = b.error_ppm.abs() > b.bound_ppm;
        println!(
            "boot={i} result={} calibrated_hz={hz:.3} vs_62500000_ppm={:+.3} uncertainty_ppm={u:.3} calibration_ms={ms:.3} met_target={}",
            if miss { "MISS" } else { "ok" },
            b.error_ppm,
            run.get("met_target").unwrap_or("none"),
        );
        results.push(b);
    }
    let usable = results.len();
    let misses = results
        .iter()
        .filter(|b| b.error_ppm.abs() > b.bound_ppm)
        .count();
    let quantile = |v: &mut Vec<f64>, p: f64| -> f64 {
        v.sort_by(f64::total_cmp);
        let at = ((v.len() as f64 - 1.0) * p).round() as usize;
        v.get(at).copied().unwrap_or(f64::NAN)
    };
    let mut ms: Vec<f64> = results.iter().map(|b| b.ms).collect();
    let mut ratio: Vec<f64> = results
        .iter()
        .map(|b| b.error_ppm.abs() / b.bound_ppm)
        .collect();
    let mut bound: Vec<f64> = results.iter().map(|b| b.bound_ppm).collect();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!(
        "coverage={} boots={boots} usable={usable} broken={broken} misses={misses} \
         coverage_percent={:.2} calibration_ms_min={:.1} calibration_ms_p10={:.1} \
         calibration_ms_median={:.1} calibration_ms_p90={:.1} calibration_ms_max={:.1} \
         uncertainty_ppm_median={:.3} error_over_bound_median={:.3} error_over_bound_p99={:.3} \
         error_over_bound_max={:.3} wall_s={:.1} host_cpu={cpu:?}",
        name::AARCH64_VIRT,
        100.0 * (usable - misses) as f64 / usable.max(1) as f64,
        quantile(&mut ms, 0.0),
        quantile(&mut ms, 0.1),
        quantile(&mut ms, 0.5),
        quantile(&mut ms, 0.9),
        quantile(&mut ms, 1.0),
        quantile(&mut bound, 0.5),
        quantile(&mut ratio, 0.5),
        quantile(&mut ratio, 0.99),
        quantile(&mut ratio, 1.0),
        start.elapsed().as_secs_f64(),
    );
    Ok(usable > 0 && misses * 100 <= usable)
}
