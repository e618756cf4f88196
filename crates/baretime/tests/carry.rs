//! Promise 2 of the `Clock` ("time moves with the counter at the rate in force") over many
//! writes: however many `update`s and `recalibrate`s run, and however close together, the
//! clock's time is the counter's ticks × the tick length at the rate in force as they passed,
//! within a bound that does not grow with the number of writes.
//!
//! Found by `tests/attack.rs` (a0, a0c): each write based its next timeline on the floor of
//! the time at its close point and dropped the fraction of a nanosecond, up to 1 ns per write.
//! A 3-bit counter at 2 000 000 001 Hz updated every tick stood still (1000 updates, 499 ns of
//! counter time, `now()` 0) and a deadline a tick away never fired; at any rate, a clock
//! updated N times lost up to N ns.
//!
//! The bound: a reading is at most the counter's time (it never runs ahead), and less than
//! 2 ns below it (the floor of the reading itself, and the fraction of a nanosecond at the
//! base, which the writer carries into the next timeline and readers do not add). The
//! counter's time is computed here exactly (in 10^-9 ns), not with the clock's fixed point.
//! The handover is part of the rate in force: a write at counter value `t` closes the old
//! timeline at `t + margin` (the smaller of the two rates' margins, 20 µs in ticks, 1..=wrap/16)
//! and the new rate runs from there.

use std::cell::Cell;

use baretime::{Accuracy, Clock, Counter, Frequency, Instant, Scale, Source, Width, LAG_NS};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// The handover margin's time ([`LAG_NS`] is the same 20 µs).
const HANDOVER_NS: u64 = LAG_NS;
/// The model's unit, 10^-9 ns: a tick is 10^21 / millihz units.
const UNITS_PER_NS: u128 = 1_000_000_000;
const UNITS_MILLIHZ: u128 = 1_000_000_000_000 * UNITS_PER_NS;

/// A counter the test moves (true ticks, never wrapped: reads are masked to the width), and
/// that also moves `per_read` ticks on every read, as a real counter does between reads.
struct Sim {
    t: Cell<u64>,
    per_read: u64,
    bits: u32,
}

impl Counter for Sim {
    fn ticks(&self) -> u64 {
        let t = self.t.get();
        self.t.set(t + self.per_read);
        t & Width::new(self.bits).mask()
    }
    fn bits(&self) -> u32 {
        self.bits
    }
}

fn freq(millihz: u64) -> Frequency {
    Frequency::from_millihz(millihz, Source::User, Accuracy::Exact).expect("a rate in range")
}

/// The handover margin in ticks at `millihz` on `bits` bits, as the clock sizes it.
fn margin(bits: u32, millihz: u64) -> u64 {
    Scale::new(freq(millihz))
        .ns_to_ticks_ceil(HANDOVER_NS)
        .clamp(1, (Width::new(bits).mask() >> 4).max(1))
}

/// The timeline's deadline, as an offset from its base: half the wrap (2^62 − 1 for 64 bits).
fn deadline(bits: u32) -> u64 {
    (Width::new(bits).mask() >> 1).min((1 << 62) - 1)
}

/// The counter's time, exactly: the ticks that passed at the rate in force as they passed,
/// with the rate switching at each write's close point.
struct Model {
    /// The close point of the latest write (true ticks) and the time there (units).
    base: u64,
    base_units: u128,
    /// The rate from `base` on, and the one before it (in force before `base`).
    millihz: u64,
    before: u64,
}

impl Model {
    fn new(start: u64, millihz: u64) -> Model {
        Model {
            base: start,
            base_units: 0,
            millihz,
            before: millihz,
        }
    }

    /// Units at true counter value `t` (from the previous close point on).
    fn at(&self, t: u64) -> u128 {
        if t >= self.base {
            self.base_units + u128::from(t - self.base) * UNITS_MILLIHZ / u128::from(self.millihz)
        } else {
            self.base_units - u128::from(self.base - t) * UNITS_MILLIHZ / u128::from(self.before)
        }
    }

    /// A write at true counter value `t`, closing at `t + m`, to `millihz`.
    fn write(&mut self, t: u64, m: u64, millihz: u64) {
        let c = t + m;
        self.base_units = self.at(c);
        self.base = c;
        self.before = self.millihz;
        self.millihz = millihz;
    }
}

/// `now` against the counter's time `units` (at the reading's own counter value): never
/// ahead, less than 2 ns behind (+1 ns for the models' own rounding).
fn check(now: Instant, units: u128, what: &dyn Fn() -> String) -> Result<(), TestCaseError> {
    let ns = u128::from(now.as_nanos());
    let floor = units / UNITS_PER_NS;
    let ceil = units.div_ceil(UNITS_PER_NS);
    prop_assert!(
        ns <= ceil,
        "ahead of the counter: {ns} ns, counter time {floor}+ ns; {}",
        what()
    );
    prop_assert!(
        ns + 2 >= floor,
        "behind the counter by {} ns (counter time {floor} ns, clock {ns} ns); {}",
        floor - ns,
        what()
    );
    Ok(())
}

/// `writes` writes on a counter that the test moves by hand (`per_read` 0), one of `rates`
/// (millihz) per write (an update where it is the rate in force), `now()` checked after
/// every write. Before each write the counter moves on by at least a tick, and to the newest
/// base at least (a writer before it waits for it), then by `steps[i]` more, modulo what the
/// interval leaves (so no write is late): with `steps` 0, a write every tick, or as soon as
/// the counter reaches the base.
fn run_manual(
    bits: u32,
    start: u64,
    rates: &[u64],
    steps: &[u64],
    writes: usize,
) -> Result<(), TestCaseError> {
    let sim = Sim {
        t: Cell::new(start),
        per_read: 0,
        bits,
    };
    let first = rates[0];
    let clock = Clock::new(&sim, freq(first));
    let mut model = Model::new(start, first);
    let mut rate = first;
    for i in 0..writes {
        let next = rates[i % rates.len()];
        let m = margin(bits, rate).min(margin(bits, next));
        // How far past the base the counter may be at a write: the interval's ticks
        // (deadline − margin − 1; at most 2^32 here, for the model's arithmetic).
        let room = (deadline(bits) - margin(bits, rate) - 1).min(1 << 32);
        let lo = (sim.t.get() + 1).max(model.base) - model.base;
        let d = lo + steps[i % steps.len()] % (room.saturating_sub(lo) + 1);
        let t = model.base + d;
        sim.t.set(t);
        let was = rate;
        let what = move || {
            format!(
                "{bits} bits, write {i} of {writes} at tick {t} ({d} past the base), \
                 {was} → {next} mHz, margin {m}"
            )
        };
        let result = if next == rate {
            clock.update()
        } else {
            clock.recalibrate(freq(next))
        };
        prop_assert_eq!(result, Ok(()), "{}", what());
        // An update whose reading is at the base does nothing (it returns `Ok`); one past it,
        // however little, writes (an update that did nothing there left the base up to a
        // margin before it, and the next, an interval later, late: `Clock::update`'s docs).
        if next != rate || d > 0 {
            model.write(t, m, next);
            rate = next;
        }
        check(clock.now(), model.at(t), &what)?;
    }
    prop_assert_eq!(clock.health().late_updates, 0);
    Ok(())
}

/// Updates on a counter that moves `per_read` ticks on every read, as fast as they can be
/// called, `now()` checked after each.
fn run_moving(bits: u32, start: u64, millihz: u64, per_read: u64, writes: usize) {
    let sim = Sim {
        t: Cell::new(start),
        per_read,
        bits,
    };
    let clock = Clock::new(&sim, freq(millihz));
    // The clock read the counter once at its start, which moved it on.
    let zero = start;
    for i in 0..writes {
        assert_eq!(
            clock.update(),
            Ok(()),
            "{bits} bits, {millihz} mHz, write {i}"
        );
        let before = sim.t.get();
        let now = clock.now();
        let after = sim.t.get();
        let lo = u128::from(before - zero) * UNITS_MILLIHZ / u128::from(millihz);
        let hi = u128::from(after - zero) * UNITS_MILLIHZ / u128::from(millihz);
        let ns = u128::from(now.as_nanos());
        assert!(
            ns <= hi.div_ceil(UNITS_PER_NS) && ns + 2 >= lo / UNITS_PER_NS,
            "{bits} bits, {millihz} mHz, {per_read} ticks a read, write {i}: clock {ns} ns, \
             counter time {}..={} ns",
            lo / UNITS_PER_NS,
            hi.div_ceil(UNITS_PER_NS)
        );
    }
    assert_eq!(clock.health().late_updates, 0);
}

/// Rates at the edges the attack found, and the crate's whole range (millihz).
const RATES_HZ: [u64; 14] = [
    Frequency::MIN_HZ,
    32_768,
    1_193_182,
    999_999_999,
    1_000_000_000,
    1_000_000_001,
    2_000_000_000,
    2_000_000_001,
    2_999_999_999,
    3_000_000_000,
    7_000_000_000,
    84_000_000_000,
    99_999_999_999,
    Frequency::MAX_HZ,
];

/// Every width 3–16 (and 24, 32, 64) at every rate above, updated as often as the counter
/// lets a write do something (one tick past the newest base, for a margin of one tick: every
/// tick), 3000 times: the clock keeps the counter's time to within 2 ns. Before the carry a
/// 3-bit counter at 2 000 000 001 Hz stood still, and every other configuration lost up to
/// 1 ns per write (at 1 kHz on 16 bits: 3000 writes, 1.5 µs).
#[test]
fn updates_as_often_as_they_act_keep_the_counters_time() {
    let widths = (3..=16).chain([24, 32, 64]);
    for bits in widths {
        for hz in RATES_HZ {
            let millihz = hz * 1000;
            // Steps past the base of 0 (the write acts as soon as it can), 1, and the most
            // the interval allows.
            run_manual(bits, 5, &[millihz], &[0, 1, u64::MAX], 3000)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The same with a counter that moves a tick on every read (a real counter, read by nobody
/// but the writer, which updates back to back): widths whose margin fits a write's reads.
#[test]
fn back_to_back_updates_on_a_moving_counter_keep_its_time() {
    for bits in (8..=16).chain([32, 64]) {
        for hz in RATES_HZ {
            for per_read in [1, 2] {
                if margin(bits, hz * 1000) < 16 * per_read {
                    continue;
                }
                run_moving(bits, 3, hz * 1000, per_read, 3000);
            }
        }
    }
}

/// The bound does not grow with the number of writes: 100 000 updates at every tick of a
/// 3-bit counter at 2 000 000 001 Hz (a tick 0.4999999998 ns, a wrap 4 ns).
#[test]
fn a_hundred_thousand_updates_lose_nothing() {
    run_manual(3, 1, &[2_000_000_001_000], &[0], 100_000).unwrap_or_else(|e| panic!("{e}"));
    run_manual(16, 1, &[Frequency::MAX_HZ * 1000], &[0], 100_000).unwrap_or_else(|e| panic!("{e}"));
}

/// Any width 3–16 (and 64), any rates in the crate's range (log-uniform, the ends, and near
/// the sub-nanosecond edges), updates and recalibrations in any order, at any spacing the
/// interval allows: the counter's time at the rates in force, within 2 ns, after every write.
#[test]
fn any_writes_at_any_rates_keep_the_counters_time() {
    let rate = prop_oneof![
        Just(Frequency::MIN_HZ * 1000),
        Just(Frequency::MAX_HZ * 1000),
        (0u32..=1 << 20).prop_map(|x| {
            // log-uniform in MIN_HZ..=MAX_HZ, in millihz.
            let lo = ((Frequency::MIN_HZ * 1000) as f64).ln();
            let hi = ((Frequency::MAX_HZ * 1000) as f64).ln();
            let v = (lo + (hi - lo) * f64::from(x) / f64::from(1u32 << 20)).exp() as u64;
            v.clamp(Frequency::MIN_HZ * 1000, Frequency::MAX_HZ * 1000)
        }),
        (1_000_000_000u64..=100_000_000_000).prop_map(|hz| hz * 1000 + hz % 1000),
    ];
    let bits = prop_oneof![3u32..=16, Just(64)];
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(
                bits,
                any::<u64>(),
                prop::collection::vec(rate, 1..4),
                prop::collection::vec(any::<u64>(), 1..5),
            ),
            |(bits, start, rates, steps)| {
                // A start near the top of the counter's range wraps through it (64 bits too).
                let start = start % (u64::MAX / 2);
                // Each rate a few times in a row: updates between recalibrations.
                let rates: Vec<u64> = rates.iter().flat_map(|&r| [r, r, r]).collect();
                run_manual(bits, start, &rates, &steps, 400)
            },
        )
        .unwrap();
}
