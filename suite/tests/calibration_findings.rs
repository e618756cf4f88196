//! Issue 27's five findings, each in a simulated world whose truth is known exactly (true time
//! in picoseconds, the counter's true rate from its `SimTimer`), over many seeds:
//!
//! 1. a sampling cadence nearly in step with a coarse counter (1 MHz counter, HPET-class
//!    reference, fixed read costs: one sample takes 1 µs·(1 + ε)) must be covered by its bound;
//! 2. several small steps of the reference (ACPI PM, +1/+2/+5 ticks at 5, 9, 13 and 17 ms of a
//!    20 ms calibration) yield a typed error or a bound that covers them;
//! 3. fault-free slow counters (1–10 kHz, a 14.3 MHz reference read every ~0.5 µs) calibrate
//!    without spurious errors;
//! 4. a counter at `Frequency::MIN_HZ` (1 kHz) is not called implausible;
//! 5. a reference far slower than it declares ends in a typed error within `max_duration`
//!    plus a small margin.
//!
//! Not timed: true time is the world's.

use baretime::{calibrate, Calibration, CalibrationError, Config, Frequency, Reference};
use baretime_sim::{SimCounter, SimReference, SimTimer, SimWorld};
use core::time::Duration;

/// A reference that costs `extra_ps` more per read than its timer says (a picosecond-exact
/// cadence, finer than `SimTimer`'s nanoseconds), and whose count steps forward by
/// `steps[i].1` ticks from true time `steps[i].0` on (cumulative, wrapping at its width).
struct Shaped<'w> {
    inner: SimReference<'w>,
    world: &'w SimWorld,
    extra_ps: u64,
    steps: Vec<(Duration, u64)>,
    /// A test's deadline in true time: a read after it panics (instead of hanging the test).
    deadline: Option<Duration>,
}

impl<'w> Shaped<'w> {
    fn new(world: &'w SimWorld, timer: SimTimer) -> Self {
        Shaped {
            inner: SimReference::new(world, timer, "sim"),
            world,
            extra_ps: 0,
            steps: Vec::new(),
            deadline: None,
        }
    }
}

impl Reference for Shaped<'_> {
    fn read(&mut self) -> u64 {
        if let Some(d) = self.deadline {
            let now = self.world.now();
            assert!(now <= d, "still calibrating at {now:?} of true time");
        }
        let v = self.inner.read();
        let now = self.world.now();
        let offset: u64 = self
            .steps
            .iter()
            .filter(|(at, _)| now >= *at)
            .map(|(_, by)| by)
            .sum();
        self.world.advance_ps(self.extra_ps);
        let mask = if self.bits() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits()) - 1
        };
        v.wrapping_add(offset) & mask
    }
    fn bits(&self) -> u32 {
        self.inner.bits()
    }
    fn frequency(&self) -> Frequency {
        self.inner.frequency()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

/// `cal`'s true error in ppb against `truth` (mHz), signed.
fn err_ppb(cal: &Calibration, truth: u64) -> i64 {
    let truth = truth as i128;
    ((cal.frequency.as_millihz() as i128 - truth) * 1_000_000_000 / truth) as i64
}

/// One calibration: `counter` against `reference` (shaped by `shape`), after a random slice of
/// one counter tick of true time (so that seeds differ in the counter's phase, not only in
/// its start count).
fn run(
    seed: u64,
    counter: SimTimer,
    reference: SimTimer,
    shape: impl FnOnce(&mut Shaped<'_>),
    config: Config,
) -> (Result<Calibration, CalibrationError>, u64, Duration) {
    let world = SimWorld::new(seed);
    let tick_ps = 1_000_000_000_000_000 / counter.nominal_millihz().max(1);
    world.advance_ps(world.random_below(tick_ps));
    let start = world.random();
    let c = SimCounter::new(&world, counter.with_start_ticks(start));
    let mut r = Shaped::new(&world, reference.with_start_ticks(start.rotate_left(29)));
    shape(&mut r);
    let t0 = world.now();
    let result = calibrate(&c, r, config);
    (result, c.timer().true_millihz(), world.now() - t0)
}

/// Tallies of a set of runs.
#[derive(Default)]
struct Tally {
    runs: u64,
    misses: u64,
    errors: Vec<String>,
    worst: f64,
    ratios: Vec<f64>,
}

impl Tally {
    fn add(&mut self, what: &str, result: Result<Calibration, CalibrationError>, truth: u64) {
        self.runs += 1;
        match result {
            Ok(cal) => {
                let e = err_ppb(&cal, truth);
                let bound = cal.frequency.accuracy().bound_ppb();
                let ratio = e.unsigned_abs() as f64 / bound.max(1) as f64;
                self.ratios.push(ratio);
                if ratio > self.worst {
                    self.worst = ratio;
                }
                if e.unsigned_abs() > bound {
                    self.misses += 1;
                    eprintln!("MISS {what}: error {e} ppb, bound {bound} ppb ({cal})");
                }
            }
            Err(e) => self.errors.push(format!("{what}: {e:?}")),
        }
    }

    fn report(&mut self, name: &str) {
        self.ratios.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let q = |p: f64| {
            self.ratios
                .get(((self.ratios.len() as f64 - 1.0) * p).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        eprintln!(
            "{name}: {} runs, {} misses, {} errors, |error|/bound p50 {:.3} p99 {:.3} max {:.3}",
            self.runs,
            self.misses,
            self.errors.len(),
            q(0.5),
            q(0.99),
            self.worst
        );
    }
}

/// Finding 1: a 1 MHz counter read in 100 ns and a 14.318 MHz HPET-class reference read in
/// 800 ns, no jitter, so that one sample takes 1 µs·(1 + ε) for ε of 1 to 20 ppm: each bin's
/// rounding of the counter drifts slowly across the window, and a fit that takes it for a rate
/// missed its bound in 97 % of the runs at ε = 1 ppm (issue 27).
#[test]
fn a_cadence_in_step_with_a_coarse_counter_is_covered() {
    let mut t = Tally::default();
    for eps_ppm in [1u64, 2, 5, 10, 20] {
        for seed in 0..40 {
            let (result, truth, _) = run(
                seed * 31 + eps_ppm,
                SimTimer::new(1_000_000).with_read_cost(Duration::from_nanos(100), Duration::ZERO),
                SimTimer::new(14_318_180).with_read_cost(Duration::from_nanos(800), Duration::ZERO),
                |r| r.extra_ps = eps_ppm, // 1 ps per µs is 1 ppm
                Config::new(),
            );
            t.add(&format!("ε {eps_ppm} ppm seed {seed}"), result, truth);
        }
    }
    t.report("cadence in step with a 1 MHz counter");
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    assert!(
        t.misses * 100 <= t.runs,
        "{} of {} runs outside their bound (worst |error|/bound {:.2})",
        t.misses,
        t.runs,
        t.worst
    );
}

/// Finding 2: an ACPI PM reference that gains 1, 2 or 5 ticks at 5, 9, 13 and 17 ms of a
/// 20 ms calibration of a 2.4 GHz counter: each step is far inside one sample's tolerance, and
/// together they look like a rate (issue 27: 66.9 ppm of error under a 55.9 ppm bound, no
/// error returned; 60 of 60 runs missed). Also two steps of 2 ticks, and eight of 3; and five
/// to eight evenly spread steps of one tick, whose sawtooth (teeth of about five bins) showed
/// neither correlation nor lopsided jumps: `cargo xtask sweep` found 13 of 400 runs of 2–8
/// steps outside their bound, by up to 15.6× (110 ppm of error under ±8.6 ppm for seven steps);
/// with the fit before, this test's 160 runs had 19 outside, worst |error|/bound 18.2.
#[test]
fn several_small_reference_steps_yield_an_error_or_a_covering_bound() {
    let mut t = Tally::default();
    let patterns: [(&[u64], u64); 8] = [
        (&[5, 9, 13, 17], 1),
        (&[5, 9, 13, 17], 2),
        (&[5, 9, 13, 17], 5),
        (&[6, 12], 2),
        (&[3, 5, 7, 9, 11, 13, 15, 17], 3),
        (&[3, 6, 10, 13, 16], 1),
        (&[2, 5, 7, 10, 12, 15, 17], 1),
        (&[2, 4, 6, 8, 11, 13, 15, 17], 1),
    ];
    for (at_ms, by) in patterns {
        for seed in 0..20 {
            let (result, truth, _) = run(
                seed * 7 + by + at_ms.len() as u64 * 1000,
                SimTimer::new(2_400_000_000),
                SimTimer::acpi_pm(),
                |r| {
                    r.steps = at_ms
                        .iter()
                        .map(|ms| (Duration::from_millis(*ms), by))
                        .collect()
                },
                Config::new()
                    .with_target_ppb(0)
                    .with_max_duration(Duration::from_millis(20)),
            );
            let what = format!("{} steps of +{by} ticks, seed {seed}", at_ms.len());
            match result {
                // A typed error is an honest answer to a reference that jumps.
                Err(e) => eprintln!("{what}: {e:?}"),
                ok => t.add(&what, ok, truth),
            }
        }
    }
    t.report("small ACPI PM steps");
    assert!(
        t.misses * 100 <= t.runs,
        "{} of {} runs returned a rate outside their bound (worst |error|/bound {:.2})",
        t.misses,
        t.runs,
        t.worst
    );
}

/// Findings 3 and 4: fault-free counters of 1–10 kHz against a 14.318 MHz reference read in
/// about 0.5 µs (so hundreds of samples see the same count) calibrate, within their bound:
/// no `Discontinuity` (issue 27: 20 of 20 runs at 2 kHz), and a counter at `Frequency::MIN_HZ`
/// is no `ImplausibleRate` (33 of 40 runs, measured a few dozen ppm low of the clamped range).
#[test]
fn slow_counters_calibrate_without_spurious_errors() {
    let mut t = Tally::default();
    for hz in [Frequency::MIN_HZ, 2_000, 5_000, 10_000] {
        for seed in 0..20 {
            let (result, truth, _) = run(
                seed * 13 + hz,
                SimTimer::new(hz),
                SimTimer::new(14_318_180)
                    .with_read_cost(Duration::from_nanos(500), Duration::from_nanos(100)),
                |_| {},
                Config::new(),
            );
            t.add(&format!("{hz} Hz seed {seed}"), result, truth);
        }
    }
    t.report("1-10 kHz counters");
    assert!(t.errors.is_empty(), "{:#?}", t.errors);
    assert!(t.misses * 100 <= t.runs, "{} misses", t.misses);
}

/// Tightness where a reference is far coarser than the sampling (issue 27 item 2): a 1 kHz
/// tick read every microsecond or so. The window's bins were cut at fixed sample counts,
/// through a tick's samples, whose rounding then shifted the bin means by up to a fraction of
/// a tick: the bound was ±14 % (141 000 ppm) for errors of 1–4 ppm in the sweep, and here
/// (100 ms) up to ±35 % ("a bound of 353772219 ppb"). Bins now close where both counts move:
/// the bound must stay within 100 ppm, and hold.
#[test]
fn a_coarse_reference_gets_a_bound_near_its_error() {
    let mut t = Tally::default();
    let mut widest = 0;
    for seed in 0..6 {
        let (result, truth, _) = run(
            seed * 17 + 5,
            SimTimer::new(2_000_000_000 + seed * 300_000_000),
            SimTimer::new(1_000)
                .with_bits(32)
                .with_read_cost(Duration::from_nanos(1_000), Duration::from_nanos(300)),
            |_| {},
            Config::new()
                .with_target_ppb(0)
                .with_max_duration(Duration::from_millis(100)),
        );
        if let Ok(cal) = &result {
            widest = widest.max(cal.frequency.accuracy().bound_ppb());
        }
        t.add(&format!("1 kHz tick seed {seed}"), result, truth);
    }
    t.report("1 kHz tick reference");
    assert!(t.errors.is_empty(), "{:#?}", t.errors);
    assert_eq!(t.misses, 0);
    assert!(widest <= 100_000, "a bound of {widest} ppb");
}

/// Finding 4 on its own: a counter at exactly `Frequency::MIN_HZ`, 40 seeds.
#[test]
fn a_counter_at_min_hz_is_not_implausible() {
    let mut t = Tally::default();
    for seed in 0..40 {
        let (result, truth, _) = run(
            seed,
            SimTimer::new(Frequency::MIN_HZ),
            SimTimer::new(14_318_180)
                .with_read_cost(Duration::from_nanos(500), Duration::from_nanos(100)),
            |_| {},
            Config::new(),
        );
        t.add(&format!("seed {seed}"), result, truth);
    }
    t.report("1 kHz counter");
    assert!(t.errors.is_empty(), "{:#?}", t.errors);
    assert!(t.misses * 100 <= t.runs, "{} misses", t.misses);
}

/// Finding 5: a reference that runs far slower than it declares ends the calibration with
/// `ImplausibleRate` within two of its own steps (true time), as `Config::with_max_duration`
/// states for a counter that would seem more than 2¼ times the highest plausible rate: here
/// well within `max_duration` (issue 27: 0.3 s at 1 000 times slower with a 100 ms
/// `max_duration`, 18 s at 100 000; a 1 kHz reference declared as 100 GHz had not finished
/// after 10.8 s).
#[test]
fn a_reference_slower_than_declared_ends_in_time() {
    const MAX: Duration = Duration::from_millis(100);
    let cases = [
        // (declared Hz, true Hz, counter Hz)
        (14_318_180u64, 14_318, 3_000_000_000u64),
        (14_318_180, 143, 3_000_000_000),
        (3_579_545, 3_580, 24_000_000),
        (100_000_000_000, 1_000, 3_000_000_000),
        (100_000_000_000, 1_000, 1_000_000),
    ];
    let mut failures = Vec::new();
    for (i, (declared, actual, counter_hz)) in cases.into_iter().enumerate() {
        // Two of the reference's true steps, and a read's worth of slack.
        let limit = Duration::from_nanos(2_000_000_000 / actual + 2_000).min(MAX);
        for seed in 0..4u64 {
            // True rate = declared · (1 + error): the error that makes it `actual`.
            let error_ppb =
                ((actual as i128 - declared as i128) * 1_000_000_000 / declared as i128) as i64;
            let outcome = std::panic::catch_unwind(|| {
                run(
                    seed * 5 + i as u64,
                    SimTimer::new(counter_hz),
                    SimTimer::new(declared)
                        .with_error_ppb(error_ppb)
                        .with_read_cost(Duration::from_nanos(500), Duration::from_nanos(100)),
                    |r| r.deadline = Some(Duration::from_secs(2)),
                    Config::new().with_max_duration(MAX),
                )
            });
            let what = format!("{actual} Hz declared as {declared} Hz, {counter_hz} Hz counter");
            match outcome {
                Ok((Err(e @ CalibrationError::ImplausibleRate { .. }), _, took))
                    if took <= limit =>
                {
                    eprintln!("ok: {what}: {e:?} after {took:?}")
                }
                Ok((r, _, took)) => {
                    failures.push(format!("{what}: {r:?} after {took:?}, limit {limit:?}"))
                }
                Err(_) => failures.push(format!("{what}: no result within 2 s")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "not ImplausibleRate within two reference steps:\n{}",
        failures.join("\n")
    );
}
