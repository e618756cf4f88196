//! Calibration on the host, through the public API: real clocks (no timed assertions: every
//! bound is loose enough that a loaded machine cannot break it, and the result is compared
//! with its *own* stated bound), `CounterReference`, formatting, and the integer-only rule.

use baretime::{
    calibrate, calibrate_and_verify, verify, CalibrationError, Config, Reference, Verdict,
};
use baretime::{Accuracy, FnCounter, Frequency, Source};
use baretime::{CounterReference, StdReference};
use baretime_sim::{SimCounter, SimTimer, SimWorld};
use std::time::{Duration, Instant};

/// A 3 GHz counter made of std's own clock: its true rate against `StdReference` is exactly
/// 3 GHz, so the real sampling loop can be checked against a known answer.
#[test]
fn std_clock_against_itself_is_exact_within_the_bound() {
    let base = Instant::now();
    let counter = FnCounter::new(|| base.elapsed().as_nanos() as u64 * 3, 64);
    let cal = calibrate(
        counter,
        StdReference::new(),
        Config::new()
            .with_target_ppb(1_000)
            .with_max_duration(Duration::from_millis(200)),
    )
    .expect("calibration succeeds");
    let err =
        cal.frequency.as_millihz().abs_diff(3_000_000_000_000) * 1_000_000_000 / 3_000_000_000_000;
    assert!(
        err <= cal.frequency.accuracy().bound_ppb(),
        "{err} ppb vs {cal}"
    );
    assert_eq!(cal.reference, "std");
    assert_eq!(cal.frequency.source(), Source::Calibrated);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn tsc_against_std_agrees_with_the_kernel() {
    use baretime_x86::Tsc;
    let tsc = Tsc::probe().expect("x86_64 has a TSC");
    let cfg = Config::new()
        .with_target_ppb(2_000)
        .with_max_duration(Duration::from_millis(200));
    let cal = calibrate(tsc, StdReference::new(), cfg).expect("calibration succeeds");
    assert!(cal.frequency.accuracy().bound_ppb() < 1_000_000, "{cal}");
    if let Some(khz) = kernel_tsc_khz() {
        // The kernel's whole-kHz figure: agreement within our bound plus its rounding and
        // ppm-level NTP slew (see verify's margin), checked through the policy itself.
        let claim = Frequency::from_hz(khz * 1000, Source::User, Accuracy::Exact).unwrap();
        let v = verify(Some(claim), &cal);
        assert!(
            !v.verdict.is_disagreement() || cal.frequency.accuracy().bound_ppb() > 2_000,
            "{cal}: {}",
            v.verdict
        );
        let dev = v.verdict.deviation_ppb().unwrap();
        assert!(
            dev.unsigned_abs() < 10_000_000,
            "TSC within 1% of the kernel's figure: {dev} ppb"
        );
    }
}

/// `dmesg`'s "tsc: Detected 2596.118 MHz", in kHz.
#[cfg(target_arch = "x86_64")]
fn kernel_tsc_khz() -> Option<u64> {
    let out = std::process::Command::new("dmesg").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().find_map(|l| {
        let mhz = l
            .split("tsc: Detected ")
            .nth(1)?
            .split_whitespace()
            .next()?;
        let (int, frac) = mhz.split_once('.')?;
        Some(int.parse::<u64>().ok()? * 1000 + format!("{frac:0<3}")[..3].parse::<u64>().ok()?)
    })
}

/// The other way round: the CPU counter as the reference, to check a firmware's CNTFRQ.
#[test]
fn counter_reference_checks_a_firmware_frequency() {
    let world = SimWorld::new(21);
    let tsc = SimCounter::new(&world, SimTimer::new(2_000_000_000));
    let reference = CounterReference::new(
        &tsc,
        Frequency::from_hz(2_000_000_000, Source::HypervisorLeaf, Accuracy::Exact).unwrap(),
    )
    .with_name("tsc");
    assert_eq!(reference.name(), "tsc");
    // Firmware says 24 MHz; the counter really runs at 25 MHz.
    let cntvct = SimCounter::new(&world, SimTimer::new(25_000_000).with_bits(56));
    let claim = Frequency::from_hz(
        24_000_000,
        Source::Cntfrq,
        Accuracy::Nominal {
            tolerance_ppb: 100_000,
        },
    )
    .unwrap();
    let cfg = Config::new()
        .with_target_ppb(1_000)
        .with_max_duration(Duration::from_millis(50));
    let v = calibrate_and_verify(&cntvct, reference, Some(claim), cfg).unwrap();
    assert_eq!(v.calibration.reference, "tsc");
    assert!(v.chosen.as_hz().abs_diff(25_000_000) <= 25, "{}", v.chosen);
    assert_eq!(v.chosen.source(), Source::Calibrated);
    assert!(
        matches!(v.verdict, Verdict::Disagrees { deviation_ppb, .. } if (deviation_ppb + 40_000_000).abs() < 1_000),
        "{}",
        v.verdict
    );
}

#[test]
fn config_builder_round_trips_and_clamps() {
    let c = Config::new()
        .with_target_ppb(3_000)
        .with_max_duration(Duration::from_millis(7))
        .with_min_samples(99)
        .with_plausible_counter_hz(1, u64::MAX)
        .with_stuck_after(Duration::from_millis(4));
    assert_eq!(c.target_ppb(), 3_000);
    assert_eq!(c.max_duration(), Duration::from_millis(7));
    assert_eq!(c.min_samples(), 99);
    assert_eq!(
        c.plausible_counter_hz(),
        (Frequency::MIN_HZ, Frequency::MAX_HZ)
    );
    assert_eq!(c.stuck_after(), Duration::from_millis(4));
    assert_eq!(Config::default(), Config::new());
    assert_eq!(
        Config::new()
            .with_plausible_counter_hz(5_000, 2_000)
            .plausible_counter_hz(),
        (5_000, 5_000)
    );
}

#[test]
fn results_and_errors_print_for_people() {
    let world = SimWorld::new(22);
    let c = SimCounter::new(&world, SimTimer::new(2_300_000_000));
    let r = baretime_sim::SimReference::new(&world, SimTimer::pit(), "pit");
    let cal = calibrate(&c, r, Config::new().with_target_ppb(5_000)).unwrap();
    let text = cal.to_string();
    let mhz: f64 = text.split(' ').next().unwrap().parse().unwrap();
    assert!(
        (mhz - 2300.0).abs() < 0.01 && text.contains(" MHz ±") && text.contains("against pit"),
        "{text}"
    );
    assert!(
        cal.frequency.accuracy().bound_ppb() >= 1 && cal.frequency.accuracy().bound_ppb() <= 5_000
    );

    let e: &dyn std::error::Error = &CalibrationError::ReferenceBackwards { by_ticks: 5 };
    assert_eq!(e.to_string(), "reference timer went backwards by 5 ticks");
    assert_eq!(
        CalibrationError::ImplausibleRate {
            counter_millihz: 23_000_000_000_500
        }
        .to_string(),
        "implausible rate: the counter would run at 23000000000.500 Hz against this reference"
    );
    assert!(CalibrationError::TooFewSamples {
        used: 2,
        rejected: 9
    }
    .to_string()
    .contains("2 used, 9 rejected"));

    let claim = Frequency::from_hz(
        2_400_000_000,
        Source::BrandString,
        Accuracy::Nominal {
            tolerance_ppb: 1_000_000,
        },
    )
    .unwrap();
    let v = verify(Some(claim), &cal);
    // 2400 MHz claimed of a 2300 MHz counter: +43478.26 ppm, measured within the 5 ppm target.
    let text = v.verdict.to_string();
    let ppm: f64 = text
        .split("DISAGREES by ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((ppm - 43_478.26).abs() <= 5.0, "{text}");
    assert_eq!(verify(None, &cal).verdict.to_string(), "no claim; measured");
}

#[test]
fn the_module_path_is_public() {
    // `calibrate::calibrate` and the free function re-export name the same thing.
    let world = SimWorld::new(23);
    let c = SimCounter::new(&world, SimTimer::new(1_000_000_000));
    let r = baretime_sim::SimReference::new(&world, SimTimer::acpi_pm(), "acpi_pm");
    assert!(calibrate(&c, r, Config::new()).is_ok());
}

/// Every published crate's library code is integer-only: no `f32`/`f64` token in any source
/// file under `crates/*/src` (a test, so it cannot silently regress; the crates' clippy lints
/// deny float arithmetic too, but not a float in a signature).
#[test]
fn no_floating_point_in_the_library() {
    fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut files = vec![];
    for krate in std::fs::read_dir(&crates).unwrap() {
        walk(&krate.unwrap().path().join("src"), &mut files);
    }
    assert!(files.len() > 30, "found only {} sources", files.len());
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut in_tests = false;
        for (n, line) in text.lines().enumerate() {
            // Unit tests may compare in floating point; the library may not.
            in_tests |= line.trim_start().starts_with("#[cfg(test)]");
            if in_tests {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            for bad in ["f32", "f64", "as_secs_f"] {
                assert!(
                    !code.contains(bad),
                    "{}:{}: floating point: {line}",
                    f.display(),
                    n + 1
                );
            }
        }
    }
}
