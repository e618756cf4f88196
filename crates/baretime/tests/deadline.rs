//! Deadlines in counter ticks (`Clock::deadline`, `Clock::check`) on a simulated counter of 16,
//! 32 and 64 bits that only the test moves: each deadline is armed at a random instant, the
//! "interrupt" moves the counter to exactly the armed tick, and the wake handler runs
//! `check`; between arming and the wake come recalibrations by ±100 ppm and by large ratios,
//! rebases forward and back (and, at 64 bits, counter resets before them), counter wraps and
//! the periodic `update` that narrow counters need.
//!
//! Asserted at every wake: `Fired` only when `now()` is at or past the instant (0 early
//! wakes); a re-arm only after a write since the last arm, or from a tick armed at the
//! furthest point (so every deadline fires within a bounded number of re-arms); and where no
//! write came in between and the tick was not clamped, the tick is exact: the clock reads
//! less than the instant one tick before it, at least the instant at it.

use std::cell::Cell;

use baretime::{Accuracy, Clock, Frequency, Source, Wake, Width};
use proptest::prelude::*;

/// One step of a schedule.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Arm a deadline (if none is pending) at now plus a distance drawn from `frac`
    /// (thousandths, cubed: mostly near ones) of the span, or behind now if `past`.
    Arm { frac: u32, past: bool },
    /// The counter moves part of the way to the armed tick (never reaching it).
    Advance { permille: u32 },
    /// The interrupt: the counter reaches the armed tick, the handler runs `check`.
    Fire,
    /// A write; with `recheck` the writer then runs `check` on the pending deadline and
    /// re-arms with what it returns (as the docs advise).
    Write { write: Write, recheck: bool },
}

#[derive(Clone, Copy, Debug)]
enum Write {
    /// Recalibrate by this many ppm (−100..=100).
    Ppm(i32),
    /// Recalibrate by a ratio of 2..=16, up or down (down instead of up, and up instead of
    /// down, where the rate would leave 1/64..=64 times the start).
    Ratio {
        up: bool,
        r: u64,
    },
    /// Rebase to now plus `frac` thousandths of the span.
    Forward {
        frac: u32,
    },
    /// Rebase to now less `frac` thousandths of the span (the timeline continues).
    Back {
        frac: u32,
    },
    /// 64-bit counters: reset the counter to `to` (below 2^40), then rebase to now plus
    /// `frac` thousandths of the span (a resume from suspend). Narrow: a plain update.
    Reset {
        to: u64,
        frac: u32,
    },
    Update,
}

fn op() -> impl Strategy<Value = Op> {
    let write = prop_oneof![
        (-100i32..=100).prop_map(Write::Ppm),
        (any::<bool>(), 2u64..=16).prop_map(|(up, r)| Write::Ratio { up, r }),
        (0u32..=1000).prop_map(|frac| Write::Forward { frac }),
        (0u32..=1000).prop_map(|frac| Write::Back { frac }),
        (0u64..1 << 40, 0u32..=1000).prop_map(|(to, frac)| Write::Reset { to, frac }),
        Just(Write::Update),
    ];
    prop_oneof![
        3 => (0u32..=1000, prop::bool::weighted(0.1)).prop_map(|(frac, past)| Op::Arm { frac, past }),
        2 => (0u32..1000).prop_map(|permille| Op::Advance { permille }),
        4 => Just(Op::Fire),
        3 => (write, any::<bool>()).prop_map(|(write, recheck)| Op::Write { write, recheck }),
    ]
}

/// What one schedule saw.
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    deadlines: u64,
    fired: u64,
    /// Wakes at an exact tick where the clock read less than the instant (a write came
    /// between): re-armed, not fired.
    early_caught: u64,
    /// Wakes at a tick armed at the furthest point, before the instant: re-armed.
    clamped_rearms: u64,
    /// Wakes where a tick before the armed one was checked to read less than the instant.
    exact_checked: u64,
    writes: u64,
}

fn freq(millihz: u64) -> Frequency {
    let millihz = millihz.clamp(Frequency::MIN_HZ * 1000, Frequency::MAX_HZ * 1000);
    Frequency::from_millihz(millihz, Source::User, Accuracy::Exact).unwrap()
}

/// The pending deadline and what the test knows of how it was armed.
#[derive(Clone, Copy, Debug)]
struct Armed {
    deadline: baretime::Deadline,
    /// Ticks ahead of the counter when armed.
    ahead: u64,
    /// Whether the clock already read the instant when it was armed.
    due: bool,
    /// Writes since it was armed (every `update` call counts, published or not).
    writes: u64,
    rearms: u64,
}

/// Runs one schedule on a `bits`-bit counter starting at `start` ticks and `millihz`.
fn run(bits: u32, start: u64, millihz: u64, ops: &[Op]) -> Result<Stats, TestCaseError> {
    let width = Width::new(bits);
    let wide = bits == 64;
    let ticks = Cell::new(width.value(start));
    let counter = baretime::FnCounter::new(|| ticks.get(), bits);
    let clock = Clock::new(&counter, freq(millihz));
    let mut millihz = clock.scale().millihz();
    let band = (millihz / 64, millihz.saturating_mul(64));
    // Updates of a narrow counter come every `step` ticks at most: half the shortest update
    // interval any rate gives (the handover margin is at most 1/16 of the wrap).
    let step = if wide {
        u64::MAX
    } else {
        (width.half() - (width.mask() >> 4) - 1) / 2
    };
    let mut since_update = 0u64;
    let mut stats = Stats::default();
    let mut pending: Option<Armed> = None;

    // The span deadlines and rebases are drawn from: three update intervals of a narrow
    // counter (each deadline re-arms a few times), 10 s at 64 bits.
    let span = |clock: &Clock<_>| -> u64 {
        if wide {
            10_000_000_000
        } else {
            (clock.update_interval().as_nanos() as u64).saturating_mul(3)
        }
    };
    let distance = |frac: u32, span: u64| -> u64 {
        let f = u128::from(frac);
        (u128::from(span) * f * f * f / 1_000_000_000) as u64
    };

    // The counter moves forward by `n` ticks; a narrow one gets its periodic update on time.
    let advance =
        |n: u64, since_update: &mut u64, stats: &mut Stats, pending: &mut Option<Armed>| {
            let mut n = n;
            while n > 0 {
                let chunk = n.min(step - *since_update);
                ticks.set(width.add_ticks(ticks.get(), chunk));
                n -= chunk;
                *since_update += chunk;
                if *since_update >= step {
                    assert_eq!(clock.update(), Ok(()), "a narrow counter updated on time");
                    *since_update = 0;
                    stats.writes += 1;
                    if let Some(p) = pending.as_mut() {
                        p.writes += 1;
                    }
                }
            }
        };
    // How far the counter is from the armed tick: a narrow compare fires when the two are
    // equal, a 64-bit one when the counter reaches it.
    let to_tick = |tick: u64| -> u64 {
        if wide {
            tick.saturating_sub(ticks.get())
        } else {
            width.delta(ticks.get(), tick)
        }
    };
    // Arms `deadline` (fresh or re-armed) and notes how.
    let arm = |deadline: baretime::Deadline, writes: u64, rearms: u64| -> Armed {
        Armed {
            deadline,
            ahead: to_tick(deadline.ticks()),
            due: clock.now() >= deadline.at(),
            writes,
            rearms,
        }
    };

    let step_op = |op: Op,
                   millihz: &mut u64,
                   since_update: &mut u64,
                   stats: &mut Stats,
                   pending: &mut Option<Armed>|
     -> Result<(), TestCaseError> {
        match op {
            Op::Arm { frac, past } => {
                if pending.is_some() {
                    return Ok(());
                }
                let now = clock.now();
                let d = Duration::from_nanos(distance(frac, span(&clock)));
                let at = if past { now.saturating_sub(d) } else { now + d };
                let deadline = clock.deadline(at).unwrap();
                prop_assert_eq!(deadline.at(), at);
                prop_assert!(deadline.ticks() <= width.mask());
                stats.deadlines += 1;
                *pending = Some(arm(deadline, 0, 0));
            }
            Op::Advance { permille } => {
                if let Some(p) = *pending {
                    let d = to_tick(p.deadline.ticks());
                    let n = (u128::from(d) * u128::from(permille) / 1000) as u64;
                    advance(n.min(d.saturating_sub(1)), since_update, stats, pending);
                } else {
                    advance(u64::from(permille) * 7, since_update, stats, pending);
                }
            }
            Op::Fire => {
                let Some(p) = *pending else { return Ok(()) };
                let at = p.deadline.at();
                let d = to_tick(p.deadline.ticks());
                // Exact where nothing came between: a tick before, the clock reads less.
                let exact = p.writes == 0 && !p.due && p.ahead < step.min(1 << 60);
                if exact && d >= 1 && *since_update + d < step {
                    advance(d - 1, since_update, stats, pending);
                    let before = clock.now();
                    prop_assert!(
                        before < at,
                        "a tick before the deadline the clock reads {:?} >= {:?} ({:?})",
                        before,
                        at,
                        p
                    );
                    advance(1, since_update, stats, pending);
                    stats.exact_checked += 1;
                } else {
                    advance(d, since_update, stats, pending);
                }
                let p = pending.unwrap_or(p);
                // At the tick (a 64-bit compare: at or past it, after a reset forward).
                prop_assert!(
                    ticks.get() == p.deadline.ticks() || wide && ticks.get() > p.deadline.ticks()
                );
                let early = clock.now() < at;
                match clock.check(p.deadline) {
                    Wake::Fired => {
                        let now = clock.now();
                        prop_assert!(now >= at, "early wake: Fired at {:?} < {:?}", now, at);
                        stats.fired += 1;
                        *pending = None;
                    }
                    Wake::Rearm(next) => {
                        prop_assert!(clock.now() < at);
                        prop_assert_eq!(next.at(), at);
                        prop_assert!(early);
                        // A re-arm only after a write, or from a tick armed as far as the
                        // counter holds (half an update interval or more ahead).
                        let clamped = p.ahead >= step.min(1 << 60);
                        if clamped {
                            stats.clamped_rearms += 1;
                        } else {
                            stats.early_caught += 1;
                        }
                        prop_assert!(
                            p.writes > 0 || clamped,
                            "re-armed with no write since and an exact tick: {:?}",
                            p
                        );
                        prop_assert!(p.rearms < 100_000, "no end to re-arms: {:?}", p);
                        *pending = Some(arm(next, 0, p.rearms + 1));
                    }
                }
            }
            Op::Write { write, recheck } => {
                let now = clock.now();
                let span = span(&clock);
                let result = match write {
                    Write::Ppm(ppm) => {
                        let m = (i128::from(*millihz) * (1_000_000 + i128::from(ppm)) / 1_000_000)
                            as u64;
                        clock.recalibrate(freq(m))
                    }
                    Write::Ratio { up, r } => {
                        // Within 64 times the starting rate either way, so that a deadline
                        // drawn at one rate re-arms a bounded number of times at another.
                        let up = if up {
                            *millihz * r <= band.1
                        } else {
                            *millihz / r < band.0
                        };
                        let m = if up { *millihz * r } else { *millihz / r };
                        clock.recalibrate(freq(m))
                    }
                    Write::Forward { frac } => clock.rebase(
                        now + Duration::from_nanos(distance(frac, span)),
                        freq(*millihz),
                    ),
                    Write::Back { frac } => clock.rebase(
                        now.saturating_sub(Duration::from_nanos(distance(frac, span))),
                        freq(*millihz),
                    ),
                    Write::Reset { to, frac } if wide => {
                        ticks.set(to);
                        clock.rebase(
                            now + Duration::from_nanos(distance(frac, span)),
                            freq(*millihz),
                        )
                    }
                    Write::Reset { .. } | Write::Update => clock.update(),
                };
                prop_assert_eq!(result, Ok(()), "{:?}", write);
                *millihz = clock.scale().millihz();
                stats.writes += 1;
                if let Some(p) = pending.as_mut() {
                    p.writes += 1;
                }
                if let (true, Some(p)) = (recheck, *pending) {
                    match clock.check(p.deadline) {
                        Wake::Fired => {
                            prop_assert!(clock.now() >= p.deadline.at());
                            stats.fired += 1;
                            *pending = None;
                        }
                        Wake::Rearm(next) => *pending = Some(arm(next, 0, p.rearms)),
                    }
                }
            }
        }
        Ok(())
    };

    for &op in ops {
        step_op(
            op,
            &mut millihz,
            &mut since_update,
            &mut stats,
            &mut pending,
        )?;
    }
    // Drain: the last deadline fires, with no write but the periodic update.
    let mut fires = 0u32;
    while pending.is_some() {
        step_op(
            Op::Fire,
            &mut millihz,
            &mut since_update,
            &mut stats,
            &mut pending,
        )?;
        fires += 1;
        prop_assert!(fires < 100_000, "the last deadline never fired");
    }
    prop_assert_eq!(clock.health().late_updates, 0);
    Ok(stats)
}

use core::time::Duration;

/// `Width`'s wrapping add is crate-private; the test's own.
trait AddTicks {
    fn add_ticks(self, at: u64, n: u64) -> u64;
}
impl AddTicks for Width {
    fn add_ticks(self, at: u64, n: u64) -> u64 {
        self.value(at.wrapping_add(n))
    }
}

/// A rate in millihertz from 1 kHz to 100 GHz, spread over the decades.
fn rate() -> impl Strategy<Value = u64> {
    (0u32..=7, 1000u64..10_000).prop_map(|(decade, m)| 10u64.pow(decade) * m * 1000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn never_early_16(start in any::<u64>(), millihz in rate(), ops in prop::collection::vec(op(), 1..60)) {
        run(16, start, millihz, &ops)?;
    }

    #[test]
    fn never_early_32(start in any::<u64>(), millihz in rate(), ops in prop::collection::vec(op(), 1..60)) {
        run(32, start, millihz, &ops)?;
    }

    #[test]
    fn never_early_64(start in 0u64..1 << 40, millihz in rate(), ops in prop::collection::vec(op(), 1..60)) {
        run(64, start, millihz, &ops)?;
    }
}

/// The same schedules from a fixed seed, with the totals printed (`--nocapture`): how often a
/// wake came early and re-armed, and that none fired early.
#[test]
fn fixed_seed_totals() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[17; 32]),
    );
    let strategy = (
        prop::sample::select(vec![16u32, 32, 64]),
        0u64..1 << 40,
        rate(),
        prop::collection::vec(op(), 1..80),
    );
    let mut total = Stats::default();
    for _ in 0..600 {
        let (bits, start, millihz, ops) = strategy.new_tree(&mut runner).unwrap().current();
        let s = run(bits, start, millihz, &ops).unwrap();
        total.deadlines += s.deadlines;
        total.fired += s.fired;
        total.early_caught += s.early_caught;
        total.clamped_rearms += s.clamped_rearms;
        total.exact_checked += s.exact_checked;
        total.writes += s.writes;
    }
    eprintln!("deadline schedules: 600, {total:?}, early fires: 0");
    assert!(total.fired >= total.deadlines);
    assert!(
        total.early_caught > 0,
        "the schedules never made a wake early"
    );
    assert!(
        total.clamped_rearms > 0,
        "the schedules never armed the furthest point"
    );
    assert!(total.exact_checked > 0);
}

/// A fresh 64- or 16-bit clock at `hz` from tick 0, and the tick a deadline `at_ns` arms.
fn boundary(bits: u32, hz: u64, at_ns: u64) {
    let ticks = Cell::new(0u64);
    let counter = baretime::FnCounter::new(|| ticks.get(), bits);
    let clock = Clock::new(&counter, Frequency::exact_hz(hz).unwrap());
    let at = baretime::Instant::from_nanos(at_ns);
    let deadline = clock.deadline(at).unwrap();
    let tick = deadline.ticks();
    // Exact: one tick before, the clock reads less; at the tick, at least `at`.
    if tick > 0 {
        ticks.set(tick - 1);
        assert!(clock.now() < at, "{hz} Hz, {at_ns} ns: tick {tick} is late");
        assert!(matches!(clock.check(deadline), Wake::Rearm(d) if d.ticks() == tick));
    }
    ticks.set(tick);
    assert!(
        clock.now() >= at,
        "{hz} Hz, {at_ns} ns: tick {tick} is early"
    );
    assert_eq!(clock.check(deadline), Wake::Fired);
}

#[test]
fn rounding_at_the_boundary() {
    for hz in [
        1_000,
        32_768,
        1_000_000,
        1_193_182,
        24_000_000,
        2_300_000_000,
        100_000_000_000,
    ] {
        for at_ns in [
            0,
            1,
            2,
            999,
            1_000,
            1_001,
            30_517,
            30_518,
            838,
            839,
            1_500_500,
            123_456_789,
        ] {
            boundary(64, hz, at_ns);
            // 16 bits: within half an update interval (the furthest a deadline is armed).
            let half_interval = 16_383 * 1_000_000_000 / hz / 2;
            if at_ns < half_interval {
                boundary(16, hz, at_ns);
            }
        }
    }
    // 2.3 GHz: 1 ns is 2.3 ticks, rounded up to 3; 10 ns is 23 ticks exactly.
    let ticks = Cell::new(0u64);
    let counter = baretime::FnCounter::new(|| ticks.get(), 64);
    let clock = Clock::new(&counter, Frequency::exact_hz(2_300_000_000).unwrap());
    assert_eq!(
        clock
            .deadline(baretime::Instant::from_nanos(1))
            .unwrap()
            .ticks(),
        3
    );
    assert_eq!(
        clock
            .deadline(baretime::Instant::from_nanos(10))
            .unwrap()
            .ticks(),
        23
    );
}

#[test]
fn far_deadlines_arm_the_furthest_point() {
    // A 16-bit counter at 1 MHz wraps every 65.5 ms: a deadline 1 s away is armed at most
    // half an update interval ahead, re-arms from there, and fires at its tick.
    let ticks = Cell::new(60_000u64);
    let counter = baretime::FnCounter::new(|| ticks.get(), 16);
    let clock = Clock::new(&counter, Frequency::exact_hz(1_000_000).unwrap());
    let half_interval = clock.update_interval().as_nanos() as u64 / 1_000 / 2;
    let at = clock.now() + Duration::from_secs(1);
    let mut deadline = clock.deadline(at).unwrap();
    let mut wakes = 0;
    loop {
        let ahead = Width::new(16).delta(ticks.get(), deadline.ticks());
        assert!((1..=half_interval).contains(&ahead), "{ahead} ticks ahead");
        ticks.set(deadline.ticks());
        wakes += 1;
        // The wake handler keeps the narrow counter's clock on time.
        clock.update().unwrap();
        match clock.check(deadline) {
            Wake::Fired => break,
            Wake::Rearm(next) => deadline = next,
        }
    }
    assert!(clock.now() >= at && clock.now() < at + Duration::from_micros(2));
    assert!((61..=64).contains(&wakes), "{wakes} wakes"); // ~1 s / (16 ms)
}

#[test]
fn before_start_and_already_due() {
    let ticks = Cell::new(5u64);
    let counter = baretime::FnCounter::new(|| ticks.get(), 32);
    let clock = Clock::uninit(&counter);
    assert_eq!(
        clock.deadline(baretime::Instant::from_nanos(10)),
        Err(baretime::ClockError::NotStarted)
    );
    clock
        .start(Frequency::exact_hz(1_000_000).unwrap())
        .unwrap();
    ticks.set(1_005);
    // Already due: the tick is the counter's value, and the check fires at once.
    let due = clock
        .deadline(baretime::Instant::from_nanos(500_000))
        .unwrap();
    assert_eq!(due.ticks(), 1_005);
    assert_eq!(clock.check(due), Wake::Fired);
}

#[test]
fn a_late_narrow_clock_rearms_at_the_furthest_point() {
    // A 16-bit counter at 1 MHz whose updates stopped: time stands still at the timeline's
    // deadline, and a deadline past it re-arms half an update interval ahead (no storm of
    // wakes), never fires early, and fires once `update` runs again.
    let ticks = Cell::new(0u64);
    let counter = baretime::FnCounter::new(|| ticks.get(), 16);
    let clock = Clock::new(&counter, Frequency::exact_hz(1_000_000).unwrap());
    let half_interval = clock.update_interval().as_nanos() as u64 / 1_000 / 2;
    let at = baretime::Instant::from_nanos(40_000_000); // 40 ms: past the 32.7 ms deadline
    ticks.set(30_000);
    let deadline = clock.deadline(at).unwrap();
    ticks.set(40_000); // no update: late
    let stood = clock.now();
    assert!(stood < at);
    let Wake::Rearm(next) = clock.check(deadline) else {
        panic!("fired early")
    };
    assert_eq!(next.ticks(), 40_000 + half_interval);
    ticks.set(next.ticks());
    assert_eq!(clock.now(), stood, "time stands still until the next write");
    let Wake::Rearm(next) = clock.check(next) else {
        panic!("fired early")
    };
    assert_eq!(clock.update(), Err(baretime::ClockError::Late));
    let Wake::Rearm(next) = clock.check(next) else {
        panic!("fired early")
    };
    ticks.set(next.ticks());
    assert_eq!(clock.check(next), Wake::Fired);
    assert!(clock.now() >= at);
}

/// A writer stalled between closing the timeline and publishing the next (the interleaving
/// test's hook stalls it): the clock stands at the close point though the old timeline says
/// the instant is reached, so the deadline is re-armed a handover margin ahead (not at once,
/// which would be a storm of wakes for as long as the stall lasts), and fires once the write
/// is published.
#[cfg(all(debug_assertions, feature = "std"))]
#[test]
fn a_stalled_writer_rearms_a_margin_ahead() {
    use baretime::{__HookPoint, __test_hook, Deadline, FnCounter, Instant};
    use std::cell::RefCell;
    use std::sync::atomic::{AtomicU64, Ordering};

    static T: AtomicU64 = AtomicU64::new(0);
    type Stalled = Box<dyn FnOnce()>;
    thread_local! {
        /// What runs inside this thread's stalled write (once).
        static STALL: RefCell<Option<Stalled>> = const { RefCell::new(None) };
    }
    fn hook(point: __HookPoint) {
        if point == __HookPoint::WriteClosed {
            if let Some(stall) = STALL.with(|s| s.borrow_mut().take()) {
                stall();
            }
        }
    }

    let clock: &'static Clock<_> = Box::leak(Box::new(Clock::new(
        FnCounter::new(|| T.load(Ordering::SeqCst), 64),
        Frequency::exact_hz(1_000_000_000).unwrap(),
    )));
    T.store(1_000_000, Ordering::SeqCst);
    assert_eq!(clock.now(), Instant::from_nanos(1_000_000));
    let armed: &'static RefCell<Option<(Deadline, Instant)>> =
        Box::leak(Box::new(RefCell::new(None)));
    STALL.with(|s| {
        *s.borrow_mut() = Some(Box::new(move || {
            // Closed at the writer's reading plus 20 µs; the counter runs on 100 µs.
            T.store(1_100_000, Ordering::SeqCst);
            let stood = clock.now();
            assert_eq!(stood, Instant::from_nanos(1_020_000));
            let at = stood + Duration::from_micros(1);
            let deadline = clock.deadline(at).unwrap();
            assert_eq!(deadline.ticks(), 1_100_000 + 20_000, "a margin ahead");
            T.store(deadline.ticks(), Ordering::SeqCst);
            let Wake::Rearm(next) = clock.check(deadline) else {
                panic!("fired early: the clock stands at {:?}", clock.now())
            };
            assert_eq!(next.ticks(), 1_120_000 + 20_000);
            *armed.borrow_mut() = Some((next, at));
        }));
    });
    __test_hook::set(Some(hook));
    let written = clock.recalibrate(Frequency::exact_hz(1_001_000_000).unwrap());
    __test_hook::set(None);
    written.unwrap();
    let (next, at) = armed.borrow_mut().take().expect("the stall ran");
    T.store(next.ticks(), Ordering::SeqCst);
    assert_eq!(clock.check(next), Wake::Fired);
    assert!(clock.now() >= at);
}
