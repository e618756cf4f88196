//! `Clock` fed arbitrary counter sequences of any width 1..=64, with `now`, `update`,
//! `recalibrate` (rates from the input, invalid ones included), `rebase`, `start` and the
//! read-only accessors interleaved in any order. Each counter read takes the next step the
//! input gives (none: the counter is stuck), whichever operation makes it: a writer's reads
//! can be far apart, as if it stalled between them.
//!
//! Three modes, chosen by the input:
//! - **contract**: the counter never goes back and, as the clock's module docs require, some
//!   operation reads it and finishes at least once per quarter wrap (steps are capped to
//!   keep that). Asserted on every read: `now()` never goes back, across `rebase` too
//!   (which continues at its `at` or later); no `Behind` anywhere.
//! - **reset**: 64-bit, and the counter may also be reset far behind everything it has
//!   read (a TSC reset on resume), staying behind until a `rebase`; all rates within 2× of
//!   each other (the high-water mark's documented condition). Asserted: the same — while
//!   behind, time stands still no earlier than anything handed out, and `rebase` continues
//!   no earlier than that.
//! - **hostile**: every read returns any value at all. Asserted: nothing panics.
#![no_main]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use arbitrary::Arbitrary;
use baretime::{Accuracy, Clock, ClockError, Counter, Frequency, Instant, RawInstant, Source};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Now,
    /// Steps (ticks) for the next counter reads, whichever operation makes them; in the
    /// hostile mode, the values those reads return.
    Pass(Vec<u64>),
    Update,
    Recalibrate(u64),
    Rebase {
        at_ns: u64,
        millihz: u64,
    },
    /// Reset mode: the counter jumps this far (bounded) behind anything read since the last
    /// reset.
    Reset(u64),
    Start(u64),
    /// The read-only accessors.
    Look {
        a: u64,
        b: u64,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    bits: u8,
    mode: u8,
    start_value: u64,
    uninit: bool,
    first_millihz: u64,
    /// A `now()` after every operation, as well as where the input says.
    read_after_each: bool,
    ops: Vec<Op>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Contract,
    Reset,
    Hostile,
}

/// The counter: `offset + true_now` (mod 2^bits) in the contract and reset modes.
#[derive(Debug)]
struct Script {
    bits: u32,
    mask: u64,
    mode: Mode,
    steps: RefCell<VecDeque<u64>>,
    /// Ticks since the start, never decreasing.
    true_now: Cell<u128>,
    /// The latest reading (true ticks) of an operation that has finished.
    seen: Cell<u128>,
    /// A quarter wrap: `true_now` never passes `seen + quarter`.
    quarter: u128,
    offset: Cell<u64>,
    /// Reset mode: true ticks at the last reset (or the start): nothing read since is lower.
    low: Cell<u128>,
    /// Reset mode, while behind: how far the counter may still advance and stay behind.
    behind_room: Cell<Option<u128>>,
    /// Reset mode: how far the resets since the last rebase have moved the counter back.
    back_total: Cell<u128>,
    /// Hostile mode: the last value returned.
    last: Cell<u64>,
}

impl Script {
    fn value(&self) -> u64 {
        // Truncating `true_now` is the counter's wrap.
        self.offset.get().wrapping_add(self.true_now.get() as u64) & self.mask
    }

    /// An operation has finished: its readings are seen.
    fn finished(&self) {
        self.seen.set(self.true_now.get());
    }

    /// Moves the counter `by` (bounded) behind its value at the last reset; `false` (and
    /// nothing) if the resets since the last rebase would add up to 2^60 or more.
    fn reset(&self, by: u64) -> bool {
        const MIN: u64 = 1 << 32;
        const MAX: u64 = 1 << 58;
        let by = MIN + by % (MAX - MIN);
        let total = self.back_total.get() + u128::from(by);
        if total >= 1 << 60 {
            return false;
        }
        self.back_total.set(total);
        // The value at `low`, minus `by`.
        let back = (self.true_now.get() - self.low.get()) as u64;
        let now = self.value();
        let target = now.wrapping_sub(back).wrapping_sub(by);
        self.offset
            .set(self.offset.get().wrapping_add(target.wrapping_sub(now)));
        debug_assert_eq!(self.value(), target);
        self.low.set(self.true_now.get());
        // It stays behind by more than any handover (2 × 20 µs at 100 GHz < 2^31 ticks).
        self.behind_room.set(Some(u128::from(by - (1 << 31))));
        true
    }
}

impl Counter for Script {
    fn ticks(&self) -> u64 {
        let step = self.steps.borrow_mut().pop_front();
        if self.mode == Mode::Hostile {
            if let Some(v) = step {
                self.last.set(v & self.mask);
            }
            return self.last.get();
        }
        if let Some(step) = step {
            let room = (self.seen.get() + self.quarter).saturating_sub(self.true_now.get());
            let mut step = u128::from(step).min(room);
            if self.bits == 64 {
                // The clock's contract for a 64-bit counter: read within its deadline, 2^62
                // ticks, of the timeline's base (clock promise 6: further ahead reads as
                // behind). A timeline's base is at or after the start, so no input takes the
                // counter more than 2^61 ticks past the start (146 years at 1 GHz).
                step = step.min((1u128 << 61).saturating_sub(self.true_now.get()));
            }
            if self.mode == Mode::Reset {
                // Small enough that no input moves the counter a quarter of 2^64 from where
                // it was last reset: a reset then lands behind every base since.
                step = step.min(1 << 40);
            }
            if let Some(r) = self.behind_room.get() {
                step = step.min(r);
                self.behind_room.set(Some(r - step));
            }
            self.true_now.set(self.true_now.get() + step);
        }
        self.value()
    }

    fn bits(&self) -> u32 {
        self.bits
    }
}

const LO: u64 = Frequency::MIN_HZ * 1000;
const HI: u64 = Frequency::MAX_HZ * 1000;

/// A rate from the input: with the top bit set, the raw value (almost always invalid: then
/// `None`, and the call that needed it is not made); otherwise one in range (in reset mode,
/// within `[f0, 2 f0)`).
fn rate(raw: u64, f0: Option<u64>) -> Option<Frequency> {
    let millihz = match f0 {
        Some(f0) => f0 + raw % f0,
        None if raw >> 63 == 1 => raw & !(1 << 63),
        None => LO + raw % (HI - LO + 1),
    };
    let f = Frequency::from_millihz(millihz, Source::User, Accuracy::Exact);
    assert_eq!(f.is_some(), (LO..=HI).contains(&millihz));
    f
}

fuzz_target!(|input: Input| {
    let bits = u32::from(input.bits % 64) + 1;
    let mode = match input.mode % 3 {
        0 => Mode::Contract,
        1 => Mode::Reset,
        _ => Mode::Hostile,
    };
    let bits = if mode == Mode::Reset { 64 } else { bits };
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    // The reset mode's base rate: at most HI / 2, so that 2 f0 stays in range.
    let f0 = (mode == Mode::Reset).then(|| LO + input.first_millihz % (HI / 2 - LO));
    let first = rate(input.first_millihz & !(1 << 63), f0).expect("in range");
    let counter = Script {
        bits,
        mask,
        mode,
        steps: RefCell::new(VecDeque::new()),
        true_now: Cell::new(0),
        seen: Cell::new(0),
        quarter: u128::from(mask >> 2).max(1),
        offset: Cell::new(input.start_value),
        low: Cell::new(0),
        behind_room: Cell::new(None),
        back_total: Cell::new(0),
        last: Cell::new(input.start_value & mask),
    };
    let clock = if input.uninit {
        Clock::uninit(&counter)
    } else {
        Clock::new(&counter, first)
    };
    counter.finished();
    let mut started = !input.uninit;
    let checked = mode != Mode::Hostile;
    // Nothing `now()` may return less than: the largest reading so far, or a rebase's `at`.
    let mut floor = 0u64;
    let mut behind = false;

    let now = |floor: &mut u64, started: bool, behind: bool| {
        let t = clock.now().as_nanos();
        if !started {
            assert_eq!(t, 0, "a clock not started reads {t}");
        }
        if checked {
            assert!(
                t >= *floor,
                "time went back: {t} after {floor} (behind: {behind})"
            );
        }
        *floor = (*floor).max(t);
    };

    for op in &input.ops {
        match op {
            Op::Now => now(&mut floor, started, behind),
            Op::Pass(steps) => counter.steps.borrow_mut().extend(steps.iter().copied()),
            Op::Update => {
                let r = clock.update();
                if !started {
                    assert_eq!(r, Err(ClockError::NotStarted));
                }
                if checked {
                    assert_ne!(r, Err(ClockError::Busy), "busy with one writer");
                    assert_eq!(r == Err(ClockError::Behind), behind, "update: {r:?}");
                }
            }
            Op::Recalibrate(m) => {
                if let Some(f) = rate(*m, f0) {
                    let r = clock.recalibrate(f);
                    if !started {
                        assert_eq!(r, Err(ClockError::NotStarted));
                    }
                    if checked && r != Err(ClockError::Busy) {
                        assert_eq!(r == Err(ClockError::Behind), behind, "recalibrate: {r:?}");
                    }
                }
            }
            Op::Rebase { at_ns, millihz } => {
                if let Some(f) = rate(*millihz, f0) {
                    let r = clock.rebase(Instant::from_nanos(*at_ns), f);
                    if started {
                        assert_eq!(r, Ok(()), "rebase with one writer");
                        floor = floor.max(*at_ns);
                        behind = false;
                        counter.behind_room.set(None);
                        counter.back_total.set(0);
                    } else {
                        assert_eq!(r, Err(ClockError::NotStarted));
                    }
                }
            }
            Op::Reset(by) => {
                if mode == Mode::Reset && started && counter.reset(*by) {
                    behind = true;
                }
            }
            Op::Start(m) => {
                if let Some(f) = rate(*m, f0) {
                    let r = clock.start(f);
                    assert_eq!(r.is_ok(), !started, "start: {r:?}");
                    if !started {
                        started = true;
                        // The epoch is now: a reading of 0 onwards.
                    }
                }
            }
            Op::Look { a, b } => {
                let _ = (clock.scale().millihz(), clock.update_interval());
                let _ = clock.delay();
                let _ = clock.elapsed(Instant::from_nanos(*a));
                let _ = clock.delta(RawInstant::from_ticks(*a), RawInstant::from_ticks(*b));
                let _ = clock.delta(RawInstant::from_ticks(*a), clock.raw());
                let health = clock.health();
                if mode == Mode::Contract {
                    assert!(!health.counter_behind, "behind in the contract mode");
                }
                let _ = format!("{clock:?}");
            }
        }
        counter.finished();
        if input.read_after_each {
            now(&mut floor, started, behind);
            counter.finished();
        }
    }
});
