//! `CoarseClock`'s promises through its public API: never back, never ahead of what it was
//! given, no older than the latest finished refresh, no counter read; single-threaded, under
//! threads with a stalled refresher, and under deterministic schedules in the style of
//! `interleave.rs`, where every counter read inside a refresh may stall it while other readers
//! and refreshers run to completion (an interrupt, or a preemption between the refresher's
//! `Clock` read and its store).
//!
//! The 32-bit form of the word (targets without 64-bit atomics) has its own schedule test
//! next to it (`src/coarse.rs`) and a loom model (`loom-model/tests/loom_coarse.rs`).

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baretime::{Clock, CoarseClock, Counter, Frequency, Instant};

/// A 1 GHz counter that advances by `step` ticks per read and counts its reads.
struct Ticking {
    at: AtomicU64,
    step: u64,
    reads: AtomicU64,
}

impl Ticking {
    fn new(step: u64) -> Ticking {
        Ticking {
            at: AtomicU64::new(1_000),
            step,
            reads: AtomicU64::new(0),
        }
    }
}

thread_local! {
    /// This thread's refreshes stall after their counter read (threaded test).
    static STALL: Cell<bool> = const { Cell::new(false) };
    /// The schedule test's hook, called inside every counter read after the value is taken.
    static HOOK: Cell<Option<fn()>> = const { Cell::new(None) };
}

impl Counter for Ticking {
    fn ticks(&self) -> u64 {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let t = self.at.fetch_add(self.step, Ordering::SeqCst) + self.step;
        // The reading is taken; the refresh that asked for it stores it only after this.
        if STALL.with(Cell::get) {
            std::thread::sleep(Duration::from_micros(200));
        }
        if let Some(f) = HOOK.with(Cell::get) {
            f();
        }
        t
    }
    fn bits(&self) -> u32 {
        64
    }
}

fn ghz() -> Frequency {
    Frequency::exact_hz(1_000_000_000).unwrap()
}

static COARSE: CoarseClock = CoarseClock::new();

#[test]
fn a_static_starts_at_zero_and_follows_its_refreshes() {
    assert_eq!(COARSE.now(), Instant::from_nanos(0));
    assert_eq!(CoarseClock::default().now(), Instant::from_nanos(0));
    let clock = Clock::new(Ticking::new(1_000), ghz());
    let fresh = COARSE.refresh(&clock);
    assert_eq!(COARSE.now(), fresh, "equals the refresher's reading");
    assert!(format!("{COARSE:?}").contains("CoarseClock"));
}

#[test]
fn never_back_equals_the_latest_and_ignores_older_refreshes() {
    let coarse = CoarseClock::new();
    let mut top = 0u64;
    // Rising, equal, older, across 2^32 (the halves of the 32-bit form) and to the end.
    for v in [
        5,
        5,
        4,
        0xffff_ffff,
        0x1_0000_0000,
        0xffff_ffff,
        0x1_0000_0001,
        1,
        u64::MAX - 1,
        0,
        u64::MAX,
        7,
    ] {
        let before = coarse.now();
        coarse.refresh_from(Instant::from_nanos(v));
        top = top.max(v);
        let after = coarse.now();
        assert!(after >= before, "went back: {before:?} -> {after:?}");
        assert_eq!(after.as_nanos(), top, "not the latest refresh (after {v})");
    }
}

#[test]
fn reads_never_touch_the_counter_and_wait_for_the_next_refresh() {
    let clock = Clock::new(Ticking::new(1_000), ghz());
    let coarse = CoarseClock::new();
    let first = coarse.refresh(&clock);
    let reads = clock.counter().reads.load(Ordering::SeqCst);
    for _ in 0..1_000 {
        assert_eq!(coarse.now(), first, "moved without a refresh");
    }
    assert_eq!(
        clock.counter().reads.load(Ordering::SeqCst),
        reads,
        "a coarse read read the counter"
    );
    let second = coarse.refresh(&clock);
    assert!(second > first);
    assert_eq!(coarse.now(), second);
    // Staleness: at most what passed since the last refresh.
    let precise = clock.now();
    assert!(precise >= coarse.now());
    assert!(precise - coarse.now() <= Duration::from_micros(2));
}

/// Readers and refreshers on threads; one refresher's reading stalls 200 µs between the
/// counter read and its store (others store later readings meanwhile), another refreshes
/// from readings it held back. Each reader's times never go back, each is a reading some
/// refresher had, and none is ahead of the clock read after it.
#[test]
fn threads_with_stalled_refreshers_never_see_time_go_back() {
    let clock = Arc::new(Clock::new(Ticking::new(37), ghz()));
    let coarse = Arc::new(CoarseClock::new());
    let stop = Arc::new(AtomicBool::new(false));
    let given = Arc::new(Mutex::new(HashSet::from([0u64])));
    // Refreshes done by each kind of refresher.
    let done: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
    let mut refreshers = Vec::new();
    for kind in 0..3 {
        let (clock, coarse, stop, given, done) = (
            clock.clone(),
            coarse.clone(),
            stop.clone(),
            given.clone(),
            done.clone(),
        );
        refreshers.push(std::thread::spawn(move || {
            STALL.with(|s| s.set(kind == 1));
            let mut held = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                if kind == 2 {
                    // Held back: refresh with a reading taken up to 64 refreshes ago.
                    let t = clock.now();
                    given.lock().unwrap().insert(t.as_nanos());
                    held.push(t);
                    let old = held[(n as usize * 7) % held.len()];
                    coarse.refresh_from(old);
                    if held.len() > 64 {
                        held.remove(0);
                    }
                } else {
                    // Kind 1 stalls inside its counter read, after taking the reading.
                    let fresh = coarse.refresh(&clock);
                    given.lock().unwrap().insert(fresh.as_nanos());
                }
                done[kind].fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let readers_stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (clock, coarse, readers_stop) = (clock.clone(), coarse.clone(), readers_stop.clone());
        readers.push(std::thread::spawn(move || {
            let mut last = Instant::from_nanos(0);
            let mut seen = Vec::new();
            let mut i = 0u32;
            while !readers_stop.load(Ordering::Relaxed) {
                i = i.wrapping_add(1);
                let t = coarse.now();
                assert!(t >= last, "went back: {last:?} -> {t:?}");
                if i % 64 == 0 {
                    let precise = clock.now();
                    assert!(t <= precise, "ahead of the clock: {t:?} > {precise:?}");
                    seen.push(t.as_nanos());
                }
                last = t;
            }
            seen
        }));
    }
    // Until the stalled refresher has been overtaken many times.
    while done[1].load(Ordering::Relaxed) < 200 || done[2].load(Ordering::Relaxed) < 2_000 {
        std::thread::sleep(Duration::from_millis(1));
    }
    readers_stop.store(true, Ordering::Relaxed);
    let seen: Vec<u64> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    stop.store(true, Ordering::Relaxed);
    for r in refreshers {
        r.join().unwrap();
    }
    let given = given.lock().unwrap();
    let moved = seen.iter().filter(|&&v| v > 0).count();
    assert!(moved > 0, "the refreshers never ran");
    for v in seen {
        // A refresh through `refresh(&clock)` records its reading after storing it, so a
        // reader may see one not yet recorded: every reading is recorded by the join.
        assert!(given.contains(&v), "{v} was never a reading");
    }
}

/// One schedule's world, for the deterministic schedule test.
struct World {
    clock: &'static Clock<Ticking>,
    coarse: &'static CoarseClock,
    rng: u64,
    depth: u32,
    ops: u32,
    /// Every reading given to a refresh (and 0), the largest, the largest a finished
    /// refresh stored, the largest a finished read returned.
    given: HashSet<u64>,
    top: u64,
    stored: u64,
    read: u64,
    /// Refreshes whose store came after a later reading's (stalled refreshers).
    overtaken: u32,
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|w| f(w.borrow_mut().as_mut().unwrap()))
}

impl World {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Inside every counter read: maybe run other whole operations before the reading is
/// returned (the operation that read it is stalled meanwhile), up to four deep.
fn on_counter_read() {
    loop {
        let nest = with(|w| {
            let r = w.next();
            w.depth < 4 && w.ops < 40 && r % 3 != 0
        });
        if !nest {
            return;
        }
        with(|w| w.depth += 1);
        act();
        with(|w| w.depth -= 1);
    }
}

/// One operation the schedule picks: a coarse read; a refresh from the clock; a refresh from
/// a reading taken now, or from one already given (held back); or a plain clock read (time
/// passes).
fn act() {
    let (clock, coarse, pick) = with(|w| {
        w.ops += 1;
        (w.clock, w.coarse, w.next() % 5)
    });
    match pick {
        0 | 1 => observe(coarse),
        2 => {
            let t = coarse.refresh(clock);
            stored(t.as_nanos(), coarse);
        }
        3 => {
            let old = with(|w| {
                let v: Vec<u64> = w.given.iter().copied().collect();
                let i = (w.next() % v.len() as u64) as usize;
                v[i]
            });
            coarse.refresh_from(Instant::from_nanos(old));
            stored(old, coarse);
        }
        _ => {
            let t = clock.now();
            with(|w| {
                w.given.insert(t.as_nanos());
                w.top = w.top.max(t.as_nanos());
            });
        }
    }
}

/// After a refresh with `v` finished: the coarse time is at least `v`, and at least every
/// earlier finished refresh.
fn stored(v: u64, coarse: &CoarseClock) {
    let now = coarse.now().as_nanos();
    with(|w| {
        w.given.insert(v);
        if v < w.top {
            w.overtaken += 1;
        }
        w.top = w.top.max(v);
        w.stored = w.stored.max(v);
        assert!(
            now >= w.stored,
            "a finished refresh lost: {now} < {}",
            w.stored
        );
    });
}

fn observe(coarse: &CoarseClock) {
    let (read, stored) = with(|w| (w.read, w.stored));
    let t = coarse.now().as_nanos();
    with(|w| {
        assert!(t >= read, "went back: {read} -> {t}");
        assert!(t >= stored, "older than a finished refresh: {t} < {stored}");
        assert!(w.given.contains(&t), "{t} was never given");
        w.read = w.read.max(t);
    });
}

#[test]
fn schedules_with_stalled_refreshers_never_go_back() {
    let mut overtaken = 0;
    for seed in 1..=3_000u64 {
        let clock: &'static Clock<Ticking> =
            Box::leak(Box::new(Clock::new(Ticking::new(1 + seed % 1_000), ghz())));
        let coarse: &'static CoarseClock = Box::leak(Box::new(CoarseClock::new()));
        WORLD.with(|w| {
            *w.borrow_mut() = Some(World {
                clock,
                coarse,
                rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                depth: 0,
                ops: 0,
                given: HashSet::from([0]),
                top: 0,
                stored: 0,
                read: 0,
                overtaken: 0,
            })
        });
        HOOK.with(|h| h.set(Some(on_counter_read)));
        for _ in 0..8 {
            act();
            observe(coarse);
        }
        HOOK.with(|h| h.set(None));
        overtaken += with(|w| w.overtaken);
    }
    // The schedules did stall refreshers past later readings.
    assert!(overtaken > 1_000, "{overtaken}");
}
