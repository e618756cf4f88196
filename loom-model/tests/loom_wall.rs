//! Model-checks the `WallClock`'s lock-free reads against a writer with loom:
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p loom-model --test
//! loom_wall` (run by `cargo xtask test`). Without `--cfg loom` this file is empty.
//!
//! The clock runs on a loom atomic counter that moves 100 µs a read, faster than the wall's
//! 100 µs handover margin, so every write's end is decided through the whole protocol — its
//! two 32-bit halves proposed by the writer or by readers that find the close announced —
//! while loom stalls the writer between any two of its steps and readers read on. Checked:
//! readings never go back (across a slew, forward or back, and a second writer's refusal), every
//! reading is one the wall clock could give (no torn or zeroed version), and the health is
//! whole.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_model::{Clock, Counter, Frequency, WallClock, MAX_SLEW_PPM};

/// 1 MHz, 100 ticks (100 µs) a read.
struct LoomCounter(AtomicU64);

impl Counter for LoomCounter {
    fn ticks(&self) -> u64 {
        self.0.fetch_add(100, Ordering::SeqCst) + 100
    }
    fn bits(&self) -> u32 {
        64
    }
}

/// The wall time set: 2^40 ns, so that a reading from a zeroed or torn version (0, or a
/// value near 0 or 2^32) is far outside what any true reading can be.
const U: u64 = 1 << 40;

/// Where the counter starts: just short of 2^31 ns of clock time (2.147 483 648 s), so that
/// the ends proposed in the model fall either side of it and their two halves differ.
const START_TICKS: u64 = 2_147_200;

fn leaked_clock() -> &'static Clock<LoomCounter> {
    let clock = Clock::new(
        LoomCounter(AtomicU64::new(0)),
        Frequency::exact_hz(1_000_000).unwrap(),
    );
    clock.counter().0.store(START_TICKS, Ordering::SeqCst);
    let t = clock.now().as_nanos();
    assert!(
        (2_147_000_000..1 << 31).contains(&t),
        "the clock starts at {t} ns"
    );
    Box::leak(Box::new(clock))
}

/// True readings lie between U (before the setting's handover, the wall time runs back from
/// U + the handover's clock time) and U + 1.5 × the clock's time (a slew at 500 000 ppm) —
/// a handful of reads of 100 µs.
fn plausible(w: Option<u64>) -> u64 {
    let w = w.expect("set before the threads start");
    assert!(
        (U - 1_000_000..U + 20_000_000).contains(&w),
        "implausible {w}"
    );
    w
}

/// A slew written while the main thread reads: never back, never torn.
#[test]
fn a_slew_while_reading_never_goes_back() {
    loom::model(|| {
        let clock = leaked_clock();
        let wall = Arc::new(WallClock::new(clock));
        wall.set(U, clock.now()).unwrap();
        let writer = {
            let wall = wall.clone();
            thread::spawn(move || {
                wall.slew(1_000_000, MAX_SLEW_PPM).unwrap();
            })
        };
        let a = plausible(wall.unix_ns());
        let b = plausible(wall.unix_ns());
        writer.join().unwrap();
        let c = plausible(wall.unix_ns());
        assert!(a <= b && b <= c, "went back: {a} {b} {c}");
        let h = wall.health();
        assert_eq!((h.steps, h.slews), (0, 1));
    });
}

/// A slew back races the main thread, which reads, then writes a slew of its own (`Busy`
/// while the other writes, changing nothing), then reads: never back, the health counts
/// exactly the slews that went through. (Two threads: a third reader thread made the model
/// run for more than ten minutes.)
#[test]
fn a_slew_back_and_a_racing_writer_never_go_back() {
    loom::model(|| {
        let clock = leaked_clock();
        let wall = Arc::new(WallClock::new(clock));
        wall.set(U, clock.now()).unwrap();
        let writer = {
            let wall = wall.clone();
            thread::spawn(move || wall.slew(-1_000_000, MAX_SLEW_PPM).is_ok())
        };
        let a = plausible(wall.unix_ns());
        let mine = wall.slew(2_000, MAX_SLEW_PPM).is_ok();
        let b = plausible(wall.unix_ns());
        let wrote = writer.join().unwrap();
        let c = plausible(wall.unix_ns());
        assert!(a <= b && b <= c, "went back: {a} {b} {c}");
        // One at a time: whichever took the writer flag first went through.
        assert!(wrote || mine, "both writers refused");
        assert_eq!(wall.health().slews, u32::from(mine) + u32::from(wrote));
    });
}
