//! Property tests of the Clock on a simulated counter: across any sequence of counter
//! advances and recalibrations, time never goes back and never jumps.

use baretime::{Accuracy, Clock, Counter, Frequency, Source};
use core::cell::Cell;
use proptest::prelude::*;

struct Manual {
    ticks: Cell<u64>,
    bits: u32,
}

impl Counter for Manual {
    fn ticks(&self) -> u64 {
        self.ticks.get() & baretime::Width::new(self.bits).mask()
    }
    fn bits(&self) -> u32 {
        self.bits
    }
}

#[derive(Clone, Debug)]
enum Op {
    Advance(u64),
    Recalibrate(u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u64..50_000_000).prop_map(Op::Advance),
            1 => (1_000u64..10_000_000_000).prop_map(Op::Recalibrate),
        ],
        1..60,
    )
}

proptest! {
    #[test]
    fn never_back_never_jumps(
        start in any::<u64>(),
        hz in 1_000u64..10_000_000_000,
        bits in prop_oneof![Just(64u32), Just(56), Just(48)],
        ops in ops(),
    ) {
        let counter = Manual { ticks: Cell::new(start), bits };
        let f = |hz| Frequency::from_hz(hz, Source::User, Accuracy::Exact).unwrap();
        let clock = Clock::new(&counter, f(hz));
        let mut last = clock.now();
        let mut max_ns_per_tick = 1_000_000_000u64.div_ceil(hz);
        for op in ops {
            match op {
                Op::Advance(t) => {
                    counter.ticks.set(counter.ticks.get().wrapping_add(t));
                    let now = clock.now();
                    prop_assert!(now >= last, "went back: {:?} -> {:?}", last, now);
                    // No jump: the step is what the ticks are worth at the slowest rate in
                    // force around it (+1 ns rounding per conversion).
                    let step = (now - last).as_nanos() as u64;
                    prop_assert!(step <= t.saturating_mul(max_ns_per_tick) + 2, "jump {} for {} ticks", step, t);
                    last = now;
                }
                Op::Recalibrate(hz) => {
                    let before = clock.now();
                    match clock.recalibrate(f(hz)) {
                        Ok(()) => max_ns_per_tick = max_ns_per_tick.max(1_000_000_000u64.div_ceil(hz)),
                        Err(e) => prop_assert_eq!(e, baretime::ClockError::Busy),
                    }
                    // Publishing alone does not move time, but for the nanosecond that the
                    // writer's carry may restore (the fraction the readers' floor dropped:
                    // never past the counter's time, promise 2).
                    let after = clock.now();
                    prop_assert!(after >= before && (after - before).as_nanos() <= 1,
                        "publishing moved time: {:?} -> {:?}", before, after);
                    prop_assert!(after >= last);
                    last = after;
                }
            }
        }
    }
}
