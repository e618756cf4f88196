//! [`ExtendedTimer`]: random interleavings of readers and the wrap interrupt against a
//! simulated timer, and issue 14's case 10 (a timer's own wrap interrupt is too slow to
//! update a clock on the bare timer, and fast enough for one on the extended count).
//!
//! The simulated world: a true tick count `NOW`; the timer shows `NOW mod 2^bits` and raises
//! its wrap flag at every wrap. Between any two steps of a reader, time moves on (any amount
//! the cadence rule allows: the wrap interrupt finishes before the timer wraps again) and
//! the wrap interrupt may run to completion (a reader below it: thread mode). Inside the
//! wrap interrupt — on entry, around its flag clear, after counting — a reader above it may
//! run to completion, while time moves on. Every reading must be a count the timer had
//! during the call: never back, never ahead.
//!
//! `SCHEDULES=N` sets the number of random schedules (default 20 000).

use std::cell::Cell;

use baretime::{Clock, ClockError, Counter, ExtendedTimer, FnCounter, Frequency, NarrowTimer};

thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
    static BITS: Cell<u32> = const { Cell::new(8) };
    /// The wrap flag is set while `NOW >> BITS` is above this.
    static CLEARED: Cell<u64> = const { Cell::new(0) };
    /// Wraps whose interrupt has finished.
    static COUNTED: Cell<u64> = const { Cell::new(0) };
    /// SysTick: the hardware clears the flag on interrupt entry.
    static HW_CLEARS: Cell<bool> = const { Cell::new(false) };
    /// Whether readers above the wrap interrupt run.
    static HIGH_READERS: Cell<bool> = const { Cell::new(true) };
    static IN_ISR: Cell<bool> = const { Cell::new(false) };
    static IN_HIGH: Cell<bool> = const { Cell::new(false) };
    static RNG: Cell<u64> = const { Cell::new(1) };
    /// Readings that were not a count the timer had during the call: (reading, from, to).
    static BAD: Cell<Option<Bad>> = const { Cell::new(None) };
    static READS: Cell<u64> = const { Cell::new(0) };
    static HIGH_READS: Cell<u64> = const { Cell::new(0) };
    static EXT: ExtendedTimer<Sim> = const { ExtendedTimer::new(Sim) };
}

/// A reading that was not a count the timer had during the call: (reading, from, to).
type Bad = (u64, u64, u64);

fn rand() -> u64 {
    // xorshift64*
    let mut x = RNG.get();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    RNG.set(x);
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn chance(one_in: u64) -> bool {
    rand() % one_in == 0
}

/// The simulated timer: every access is an interleaving point.
struct Sim;

impl NarrowTimer for Sim {
    fn count(&self) -> u32 {
        step();
        let v = (NOW.get() & ((1u64 << BITS.get()) - 1)) as u32;
        step();
        v
    }
    fn bits(&self) -> u32 {
        BITS.get()
    }
    fn wrap_pending(&self) -> bool {
        step();
        let v = NOW.get() >> BITS.get() > CLEARED.get();
        step();
        v
    }
    fn clear_wrap(&self) {
        maybe_high_reader();
        if !HW_CLEARS.get() {
            CLEARED.set(NOW.get() >> BITS.get());
        }
        maybe_high_reader();
    }
}

/// Time moves on by an amount the cadence rule allows: never two wraps uncounted, and
/// never a new wrap while one is uncounted or being counted.
fn advance() {
    let bits = BITS.get();
    let period = 1u64 << bits;
    let now = NOW.get();
    let wraps = now >> bits;
    let next = if wraps > COUNTED.get() || IN_ISR.get() {
        wraps + 1
    } else {
        wraps + 2
    };
    let room = (next << bits) - 1 - now;
    let by = match rand() % 6 {
        0 | 1 => 0,
        2 => 1,
        3 => rand() % 8,
        4 => rand() % (period / 2 + 1),
        _ => rand() % (2 * period),
    };
    NOW.set(now + by.min(room));
}

/// One interleaving point of a reader: time moves on; below the wrap interrupt, the
/// interrupt may run.
fn step() {
    advance();
    if !IN_ISR.get() && !IN_HIGH.get() && NOW.get() >> BITS.get() > COUNTED.get() && chance(2) {
        wrap_interrupt();
    }
}

/// The wrap interrupt: count the wrap (readers above it may run at every point).
fn wrap_interrupt() {
    IN_ISR.set(true);
    if HW_CLEARS.get() {
        CLEARED.set(NOW.get() >> BITS.get()); // SysTick: PENDSTSET cleared on entry
    }
    maybe_high_reader();
    EXT.with(|e| e.on_wrap());
    maybe_high_reader();
    COUNTED.set(COUNTED.get() + 1);
    IN_ISR.set(false);
}

fn maybe_high_reader() {
    if HIGH_READERS.get() && !IN_HIGH.get() && chance(2) {
        IN_HIGH.set(true);
        checked_read();
        HIGH_READS.set(HIGH_READS.get() + 1);
        IN_HIGH.set(false);
    }
}

/// Reads the extended count and checks it against the true counts during the call.
fn checked_read() {
    let from = NOW.get();
    let v = EXT.with(|e| e.ticks());
    let to = NOW.get();
    READS.set(READS.get() + 1);
    if (v < from || v > to) && BAD.get().is_none() {
        BAD.set(Some((v, from, to)));
    }
}

/// Runs one schedule of `reads` readings below the wrap interrupt, from `seed`; returns the
/// first bad reading.
fn schedule(seed: u64, bits: u32, hw_clears: bool, high: bool, reads: u32) -> Option<Bad> {
    RNG.set(seed | 1);
    BITS.set(bits);
    // Start anywhere in the first period, with the state and flag as at boot.
    NOW.set(rand() & ((1u64 << bits) - 1));
    CLEARED.set(0);
    COUNTED.set(0);
    HW_CLEARS.set(hw_clears);
    HIGH_READERS.set(high);
    BAD.set(None);
    for _ in 0..reads {
        step();
        checked_read();
    }
    BAD.get()
}

/// Runs each schedule on a thread of its own (a fresh `EXT`).
fn run(schedules: u64, hw_clears: bool, high: bool) -> (u64, Vec<(u64, u32, Bad)>) {
    let threads = 4u64;
    let per = schedules.div_ceil(threads);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut bad = Vec::new();
                let mut reads = 0;
                for i in 0..per {
                    let seed = (t * per + i).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xdead_beef;
                    let bits = 2 + (seed % 15) as u32; // 2 to 16 bits
                                                       // A fresh thread for each schedule: EXT's wrap count starts at zero.
                    let (b, r) = std::thread::spawn(move || {
                        let b = schedule(seed, bits, hw_clears, high, 200);
                        (b, READS.get() + HIGH_READS.get())
                    })
                    .join()
                    .unwrap();
                    reads += r;
                    if let Some(b) = b {
                        bad.push((seed, bits, b));
                    }
                }
                (reads, bad)
            })
        })
        .collect();
    let mut reads = 0;
    let mut bad = Vec::new();
    for h in handles {
        let (r, b) = h.join().unwrap();
        reads += r;
        bad.extend(b);
    }
    (reads, bad)
}

fn schedules() -> u64 {
    std::env::var("SCHEDULES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

#[test]
fn never_back_never_ahead_with_a_flag_the_interrupt_clears() {
    let n = schedules();
    let (reads, bad) = run(n, false, true);
    assert!(reads > n * 200, "{reads} reads");
    assert!(
        bad.is_empty(),
        "{} bad schedules, first {:?}",
        bad.len(),
        bad[0]
    );
}

#[test]
fn never_back_never_ahead_with_systick_read_at_or_below_its_priority() {
    let n = schedules();
    let (reads, bad) = run(n, true, false);
    assert!(reads >= n * 200, "{reads} reads");
    assert!(
        bad.is_empty(),
        "{} bad schedules, first {:?}",
        bad.len(),
        bad[0]
    );
}

/// The rule's reason: SysTick's pending bit is cleared on interrupt entry, so a reader above
/// SysTick that runs before the handler counts the wrap reads a whole wrap back.
#[test]
fn systick_read_above_its_priority_can_read_a_wrap_back() {
    let (_, bad) = run(2_000, true, true);
    assert!(!bad.is_empty(), "the entry gap was never hit");
    for (seed, bits, (v, from, to)) in &bad {
        let v = v + (1 << bits);
        assert!(
            *from <= v && v <= *to,
            "seed {seed}: read {v} − 2^{bits} in [{from}, {to}]: not exactly one wrap back"
        );
    }
}

/// Case 10 of issue 14: a 24-bit SysTick at 25 MHz, its wrap interrupt the only periodic
/// code, readers in thread mode every eighth of a wrap.
const SYSTICK_BITS: u32 = 24;
const PERIOD: u64 = 1 << SYSTICK_BITS;
const HZ: u64 = 25_000_000;
const WRAPS: u64 = 40;

fn ns(ticks: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(HZ)) as u64
}

#[test]
fn case_10_systick_as_the_counter_with_update_from_its_wrap_is_late() {
    let now = Cell::new(0u64);
    let systick = FnCounter::new(|| now.get() & (PERIOD - 1), SYSTICK_BITS);
    let clock = Clock::new(&systick, Frequency::exact_hz(HZ).unwrap());
    let t0 = clock.now();
    let mut late = 0;
    for wrap in 1..=WRAPS {
        for eighth in 1..8 {
            now.set((wrap - 1) * PERIOD + eighth * PERIOD / 8);
            let _ = clock.now();
        }
        now.set(wrap * PERIOD + 200); // the wrap interrupt, 8 µs after the wrap
        if clock.update() == Err(ClockError::Late) {
            late += 1;
        }
    }
    let elapsed = (clock.now() - t0).as_nanos() as u64;
    let truth = ns(now.get());
    assert!(late >= WRAPS - 1, "{late} of {WRAPS} updates late");
    assert!(clock.health().late_updates >= (WRAPS - 1) as u32);
    // The clock stood still from each deadline (half a wrap) to the next update.
    assert!(
        elapsed < truth * 6 / 10,
        "clock {elapsed} ns, true {truth} ns"
    );
}

/// The wrap-interrupt state of the hand-moved SysTick below.
struct HandSysTick<'a> {
    now: &'a Cell<u64>,
    cleared: &'a Cell<u64>,
}

impl NarrowTimer for HandSysTick<'_> {
    fn count(&self) -> u32 {
        (self.now.get() & (PERIOD - 1)) as u32
    }
    fn bits(&self) -> u32 {
        SYSTICK_BITS
    }
    fn wrap_pending(&self) -> bool {
        self.now.get() / PERIOD > self.cleared.get()
    }
    fn clear_wrap(&self) {} // PENDSTSET: cleared on entry
}

#[test]
fn case_10_the_extended_systick_with_update_from_its_wrap_is_never_late() {
    let now = Cell::new(0u64);
    let cleared = Cell::new(0u64);
    let timer = ExtendedTimer::new(HandSysTick {
        now: &now,
        cleared: &cleared,
    });
    assert_eq!(timer.bits(), 55);
    let clock = Clock::new(&timer, Frequency::exact_hz(HZ).unwrap());
    let t0 = clock.now();
    let mut last = t0;
    for wrap in 1..=WRAPS {
        for eighth in 1..8 {
            now.set((wrap - 1) * PERIOD + eighth * PERIOD / 8);
            let t = clock.now();
            assert!(t >= last);
            last = t;
        }
        // A reader while the wrap is pending (interrupts masked, say): counted already.
        now.set(wrap * PERIOD + 100);
        let t = clock.now();
        assert!(t >= last);
        assert_eq!((t - t0).as_nanos() as u64, ns(now.get()));
        last = t;
        // The wrap interrupt, 8 µs after the wrap: entry clears PENDSTSET.
        now.set(wrap * PERIOD + 200);
        cleared.set(wrap);
        timer.on_wrap();
        assert_eq!(clock.update(), Ok(()));
    }
    assert_eq!(timer.wraps(), WRAPS as u32);
    assert_eq!(clock.health().late_updates, 0);
    // The clock tracks true time (to the nanosecond's rounding).
    let elapsed = (clock.now() - t0).as_nanos() as u64;
    let truth = ns(now.get());
    assert!(
        elapsed.abs_diff(truth) <= 1,
        "clock {elapsed} ns, true {truth} ns"
    );
}
