//! [`CoarseClock`]: the time as of the last tick, read without touching the counter (Linux's
//! `CLOCK_MONOTONIC_COARSE`, FreeBSD's `getbinuptime`, nginx's cached time, quanta's
//! `recent()`).
//!
//! # The word and its two forms
//!
//! The coarse time is one 64-bit count of nanoseconds that only grows.
//!
//! - **Where the target has 64-bit atomics** (x86_64, aarch64, riscv64): one `AtomicU64`. A
//!   refresh is a `fetch_max` (relaxed), a read one relaxed load. All modifications of one
//!   atomic are in one order, and a `fetch_max` stores the larger of its value and the one
//!   before it, so the word takes only growing values; a load that happens after another
//!   (on one CPU, or ordered by any synchronisation) reads the same value or a later one
//!   (the coherence of one location). Nothing else is needed, so nothing else is paid.
//!
//! - **Where it has only 32-bit atomics** (thumbv7em, thumbv6m with `portable-atomic`,
//!   riscv32): no single load can read 64 bits, so the word is kept as two versions of two
//!   32-bit halves behind a generation number, as the [`Clock`]'s own timelines are (FreeBSD's
//!   `timehands`; the ordering argument is the one in `sync.rs`, Boehm's, MSPC 2012):
//!
//!   `seq` is `2k` while version `k` is published and nobody is writing, `2k + 1` while a
//!   refresher is writing version `k + 1`; version `k` lives in slot `k mod 2`.
//!
//!   - A refresher takes `seq` from even `2k` to `2k + 1` by compare-and-swap (acquire: it
//!     has seen version `k`), issues a release fence, writes `max(version k, its time)` into
//!     slot `k + 1 mod 2` (relaxed) and stores `2k + 2` (release). If `seq` is odd, another
//!     refresher is writing: this one leaves the word to it and returns, without waiting. A
//!     compare-and-swap that fails on an even `seq` tries again with it; after the first try
//!     (a guess), each failure is another refresher's publication.
//!   - A reader loads `seq` (acquire), the two halves of slot `⌊seq/2⌋ mod 2` (relaxed),
//!     issues an acquire fence, loads `seq` again (relaxed), and accepts if the second is at
//!     most 2 past the first rounded down to even: no refresher has begun to write the next
//!     version into the same slot. If one had and the reader saw any half it wrote, the
//!     reader's fence synchronises with that refresher's release fence, so its second load
//!     sees the odd `seq` and it reads again: an accepted read saw one version whole, never
//!     a torn pair.
//!   - The slot a reader reads is never the one being written. A reader that interrupted a
//!     refresher (the same CPU) therefore never waits for it: the refresher is stalled, `seq`
//!     stays where the reader found it, and the read is accepted on the first try. A reader
//!     reads again only when two refreshes overtook it (another CPU's, or two nested
//!     interrupts' inside its own few loads), and never waits for a refresher to finish.
//!   - Versions hold growing values (each is the max of the one before it and a time), and a
//!     later read loads a `seq` no earlier than an earlier read's: never back. `seq` wraps
//!     after 2^31 refreshes; a reader stalled across exactly that many inside its four loads
//!     could be fooled (at one refresh per millisecond, 24 days inside one read).
//!
//!   A read costs four loads and a fence there, still no counter read. A refresher stalled
//!   between its compare-and-swap and its store (interrupted, preempted) holds the other
//!   refreshers off for the length of its stall (they return at once, their time unstored):
//!   it costs freshness, never a reader's wait. That is the stall in the staleness bound.
//!
//! The model check (`loom-model/tests/loom_coarse.rs`) runs the 32-bit form under loom's
//! memory model; the unit tests below drive it through 20 000 schedules of readers and
//! refreshers nested inside one another at every step (as interrupts nest on one CPU).

use crate::clock::Clock;
use crate::counter::Counter;
use crate::instant::Instant;

/// The time as of the last refresh, read with one atomic load and no counter read: for the
/// hot paths that need a time often and precisely only to a tick (timeouts, cache expiry,
/// timestamps on a fast path, rate limits).
///
/// A periodic tick (or the timer interrupt that serves deadlines) calls
/// [`CoarseClock::refresh`] with the [`Clock`]; everyone else calls [`CoarseClock::now`].
/// `new` is `const`, so the coarse clock can be a `static` beside a `static` `Clock`.
///
/// # Promises
///
/// 1. **Never back.** A [`CoarseClock::now`] that happens after another (on one CPU, or on
///    CPUs ordered by any synchronisation) never returns less, whatever the refreshers do:
///    a refresh with an older time (a refresher stalled between its `Clock` read and its
///    store, a slow CPU's reading) is ignored, never stored.
/// 2. **Never ahead.** Every time it returns is one given to a refresh (a `Clock` reading,
///    or the `Instant` given to [`CoarseClock::refresh_from`]), or 0 before the first; so it
///    is never ahead of the `Clock` it is refreshed from.
/// 3. **Staleness.** A `now()` returns at least the time of every refresh that finished
///    before it began (ordered as in 1), except, on targets without 64-bit atomics, a
///    refresh that found another refresher writing: it returns without storing (it does not
///    wait), and the writer's time stands until the next refresh. So where refreshes start
///    at most `T` apart (the tick), a reading is behind the `Clock` by at most `T` plus the
///    time one refresh takes (its `Clock::now` and one store), plus the longest a refresher
///    was stalled inside its refresh in that span (an interrupt or a preemption between its
///    `Clock` read and its store, or a tick that came late). The bound is the caller's: the
///    coarse clock never reads the counter, and a tick that stops stops it.
/// 4. **Readers never wait.** A read never locks and never waits for a refresher, not even
///    one it interrupted; it reads again only when two refreshes overtook it (only on targets
///    without 64-bit atomics). Refreshers never wait either.
///
/// The cost, where the target has 64-bit atomics: one relaxed load (a plain `mov` on x86_64,
/// an `ldr` on aarch64), about 0.02× a [`Clock::now`] on the plain TSC read (an AMD EPYC KVM
/// guest, `cargo bench --bench read_ratio` in `suite/`).
/// Elsewhere four loads and a fence (see the module docs).
///
/// ```
/// use baretime::{Clock, CoarseClock, FnCounter, Frequency};
///
/// static COARSE: CoarseClock = CoarseClock::new();
/// # let clock = Clock::new(FnCounter::new(|| 1_000_000, 64), Frequency::exact_hz(1_000_000).unwrap());
/// // In the periodic tick (or the timer interrupt):
/// let fresh = COARSE.refresh(&clock);
/// // On the hot path: no counter read.
/// let t = COARSE.now();
/// assert_eq!(t, fresh);
/// ```
pub struct CoarseClock {
    word: Word,
}

#[cfg(all(not(loom), target_has_atomic = "64"))]
type Word = wide::Wide;
#[cfg(any(loom, not(target_has_atomic = "64")))]
type Word = split::Split;

impl CoarseClock {
    /// A coarse clock at time 0 (an unstarted [`Clock`]'s reading) until its first refresh.
    #[cfg(not(loom))]
    pub const fn new() -> CoarseClock {
        CoarseClock { word: Word::new() }
    }

    /// A coarse clock at time 0 until its first refresh (loom's atomics have no `const fn`).
    #[cfg(loom)]
    pub fn new() -> CoarseClock {
        CoarseClock { word: Word::new() }
    }

    /// The time as of the latest refresh: one atomic load where the target has 64-bit
    /// atomics, no counter read anywhere. Never goes back; behind the `Clock` by at most the
    /// staleness bound in the [type docs](CoarseClock).
    #[inline]
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.word.load())
    }

    /// Reads `clock` and raises the coarse time to that reading (never lowers it). Returns
    /// the `Clock`'s reading, the precise time, for the caller's own use (a tick handler's
    /// deadlines). Call it from the periodic tick or the timer interrupt; any number of
    /// refreshers may race, and none waits for another.
    #[inline]
    pub fn refresh<C: Counter>(&self, clock: &Clock<C>) -> Instant {
        let now = clock.now();
        self.word.raise(now.as_nanos());
        now
    }

    /// Raises the coarse time to `now` if it is later (an earlier `now` is ignored): for a
    /// handler that has just read its `Clock` anyway. `now` should be a reading of the `Clock`
    /// this coarse clock follows: the coarse clock trusts it, and never comes back from a
    /// time ahead of that clock.
    #[inline]
    pub fn refresh_from(&self, now: Instant) {
        self.word.raise(now.as_nanos());
    }
}

impl Default for CoarseClock {
    fn default() -> CoarseClock {
        CoarseClock::new()
    }
}

impl core::fmt::Debug for CoarseClock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CoarseClock")
            .field("now", &self.now())
            .finish()
    }
}

/// The word where the target has 64-bit atomics: one `AtomicU64`.
#[cfg(all(not(loom), target_has_atomic = "64"))]
mod wide {
    use crate::sync::{AtomicU64, Ordering};

    pub(super) struct Wide(AtomicU64);

    impl Wide {
        pub(super) const fn new() -> Wide {
            Wide(AtomicU64::new(0))
        }

        /// Relaxed: the coherence of this one location is all that is needed.
        #[inline(always)]
        pub(super) fn load(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }

        /// Raises the word to `ns` if it is below. Always stores (`true`): no refresher is
        /// ever turned away here.
        #[inline(always)]
        pub(super) fn raise(&self, ns: u64) -> bool {
            self.0.fetch_max(ns, Ordering::Relaxed);
            true
        }
    }
}

/// The word where the target has only 32-bit atomics: two versions of two halves behind a
/// generation number (the protocol and its argument are in the module docs). Compiled on every
/// target for the unit tests, and under loom for the model check.
#[cfg(any(test, loom, not(target_has_atomic = "64")))]
mod split {
    use super::{hook, Point};
    use crate::sync::{fence, spin_loop, AtomicU32, Ordering};

    /// Halves of one version: `[low, high]`.
    type Halves = [AtomicU32; 2];

    pub(crate) struct Split {
        seq: AtomicU32,
        slots: [Halves; 2],
    }

    #[inline(always)]
    const fn join(lo: u32, hi: u32) -> u64 {
        ((hi as u64) << 32) | lo as u64
    }

    impl Split {
        #[cfg(not(loom))]
        pub(crate) const fn new() -> Split {
            Split {
                seq: AtomicU32::new(0),
                slots: [
                    [AtomicU32::new(0), AtomicU32::new(0)],
                    [AtomicU32::new(0), AtomicU32::new(0)],
                ],
            }
        }

        #[cfg(loom)]
        pub(crate) fn new() -> Split {
            Split {
                seq: AtomicU32::new(0),
                slots: [
                    [AtomicU32::new(0), AtomicU32::new(0)],
                    [AtomicU32::new(0), AtomicU32::new(0)],
                ],
            }
        }

        /// Version `number`'s slot.
        #[inline(always)]
        fn slot(&self, number: u32) -> &Halves {
            let [even, odd] = &self.slots;
            if number & 1 == 0 {
                even
            } else {
                odd
            }
        }

        /// One version, read whole; again only if two refreshes overtook the read.
        #[inline(always)]
        pub(crate) fn load(&self) -> u64 {
            loop {
                let s1 = self.seq.load(Ordering::Acquire);
                hook(Point::ReadSeq);
                let [lo, hi] = self.slot(s1 >> 1);
                let lo = lo.load(Ordering::Relaxed);
                hook(Point::ReadLow);
                let hi = hi.load(Ordering::Relaxed);
                hook(Point::ReadHigh);
                fence(Ordering::Acquire);
                let s2 = self.seq.load(Ordering::Relaxed);
                // Version ⌊s1/2⌋'s slot is rewritten from seq = 2⌊s1/2⌋ + 3 on.
                if s2.wrapping_sub(s1 & !1) <= 2 {
                    return join(lo, hi);
                }
                hook(Point::ReadRetry);
                spin_loop();
            }
        }

        /// Publishes `max(current, ns)` as the next version, unless another refresher is
        /// writing (`false`: it is left to that one).
        pub(crate) fn raise(&self, ns: u64) -> bool {
            hook(Point::WriteStart);
            // Claims the word: `seq` from even to odd by compare-and-swap. The first try
            // guesses 0 (a failed compare-and-swap returns the value and writes nothing); a
            // later failure means another refresher published meanwhile. (A relaxed load
            // first would do as well on hardware, but loom 0.7 explores no interleaving after
            // a load that precedes a compare-and-swap, and a `fetch_or` that leaves an odd
            // `seq` as it was trips its coherence check: this form is the one it checks.)
            let mut s = 0;
            while let Err(now) =
                self.seq
                    .compare_exchange(s, s | 1, Ordering::Acquire, Ordering::Relaxed)
            {
                if now & 1 != 0 {
                    // Another refresher holds the word: leave it to that one.
                    return false;
                }
                s = now;
                hook(Point::WriteStart);
            }
            // A reader that sees any half written below also sees the odd `seq` (module docs).
            fence(Ordering::Release);
            hook(Point::WriteClaimed);
            let number = s >> 1;
            let [lo, hi] = self.slot(number);
            // The previous writer's halves: visible through the acquire above, and stable
            // while `seq` is odd (only its holder writes).
            let current = join(lo.load(Ordering::Relaxed), hi.load(Ordering::Relaxed));
            let next = if ns > current { ns } else { current };
            let [lo, hi] = self.slot(number.wrapping_add(1));
            lo.store(next as u32, Ordering::Relaxed);
            hook(Point::WriteLow);
            hi.store((next >> 32) as u32, Ordering::Relaxed);
            hook(Point::WriteHigh);
            self.seq.store(s.wrapping_add(2), Ordering::Release);
            true
        }
    }
}

/// Steps of the 32-bit protocol where the unit tests stall a reader or a refresher and run
/// others (as an interrupt would).
#[cfg(any(test, loom, not(target_has_atomic = "64")))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// Reader: loaded `seq`.
    ReadSeq,
    /// Reader: loaded the low half.
    ReadLow,
    /// Reader: loaded the high half, before the second `seq`.
    ReadHigh,
    /// Reader: rejected its read, about to read again.
    ReadRetry,
    /// Refresher: before claiming the word.
    WriteStart,
    /// Refresher: holds the odd `seq`, before writing.
    WriteClaimed,
    /// Refresher: wrote the low half.
    WriteLow,
    /// Refresher: wrote the high half, before publishing.
    WriteHigh,
}

/// Calls the unit tests' hook at `point` (nothing outside them).
#[cfg(any(test, loom, not(target_has_atomic = "64")))]
#[inline(always)]
fn hook(point: Point) {
    #[cfg(all(test, not(loom)))]
    tests::call_hook(point);
    #[cfg(not(all(test, not(loom))))]
    let _ = point;
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The 32-bit protocol, driven through deterministic schedules: at every step of every
    //! operation, a schedule may run other whole operations right there (readers and
    //! refreshers, themselves stalled at their own steps, up to four deep), as interrupts do
    //! on one CPU. Checked at every read: never back, never a torn or unpublished value,
    //! never older than a refresh that stored before it began; a refresher is turned away
    //! only by one writing; a reader reads again only after two refreshes overtook it.

    use super::split::Split;
    use super::Point;
    use std::cell::{Cell, RefCell};
    use std::vec::Vec;

    std::thread_local! {
        static HOOK: Cell<Option<fn(Point)>> = const { Cell::new(None) };
        static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
    }

    pub(super) fn call_hook(point: Point) {
        if let Some(f) = HOOK.with(Cell::get) {
            f(point);
        }
    }

    /// One schedule's state.
    struct World {
        word: &'static Split,
        rng: u64,
        /// Operations in progress, outermost first: `Some(claimed)` for a refresher, `None`
        /// for a reader.
        stack: Vec<Option<bool>>,
        /// Every value ever offered to a refresh, and 0.
        offered: Vec<u64>,
        /// The largest value offered so far.
        top: u64,
        /// Largest value stored by a finished refresh, and largest read by a finished read.
        stored: u64,
        read: u64,
        /// Publications so far.
        published: u64,
        /// Operations run, to bound a schedule.
        ops: u32,
    }

    impl World {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.rng ^= self.rng >> 12;
            self.rng ^= self.rng << 25;
            self.rng ^= self.rng >> 27;
            self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
        WORLD.with(|w| f(w.borrow_mut().as_mut().expect("a world")))
    }

    /// At each step: maybe run a nested operation (an interrupt), never holding the borrow.
    fn on_point(point: Point) {
        if point == Point::WriteClaimed {
            with(|w| {
                if let Some(Some(claimed)) = w.stack.last_mut() {
                    *claimed = true;
                }
            });
        }
        loop {
            let nest = with(|w| {
                let depth = w.stack.len();
                let r = w.next();
                depth < 5 && w.ops < 24 && r % 3 == 0
            });
            if !nest {
                return;
            }
            run_one();
        }
    }

    /// Runs one operation the schedule picks: a read, or a refresh with a value ahead, the
    /// same, just behind, or far behind (a stalled refresher), possibly carrying into the
    /// high half.
    fn run_one() {
        let (word, op) = with(|w| {
            w.ops += 1;
            let r = w.next();
            (w.word, r)
        });
        if op % 2 == 0 {
            read(word);
        } else {
            let v = with(|w| {
                let r = w.next();
                let v = match (op >> 1) % 6 {
                    0 => w.top.wrapping_add(1 + r % 1000),
                    // Across the 2^32 boundary of the halves.
                    1 => ((w.top >> 32) + 1 + (r % 3)) << 32 | (r % 7),
                    2 => (w.top | 0xffff_ffff).saturating_sub(r % 3),
                    3 => w.top,
                    4 => w.top.saturating_sub(1 + r % 1000),
                    _ => w.offered[(r % w.offered.len() as u64) as usize],
                };
                w.offered.push(v);
                w.top = w.top.max(v);
                v
            });
            refresh(word, v);
        }
    }

    fn read(word: &Split) {
        let (before_read, before_stored, before_pub) = with(|w| {
            w.stack.push(None);
            (w.read, w.stored, w.published)
        });
        let retries = Cell::new(0u32);
        // Count retries through the hook: wrap the reader's loop.
        let v = READ_RETRIES.with(|c| {
            let saved = c.replace(0);
            let v = word.load();
            retries.set(c.replace(saved));
            v
        });
        with(|w| {
            w.stack.pop();
            assert!(v >= before_read, "went back: {v} after {before_read}");
            assert!(
                v >= before_stored,
                "older than a finished refresh: {v} < {before_stored}"
            );
            assert!(w.offered.contains(&v), "torn or invented value {v:#x}");
            assert!(v <= w.top, "ahead of every refresh: {v:#x}");
            let overtaking = w.published - before_pub;
            assert!(
                retries.get() == 0 || overtaking >= 2,
                "read again after {overtaking} refreshes"
            );
            assert!(
                u64::from(retries.get()) <= overtaking,
                "more retries than refreshes"
            );
            w.read = w.read.max(v);
        });
        if retries.get() > 0 {
            RETRIED.with(|c| c.set(c.get() + 1));
        }
    }

    std::thread_local! {
        static READ_RETRIES: Cell<u32> = const { Cell::new(0) };
        /// Over all schedules: reads that read again, refreshes turned away.
        static RETRIED: Cell<u32> = const { Cell::new(0) };
        static TURNED_AWAY: Cell<u32> = const { Cell::new(0) };
    }

    fn refresh(word: &Split, v: u64) {
        let someone_writing = with(|w| {
            let writing = w.stack.contains(&Some(true));
            w.stack.push(Some(false));
            writing
        });
        let stored = word.raise(v);
        with(|w| {
            w.stack.pop();
            assert_eq!(
                stored, !someone_writing,
                "turned away with nobody writing, or wrote over a writer"
            );
            if stored {
                w.published += 1;
                w.stored = w.stored.max(v);
            } else {
                TURNED_AWAY.with(|c| c.set(c.get() + 1));
            }
        });
        if stored {
            // Right after its own store (nothing nested can run here), the word holds at
            // least its value.
            let now = word.load();
            assert!(now >= v, "a stored refresh is not visible: {now} < {v}");
        }
    }

    fn hook_fn(point: Point) {
        if point == Point::ReadRetry {
            READ_RETRIES.with(|c| c.set(c.get() + 1));
        }
        on_point(point);
    }

    #[test]
    fn schedules_never_go_back_tear_or_wait() {
        let mut ops = 0;
        for seed in 1..=20_000u64 {
            let word: &'static Split = Box::leak(Box::new(Split::new()));
            WORLD.with(|w| {
                *w.borrow_mut() = Some(World {
                    word,
                    rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
                    stack: Vec::new(),
                    offered: std::vec![0],
                    top: 0,
                    stored: 0,
                    read: 0,
                    published: 0,
                    ops: 0,
                })
            });
            HOOK.with(|h| h.set(Some(hook_fn)));
            // Top-level operations, each followed by a read (every act has an observer).
            for _ in 0..6 {
                run_one();
                read(word);
            }
            HOOK.with(|h| h.set(None));
            ops += with(|w| w.ops);
        }
        // The schedules did nest (more operations than the 6 top-level ones each), and they
        // reached both rare paths: a read overtaken by two refreshes, a refresher turned away.
        let (retried, turned_away) = (RETRIED.with(Cell::get), TURNED_AWAY.with(Cell::get));
        std::println!("{ops} operations, {retried} reads again, {turned_away} turned away");
        assert!(ops > 20_000 * 8, "{ops}");
        assert!(
            retried > 100 && turned_away > 100,
            "{retried} {turned_away}"
        );
    }

    /// A reader that interrupts a refresher at each of its steps reads the last published
    /// version on its first try.
    #[test]
    fn a_reader_inside_a_refresher_never_waits() {
        for stop in [
            Point::WriteStart,
            Point::WriteClaimed,
            Point::WriteLow,
            Point::WriteHigh,
        ] {
            let word: &'static Split = Box::leak(Box::new(Split::new()));
            assert!(word.raise(0x1_0000_0005));
            STOP.with(|s| s.set(Some((stop, word))));
            HOOK.with(|h| h.set(Some(stop_fn)));
            assert!(word.raise(0x2_0000_0001));
            HOOK.with(|h| h.set(None));
            let (seen, retries) = SEEN.with(Cell::get).expect("the reader ran");
            assert_eq!(seen, 0x1_0000_0005, "at {stop:?}");
            assert_eq!(retries, 0, "at {stop:?}");
            // Before its claim, the nested refresher's value got in first; the outer one then
            // claimed and kept the larger.
            let last = if stop == Point::WriteStart {
                u64::MAX
            } else {
                0x2_0000_0001
            };
            assert_eq!(word.load(), last, "at {stop:?}");
            SEEN.with(|s| s.set(None));
        }
    }

    std::thread_local! {
        static STOP: Cell<Option<(Point, &'static Split)>> = const { Cell::new(None) };
        static SEEN: Cell<Option<(u64, u32)>> = const { Cell::new(None) };
    }

    fn stop_fn(point: Point) {
        if point == Point::ReadRetry {
            READ_RETRIES.with(|c| c.set(c.get() + 1));
            return;
        }
        if let Some((stop, word)) = STOP.with(Cell::get) {
            if point == stop {
                STOP.with(|s| s.set(None));
                let before = READ_RETRIES.with(|c| c.replace(0));
                let v = word.load();
                let retries = READ_RETRIES.with(|c| c.replace(before));
                SEEN.with(|s| s.set(Some((v, retries))));
                // A refresher nested here is turned away once the outer one holds the word,
                // and stores if it came before the claim.
                let turned_away = !word.raise(u64::MAX);
                assert_eq!(turned_away, stop != Point::WriteStart, "at {stop:?}");
            }
        }
    }

    /// The halves never tear across 2^32, and an older value is never stored.
    #[test]
    fn sequential_values() {
        let word = Split::new();
        assert_eq!(word.load(), 0);
        for v in [5, 0xffff_ffff, 0x1_0000_0000, 3, 0x1_0000_0000, u64::MAX, 7] {
            let before = word.load();
            assert!(word.raise(v));
            assert_eq!(word.load(), before.max(v));
        }
    }
}
