//! Model-checks the Clock's lock-free publication with loom:
//! `RUSTFLAGS="--cfg loom" cargo test --release -p loom-model --test loom_clock` (run by
//! `cargo xtask test`). `loom_model` is baretime's clock sources compiled against loom's
//! atomics; without `--cfg loom` this file is empty.
//!
//! The counter is a loom atomic, so loom explores every interleaving of the writer's
//! stores with the reader's loads *and* counter reads. Checked: a reader never uses a
//! half-written slot (its results stay on the one true timeline), and its successive
//! readings never go back, across a recalibration to a faster and to a slower rate.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use loom_model::{Clock, Counter, Frequency};

/// 1 MHz counter that advances 100 ticks (µs) per read, like time passing between reads
/// (faster than the 20 µs handover margin: every close goes through the full protocol, and
/// loom may stall the writer between any two of its steps while readers read on).
struct LoomCounter(AtomicU64);

impl Counter for LoomCounter {
    fn ticks(&self) -> u64 {
        self.0.fetch_add(100, Ordering::SeqCst) + 100
    }
    fn bits(&self) -> u32 {
        64
    }
}

fn check(new_hz: u64) {
    loom::model(move || {
        let clock = Arc::new(Clock::new(
            LoomCounter(AtomicU64::new(0)),
            Frequency::exact_hz(1_000_000).unwrap(),
        ));
        let writer = {
            let clock = clock.clone();
            thread::spawn(move || {
                // Loom may stop the writer between any two of its steps for as long as the
                // reader keeps reading (each read moves the counter on): a stalled writer.
                clock
                    .recalibrate(Frequency::exact_hz(new_hz).unwrap())
                    .unwrap();
            })
        };
        let a = clock.now();
        let b = clock.now();
        writer.join().unwrap();
        let c = clock.now();
        assert!(a <= b && b <= c, "went back: {a:?} {b:?} {c:?}");
        // Every reading stays on the true timeline: a handful of reads of 100 µs at rates
        // within 2× of 1 MHz, never a value from a torn or zeroed slot.
        assert!(c.as_nanos() <= 10_000_000, "implausible reading {c:?}");
        assert!(a.as_nanos() > 0, "zero reading");
    });
}

#[test]
fn recalibrate_faster_never_goes_back() {
    check(2_000_000);
}

#[test]
fn recalibrate_slower_never_goes_back() {
    check(500_000);
}

/// Two publications: the second rewrites the slot a stalled reader may still be reading, so
/// the generation check is what keeps it from using a half-written slot.
#[test]
fn a_reader_overtaken_by_two_publications_reads_again() {
    loom::model(|| {
        let clock = Arc::new(Clock::new(
            LoomCounter(AtomicU64::new(0)),
            Frequency::exact_hz(1_000_000).unwrap(),
        ));
        let writer = {
            let clock = clock.clone();
            thread::spawn(move || {
                let _ = clock.recalibrate(Frequency::exact_hz(2_000_000).unwrap());
                let _ = clock.recalibrate(Frequency::exact_hz(1_000_000).unwrap());
            })
        };
        let a = clock.now();
        writer.join().unwrap();
        let b = clock.now();
        assert!(a <= b, "went back: {a:?} {b:?}");
        assert!(b.as_nanos() <= 10_000_000, "implausible reading {b:?}");
    });
}
