//! Model-checks the `CoarseClock`'s 32-bit word (two versions of two halves behind a
//! generation number: its form on targets without 64-bit atomics, which loom builds always)
//! with loom: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p loom-model
//! --test loom_coarse`
//! (run by `cargo xtask test`). Without `--cfg loom` this file is empty.
//!
//! Checked, over every interleaving and every value loom's memory model lets a relaxed load
//! return: a reader never returns a torn pair of halves or a value nobody gave (values cross
//! 2^32, so a torn pair is a different number), its readings never go back, a refresh that
//! finished is never lost by a reader after it, and racing refreshers never lower the time.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use loom_model::{CoarseClock, Instant};

const A: u64 = 0x1_0000_0001;
const B: u64 = 0x0_ffff_ffff;
const C: u64 = 0x2_0000_0002;

fn given(v: Instant) -> bool {
    [0, A, B, C].contains(&v.as_nanos())
}

/// Two racing refreshers (one with an older value that crosses the halves the other way)
/// and a reader on its own thread: never torn, never back.
#[test]
fn racing_refreshers_and_a_reader() {
    loom::model(|| {
        let coarse = Arc::new(CoarseClock::new());
        let r1 = {
            let coarse = coarse.clone();
            thread::spawn(move || {
                coarse.refresh_from(Instant::from_nanos(A));
            })
        };
        let r2 = {
            let coarse = coarse.clone();
            thread::spawn(move || {
                coarse.refresh_from(Instant::from_nanos(B));
            })
        };
        let a = coarse.now();
        let b = coarse.now();
        assert!(given(a) && given(b), "torn: {a:?} {b:?}");
        assert!(a <= b, "went back: {a:?} {b:?}");
        r1.join().unwrap();
        r2.join().unwrap();
        let c = coarse.now();
        assert!(b <= c, "went back: {b:?} {c:?}");
        // Both finished: at least the larger is there, unless one was turned away while the
        // other wrote (then the other's is).
        assert!(c.as_nanos() == A || c.as_nanos() == B, "{c:?}");
    });
}

/// One refresher publishes twice while a reader reads: the second publication rewrites the
/// slot the reader may be reading, so the generation check is what keeps it from a torn pair.
#[test]
fn a_reader_overtaken_by_two_refreshes_reads_again() {
    loom::model(|| {
        let coarse = Arc::new(CoarseClock::new());
        let writer = {
            let coarse = coarse.clone();
            thread::spawn(move || {
                coarse.refresh_from(Instant::from_nanos(B));
                coarse.refresh_from(Instant::from_nanos(C));
            })
        };
        let a = coarse.now();
        assert!(given(a), "torn: {a:?}");
        writer.join().unwrap();
        let b = coarse.now();
        assert_eq!(b.as_nanos(), C, "a finished refresh lost");
        assert!(a <= b);
    });
}

/// A refresh that finished before a read began (ordered through a join) is seen by it.
#[test]
fn a_finished_refresh_is_seen() {
    loom::model(|| {
        let coarse = Arc::new(CoarseClock::new());
        let writer = {
            let coarse = coarse.clone();
            thread::spawn(move || coarse.refresh_from(Instant::from_nanos(A)))
        };
        let reader = {
            let coarse = coarse.clone();
            thread::spawn(move || coarse.now())
        };
        writer.join().unwrap();
        let early = reader.join().unwrap();
        assert!(given(early), "torn: {early:?}");
        assert_eq!(coarse.now().as_nanos(), A);
    });
}
