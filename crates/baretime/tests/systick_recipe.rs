//! The README's SysTick recipe (`ExtendedTimer` on SysTick, `update()` in its handler) against
//! SysTick as the Armv7-M architecture defines it (issue 26, item 5):
//!
//! - `SYST_CVR` (VAL) counts down from `SYST_RVR` (0xff_ffff) to 0; the tick after 0 it
//!   reloads. The wrap flag (`ICSR.PENDSTSET`, with `TICKINT`) is set when VAL goes from 1 to
//!   0, not at the reload; the hardware clears it on interrupt entry.
//! - After the usual `clear_current()` (any write to VAL makes it 0) and enable, VAL reads 0
//!   until its first reload, with no wrap flag.
//!
//! The recipe's count must be a 24-bit up-counter that wraps exactly when the flag is raised.
//! `0xff_ffff − VAL` is not: it reads 0xff_ffff while VAL is 0 — before the first reload, and
//! for one tick at every wrap with the flag already set — and 0 one tick later. A clock
//! started at VAL = 0 then sees its next reading a whole wrap behind: on a 32-bit target
//! (which reads the count modulo 2^32) it jumps to its deadline, 85.9 s at 25 MHz; with
//! 64-bit atomics it stands still for a wrap (0.67 s). `(2^24 − VAL) mod 2^24` is: it reads 0
//! while VAL is 0 and 1 after the reload, and wraps to 0 on the tick the flag is raised.
//!
//! Each run starts the clock at one point (before the first reload, or at any phase around a
//! wrap, the interrupt pending or not), then runs SysTick through three wraps, taking the wrap
//! interrupt a random number of ticks after the flag (within the period): the clock must read
//! the ticks since the start at 25 MHz (40 ns each), at every step, within a nanosecond.

use std::cell::Cell;

use baretime::{Clock, Counter, ExtendedTimer, FnCounter, Frequency, NarrowTimer};

const RVR: u32 = 0xff_ffff;
const HZ: u64 = 25_000_000;

thread_local! {
    /// SYST_CVR.
    static VAL: Cell<u32> = const { Cell::new(0) };
    /// ICSR.PENDSTSET.
    static PENDST: Cell<bool> = const { Cell::new(false) };
    /// Ticks since SysTick was enabled.
    static TICKS: Cell<u64> = const { Cell::new(0) };
    /// The count mapping under test.
    static MAPPING: Cell<Mapping> = const { Cell::new(Mapping::Fixed) };
}

#[derive(Clone, Copy, Debug)]
enum Mapping {
    /// The README's recipe before issue 26: `0xff_ffff − VAL`.
    Old,
    /// `(2^24 − VAL) mod 2^24`: 0 while VAL is 0.
    Fixed,
}

/// SysTick as the recipe's `NarrowTimer`.
struct SysTick;

impl NarrowTimer for SysTick {
    fn count(&self) -> u32 {
        let val = VAL.get();
        match MAPPING.get() {
            Mapping::Old => RVR - val,
            Mapping::Fixed => val.wrapping_neg() & RVR,
        }
    }
    fn bits(&self) -> u32 {
        24
    }
    fn wrap_pending(&self) -> bool {
        PENDST.get()
    }
    fn clear_wrap(&self) {} // the hardware cleared it on entry
}

/// `n` SysTick clock ticks.
fn tick(n: u64) {
    for _ in 0..n {
        let val = VAL.get();
        if val == 0 {
            VAL.set(RVR); // the reload: no flag
        } else {
            VAL.set(val - 1);
            if val == 1 {
                PENDST.set(true); // 1 -> 0: the wrap
            }
        }
        TICKS.set(TICKS.get() + 1);
    }
}

/// Moves SysTick `n` ticks on in big steps (the reload and the flag as `tick` has them).
fn advance(mut n: u64) {
    while n > 0 {
        let val = u64::from(VAL.get());
        if val <= 1 {
            tick(1);
            n -= 1;
        } else {
            let step = n.min(val - 1);
            VAL.set((val - step) as u32);
            TICKS.set(TICKS.get() + step);
            n -= step;
        }
    }
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Runs the recipe once: the clock started `start_at` ticks after SysTick's enable (its
/// interrupt taken `delay` ticks after each flag), the clock reading the extended count
/// modulo 2^32 (`narrow`: a 32-bit target) or whole. The worst error of `now()` against the
/// true time since the start, in ns, and the clock's health afterwards.
fn run(mapping: Mapping, start_at: u64, narrow: bool, seed: u64) -> (u64, String) {
    MAPPING.set(mapping);
    VAL.set(0); // clear_current()
    PENDST.set(false);
    TICKS.set(0);
    let timer: &'static ExtendedTimer<SysTick> = Box::leak(Box::new(ExtendedTimer::new(SysTick)));
    let read = move || {
        let t = timer.ticks();
        if narrow {
            t & u64::from(u32::MAX)
        } else {
            t
        }
    };
    let bits = if narrow { 32 } else { timer.bits() };
    let clock = Clock::uninit(FnCounter::new(read, bits));
    let handler = |clock: &Clock<_>| {
        PENDST.set(false); // cleared on entry
        timer.on_wrap();
        let _ = clock.update();
    };
    let mut rng = Rng(seed | 1);
    // Before the start: SysTick runs, its interrupt taken at each wrap (no clock yet to
    // update); the last one maybe still pending when the clock starts.
    let mut left = start_at;
    while left > 0 {
        let step = left.min(u64::from(VAL.get()).max(1));
        advance(step);
        left -= step;
        if PENDST.get() && (left > 0 || rng.below(2) == 0) {
            PENDST.set(false);
            timer.on_wrap();
        }
    }
    let start_ticks = TICKS.get();
    clock
        .start(Frequency::exact_hz(HZ).unwrap())
        .expect("start");
    let mut worst = 0u64;
    let mut check = |clock: &Clock<_>| {
        let truth = (TICKS.get() - start_ticks) * 1_000_000_000 / HZ;
        let now = clock.now().as_nanos();
        worst = worst.max(now.abs_diff(truth));
    };
    check(&clock);
    // Three wraps: steps of a few ticks around each wrap, big steps between, the interrupt
    // taken some ticks after the flag (at most a quarter period).
    let mut pending_for: Option<u64> = None;
    while TICKS.get() < start_ticks + 3 * (u64::from(RVR) + 1) {
        let val = u64::from(VAL.get());
        let step = if val < 4 || val > u64::from(RVR) - 4 {
            1
        } else {
            1 + rng.below(val.min(200_000))
        };
        advance(step);
        if PENDST.get() && pending_for.is_none() {
            pending_for = Some(rng.below(u64::from(RVR) / 4));
        }
        check(&clock);
        if let Some(left) = pending_for {
            if left <= step {
                handler(&clock);
                pending_for = None;
                check(&clock);
            } else {
                pending_for = Some(left - step);
            }
        }
    }
    (worst, format!("{:?}", clock.health()))
}

/// The points to start at: before the first reload (VAL = 0), at it, and around the first
/// wraps (VAL = 2, 1, 0 with the flag set, the reload), plus random phases.
fn start_points() -> Vec<u64> {
    let period = u64::from(RVR) + 1;
    let mut v = vec![0, 1, 2, 3];
    for wrap in 1..=2u64 {
        for d in 0..6u64 {
            v.push(wrap * period + d - 3);
        }
    }
    let mut rng = Rng(7);
    for _ in 0..8 {
        v.push(rng.below(3 * period));
    }
    v
}

fn worst_over_starts(mapping: Mapping, narrow: bool) -> Vec<(u64, u64, String)> {
    let mut bad = Vec::new();
    for (i, start) in start_points().into_iter().enumerate() {
        let (worst, health) = run(mapping, start, narrow, i as u64 + 1);
        if worst > 1 {
            bad.push((start, worst, health));
        }
    }
    bad
}

/// The recipe as the README now gives it: whenever the clock starts, it reads the true time
/// to within a nanosecond, on a 32-bit target and with 64-bit atomics.
#[test]
fn the_systick_recipe_keeps_time_whenever_start_runs() {
    for narrow in [true, false] {
        let bad = worst_over_starts(Mapping::Fixed, narrow);
        assert!(
            bad.is_empty(),
            "narrow={narrow}: (start tick, worst error ns, health): {bad:?}"
        );
    }
}

/// The recipe before issue 26 (`0xff_ffff − VAL`): a clock started while VAL is 0 reads a
/// whole wrap back next — 85.9 s ahead on a 32-bit target, a wrap standing still otherwise.
/// Kept as the finding: the old mapping must trap here, or this test's model is wrong.
#[test]
fn the_old_mapping_traps_at_val_zero() {
    let (worst, health) = run(Mapping::Old, 0, true, 1);
    assert!(
        worst > 80_000_000_000,
        "32-bit target: worst {worst} ns ({health})"
    );
    let (worst, health) = run(Mapping::Old, 0, false, 1);
    assert!(
        worst > 600_000_000,
        "64-bit atomics: worst {worst} ns ({health})"
    );
}
