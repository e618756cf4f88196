//! An outside attack on `Pl031` (`read_at_edge`, `read_unix_seconds`, its `Reference`) from its
//! docs alone, run on aarch64 Linux under qemu-user (`cargo test -p baretime-aarch64 --target
//! aarch64-unknown-linux-gnu --test adversary_pl031`): the "PL031" is a page of ordinary memory
//! whose data register (RTCDR, offset 0) the test changes from inside the clock's counter reads,
//! at a counter value it chooses, so the true edge is known.
//!
//! Promises attacked: the edge lies between `before` and `after`; `unix_seconds` is the new
//! count; no edge within 1.2 s of clock time is `NotTicking` (and not much later or earlier);
//! the count wraps in 2106 to 0 (a step back); the `Reference` returns the edge's count in ms
//! and the previous count when no edge comes.
#![cfg(target_arch = "aarch64")]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use baretime::{Clock, FnCounter, Frequency, Reference};
use baretime_aarch64::{Pl031, Pl031Error};

/// The register block: 4 KiB, RTCDR first.
static REGS: [AtomicU32; 1024] = [const { AtomicU32::new(0) }; 1024];
/// The counter (1 GHz: a tick is a ns), what each read adds, and the edge: at the first read
/// whose value reaches `EDGE_AT`, RTCDR becomes `NEW` (and `PREV` keeps the value before it).
static TICKS: AtomicU64 = AtomicU64::new(0);
static STEP: AtomicU64 = AtomicU64::new(1);
static EDGE_AT: AtomicU64 = AtomicU64::new(u64::MAX);
static NEW: AtomicU32 = AtomicU32::new(0);
static BEFORE_EDGE: AtomicU64 = AtomicU64::new(0);
static AFTER_EDGE: AtomicU64 = AtomicU64::new(0);
/// One test at a time: the statics are shared.
static LOCK: Mutex<()> = Mutex::new(());

fn ticks() -> u64 {
    let prev = TICKS.fetch_add(STEP.load(Ordering::SeqCst), Ordering::SeqCst);
    let now = prev + STEP.load(Ordering::SeqCst);
    let at = EDGE_AT.load(Ordering::SeqCst);
    if now >= at && prev < at {
        // The RTC changes between the previous counter read (at most `prev`) and this one.
        REGS[0].store(NEW.load(Ordering::SeqCst), Ordering::SeqCst);
        BEFORE_EDGE.store(prev, Ordering::SeqCst);
        AFTER_EDGE.store(now, Ordering::SeqCst);
    }
    now
}

fn rtc() -> Pl031 {
    // SAFETY: `REGS` is a static 4 KiB block, readable for the whole program, standing in for
    // the PL031's registers; reading it has no side effect.
    unsafe { Pl031::new(REGS.as_ptr() as usize) }
}

fn clock() -> Clock<FnCounter<fn() -> u64>> {
    Clock::new(
        FnCounter::new(ticks as fn() -> u64, 64),
        Frequency::exact_hz(1_000_000_000).unwrap(),
    )
}

fn setup(count: u32, new: u32, edge_in: u64, step: u64) -> Clock<FnCounter<fn() -> u64>> {
    TICKS.store(0, Ordering::SeqCst);
    STEP.store(step, Ordering::SeqCst);
    EDGE_AT.store(u64::MAX, Ordering::SeqCst);
    REGS[0].store(count, Ordering::SeqCst);
    NEW.store(new, Ordering::SeqCst);
    let c = clock();
    let t0 = TICKS.load(Ordering::SeqCst);
    EDGE_AT.store(t0.saturating_add(edge_in), Ordering::SeqCst);
    c
}

/// The edge lies between `before` and `after`, and `unix_seconds` is the new count: edges at
/// every offset into the second, polled at rates from 1 ns to 50 µs a read.
#[test]
fn the_edge_is_in_the_bracket() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut cases = 0;
    for step in [1u64, 7, 100, 1_000, 50_000] {
        for _ in 0..40 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let edge_in = x % 1_000_000_000;
            let count = (x >> 32) as u32 % 0xFFFF_FFF0;
            let c = setup(count, count + 1, edge_in, step);
            // A poll every `step` ns over up to a second: bound the work for slow polls only.
            if edge_in / step > 2_000_000 {
                continue;
            }
            let e = rtc().read_at_edge(&c).expect("the RTC ticks");
            cases += 1;
            let (b, a) = (e.before.as_nanos(), e.after.as_nanos());
            let (lo, hi) = (
                BEFORE_EDGE.load(Ordering::SeqCst),
                AFTER_EDGE.load(Ordering::SeqCst),
            );
            assert_eq!(e.unix_seconds, u64::from(count) + 1);
            // The change happened in (lo, hi]: the bracket must overlap it.
            assert!(
                b <= hi && a >= lo,
                "step {step}, edge in ({lo}, {hi}]: bracket [{b}, {a}] misses it"
            );
            assert!(b <= a, "before {b} after {a}");
            assert_eq!(e.width_ns(), a - b);
        }
    }
    eprintln!("{cases} edges bracketed");
}

/// No change within 1.2 s of clock time: `NotTicking`, after about 1.2 s (not a second early,
/// not unboundedly late: a poll is two clock reads and the check follows one, so a few of this
/// test's counter steps over, which the docs' "at most 1.2 s" does not mention).
#[test]
fn not_ticking_after_1_2_s() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for step in [1_000u64, 10_000, 333_333, 100_000_000] {
        let c = setup(5, 6, u64::MAX / 2, step);
        let t0 = c.now().as_nanos();
        let r = rtc().read_at_edge(&c);
        let t1 = c.now().as_nanos();
        assert_eq!(r, Err(Pl031Error::NotTicking));
        let waited = t1 - t0;
        assert!(
            waited >= 1_200_000_000 - 2 * step && waited <= 1_200_000_000 + 8 * step,
            "step {step}: waited {waited} ns of clock time, docs: 1.2 s"
        );
    }
}

/// The count wraps in 2106 to 0: `read_unix_seconds` says 0 (a step back, as documented); the
/// edge reader returns the second that began.
#[test]
fn the_2106_wrap() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let c = setup(u32::MAX, 0, 10_000, 100);
    let e = rtc().read_at_edge(&c).expect("ticks");
    eprintln!("edge at the wrap: unix_seconds {}", e.unix_seconds);
    assert_eq!(rtc().read_unix_seconds(), 0, "wraps to 0");
    assert!(
        e.unix_seconds == 0 || e.unix_seconds == 1 << 32,
        "the second that began: {}",
        e.unix_seconds
    );
}

/// A count that someone moves back (a write to RTCLR) is still an edge: no panic, the new count.
#[test]
fn a_count_moved_back() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let c = setup(1_000_000, 3, 50_000, 100);
    let e = rtc().read_at_edge(&c).expect("changes");
    assert_eq!(e.unix_seconds, 3);
}

/// The `Reference`: each read waits for the next edge and returns its count in ms; with no
/// edge in 2^24 reads, the previous count.
#[test]
fn reference_reads_latch_at_the_edge() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let _c = setup(1_700_000_000, 1_700_000_001, u64::MAX / 2, 1);
    let mut r = rtc();
    let bits = r.bits();
    assert!((1..=64).contains(&bits));
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    // No edge at all: the docs say "the previous count"; for the first read there is none.
    let first = r.read();
    eprintln!("first read, no edge in 2^24 reads: {first}");
    // A thread moves the count on and on: every read returns a count the RTC showed, in ms,
    // each later than the one before (it waits for the next edge).
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                REGS[0].fetch_add(1, Ordering::SeqCst);
                std::thread::yield_now();
            }
        });
        let mut prev = 0u64;
        for _ in 0..50 {
            let v = r.read();
            assert_eq!(v % 1000, 0, "not whole seconds: {v}");
            assert!(v > prev, "not the next edge: {prev} then {v}");
            assert!(v / 1000 >= 1_700_000_000 && v <= (u64::from(u32::MAX) * 1000) & mask);
            prev = v;
        }
        stop.store(true, Ordering::SeqCst);
    });
    // No edge again: the previous count.
    let last = r.read();
    let again = r.read();
    assert_eq!(again, last, "no edge: the previous count");
}
