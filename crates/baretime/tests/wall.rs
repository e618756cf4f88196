//! `WallClock` read by several threads while one slews it again and again: no reader ever
//! sees the wall time go back — on its own thread, or against any reading that finished
//! before its own began (a shared floor) — and every reading is within the slews' offsets of
//! the clock's time plus the setting (below it only while a write is in progress: a writer
//! stalled past its handover leaves the wall time standing still until it publishes).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use baretime::{Clock, FnCounter, Frequency, Instant, WallClock};

/// One global 64-bit counter that every read moves on (1 tick = 1 ns).
static TICKS: AtomicU64 = AtomicU64::new(0);
fn ticks() -> u64 {
    TICKS.fetch_add(37, Ordering::Relaxed)
}
type Counter = FnCounter<fn() -> u64>;
static CLOCK: Clock<Counter> = Clock::uninit(FnCounter::new(ticks as fn() -> u64, 64));
static WALL: WallClock<'static, Counter> = WallClock::new(&CLOCK);
/// The latest reading any thread finished with.
static FLOOR: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
/// Odd while the writer is inside a slew: a reading that overlapped none is held to the
/// lower bound (one that did may stand still past the handover while the writer is stalled,
/// and catch up when it publishes: the docs' "catch-up equal to the stall").
static WRITING: AtomicU64 = AtomicU64::new(0);
/// Readings held to the lower bound.
static QUIET: AtomicU64 = AtomicU64::new(0);

const UNIX: u64 = 1_700_000_000_000_000_000;
/// Each slew's offset, alternately forward and back.
const OFFSET: i64 = 3_000;

#[test]
fn readers_never_see_a_slew_go_back() {
    CLOCK
        .start(Frequency::exact_hz(1_000_000_000).unwrap())
        .unwrap();
    assert_eq!(WALL.set(UNIX, Instant::ZERO), Ok(None));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            thread::spawn(|| {
                let mut prev = 0;
                let mut reads = 0u64;
                while !STOP.load(Ordering::Relaxed) || reads < 100_000 {
                    let floor = FLOOR.load(Ordering::SeqCst);
                    let writes = WRITING.load(Ordering::SeqCst);
                    let t0 = CLOCK.now().as_nanos();
                    let w = WALL.unix_ns().unwrap();
                    let t1 = CLOCK.now().as_nanos();
                    let quiet = writes % 2 == 0 && WRITING.load(Ordering::SeqCst) == writes;
                    assert!(w >= prev, "back on one thread: {prev} then {w}");
                    assert!(w >= floor, "back across threads: {floor} then {w}");
                    // Net offset of the alternating slews is in [-OFFSET, OFFSET].
                    let lo = (UNIX + t0).saturating_sub(OFFSET as u64 + 1);
                    let hi = UNIX + t1 + OFFSET as u64 + 1;
                    assert!(w <= hi, "{w} above {hi}");
                    assert!(
                        !quiet || w >= lo,
                        "{w} below {lo} with no write in progress"
                    );
                    QUIET.fetch_add(u64::from(quiet), Ordering::Relaxed);
                    FLOOR.fetch_max(w, Ordering::SeqCst);
                    prev = w;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    // A slew replaces the one in progress and returns what was left of it, so the writer
    // knows the net offset absorbed so far (`net`) and aims each slew at +OFFSET or -OFFSET
    // in turn: the net offset moves from one within [-OFFSET, OFFSET] toward another, and
    // stays in that range.
    let mut net = 0i64;
    let mut last = 0i64;
    let mut sign = 1;
    let mut started = 0;
    for _ in 0..2_000 {
        let offset = sign * OFFSET - net;
        started += u32::from(offset != 0);
        WRITING.fetch_add(1, Ordering::SeqCst);
        let left = WALL
            .slew(offset, 400_000)
            .expect("one writer: never refused");
        WRITING.fetch_add(1, Ordering::SeqCst);
        // A pause between slews past the handover (100 µs of the clock's time, which the next
        // write would otherwise wait out inside the write), so that readings also fall where
        // no write is in progress.
        let done = CLOCK.now();
        while CLOCK.now() - done < core::time::Duration::from_micros(150) {}
        net += last - left;
        last = offset;
        assert!(net.abs() <= OFFSET);
        sign = -sign;
    }
    STOP.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(reads >= 300_000);
    let quiet = QUIET.load(Ordering::Relaxed);
    eprintln!("{reads} readings, {quiet} with no write in progress");
    assert!(
        quiet >= 10_000,
        "too few readings with no write in progress: {quiet}"
    );
    assert_eq!(WALL.health().slews, started); // an offset of 0 starts none
    assert!(started >= 1_000);
    assert_eq!(WALL.health().steps, 0);
}
