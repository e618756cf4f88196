//! Regression tests for the ways a review broke the clock's first promise — time never goes
//! back and never jumps — each reproduced as it was found (counter 1 MHz and 16 bits unless
//! said: half a wrap is 32 767 ticks). Hole 5 (Delay and a counter that steps back) is in
//! src/delay.rs, hole 7 (references that called themselves exact) in honest_references.rs.
//!
//! A stall is made by the counter itself: a read can be told to run some code *after* it
//! took its value, so whoever made that read is stalled just after it while that code runs
//! (other readers, writers, time passing).

use std::cell::{Cell, RefCell};

use baretime::{Clock, ClockError, Counter, Frequency, Instant, Width};
use baretime::{LAG_NS as HANDOVER_NS, MARK_GRANULE_NS};

/// Code to run during one counter read (by its number), stalling whoever made it.
type Stall = Option<(u64, Box<dyn FnOnce()>)>;

thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
    static READS: Cell<u64> = const { Cell::new(0) };
    static STALL: RefCell<Stall> = const { RefCell::new(None) };
}

/// The test's counter: `NOW`, masked to its width.
struct Sim(u32);

impl Counter for Sim {
    fn ticks(&self) -> u64 {
        let v = Width::new(self.0).value(NOW.get());
        let n = READS.get();
        READS.set(n + 1);
        let due = STALL.with(|s| {
            let mut s = s.borrow_mut();
            match *s {
                Some((k, _)) if k == n => s.take(),
                _ => None,
            }
        });
        if let Some((_, stalled)) = due {
            stalled();
        }
        v
    }
    fn bits(&self) -> u32 {
        self.0
    }
}

fn set(ticks: u64) {
    NOW.set(ticks);
}

/// Runs `f` while whoever makes the counter read number `k` from now is stalled after it.
fn stall_after_read(k: u64, f: impl FnOnce() + 'static) {
    STALL.set(Some((READS.get() + k, Box::new(f))));
}

fn hz(hz: u64) -> Frequency {
    Frequency::exact_hz(hz).unwrap()
}

fn clock(bits: u32, rate: u64) -> &'static Clock<Sim> {
    set(0);
    Box::leak(Box::new(Clock::new(Sim(bits), hz(rate))))
}

fn ns(i: Instant) -> u64 {
    i.as_nanos()
}

/// Hole 1: a late `update()` sent time back to an old timebase, often the epoch, and the
/// next update hid the loss.
#[test]
fn a_late_update_never_sends_time_back() {
    let c = clock(16, 1_000_000);
    set(10_000);
    c.update().unwrap();
    set(43_000);
    let mut last = ns(c.now());
    assert!(last >= 42_000_000, "{last}");
    // No update for the next 160 ms: more than two wraps.
    for ms in 44..=200u64 {
        set(ms * 1_000);
        let now = ns(c.now());
        assert!(now >= last, "at {ms} ms: {now} after {last}");
        last = now;
    }
    // Time stood still at the deadline: half a wrap after the update's base (which is the
    // update's counter read plus the handover margin).
    let deadline = 10_000_000 + 32_767_000;
    assert!(
        last >= deadline && last <= deadline + 2 * HANDOVER_NS,
        "{last}"
    );
    // The late update says so, and time runs again from where it stood.
    assert_eq!(c.update(), Err(ClockError::Late));
    assert_eq!(c.health().late_updates, 1);
    set(201_000);
    let resumed = ns(c.now());
    assert!(resumed >= last && resumed <= last + 1_000_000, "{resumed}");
    set(210_000);
    assert_eq!(c.update(), Ok(()));
    assert!(ns(c.now()) >= resumed);
}

/// Hole 1, second path: a 64-bit counter reset (a TSC on resume) before `rebase` sent time
/// back to the epoch.
#[test]
fn a_counter_reset_never_sends_time_back() {
    set(1_000_000_000_000); // a TSC some minutes after power-on
    let c = Box::leak(Box::new(Clock::new(Sim(64), hz(1_000_000_000))));
    set(1_005_000_000_000);
    let before = ns(c.now());
    assert_eq!(before, 5_000_000_000);
    set(1_000); // reset
    let after = ns(c.now());
    assert!(after >= before, "{after} < {before}");
    assert!(
        after <= before + 3_000_000,
        "stands still near {before}, not {after}"
    );
    assert!(c.health().counter_behind);
    assert_eq!(c.update(), Err(ClockError::Behind));
    assert_eq!(c.recalibrate(hz(1_000_000_000)), Err(ClockError::Behind));
    // Suspended for 2 s: continue from 7 s.
    let resume = Instant::from_nanos(before + 2_000_000_000);
    c.rebase(resume, hz(1_000_000_000)).unwrap();
    assert_eq!(c.now(), resume);
    set(1_500);
    assert_eq!(ns(c.now()), 7_000_000_500);
}

/// Hole 2: an `update()` inside the half wrap returned Ok, and then time went back to 0.
#[test]
fn an_update_in_time_loses_nothing() {
    let c = clock(16, 1_000_000);
    set(32_000);
    assert_eq!(c.update(), Ok(()));
    let mut last = 0;
    for t in (32_000..33_000u64).chain([32_767, 32_768, 40_000, 60_000, 64_000]) {
        if t < 32_767 && last > t * 1_000 {
            continue;
        }
        set(t);
        let now = ns(c.now());
        assert_eq!(now, t * 1_000, "at tick {t}");
        last = now;
    }
    // The deadline the clock states is the one readers need: update within it, again.
    // Half the wrap (32 767 ticks) less the handover margin (20 ticks) and a tick, at 1 MHz
    // (the scale rounds 1000 ns/tick a hair low, so the micros round down to 32 745).
    let interval = c.update_interval().as_micros();
    assert!((32_745..=32_746).contains(&interval), "{interval}");
    set(64_000);
    assert_eq!(c.update(), Ok(()));
    for k in 1..=20u64 {
        set(64_000 + k * 32_000);
        assert_eq!(c.update(), Ok(()), "update {k}");
        assert_eq!(ns(c.now()), (64_000 + k * 32_000) * 1_000);
    }
}

/// Hole 3: a reader stalled just after its counter read, while updates ran every 10 ms,
/// returned a time in the future.
#[test]
fn a_stalled_reader_never_returns_a_future_time() {
    let c = clock(16, 1_000_000);
    for ms in (10..=50).step_by(10) {
        set(ms * 1_000);
        c.update().unwrap();
    }
    let before = ns(c.now());
    stall_after_read(0, move || {
        for ms in (60..=90).step_by(10) {
            set(ms * 1_000);
            c.update().unwrap();
        }
    });
    let stalled = ns(c.now());
    let after = ns(c.now());
    assert!(stalled >= before, "{stalled} < {before}");
    assert!(
        stalled <= 90_000_000,
        "returned {stalled} ns at 90 ms: the future"
    );
    assert!(after >= stalled, "{after} < {stalled}");
}

/// Hole 4: a writer stalled between deciding and publishing (an SMI, an NMI, a vCPU
/// preemption) let readers during the stall run past the handover on the old rate, and the
/// same counter value read 364 µs earlier afterwards. 1 GHz, recalibrating to 1.1 GHz,
/// stalled 5 ms — after each of the writer's counter reads in turn.
#[test]
fn a_stalled_writer_never_sends_time_back() {
    // The writer reads the counter twice (before announcing the close, and after).
    for k in 0..2 {
        let c = clock(64, 1_000_000_000);
        set(10_000_000);
        let seen = std::rc::Rc::new(Cell::new(0u64));
        let during = seen.clone();
        let stalled = std::rc::Rc::new(Cell::new(false));
        let fired = stalled.clone();
        stall_after_read(k, move || {
            fired.set(true);
            for t in [10_000_000, 12_000_000, 15_000_000] {
                set(t);
                let v = ns(c.now());
                assert!(
                    v >= during.get(),
                    "stall after read {k}: {v} < {}",
                    during.get()
                );
                during.set(v);
            }
        });
        let r = c.recalibrate(hz(1_100_000_000));
        assert_eq!(r, Ok(()));
        assert!(stalled.get(), "the writer made fewer than {} reads", k + 1);
        // The same counter value as the last read during the stall, then later ones.
        for t in [15_000_000, 15_000_001, 16_000_000, 20_000_000] {
            set(t);
            let v = ns(c.now());
            assert!(
                v >= seen.get(),
                "stall after read {k}: {v} at tick {t} < {} seen during the stall",
                seen.get()
            );
            seen.set(v);
        }
        // And it does not lose the stall either: within the rates' difference of 20 ms.
        assert!(seen.get() >= 18_000_000, "{}", seen.get());
    }
}

/// Hole 6: a wrapper must not lose the width. `Clock<&C>` reads what `Clock<C>` reads just
/// after the wrap.
#[test]
fn a_reference_to_a_counter_keeps_its_width() {
    let owned = clock(16, 1_000_000);
    let borrowed = Box::leak(Box::new(Clock::new(&Sim(16), hz(1_000_000))));
    for t in [30_000, 60_000] {
        set(t);
        owned.update().unwrap();
        borrowed.update().unwrap();
    }
    set(65_536 + 4_352); // just after the wrap
    assert_eq!(owned.now(), borrowed.now());
    assert_eq!(ns(borrowed.now()), 69_888_000);
}

/// Counters that warp between CPUs (found by the SMP scenarios, issue 9): a 64-bit counter
/// one CPU reads 200 µs ahead of the others. The plain clock does not promise order across
/// such CPUs (that is `MonotonicClock`'s job), but it must never jump: every value stays
/// within the most-ahead CPU's time plus the mark's 2.1 ms. Before the fix, a helper on the
/// ahead CPU set the close point, the writer then found its own reading behind the new base,
/// and published the new timeline latched at its deadline: 2^62 ticks, 146 years at 1 GHz.
const SKEW: u64 = 200_000; // 200 µs at 1 GHz

/// Most any value may be ahead of the most-ahead reading: the mark's two granules and a
/// handover margin.
const JUMP_LIMIT_NS: u64 = MARK_GRANULE_NS + HANDOVER_NS;

#[test]
fn a_helper_on_an_ahead_cpu_never_makes_time_jump() {
    let base = 1_000_000_000u64;
    set(base);
    let c: &'static Clock<Sim> = Box::leak(Box::new(Clock::new(Sim(64), hz(1_000_000_000))));
    let t = base + 1_000_000; // 1 ms on
    set(t);
    let mut last = ns(c.now());
    // The writer's second read (the close) is stalled while a reader on the ahead CPU helps.
    stall_after_read(1, move || {
        set(t + SKEW);
        let ahead = ns(c.now());
        assert!(ahead <= 1_000_000 + SKEW + JUMP_LIMIT_NS, "{ahead}");
        set(t);
    });
    c.update().unwrap();
    for step in 0..400u64 {
        set(t + step * 1_000);
        let now = ns(c.now());
        // The writer's CPU lags the helper's by 200 µs, ten times LAG_NS: it stands at the
        // mark's ceiling, and may then read the mark itself, a granule lower (promise 1's
        // limit for a counter that lags by more than LAG_NS), never more.
        assert!(
            now + MARK_GRANULE_NS >= last,
            "writer's CPU went back: {now} after {last}"
        );
        let most_ahead = 1_000_000 + step * 1_000 + SKEW;
        assert!(
            now <= most_ahead + JUMP_LIMIT_NS,
            "jumped to {now} ns at {most_ahead}"
        );
        last = now;
    }
    c.update().unwrap();
}

#[test]
fn a_helper_moved_to_a_behind_cpu_never_makes_time_jump() {
    let base = 1_000_000_000u64;
    set(base);
    let c: &'static Clock<Sim> = Box::leak(Box::new(Clock::new(Sim(64), hz(1_000_000_000))));
    let t = base + 1_000_000;
    set(t);
    let mut last = ns(c.now());
    // During the writer's close, a reader reads at `t` (its fast path, then its slow path's
    // read), is moved to a CPU 200 µs behind the timeline's base, and helps decide the close
    // point from there.
    stall_after_read(1, move || {
        stall_after_read(1, move || set(base - SKEW));
        let helped = ns(c.now());
        assert!(
            helped <= 1_000_000 + JUMP_LIMIT_NS,
            "the helper jumped to {helped}"
        );
        set(t);
    });
    let _ = c.update();
    for step in 0..400u64 {
        set(t + step * 1_000);
        let now = ns(c.now());
        assert!(now >= last, "went back: {now} after {last}");
        let most_ahead = 1_000_000 + step * 1_000;
        assert!(
            now <= most_ahead + JUMP_LIMIT_NS,
            "jumped to {now} ns at {most_ahead}"
        );
        last = now;
    }
}
