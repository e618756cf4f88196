//! Every fault a reference or counter can show (stuck, backwards, jumps, implausible rates)
//! yields its typed error or a correct bound — never a panic, never
//! a wrong frequency without a warning. Simulated, so nothing here depends on the machine.

use baretime::{calibrate, calibrate_and_verify, Calibration, CalibrationError, Config, Verdict};
use baretime::{Accuracy, Frequency, Source};
use baretime_sim::{SimCounter, SimFault, SimReference, SimTimer, SimWorld};
use core::time::Duration;

const TSC_HZ: u64 = 2_300_000_000;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Runs a calibration of `counter` against `reference` in a fresh world.
fn run(
    seed: u64,
    smi: Option<(u32, Duration)>,
    counter: SimTimer,
    reference: SimTimer,
    config: Config,
) -> (Result<Calibration, CalibrationError>, u64) {
    let mut world = SimWorld::new(seed);
    if let Some((rate, stall)) = smi {
        world = world.with_smi(rate, stall);
    }
    let c = SimCounter::new(&world, counter);
    let r = SimReference::new(&world, reference, "sim");
    (calibrate(&c, r, config), c.timer().true_millihz())
}

/// Asserts success and that the bound contains the true error; returns the calibration.
fn assert_bounded(result: Result<Calibration, CalibrationError>, true_millihz: u64) -> Calibration {
    let cal = result.expect("calibration succeeds");
    let truth = true_millihz as i128;
    let err = ((cal.frequency.as_millihz() as i128 - truth) * 1_000_000_000 / truth).unsigned_abs()
        as u64;
    assert!(
        err <= cal.frequency.accuracy().bound_ppb(),
        "error {err} ppb outside the bound: {cal}"
    );
    assert_eq!(cal.frequency.source(), Source::Calibrated);
    assert!(
        matches!(cal.frequency.accuracy(), Accuracy::Measured { .. }),
        "{cal:?}"
    );
    cal
}

fn short() -> Config {
    Config::new().with_target_ppb(0).with_max_duration(ms(10))
}

#[test]
fn healthy_pit_calibration_is_bounded() {
    let (r, truth) = run(
        1,
        None,
        SimTimer::new(TSC_HZ).with_error_ppb(40_000),
        SimTimer::pit(),
        short(),
    );
    let cal = assert_bounded(r, truth);
    assert_eq!(cal.reference, "sim");
    assert!(
        cal.samples_used > 5_000 && cal.frequency.accuracy().bound_ppb() < 20_000,
        "{cal}"
    );
}

#[test]
fn reference_stuck() {
    let pit = SimTimer::pit().with_fault(SimFault::StuckAfter(ms(2)));
    assert_eq!(
        run(2, None, SimTimer::new(TSC_HZ), pit, short()).0,
        Err(CalibrationError::ReferenceStuck)
    );
    // Stuck from the very start: never warms up.
    let pit = SimTimer::pit().with_fault(SimFault::StuckAfter(Duration::ZERO));
    assert_eq!(
        run(2, None, SimTimer::new(TSC_HZ), pit, short()).0,
        Err(CalibrationError::ReferenceStuck)
    );
}

#[test]
fn reference_backwards_narrow_and_wide() {
    let pit = SimTimer::pit().with_fault(SimFault::BackwardsAt { at: ms(3), by: 100 });
    let (r, _) = run(3, None, SimTimer::new(TSC_HZ), pit, short());
    assert!(
        matches!(r, Err(CalibrationError::ReferenceBackwards { by_ticks }) if by_ticks > 90 && by_ticks <= 100),
        "{r:?}"
    );
    // During warm-up (the first samples), on a 64-bit reference.
    let hpet = SimTimer::new(14_318_180).with_fault(SimFault::BackwardsAt {
        at: Duration::from_micros(3),
        by: 1_000,
    });
    let (r, _) = run(3, None, SimTimer::new(TSC_HZ), hpet, short());
    assert!(
        matches!(r, Err(CalibrationError::ReferenceBackwards { .. })),
        "{r:?}"
    );
}

#[test]
fn reference_jumping_forward_is_inconsistent() {
    // A persistent forward jump of a million ticks (an unlatched read gone wrong, a skip).
    let hpet = SimTimer::new(14_318_180).with_fault(SimFault::BackwardsAt {
        at: ms(2),
        by: 0u64.wrapping_sub(1_000_000),
    });
    assert_eq!(
        run(4, None, SimTimer::new(TSC_HZ), hpet, short()).0,
        Err(CalibrationError::Discontinuity)
    );
}

#[test]
fn a_single_reference_spike_is_rejected_and_bounded() {
    let pit = SimTimer::pit().with_fault(SimFault::SpikeAt {
        at: ms(4),
        by: 5_000,
    });
    let (r, truth) = run(
        5,
        None,
        SimTimer::new(TSC_HZ).with_error_ppb(-3_000),
        pit,
        short(),
    );
    let cal = assert_bounded(r, truth);
    assert!(cal.samples_rejected >= 1);
    let hpet = SimTimer::new(14_318_180).with_fault(SimFault::SpikeAt {
        at: ms(4),
        by: 1 << 40,
    });
    let (r, truth) = run(5, None, SimTimer::new(TSC_HZ), hpet, short());
    assert_bounded(r, truth);
}

#[test]
fn counter_stuck() {
    let tsc = SimTimer::new(TSC_HZ).with_fault(SimFault::StuckAfter(ms(1)));
    assert_eq!(
        run(6, None, tsc, SimTimer::pit(), short()).0,
        Err(CalibrationError::CounterStuck)
    );
    let tsc = SimTimer::new(TSC_HZ).with_fault(SimFault::StuckAfter(Duration::ZERO));
    assert_eq!(
        run(6, None, tsc, SimTimer::pit(), short()).0,
        Err(CalibrationError::CounterStuck)
    );
}

#[test]
fn both_stuck_ends_too() {
    let tsc = SimTimer::new(TSC_HZ).with_fault(SimFault::StuckAfter(Duration::from_micros(50)));
    let pit = SimTimer::pit()
        .with_read_cost(Duration::from_nanos(50), Duration::ZERO)
        .with_fault(SimFault::StuckAfter(Duration::from_micros(50)));
    assert_eq!(
        run(7, None, tsc, pit, short()).0,
        Err(CalibrationError::CounterStuck)
    );
}

#[test]
fn counter_backwards() {
    // A step back larger than the counter advances between reads is seen as such.
    let tsc = SimTimer::new(TSC_HZ).with_fault(SimFault::BackwardsAt {
        at: ms(2),
        by: 1_000_000,
    });
    let (r, _) = run(8, None, tsc, SimTimer::pit(), short());
    assert!(
        matches!(r, Err(CalibrationError::CounterBackwards { by_ticks }) if by_ticks > 990_000 && by_ticks <= 1_000_000),
        "{r:?}"
    );
    // A smaller one (0.4 µs, less than a PIT tick) only slows the count once; no single
    // sample can tell, but the residuals do, and the bound covers the bias it causes.
    let tsc = SimTimer::new(TSC_HZ).with_fault(SimFault::BackwardsAt {
        at: ms(5),
        by: 1_000,
    });
    let (r, truth) = run(8, None, tsc, SimTimer::pit(), short());
    assert_bounded(r, truth);
}

#[test]
fn reference_at_an_implausible_rate() {
    // Declared 1.193182 MHz, actually ten times slower: the counter would be 23 GHz.
    let slow = SimTimer::pit().with_error_ppb(-900_000_000);
    let (r, _) = run(
        9,
        None,
        SimTimer::new(TSC_HZ),
        slow,
        Config::new().with_max_duration(ms(2)),
    );
    assert!(
        matches!(r, Err(CalibrationError::ImplausibleRate { counter_millihz }) if counter_millihz > 20_000_000_000_000),
        "{r:?}"
    );
    // Declared 1.193182 MHz, actually 1000 times faster: 2.3 MHz, implausible for a TSC.
    // (Its declared 10 s last 10 ms of true time.)
    let fast = SimTimer::pit()
        .with_bits(64)
        .with_error_ppb(999_000_000_000);
    let cfg = short()
        .with_max_duration(Duration::from_secs(10))
        .with_plausible_counter_hz(100_000_000, 10_000_000_000);
    let (r, _) = run(9, None, SimTimer::new(TSC_HZ), fast, cfg);
    assert!(
        matches!(r, Err(CalibrationError::ImplausibleRate { .. })),
        "{r:?}"
    );
}

#[test]
fn too_few_samples() {
    let (r, _) = run(
        10,
        None,
        SimTimer::new(TSC_HZ),
        SimTimer::pit(),
        Config::new().with_max_duration(Duration::from_micros(20)),
    );
    assert!(
        matches!(r, Err(CalibrationError::TooFewSamples { .. })),
        "{r:?}"
    );
}

/// `min_samples` holds back an early stop, not the result at the duration limit: a
/// calibration that reaches `max_duration` with fewer samples (a loop whose every sample is
/// slow: the x86 timers kernel under this project's software KVM took about 1.3 ms a sample
/// and had 58–63 of the 64 in 100 ms, `timers-x86-kvm` FAIL `calibration_failed`) is a
/// result with its bound, not `TooFewSamples`, and the bound still holds.
#[test]
fn min_samples_does_not_fail_a_full_duration() {
    let cfg = Config::new()
        .with_max_duration(ms(1))
        .with_min_samples(1_000_000);
    let (r, truth) = run(10, None, SimTimer::new(TSC_HZ), SimTimer::pit(), cfg);
    let cal = assert_bounded(r, truth);
    assert!(cal.samples_used > 500, "{cal:?}");
    assert!(!cal.met_target, "{cal:?}");
}

#[test]
fn smi_stalls_are_rejected() {
    // 2000 stalls a second: dozens land inside brackets in 20 ms.
    let smi = Some((2_000, Duration::from_micros(100)));
    let (r, truth) = run(
        11,
        smi,
        SimTimer::new(TSC_HZ).with_error_ppb(77_000),
        SimTimer::pit(),
        short().with_max_duration(ms(20)),
    );
    let cal = assert_bounded(r, truth);
    assert!(cal.samples_rejected >= 5, "{cal}");
}

#[test]
fn stalls_longer_than_the_reference_wrap_are_unwrapped() {
    // 60 ms stalls against a 16-bit PIT that wraps every 55 ms.
    let smi = Some((20, ms(60)));
    let (r, truth) = run(
        12,
        smi,
        SimTimer::new(TSC_HZ).with_error_ppb(5_000),
        SimTimer::pit(),
        short().with_max_duration(ms(300)),
    );
    assert_bounded(r, truth);
}

#[test]
fn narrow_counters_wrap() {
    // A 24-bit counter at 2.3 GHz wraps every 7.3 ms; a 32-bit one starting just before a wrap.
    let c24 = SimTimer::new(TSC_HZ).with_bits(24).with_error_ppb(1_000);
    let (r, truth) = run(
        13,
        None,
        c24,
        SimTimer::pit(),
        short().with_max_duration(ms(30)),
    );
    assert_bounded(r, truth);
    let c32 = SimTimer::new(TSC_HZ)
        .with_bits(32)
        .with_start_ticks((1 << 32) - 1_000_000);
    let (r, truth) = run(
        13,
        None,
        c32,
        SimTimer::acpi_pm().with_start_ticks((1 << 24) - 100),
        short(),
    );
    assert_bounded(r, truth);
}

#[test]
fn drift_is_averaged_and_bounded() {
    // +100 ppm/s drift over 100 ms: the rate moves by 10 ppm; the fit reports the mean.
    let tsc = SimTimer::new(TSC_HZ).with_drift_ppb_per_s(100_000);
    let world = SimWorld::new(14);
    let c = SimCounter::new(&world, tsc);
    let cal = calibrate(
        &c,
        SimReference::new(&world, SimTimer::pit(), "pit"),
        short().with_max_duration(ms(100)),
    )
    .unwrap();
    let mid = c.timer().true_millihz_at(cal.duration / 2) as i128;
    let err =
        ((cal.frequency.as_millihz() as i128 - mid) * 1_000_000_000 / mid).unsigned_abs() as u64;
    assert!(
        err <= cal.frequency.accuracy().bound_ppb(),
        "{err} ppb vs {cal}"
    );
}

#[test]
fn coarse_reference_quantum() {
    // A 1 MHz count that only moves in steps of 1000 (1 ms).
    let coarse = SimTimer::new(1_000_000)
        .with_quantum(1_000)
        .with_read_cost(Duration::from_nanos(200), Duration::from_nanos(50));
    let cfg = Config::new()
        .with_target_ppb(0)
        .with_max_duration(ms(200))
        .with_stuck_after(ms(5));
    let (r, truth) = run(15, None, SimTimer::new(TSC_HZ), coarse, cfg);
    let cal = assert_bounded(r, truth);
    assert!(
        cal.frequency.accuracy().bound_ppb() > 100,
        "a coarse reference cannot claim ppb: {cal}"
    );
}

#[test]
fn reference_tolerance_is_added_but_not_waited_for() {
    let world = SimWorld::new(16);
    let c = SimCounter::new(&world, SimTimer::new(TSC_HZ));
    let pit = SimReference::new(&world, SimTimer::pit(), "pit").with_accuracy(Accuracy::Nominal {
        tolerance_ppb: 50_000,
    });
    let cal = calibrate(
        &c,
        pit,
        Config::new()
            .with_target_ppb(20_000)
            .with_max_duration(ms(50)),
    )
    .unwrap();
    assert!(cal.met_target, "{cal}");
    assert!(cal.measurement_ppb <= 20_000);
    assert_eq!(
        cal.frequency.accuracy().bound_ppb(),
        cal.measurement_ppb + 50_000
    );
    assert!(cal.duration < ms(50), "stopped early: {cal}");
}

#[test]
fn early_stop_meets_the_target() {
    let (r, truth) = run(
        17,
        None,
        SimTimer::new(TSC_HZ),
        SimTimer::pit(),
        Config::new()
            .with_target_ppb(5_000)
            .with_max_duration(ms(100)),
    );
    let cal = assert_bounded(r, truth);
    assert!(
        cal.met_target && cal.measurement_ppb <= 5_000 && cal.duration < ms(100),
        "{cal}"
    );
}

#[test]
fn verification_keeps_a_true_claim_and_rejects_a_false_one() {
    let world = SimWorld::new(18);
    let c = SimCounter::new(&world, SimTimer::new(TSC_HZ).with_error_ppb(150));
    let exact = Frequency::from_millihz(
        c.timer().true_millihz(),
        Source::CpuidTscLeaf,
        Accuracy::Exact,
    )
    .unwrap();
    let cfg = Config::new()
        .with_target_ppb(1_000)
        .with_max_duration(ms(100));
    let v = calibrate_and_verify(
        &c,
        SimReference::new(&world, SimTimer::pit(), "pit"),
        Some(exact),
        cfg,
    )
    .unwrap();
    assert_eq!(v.chosen, exact);
    assert!(
        matches!(v.verdict, Verdict::Confirmed { .. }),
        "{}",
        v.verdict
    );

    // A nominal claim (the TSC's "2.3 GHz" brand string) that is 500 ppm off.
    let world = SimWorld::new(19);
    let c = SimCounter::new(&world, SimTimer::new(TSC_HZ).with_error_ppb(-500_000));
    let brand = Frequency::from_hz(TSC_HZ, Source::CpuidTscLeaf, Accuracy::Exact).unwrap();
    let v = calibrate_and_verify(
        &c,
        SimReference::new(&world, SimTimer::pit(), "pit"),
        Some(brand),
        cfg,
    )
    .unwrap();
    assert_eq!(v.chosen.source(), Source::Calibrated);
    match v.verdict {
        Verdict::Disagrees {
            claim,
            deviation_ppb,
            ..
        } => {
            assert_eq!(claim, brand);
            assert!((deviation_ppb - 500_250).abs() < 1_000, "{deviation_ppb}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn random_faults_never_panic_nor_mislead() {
    for seed in 0..60u64 {
        let world = SimWorld::new(seed);
        let at = Duration::from_micros(world.random_below(5_000));
        let by = 1 + world.random_below(100_000);
        let fault = match world.random_below(4) {
            0 => SimFault::StuckAfter(at),
            1 => SimFault::BackwardsAt { at, by },
            2 => SimFault::SpikeAt { at, by },
            _ => SimFault::None,
        };
        let on_counter = world.random_below(2) == 0;
        let bits = [8u32, 16, 24, 32, 64][world.random_below(5) as usize];
        let (counter, reference) = if on_counter {
            (
                SimTimer::new(TSC_HZ).with_fault(fault),
                SimTimer::pit().with_bits(bits.max(12)),
            )
        } else {
            (
                SimTimer::new(TSC_HZ),
                SimTimer::pit().with_bits(bits.max(12)).with_fault(fault),
            )
        };
        let (r, truth) = run(
            seed,
            Some((500, Duration::from_micros(100))),
            counter,
            reference,
            short().with_max_duration(ms(8)),
        );
        if let Ok(cal) = r {
            // Any answer given must be right within its bound.
            let truth = truth as i128;
            let err = ((cal.frequency.as_millihz() as i128 - truth) * 1_000_000_000 / truth)
                .unsigned_abs() as u64;
            assert!(
                err <= cal.frequency.accuracy().bound_ppb(),
                "seed {seed} {fault:?} on_counter={on_counter} bits={bits}: {err} ppb vs {cal}"
            );
        }
    }
}
