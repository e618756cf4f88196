//! Adversarial review of `Clock::deadline` / `Clock::check` and `CoarseClock`, designed from
//! their docs and public API only. Each test asserts a documented promise.

use std::cell::Cell;
use std::time::Duration;

use baretime::{
    Clock, ClockError, CoarseClock, Counter, Deadline, FnCounter, Frequency, Instant, Wake,
    MARK_GRANULE_NS,
};

/// The fastest rate at which a `bits`-bit counter wraps no faster than once per ms (so the
/// 20 µs handover margin fits well inside half a wrap).
fn cap(bits: u32, rate: u64) -> u64 {
    if bits >= 40 {
        rate
    } else {
        rate.min((1u64 << bits) * 1000).max(Frequency::MIN_HZ)
    }
}

fn hz(h: u64) -> Frequency {
    Frequency::exact_hz(h).unwrap()
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    fn rate(&mut self) -> u64 {
        // log-uniform in MIN_HZ..=MAX_HZ, with the ends often.
        match self.below(6) {
            0 => Frequency::MIN_HZ,
            1 => Frequency::MAX_HZ,
            _ => {
                let lo = (Frequency::MIN_HZ as f64).ln();
                let hi = (Frequency::MAX_HZ as f64).ln();
                let x = lo + (hi - lo) * (self.below(1 << 30) as f64 / (1u64 << 30) as f64);
                (x.exp() as u64).clamp(Frequency::MIN_HZ, Frequency::MAX_HZ)
            }
        }
    }
}

/// A counter the test moves: `true_ticks` only grows (or is reset on 64 bits); it reads
/// masked to `bits`.
struct Sim {
    t: Cell<u64>,
    reads: Cell<u64>,
    bits: u32,
}
impl Sim {
    fn new(bits: u32, start: u64) -> Self {
        Sim {
            t: Cell::new(start),
            reads: Cell::new(0),
            bits,
        }
    }
    fn mask(&self) -> u64 {
        if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
    fn read(&self) -> u64 {
        self.reads.set(self.reads.get() + 1);
        self.t.get() & self.mask()
    }
    /// Move forward to the counter value `to` (within the width): the least forward step.
    fn reach(&self, to: u64) {
        let m = self.mask();
        let d = to.wrapping_sub(self.t.get()) & m;
        if d <= m / 2 {
            self.t.set(self.t.get().wrapping_add(d));
        }
    }
}

/// Drive one deadline to `Fired`, moving the counter to each armed tick, running `update` in
/// the handler (as the docs advise). Asserts no early `Fired`; returns the re-arm count.
fn drive<C: Counter>(clock: &Clock<C>, sim: &Sim, mut d: Deadline, max: u64, log: &str) -> u64 {
    // The handler's `update` is a write: the docs allow one re-arm per write besides the
    // `⌈remaining / H⌉` far ones.
    let max = max.saturating_mul(2).saturating_add(4);
    let mut rearms = 0;
    loop {
        sim.reach(d.ticks());
        match clock.check(d) {
            Wake::Fired => {
                let now = clock.now();
                assert!(
                    now >= d.at(),
                    "early Fired: now {:?} < at {:?}; counter {}; {log}",
                    now,
                    d.at(),
                    sim.t.get()
                );
                return rearms;
            }
            Wake::Rearm(n) => {
                assert_eq!(n.at(), d.at(), "{log}");
                d = n;
                rearms += 1;
                assert!(
                    rearms <= max,
                    "no Fired after {max} re-arms; counter {}, tick {}, at {:?}, now {:?}; {log}",
                    sim.t.get(),
                    d.ticks(),
                    d.at(),
                    clock.now()
                );
            }
        }
        let _ = clock.update();
    }
}

/// Half the update interval in ns (the docs' `H`, in time), at least 1.
fn h_ns<C: Counter>(clock: &Clock<C>) -> u64 {
    // H in whole ticks (at least one), back in ns (rounded down).
    let rate_mhz = clock.scale().millihz() as u128;
    let ui_ticks = clock.update_interval().as_nanos() * rate_mhz / 1_000_000_000_000;
    let h_ticks = (ui_ticks / 2).max(1);
    ((h_ticks * 1_000_000_000_000 / rate_mhz) as u64).max(1)
}

#[test]
fn a1_every_width_every_rate_no_early_and_bounded() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for bits in 3..=64u32 {
        for _ in 0..40 {
            let rate = cap(bits, rng.rate());
            let start = rng.next()
                & if bits == 64 {
                    (1 << 40) - 1
                } else {
                    (1u64 << bits) - 1
                };
            let sim = Sim::new(bits, start);
            let c = FnCounter::new(|| sim.read(), bits);
            let clock = Clock::new(&c, hz(rate));
            let h = h_ns(&clock);
            let dist = rng.below(h.saturating_mul(20).min(1 << 50));
            let at = clock.now().saturating_add(Duration::from_nanos(dist));
            let d = clock.deadline(at).unwrap();
            let bound = dist / h + 4;
            drive(
                &clock,
                &sim,
                d,
                bound,
                &format!("bits {bits} rate {rate} start {start} dist {dist}"),
            );
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Arm(u64, bool),
    Advance(u64),
    Recal(u64),
    Forward(u64),
    Back(u64),
    Reset(u64, u64),
    Update,
    StepBack(u64),
    Fire,
    CheckMany,
}

fn fuzz(seed: u64, iters: u32, capped: bool) {
    let mut rng = Rng(seed | 1);
    for case in 0..iters {
        let bits = if rng.below(3) == 0 {
            64
        } else {
            3 + rng.below(62) as u32
        };
        let rate = if capped {
            cap(bits, rng.rate())
        } else {
            rng.rate()
        };
        let sim = Sim::new(
            bits,
            rng.next()
                & if bits == 64 {
                    (1 << 40) - 1
                } else {
                    (1u64 << bits) - 1
                },
        );
        let c = FnCounter::new(|| sim.read(), bits);
        let clock = Clock::new(&c, hz(rate));
        let mut log: Vec<String> = vec![format!(
            "case {case} bits {bits} rate {rate} start {}",
            sim.t.get()
        )];
        let mut pending: Option<Deadline> = None;
        let mut rearms_since_write = 0u64;
        for _ in 0..60 {
            let h = h_ns(&clock);
            let op = match rng.below(10) {
                0 | 1 => Op::Arm(
                    rng.below(h.saturating_mul(4).min(1 << 52)),
                    rng.below(5) == 0,
                ),
                2 => Op::Advance(rng.below(1000)),
                3 => Op::Recal(if capped {
                    cap(bits, rng.rate())
                } else {
                    rng.rate()
                }),
                4 => Op::Forward(rng.below(h.min(1 << 50))),
                5 => Op::Back(rng.below(h.min(1 << 50))),
                6 => Op::Reset(rng.below(1 << 40), rng.below(1 << 40)),
                7 => {
                    if bits == 64 {
                        Op::StepBack(rng.below(1 << 20))
                    } else {
                        Op::Update
                    }
                }
                8 => Op::CheckMany,
                _ => Op::Fire,
            };
            log.push(format!(
                "{op:?} [counter {} now {:?}]",
                sim.t.get(),
                clock.now()
            ));

            let mut wrote = false;
            match op {
                Op::Arm(dist, past) => {
                    if pending.is_none() {
                        let now = clock.now();
                        let at = if past {
                            now.saturating_sub(Duration::from_nanos(dist))
                        } else {
                            now.saturating_add(Duration::from_nanos(dist))
                        };
                        let d = clock.deadline(at).unwrap();
                        log.push(format!("  armed at {:?} tick {}", at, d.ticks()));
                        pending = Some(d);
                        rearms_since_write = 0;
                    }
                }
                Op::Advance(permille) => {
                    if let Some(d) = pending {
                        let m = sim.mask();
                        let delta = d.ticks().wrapping_sub(sim.t.get()) & m;
                        if delta <= m / 2 && delta > 0 {
                            let step = (delta as u128 * permille as u128 / 1000) as u64;
                            sim.t.set(sim.t.get().wrapping_add(step.min(delta - 1)));
                        }
                    }
                }
                Op::Recal(r) => {
                    let _ = clock.recalibrate(hz(r));
                    wrote = true;
                }
                Op::Forward(ns) => {
                    let _ = clock.rebase(
                        clock.now().saturating_add(Duration::from_nanos(ns)),
                        clock.scale_freq(),
                    );
                    wrote = true;
                }
                Op::Back(ns) => {
                    let _ = clock.rebase(
                        clock.now().saturating_sub(Duration::from_nanos(ns)),
                        clock.scale_freq(),
                    );
                    wrote = true;
                }
                Op::Reset(to, ns) => {
                    if bits == 64 {
                        sim.t.set(to);
                        let _ = clock.rebase(
                            clock.now().saturating_add(Duration::from_nanos(ns)),
                            clock.scale_freq(),
                        );
                    } else {
                        let _ = clock.update();
                    }
                    wrote = true;
                }
                Op::Update => {
                    let _ = clock.update();
                    wrote = true;
                }
                Op::StepBack(k) => {
                    // The counter reaches the tick, then steps back.
                    if let Some(d) = pending {
                        sim.reach(d.ticks());
                        sim.t.set(sim.t.get().saturating_sub(k));
                        match clock.check(d) {
                            Wake::Fired => {
                                let now = clock.now();
                                assert!(
                                    now >= d.at(),
                                    "early Fired after step back: now {now:?} at {:?}\n  {}",
                                    d.at(),
                                    log.join("\n  ")
                                );
                                pending = None;
                            }
                            Wake::Rearm(n) => pending = Some(n),
                        }
                        wrote = true; // the step back is a disturbance, not bounded by H
                    }
                }
                Op::CheckMany => {
                    if let Some(d) = pending {
                        let mut fired = false;
                        for _ in 0..50 {
                            match clock.check(d) {
                                Wake::Fired => {
                                    let now = clock.now();
                                    assert!(
                                        now >= d.at(),
                                        "early Fired (check many): now {now:?} at {:?}\n  {}",
                                        d.at(),
                                        log.join("\n  ")
                                    );
                                    fired = true;
                                }
                                Wake::Rearm(_) => {}
                            }
                        }
                        if fired {
                            pending = None;
                        }
                    }
                }
                Op::Fire => {
                    if let Some(d) = pending {
                        sim.reach(d.ticks());
                        match clock.check(d) {
                            Wake::Fired => {
                                let now = clock.now();
                                assert!(
                                    now >= d.at(),
                                    "early Fired: now {now:?} at {:?} counter {}\n  {}",
                                    d.at(),
                                    sim.t.get(),
                                    log.join("\n  ")
                                );
                                pending = None;
                            }
                            Wake::Rearm(n) => {
                                pending = Some(n);
                                rearms_since_write += 1;
                            }
                        }
                        let _ = clock.update();
                    }
                }
            }
            if wrote {
                rearms_since_write = 0;
                // As the docs advise: re-check after one's own write, re-arm with the result.
                if let Some(d) = pending {
                    match clock.check(d) {
                        Wake::Fired => {
                            let now = clock.now();
                            assert!(
                                now >= d.at(),
                                "early Fired (recheck): now {now:?} at {:?}\n  {}",
                                d.at(),
                                log.join("\n  ")
                            );
                            pending = None;
                        }
                        Wake::Rearm(n) => pending = Some(n),
                    }
                }
            }
            let _ = rearms_since_write;
        }
        // Finally: with no further writes, a pending deadline fires within a bounded number
        // of re-arms.
        if let Some(d) = pending {
            let h = h_ns(&clock);
            let rem = d.at().as_nanos().saturating_sub(clock.now().as_nanos());
            let bound = rem / h + 6;
            if capped && bound < 100_000 {
                drive(&clock, &sim, d, bound, &log.join("\n  "));
            }
        }
    }
}

trait ScaleFreq {
    fn scale_freq(&self) -> Frequency;
}
impl<C: Counter> ScaleFreq for Clock<C> {
    fn scale_freq(&self) -> Frequency {
        let mhz = self.scale().millihz();
        Frequency::from_millihz(mhz, baretime::Source::Calibrated, baretime::Accuracy::Exact)
            .unwrap_or_else(|| hz(Frequency::MIN_HZ))
    }
}

#[test]
fn a2_fuzz_writes_between_arm_and_wake() {
    for seed in 1..=40u64 {
        fuzz(seed.wrapping_mul(0x2545_F491_4F6C_DD1D), 60, true);
    }
}

/// Every rate at every width (narrow counters included at rates where the wrap is shorter
/// than the handover): only "no early Fired" is asserted.
#[test]
fn a2b_fuzz_uncapped_rates_no_early_fire() {
    for seed in 100..=160u64 {
        fuzz(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 60, false);
    }
}

/// The root cause of a0, without deadlines: the counter moves 1 tick between updates (as the
/// deadline handler does when H = 1 tick). Each update seems to drop the sub-nanosecond part
/// of the time since the last publication, so with ticks under 1 ns the clock loses all of
/// it. Probe results (1000 steps, `update()` after each): 3 bits @ 2_000_000_001 Hz, 1-tick
/// steps: 499 ns of counter time, now 0 ns; 2-tick steps: 999 ns, now 1 ns; 3 bits @
/// 2_000_000_000 Hz (exactly 0.5 ns a tick): 500 ns, now 500 ns (held); 4 bits @ 3 GHz,
/// 1-tick: 333 ns, now 0; 8 bits @ 84 GHz, 8-tick steps: 95 ns, now 0. No late update, no
/// `counter_behind` reported. Against Clock promise 2 ("time moves with the counter at the
/// rate in force") and promise 5 (updates at least once per `update_interval` are fine).
#[test]
fn a0c_updates_every_tick_lose_all_time() {
    let sim = Sim::new(3, 1);
    let c = FnCounter::new(|| sim.read(), 3);
    let clock = Clock::new(&c, hz(2_000_000_001));
    for _ in 0..1000 {
        sim.t.set(sim.t.get() + 1);
        let _ = clock.update();
    }
    assert!(
        clock.now() >= Instant::from_nanos(250),
        "499 ns of counter time, now {:?}, {:?}",
        clock.now(),
        clock.health()
    );
}

/// Narrow counter whose wrap at the rate is shorter than about 4 ns: the Clock docs promise
/// everything for 3 bits or more, with no rate caveat, and the deadline docs promise a
/// bounded number of re-arms once `update` runs. Boundary found by bisection (a deadline at
/// now + 1 ns, the handler moving the counter to each armed tick and calling `update`):
/// 3 bits fires at 2_000_000_000 Hz, never at 2_000_000_001 Hz; 4 bits: 2_999_999_999 /
/// 3_000_000_000; 5 bits: 6_999_999_999 / 7_000_000_000; 8 bits: 83_999_999_999 /
/// 84_000_000_000 Hz.
#[test]
fn a0_narrow_counter_faster_than_handover_never_fires() {
    let sim = Sim::new(3, 1);
    let c = FnCounter::new(|| sim.read(), 3);
    let clock = Clock::new(&c, hz(2_000_000_001));
    let d = clock
        .deadline(clock.now() + Duration::from_nanos(1))
        .unwrap();
    drive(
        &clock,
        &sim,
        d,
        1000,
        &format!("update_interval {:?}", clock.update_interval()),
    );
}

/// The same configuration without deadlines, 3 ticks between updates: the clock runs.
#[test]
fn a0b_same_clock_runs_with_3_tick_steps() {
    let sim = Sim::new(3, 1);
    let c = FnCounter::new(|| sim.read(), 3);
    let clock = Clock::new(&c, hz(2_000_000_001));
    for _ in 0..1000 {
        sim.t.set(sim.t.get() + 3);
        let _ = clock.update();
    }
    assert!(
        clock.now() > Instant::ZERO,
        "now {:?}, health {:?}",
        clock.now(),
        clock.health()
    );
}

#[test]
fn a3_deadline_at_zero_and_past_fire_at_once() {
    for bits in [3u32, 8, 16, 32, 64] {
        let sim = Sim::new(bits, 5);
        let c = FnCounter::new(|| sim.read(), bits);
        let clock = Clock::new(&c, hz(1_000_000));
        sim.t.set(sim.t.get() + 3);
        for at in [Instant::ZERO, clock.now(), Instant::from_nanos(1)] {
            let d = clock.deadline(at).unwrap();
            assert_eq!(
                clock.check(d),
                Wake::Fired,
                "bits {bits} at {at:?} now {:?}",
                clock.now()
            );
        }
    }
}

#[test]
fn a4_deadline_at_u64_max_ns() {
    // At 1 kHz on 64 bits, u64::MAX ns is ~1.8e16 ticks: reachable.
    for rate in [Frequency::MIN_HZ, 1_000_003] {
        let sim = Sim::new(64, 0);
        let c = FnCounter::new(|| sim.read(), 64);
        let clock = Clock::new(&c, hz(rate));
        let d = clock.deadline(Instant::from_nanos(u64::MAX)).unwrap();
        drive(&clock, &sim, d, 16, &format!("u64::MAX ns at {rate} Hz"));
    }
    // At MAX_HZ it is beyond the counter: it must never fire early.
    for bits in [16u32, 64] {
        let sim = Sim::new(bits, 0);
        let c = FnCounter::new(|| sim.read(), bits);
        let clock = Clock::new(&c, hz(Frequency::MAX_HZ));
        let mut d = clock.deadline(Instant::from_nanos(u64::MAX)).unwrap();
        for _ in 0..200 {
            sim.reach(d.ticks());
            match clock.check(d) {
                Wake::Fired => panic!("u64::MAX fired: now {:?} bits {bits}", clock.now()),
                Wake::Rearm(n) => d = n,
            }
            let _ = clock.update();
        }
    }
}

#[test]
fn a5_before_start_and_foreign_deadline() {
    let sim = Sim::new(32, 100);
    let c = FnCounter::new(|| sim.read(), 32);
    let clock = Clock::uninit(&c);
    assert_eq!(
        clock.deadline(Instant::from_nanos(10)),
        Err(ClockError::NotStarted)
    );

    // A deadline from another clock, checked on this one before and after start.
    let osim = Sim::new(64, 1 << 35);
    let oc = FnCounter::new(|| osim.read(), 64);
    let other = Clock::new(&oc, hz(3_000_000_000));
    osim.t.set(osim.t.get() + 5_000_000_000);
    for dist in [0u64, 1, 1_000, 1_000_000_000] {
        let d = other
            .deadline(other.now() + Duration::from_nanos(dist))
            .unwrap();
        for _ in 0..3 {
            match clock.check(d) {
                Wake::Fired => assert!(
                    clock.now() >= d.at(),
                    "unstarted fired: now {:?} at {:?}",
                    clock.now(),
                    d.at()
                ),
                Wake::Rearm(_) => {}
            }
        }
    }
    clock.start(hz(1_000_000)).unwrap();
    let h = h_ns(&clock);
    let d = other
        .deadline(other.now() + Duration::from_millis(3))
        .unwrap();
    // Checked on `clock`, it must not fire before clock's now reaches d.at() (far ahead of
    // clock's timeline): step it via re-arms.
    let rem = d.at().as_nanos() - clock.now().as_nanos();
    drive(
        &clock,
        &sim,
        d,
        rem / h + 6,
        "foreign deadline on a 32-bit 1 MHz clock",
    );
}

#[test]
fn a6_check_many_times_one_tick_before() {
    for (bits, rate) in [
        (64u32, 1_000_000_007u64),
        (32, 32_768),
        (12, 1_000),
        (64, Frequency::MAX_HZ),
        (3, 1_000),
    ] {
        let sim = Sim::new(bits, 1);
        let c = FnCounter::new(|| sim.read(), bits);
        let clock = Clock::new(&c, hz(rate));
        sim.t.set(sim.t.get() + 2);
        let at = clock.now() + Duration::from_nanos(h_ns(&clock) / 3 + 1);
        let d = clock.deadline(at).unwrap();
        let m = sim.mask();
        // One tick before the armed tick: never Fired, however often.
        sim.t
            .set(sim.t.get() + ((d.ticks().wrapping_sub(sim.t.get()) & m).saturating_sub(1)));
        for _ in 0..1000 {
            if let Wake::Fired = clock.check(d) {
                assert!(
                    clock.now() >= at,
                    "early: bits {bits} rate {rate} now {:?} at {at:?}",
                    clock.now()
                );
            }
        }
        drive(&clock, &sim, d, 4, &format!("bits {bits} rate {rate}"));
    }
}

#[test]
fn a7_reach_tick_then_step_back_64() {
    for back in [1u64, 2, 1000, 1 << 20, u64::MAX] {
        let sim = Sim::new(64, 1 << 30);
        let c = FnCounter::new(|| sim.read(), 64);
        let clock = Clock::new(&c, hz(2_500_000_000));
        sim.t.set(sim.t.get() + 1_000_000);
        let at = clock.now() + Duration::from_micros(50);
        let d = clock.deadline(at).unwrap();
        sim.reach(d.ticks());
        sim.t.set(sim.t.get().saturating_sub(back));
        for _ in 0..10 {
            if let Wake::Fired = clock.check(d) {
                assert!(
                    clock.now() >= at,
                    "early after step back {back}: now {:?} at {at:?}",
                    clock.now()
                );
            }
        }
    }
}

#[test]
fn a8_recalibrate_extreme_ratios() {
    for bits in [3u32, 7, 16, 32, 48, 64] {
        for (r0, r1) in [
            (Frequency::MIN_HZ, Frequency::MAX_HZ),
            (Frequency::MAX_HZ, Frequency::MIN_HZ),
            (1_000_000, 1_000_001),
            (1_000_001, 1_000_000),
        ] {
            let (r0, r1) = (cap(bits, r0), cap(bits, r1));
            let sim = Sim::new(bits, 7);
            let c = FnCounter::new(|| sim.read(), bits);
            let clock = Clock::new(&c, hz(r0));
            let h = h_ns(&clock);
            let at = clock.now() + Duration::from_nanos(h / 2 + 1);
            let d = clock.deadline(at).unwrap();
            let m = sim.mask();
            sim.t
                .set(sim.t.get() + (d.ticks().wrapping_sub(sim.t.get()) & m) / 2);
            let _ = clock.recalibrate(hz(r1));
            // The wake at the old tick (no recheck: the timer fires where it was armed).
            sim.reach(d.ticks());
            let mut dd = d;
            match clock.check(dd) {
                Wake::Fired => assert!(
                    clock.now() >= at,
                    "early: bits {bits} {r0}->{r1}: now {:?} at {at:?}",
                    clock.now()
                ),
                Wake::Rearm(n) => dd = n,
            }
            if clock.now() < at {
                let rem = at.as_nanos() - clock.now().as_nanos();
                drive(
                    &clock,
                    &sim,
                    dd,
                    rem / h_ns(&clock) + 8,
                    &format!("bits {bits} {r0}->{r1}"),
                );
            }
        }
    }
}

#[test]
fn a9_late_update_narrow() {
    for bits in [3u32, 8, 16] {
        let sim = Sim::new(bits, 0);
        let c = FnCounter::new(|| sim.read(), bits);
        let clock = Clock::new(&c, hz(1_000));
        let ui_ticks = clock.update_interval().as_millis() as u64;
        let at = clock.now() + Duration::from_millis(ui_ticks / 2);
        let d = clock.deadline(at).unwrap();
        // Let the counter run well past the update interval with no update, in small steps.
        let m = sim.mask();
        for _ in 0..5 {
            sim.t.set(sim.t.get() + (m / 4).max(1));
            let now = clock.now();
            if let Wake::Fired = clock.check(d) {
                assert!(
                    now >= at || clock.now() >= at,
                    "early late-update: bits {bits} now {:?} at {at:?}",
                    clock.now()
                );
            }
        }
        let _ = clock.update();
        let mut dd = d;
        if let Wake::Rearm(n) = clock.check(dd) {
            dd = n;
        }
        if clock.now() < at {
            let rem = at.as_nanos() - clock.now().as_nanos();
            drive(
                &clock,
                &sim,
                dd,
                rem / h_ns(&clock) + 8,
                &format!("late bits {bits}"),
            );
        }
    }
}

#[test]
fn a10_rebase_back_then_old_deadline() {
    let sim = Sim::new(64, 0);
    let c = FnCounter::new(|| sim.read(), 64);
    let clock = Clock::new(&c, hz(1_000_000_000));
    sim.t.set(10_000_000_000);
    let at = clock.now() + Duration::from_millis(5);
    let d = clock.deadline(at).unwrap();
    // Reset the counter to 0 and rebase back to the epoch-ish (the clock continues from the
    // latest handed out: never earlier).
    sim.t.set(0);
    let _ = clock.rebase(Instant::ZERO, hz(3_000_000_000));
    drive(&clock, &sim, d, 1_000, "reset + rebase back");
}

// ---- CoarseClock -------------------------------------------------------------------------

#[test]
fn c1_now_never_reads_counter() {
    let sim = Sim::new(64, 1000);
    let c = FnCounter::new(|| sim.read(), 64);
    let clock = Clock::new(&c, hz(1_000_000));
    let coarse = CoarseClock::new();
    let before = sim.reads.get();
    for _ in 0..100 {
        let _ = coarse.now();
    }
    assert_eq!(sim.reads.get(), before);
    sim.t.set(5000);
    coarse.refresh(&clock);
    let before = sim.reads.get();
    for _ in 0..100 {
        let _ = coarse.now();
    }
    assert_eq!(sim.reads.get(), before);
}

/// A 64-bit counter that steps back a little (a CPU lagging less than LAG_NS): the clock may
/// read up to MARK_GRANULE_NS below a time already handed out (Clock promise 1's exception),
/// but the coarse clock holds that time: is it then ahead of the clock?
#[test]
fn c3_small_step_back_coarse_vs_clock() {
    for rate in [
        1_000_000u64,
        1_000_000_000,
        3_000_000_000,
        Frequency::MAX_HZ,
    ] {
        for back in [1u64, 10, 100, 1000, 10_000, 100_000] {
            let sim = Sim::new(64, 1 << 32);
            let c = FnCounter::new(|| sim.read(), 64);
            let clock = Clock::new(&c, hz(rate));
            let coarse = CoarseClock::new();
            sim.t.set(sim.t.get() + 123_456_789);
            let r = coarse.refresh(&clock);
            sim.t.set(sim.t.get() - back);
            let now = clock.now();
            let cn = coarse.now();
            assert!(cn <= now, "coarse ahead: rate {rate} back {back}: coarse {cn:?} (refresh {r:?}) clock {now:?}");
        }
    }
}

#[test]
fn c2_never_back_never_ahead_fuzz() {
    let mut rng = Rng(0xDEAD_BEEF_1234_5677);
    for case in 0..400 {
        let bits = if rng.below(2) == 0 {
            64
        } else {
            3 + rng.below(61) as u32
        };
        let rate = rng.rate();
        let sim = Sim::new(
            bits,
            rng.below(1 << 40)
                & if bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                },
        );
        let c = FnCounter::new(|| sim.read(), bits);
        let clock = Clock::new(&c, hz(rate));
        let coarse = CoarseClock::new();
        let mut last = coarse.now();
        let mut log = vec![format!("case {case} bits {bits} rate {rate}")];
        for _ in 0..80 {
            let h = h_ns(&clock);
            let k = rng.below(8);
            match k {
                0 | 1 => {
                    // advance within the cadence, updating as needed
                    let step = rng.below((sim.mask() / 8).clamp(1, 1 << 40));
                    sim.t.set(sim.t.get().wrapping_add(step));
                    let _ = clock.update();
                }
                2 => {
                    let _ = clock.recalibrate(hz(rng.rate()));
                }
                3 => {
                    let _ = clock.rebase(
                        clock.now() + Duration::from_nanos(rng.below(h.min(1 << 50))),
                        hz(rng.rate()),
                    );
                }
                4 => {
                    let _ = clock.rebase(
                        clock
                            .now()
                            .saturating_sub(Duration::from_nanos(rng.below(h.min(1 << 50)))),
                        hz(rng.rate()),
                    );
                }
                5 if bits == 64 => {
                    sim.t.set(sim.t.get().saturating_sub(rng.below(1 << 30)));
                }
                5 => {}
                6 => {
                    coarse.refresh_from(Instant::ZERO);
                }
                _ => {}
            }
            let r = coarse.refresh(&clock);
            let cn = coarse.now();
            let now = clock.now();
            log.push(format!(
                "op {k}: counter {} refresh {r:?} coarse {cn:?} clock {now:?}",
                sim.t.get()
            ));
            assert!(
                cn >= last,
                "coarse went back: {last:?} -> {cn:?}\n  {}",
                log.join("\n  ")
            );
            assert!(cn <= now, "coarse ahead of clock: coarse {cn:?} clock {now:?} (by {} ns, granule {MARK_GRANULE_NS})\n  {}", cn.as_nanos() - now.as_nanos(), log.join("\n  "));
            last = cn;
        }
    }
}
