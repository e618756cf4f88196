//! Cases the coverage test does not draw: a counter coarser than the reference read (62.5 MHz
//! CNTVCT against QEMU's 1 GHz semihosting clock, whose read is a trap far longer than its
//! tick), a counter slower than 1 MHz against a 1 GHz reference, a 32-bit HPET that wraps
//! during calibration, and a reference that stops part-way. Each checks that the bound
//! contains the true error over many seeds, or that the run ends in time with a typed error.

use baretime::{calibrate, Calibration, CalibrationError, Config};
use baretime_sim::{SimCounter, SimFault, SimReference, SimTimer, SimWorld};
use core::time::Duration;

fn us(v: u64) -> Duration {
    Duration::from_micros(v)
}

struct Run {
    result: Result<Calibration, CalibrationError>,
    truth: u64,
    /// True time the calibration took.
    took: Duration,
}

fn run(seed: u64, counter: SimTimer, reference: SimTimer, config: Config) -> Run {
    let world = SimWorld::new(seed).with_smi(50, us(100));
    let err = (world.random_below(400_001) as i64) - 200_000; // ±200 ppm
    let c = SimCounter::new(&world, counter.with_error_ppb(err));
    let r = SimReference::new(&world, reference, "sim");
    let t0 = world.now();
    let result = calibrate(&c, r, config);
    Run {
        result,
        truth: c.timer().true_millihz(),
        took: world.now().saturating_sub(t0),
    }
}

fn err_ppb(cal: &Calibration, truth: u64) -> u64 {
    let truth = truth as i128;
    ((cal.frequency.as_millihz() as i128 - truth) * 1_000_000_000 / truth).unsigned_abs() as u64
}

/// Runs `seeds` seeds of a scenario; asserts every run succeeds and at most 1 % fall outside
/// their bound. Returns the largest bound seen (for sanity checks on its size).
fn coverage(name: &str, seeds: u64, scenario: impl Fn(u64) -> (SimTimer, SimTimer, Config)) -> u64 {
    let mut misses = 0u64;
    let mut worst = 0u64;
    let mut ratio_max = 0f64;
    for seed in 0..seeds {
        let (counter, reference, config) = scenario(seed);
        let r = run(seed, counter, reference, config);
        let cal = r
            .result
            .unwrap_or_else(|e| panic!("{name} seed {seed}: {e}"));
        let e = err_ppb(&cal, r.truth);
        if e > cal.frequency.accuracy().bound_ppb() {
            misses += 1;
        }
        worst = worst.max(cal.frequency.accuracy().bound_ppb());
        ratio_max = ratio_max.max(e as f64 / cal.frequency.accuracy().bound_ppb().max(1) as f64);
    }
    eprintln!(
        "{name}: {misses} misses of {seeds}, max |err|/bound {ratio_max:.3}, max bound {worst} ppb"
    );
    assert!(
        misses * 100 <= seeds,
        "{name}: {misses} of {seeds} runs outside the bound"
    );
    worst
}

#[test]
fn slow_cntvct_against_semihosting_ns_clock() {
    // 62.5 MHz counter (16 ns ticks), 1 GHz reference whose read is a 2–8 µs trap: the
    // reference read is thousands of its own ticks long and the bracket ~300 counter ticks.
    coverage("cntvct-vs-semihosting", 200, |seed| {
        (
            SimTimer::new(62_500_000)
                .with_read_cost(Duration::from_nanos(10), Duration::from_nanos(3))
                .with_start_ticks(seed.wrapping_mul(0x9e37_79b9)),
            SimTimer::new(1_000_000_000)
                .with_read_cost(us(5), us(3))
                .with_start_ticks(seed << 20),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(5)),
        )
    });
}

#[test]
fn counter_coarser_than_a_fast_reference_read() {
    // 62.5 MHz counter, 1 GHz reference read in 5 ns: most brackets are 0 or 1 counter tick
    // wide, so the counter's own quantization is the whole of the timing uncertainty.
    coverage("coarse-counter", 200, |seed| {
        (
            SimTimer::new(62_500_000)
                .with_read_cost(Duration::from_nanos(4), Duration::from_nanos(1))
                .with_start_ticks(seed.wrapping_mul(0x1234_5679)),
            SimTimer::new(1_000_000_000)
                .with_read_cost(Duration::from_nanos(5), Duration::from_nanos(2))
                .with_start_ticks(seed << 24),
            Config::new().with_target_ppb(0).with_max_duration(us(300)),
        )
    });
}

#[test]
fn counter_below_1_mhz_against_1_ghz() {
    // A 250 kHz counter (4 µs ticks): a bracket is usually 0 ticks wide.
    coverage("250khz-counter", 200, |seed| {
        (
            SimTimer::new(250_000).with_start_ticks(seed.wrapping_mul(77)),
            SimTimer::new(1_000_000_000)
                .with_read_cost(Duration::from_nanos(40), Duration::from_nanos(10))
                .with_start_ticks(seed << 16),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(20))
                .with_plausible_counter_hz(1_000, 10_000_000_000),
        )
    });
}

#[test]
fn hpet_32_bit_wraps_during_calibration() {
    // A 32-bit HPET at 14.318 MHz wraps every 300 s: start it 1 ms before the wrap.
    let worst = coverage("hpet32-wrap", 100, |seed| {
        (
            SimTimer::new(2_000_000_000 + seed * 1_000_000)
                .with_start_ticks(seed.wrapping_mul(u64::MAX / 101)),
            SimTimer::new(14_318_180)
                .with_bits(32)
                .with_read_cost(Duration::from_nanos(500), Duration::from_nanos(200))
                .with_start_ticks((1u64 << 32) - 14_318 - seed * 7),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(4)),
        )
    });
    assert!(
        worst < 50_000,
        "a wrap must not blow up the bound: {worst} ppb"
    );
}

#[test]
fn reference_stopping_midway_ends_near_max_duration() {
    // Counters from 24 MHz to 3 GHz; the reference stops after 3 ms; max_duration is 20 ms and
    // stuck_after the default 10 ms. The run must end with ReferenceStuck within
    // max_duration + stuck_after of true time, whatever the counter's rate (it is judged by
    // the rate measured so far, not only by the fastest plausible one).
    for (i, hz) in [24_000_000u64, 62_500_000, 1_000_000_000, 3_000_000_000]
        .into_iter()
        .enumerate()
    {
        let r = run(
            i as u64,
            SimTimer::new(hz),
            SimTimer::pit().with_fault(SimFault::StuckAfter(Duration::from_millis(3))),
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(20)),
        );
        assert_eq!(r.result, Err(CalibrationError::ReferenceStuck), "{hz} Hz");
        assert!(
            r.took <= Duration::from_millis(30),
            "{hz} Hz counter: a stopped reference was noticed only after {:?}",
            r.took
        );
    }
}
