//! The calibration's acceptance scenario in simulation: a 2.3 GHz counter against a PIT-like
//! reference (1.193182 MHz, 16 bits, reads of 1 µs ± 0.3 µs) with 100 µs SMI-like stalls ten
//! times a second. The true error must be ≤ 20 ppm after 50 ms and ≤ 1 ppm after 500 ms, and
//! the reported bound must contain it.

use baretime::{calibrate, Calibration, Config};
use baretime_sim::{SimCounter, SimReference, SimTimer, SimWorld};
use core::time::Duration;

/// Calibrates for exactly `ms` of reference time (no early stop); returns the calibration
/// and its true error in ppb.
fn pit_run(seed: u64, error_ppb: i64, ms: u64) -> (Calibration, i64, u64) {
    let world = SimWorld::new(seed).with_smi(10, Duration::from_micros(100));
    let tsc = SimCounter::new(
        &world,
        SimTimer::new(2_300_000_000).with_error_ppb(error_ppb),
    );
    let pit = SimReference::new(
        &world,
        SimTimer::pit().with_start_ticks(seed.wrapping_mul(7919)),
        "pit",
    );
    let config = Config::new()
        .with_target_ppb(0)
        .with_max_duration(Duration::from_millis(ms));
    let cal = calibrate(&tsc, pit, config).expect("calibration succeeds");
    let truth = tsc.timer().true_millihz() as i128;
    let err = (cal.frequency.as_millihz() as i128 - truth) * 1_000_000_000 / truth;
    (cal, err as i64, world.smi_count())
}

#[test]
fn pit_50ms_within_20ppm_and_bounded() {
    for seed in 1..=3 {
        let (cal, err, smis) = pit_run(seed, 37_000, 50);
        eprintln!(
            "50 ms seed {seed}: err {err} ppb, bound {} ppb, {cal}, {smis} SMIs",
            cal.frequency.accuracy().bound_ppb()
        );
        assert!(err.unsigned_abs() <= 20_000, "true error {err} ppb");
        assert!(
            err.unsigned_abs() <= cal.frequency.accuracy().bound_ppb(),
            "bound {} < error {err}",
            cal.frequency.accuracy().bound_ppb()
        );
        assert!(
            cal.duration >= Duration::from_micros(49_990)
                && cal.duration < Duration::from_millis(51)
        );
    }
}

#[test]
fn pit_500ms_within_1ppm_and_bounded() {
    let (cal, err, smis) = pit_run(11, -52_000, 500);
    eprintln!(
        "500 ms: err {err} ppb, bound {} ppb, {cal}, {smis} SMIs",
        cal.frequency.accuracy().bound_ppb()
    );
    assert!(smis >= 2, "the stalls happened");
    assert!(
        cal.samples_rejected >= smis / 2,
        "stalls inside brackets were rejected"
    );
    assert!(err.unsigned_abs() <= 1_000, "true error {err} ppb");
    assert!(
        err.unsigned_abs() <= cal.frequency.accuracy().bound_ppb(),
        "bound {} < error {err}",
        cal.frequency.accuracy().bound_ppb()
    );
}
