//! [`Clock`]: a counter plus a timebase, published lock-free; time never jumps or goes back.
//!
//! # How recalibration stays monotonic
//!
//! The timebase — `(base_ticks, base_ns, scale)` — lives in one of two *slots* (FreeBSD's
//! `timehands`, with a ring of two). Readers compute
//! `base_ns + scale(ticks − base_ticks)` from the slot `current` points at. A recalibration
//! (one writer at a time; a second gets [`ClockError::Busy`], never a wait) fills the *other*
//! slot so that the new timeline starts where the old one is at that moment, then points
//! `current` at it. Readers never wait for the writer: they keep using the old slot until the
//! switch.
//!
//! ## The ordering argument
//!
//! - Writer: `gen = 0` (relaxed); release fence; write the slot's fields (relaxed); `gen = g`
//!   (release); `current = slot` (seq-cst).
//! - Reader: read the counter; `i = current` (seq-cst: a plain load on x86, `LDAR` on Arm);
//!   `g = slot[i].gen` (acquire); read the fields (relaxed); acquire fence; accept only if
//!   `g ≠ 0` and `slot[i].gen == g`.
//!
//! If a reader saw any field written after the writer's `gen = 0`, its acquire fence
//! synchronises with the writer's release fence, so its second `gen` load sees 0 or a newer
//! generation and it retries: a reader never uses a half-written slot (torn `u64` halves on
//! 32-bit targets included). This is the seqlock of Boehm, "Can seqlocks get along with
//! programming language memory models?" (MSPC 2012); the loom test in `tests/loom_clock.rs`
//! model-checks it.
//!
//! ## The handover
//!
//! A reader reads the counter *before* it looks at `current`, so a reader that still finds
//! the old slot read the counter before the switch was visible; one that finds the new slot
//! may hold a count from just before the writer's. To give all of them the same answer, the
//! new timeline does not
//! start at the writer's counter read `t` but at `t + margin` (1 ms of ticks, or an eighth
//! of a narrow counter's wrap): until then readers of the new slot compute with the *old*
//! timebase (the slot keeps a copy), exactly as readers of the old slot do.
//! So both slots agree on every tick before `t + margin`, and afterwards the new scale takes
//! over from the same point: no jump, no step back. A reader of the old slot never holds a
//! count past `t + margin`, because the writer publishes only while it is itself well inside
//! the margin (and retries otherwise); a count older than the new slot's previous timebase
//! (a reader preempted across two publications) is thrown away and read again. What remains
//! is the case of a *writer* interrupted for longer than the margin
//! between that check and its final store: in a kernel that can preempt the writer, call
//! [`Clock::recalibrate`] with interrupts disabled.
//!
//! A recalibration whose new timeline has not started yet (within the margin of the last
//! one) returns [`ClockError::Busy`].

use core::fmt;

use crate::counter::Counter;
use crate::delay::Delay;
use crate::frequency::Frequency;
use crate::instant::{Instant, RawInstant};
use crate::scale::{mul_q64, saturate_u64, Scale};
use crate::sync::{fence, spin_loop, AtomicBool, AtomicU32, Ordering, RelaxedU64};

/// How far ahead of the writer's counter read the new timeline starts.
pub const HANDOVER_NS: u64 = 1_000_000;

/// Why a [`Clock`] did not publish a new timebase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ClockError {
    /// Another recalibration is being written, or the last one's timeline has not started
    /// yet (it starts [`HANDOVER_NS`] after it was published). Try again later.
    Busy,
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockError::Busy => {
                f.write_str("clock busy: a recalibration is in progress or has not started yet")
            }
        }
    }
}

impl core::error::Error for ClockError {}

/// One timebase snapshot. Cache-line aligned: a writer filling one slot does not disturb
/// readers of the other, and the slot address is a shift, not a multiply.
#[repr(align(64))]
struct Slot {
    /// 0 while being written; otherwise changes with every write.
    gen: AtomicU32,
    base_ticks: RelaxedU64,
    base_ns: RelaxedU64,
    mult_int: RelaxedU64,
    mult_frac: RelaxedU64,
    inv_mult: RelaxedU64,
    inv_shift: AtomicU32,
    millihz: RelaxedU64,
    /// The previous timebase, for ticks before `base_ticks` (the handover): readers of this
    /// slot then compute exactly what readers of the previous slot compute.
    prev_base_ticks: RelaxedU64,
    prev_base_ns: RelaxedU64,
    prev_mult_int: RelaxedU64,
    prev_mult_frac: RelaxedU64,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            gen: AtomicU32::new(0),
            base_ticks: RelaxedU64::new(0),
            base_ns: RelaxedU64::new(0),
            mult_int: RelaxedU64::new(0),
            mult_frac: RelaxedU64::new(0),
            inv_mult: RelaxedU64::new(0),
            inv_shift: AtomicU32::new(0),
            millihz: RelaxedU64::new(0),
            prev_base_ticks: RelaxedU64::new(0),
            prev_base_ns: RelaxedU64::new(0),
            prev_mult_int: RelaxedU64::new(0),
            prev_mult_frac: RelaxedU64::new(0),
        }
    }
}

/// A timeline: `ns = base_ns + (ticks − base_ticks) × mult >> 64` (see [`Scale`]).
struct Timebase {
    base_ticks: u64,
    base_ns: u64,
    mult_int: u64,
    mult_frac: u64,
}

/// `base_ns + ticks × (int + frac / 2^64)`, saturating at `u64::MAX`.
///
/// Counters faster than 1 GHz have ticks shorter than a nanosecond (`int == 0`): then the
/// result is one multiply and one saturating add, the shortest chain after the counter read
/// (an ordered read waits for the previous call's arithmetic, so its length is the cost).
/// Otherwise the general `u128` sum, which cannot overflow (each term is below 2^128 − 2^65).
#[inline(always)]
fn advance(base_ns: u64, ticks: u64, int: u64, frac: u64) -> u64 {
    if int == 0 {
        // With `int` known to be 0 the whole-part product folds away; the rest is < 2^64.
        base_ns.saturating_add(saturate_u64(mul_q64(ticks, 0, frac)))
    } else {
        saturate_u64(mul_q64(ticks, int, frac).saturating_add(base_ns as u128))
    }
}

/// A clock on a [`Counter`]: nanoseconds since its creation, recalibrated lock-free.
///
/// `Clock<C>` is `Sync` when `C` is: share it (a `static`, an `Arc`) and read it from any
/// CPU or interrupt handler. Readers never lock and never wait for a writer.
///
/// ```
/// use baretime::{Clock, FnCounter, Frequency};
/// use core::sync::atomic::{AtomicU64, Ordering};
///
/// // A counter of the user's own: here a fake one that advances 1000 ticks per read.
/// static TICKS: AtomicU64 = AtomicU64::new(0);
/// let counter = FnCounter::new(|| TICKS.fetch_add(1000, Ordering::Relaxed));
/// let clock = Clock::new(counter, Frequency::user_hz(1_000_000_000).unwrap());
/// let a = clock.now();
/// let b = clock.now();
/// assert_eq!((b - a).as_nanos(), 1000);
/// ```
pub struct Clock<C: Counter> {
    counter: C,
    slots: [Slot; 2],
    current: AtomicU32,
    writer: AtomicBool,
}

impl<C: Counter> Clock<C> {
    /// A clock on `counter` at `frequency`, whose epoch (`Instant::ZERO`) is now.
    pub fn new(counter: C, frequency: Frequency) -> Clock<C> {
        let mask = counter.mask();
        let clock = Clock {
            counter,
            slots: [Slot::new(), Slot::new()],
            current: AtomicU32::new(0),
            writer: AtomicBool::new(false),
        };
        let scale = Scale::new(&frequency);
        let base_ticks = clock.counter.ticks() & mask;
        let timebase = Timebase {
            base_ticks,
            base_ns: 0,
            mult_int: scale.mult_int(),
            mult_frac: scale.mult_frac(),
        };
        clock.write_slot(0, 1, &timebase, &scale, &timebase);
        clock
    }

    /// Slot `i` of the ring of two (by parity, so any generation counter indexes it).
    #[inline(always)]
    fn slot(&self, i: u32) -> &Slot {
        let [even, odd] = &self.slots;
        if i & 1 == 0 {
            even
        } else {
            odd
        }
    }

    /// The counter this clock reads.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    /// The raw counter value (one read, no conversion).
    #[inline(always)]
    pub fn ticks(&self) -> u64 {
        self.counter.ticks()
    }

    /// A raw reading, the cheapest timestamp: convert differences later with
    /// [`Clock::delta`].
    #[inline(always)]
    pub fn raw(&self) -> RawInstant {
        RawInstant::from_ticks(self.counter.ticks())
    }

    /// The time from `start` to `end` (raw readings of this clock's counter) at the current
    /// scale; zero if `end` is before `start` (masked to the counter's width).
    pub fn delta(&self, start: RawInstant, end: RawInstant) -> core::time::Duration {
        let mask = self.counter.mask();
        let ticks = end.ticks_since(start) & mask;
        if ticks > mask >> 1 {
            return core::time::Duration::ZERO;
        }
        core::time::Duration::from_nanos(self.scale().ticks_to_ns(ticks))
    }

    /// Nanoseconds since the clock's epoch. Never goes back, never jumps at a
    /// recalibration, never blocks: it retries only if it raced a writer's store, or once
    /// if its counter reading was older than the timebase. A counter that reads behind the
    /// timebase twice in a row (it stepped back, another CPU's counter lags, or a narrow
    /// counter went more than half a wrap without [`Clock::update`]) gets the earliest time
    /// the timebase describes: time stands still until the counter catches up.
    #[inline]
    pub fn now(&self) -> Instant {
        let mut behind = false;
        loop {
            // The counter first: an ordered read then waits only for the caller's earlier
            // instructions, not for our loads, and the timestamp precedes everything we load.
            let t = self.counter.ticks();
            // For a 64-bit counter this folds to a constant.
            let mask = self.counter.mask();
            let i = self.current.load(Ordering::SeqCst);
            let slot = self.slot(i);
            let gen = slot.gen.load(Ordering::Acquire);
            let base_ticks = slot.base_ticks.load();
            let base_ns = slot.base_ns.load();
            let mult_int = slot.mult_int.load();
            let mult_frac = slot.mult_frac.load();
            let delta = t.wrapping_sub(base_ticks) & mask;
            let half = mask >> 1;
            let ns = if delta <= half {
                Some(advance(base_ns, delta, mult_int, mult_frac))
            } else {
                // Before the base: the handover window (see the module docs).
                let prev_base_ticks = slot.prev_base_ticks.load();
                let prev_base_ns = slot.prev_base_ns.load();
                let prev_int = slot.prev_mult_int.load();
                let prev_frac = slot.prev_mult_frac.load();
                let prev_delta = t.wrapping_sub(prev_base_ticks) & mask;
                // Before the previous base too: `t` is older than two publications (the
                // reader was preempted right after reading it): read the counter again.
                // Behind again with a fresh reading: the counter itself is behind the
                // timeline, and a spin could last as long as it stays behind.
                if prev_delta <= half {
                    Some(advance(prev_base_ns, prev_delta, prev_int, prev_frac))
                } else {
                    behind.then_some(prev_base_ns)
                }
            };
            fence(Ordering::Acquire);
            if gen != 0 && slot.gen.load(Ordering::Relaxed) == gen {
                match ns {
                    Some(ns) => return Instant::from_nanos(ns),
                    None => behind = true,
                }
            }
            spin_loop();
        }
    }

    /// The scale in force (a consistent snapshot).
    pub fn scale(&self) -> Scale {
        loop {
            let i = self.current.load(Ordering::Acquire);
            let slot = self.slot(i);
            let gen = slot.gen.load(Ordering::Acquire);
            let scale = Scale::from_parts(
                slot.mult_int.load(),
                slot.mult_frac.load(),
                slot.inv_mult.load(),
                slot.inv_shift.load(Ordering::Relaxed),
                slot.millihz.load(),
            );
            fence(Ordering::Acquire);
            if gen != 0 && slot.gen.load(Ordering::Relaxed) == gen {
                return scale;
            }
            spin_loop();
        }
    }

    /// The rate in force, in millihertz.
    pub fn millihz(&self) -> u64 {
        self.scale().millihz()
    }

    /// A busy-wait [`Delay`] on this clock's counter at the scale in force.
    pub fn delay(&self) -> Delay<&C> {
        Delay::with_scale(&self.counter, self.scale())
    }

    /// Publishes a timebase at `frequency` that continues the current timeline: readers see
    /// no jump and no step back (see the module docs). Never blocks: returns
    /// [`ClockError::Busy`] if another recalibration is being written or the last one's
    /// timeline has not started yet.
    pub fn recalibrate(&self, frequency: Frequency) -> Result<(), ClockError> {
        self.publish(Some(Scale::new(&frequency)))
    }

    /// Re-bases the timebase at the current time without changing the rate. A clock on a
    /// counter narrower than 64 bits must be updated at least once per half wrap period
    /// (e.g. from a periodic tick); 64-bit counters never need it.
    pub fn update(&self) -> Result<(), ClockError> {
        self.publish(None)
    }

    /// Starts a new timeline at `at` (never earlier than what the clock reads now) from
    /// the counter's value now, discarding the old timeline: for a counter that was reset or
    /// jumped — a TSC after suspend to RAM, a counter reprogrammed by firmware — where
    /// [`Clock::recalibrate`] would return [`ClockError::Busy`] for as long as the counter
    /// reads behind the timebase. Pass the time the clock should continue from (the last
    /// reading before the suspend plus the time spent suspended, say); `frequency` is the
    /// rate from now on. There is no handover: readers racing this call may see time stand
    /// still at the old timebase's start. Returns `Busy` only if another writer is active.
    pub fn rebase(&self, at: Instant, frequency: Frequency) -> Result<(), ClockError> {
        self.locked(|| {
            let i = self.current.load(Ordering::Relaxed);
            let cur = self.slot(i);
            // What the clock reads now (its timebase's start while the counter is behind).
            let base_ns = at.max(self.now()).as_nanos();
            let scale = Scale::new(&frequency);
            let timebase = Timebase {
                base_ticks: self.counter.ticks() & self.counter.mask(),
                base_ns,
                mult_int: scale.mult_int(),
                mult_frac: scale.mult_frac(),
            };
            let next = i.wrapping_add(1);
            let gen = cur.gen.load(Ordering::Relaxed).wrapping_add(1).max(1);
            self.write_slot(next & 1, gen, &timebase, &scale, &timebase);
            self.current.store(next, Ordering::SeqCst);
            Ok(())
        })
    }

    fn publish(&self, new_scale: Option<Scale>) -> Result<(), ClockError> {
        self.locked(|| self.publish_locked(new_scale))
    }

    /// Runs `write` as the one writer, or returns `Busy` without waiting.
    fn locked(&self, write: impl FnOnce() -> Result<(), ClockError>) -> Result<(), ClockError> {
        if self
            .writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(ClockError::Busy);
        }
        let result = write();
        self.writer.store(false, Ordering::Release);
        result
    }

    fn publish_locked(&self, new_scale: Option<Scale>) -> Result<(), ClockError> {
        // Only the writer changes `current` and the slots, and we are the writer: relaxed
        // loads see our own last stores.
        let i = self.current.load(Ordering::Relaxed);
        let cur = self.slot(i);
        let base_ticks = cur.base_ticks.load();
        let base_ns = cur.base_ns.load();
        let mult_int = cur.mult_int.load();
        let mult_frac = cur.mult_frac.load();
        let cur_scale = Scale::from_parts(
            mult_int,
            mult_frac,
            cur.inv_mult.load(),
            cur.inv_shift.load(Ordering::Relaxed),
            cur.millihz.load(),
        );
        let scale = new_scale.unwrap_or(cur_scale);
        let mask = self.counter.mask();
        let half = mask >> 1;
        let margin = cur_scale
            .ns_to_ticks_ceil(HANDOVER_NS)
            .clamp(1, (mask >> 3).max(1));
        for _ in 0..3 {
            let t = self.counter.ticks() & mask;
            let since_base = t.wrapping_sub(base_ticks) & mask;
            if since_base > half {
                // The current timeline has not started yet (within the last handover).
                return Err(ClockError::Busy);
            }
            let new_base_ticks = t.wrapping_add(margin) & mask;
            let new_base_ns = advance(
                base_ns,
                since_base.saturating_add(margin),
                mult_int,
                mult_frac,
            );
            let next = i.wrapping_add(1);
            let gen = cur.gen.load(Ordering::Relaxed).wrapping_add(1).max(1);
            let new = Timebase {
                base_ticks: new_base_ticks,
                base_ns: new_base_ns,
                mult_int: scale.mult_int(),
                mult_frac: scale.mult_frac(),
            };
            let prev = Timebase {
                base_ticks,
                base_ns,
                mult_int,
                mult_frac,
            };
            self.write_slot(next & 1, gen, &new, &scale, &prev);
            // Publish only while still well inside the margin; otherwise start again.
            let now = self.counter.ticks() & mask;
            if now.wrapping_sub(t) & mask <= margin / 2 {
                self.current.store(next, Ordering::SeqCst);
                return Ok(());
            }
        }
        Err(ClockError::Busy)
    }

    fn write_slot(&self, index: u32, gen: u32, new: &Timebase, scale: &Scale, prev: &Timebase) {
        let slot = self.slot(index);
        slot.gen.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.base_ticks.store(new.base_ticks);
        slot.base_ns.store(new.base_ns);
        slot.mult_int.store(scale.mult_int());
        slot.mult_frac.store(scale.mult_frac());
        slot.inv_mult.store(scale.inv_mult());
        slot.inv_shift.store(scale.inv_shift(), Ordering::Relaxed);
        slot.millihz.store(scale.millihz());
        slot.prev_base_ticks.store(prev.base_ticks);
        slot.prev_base_ns.store(prev.base_ns);
        slot.prev_mult_int.store(prev.mult_int);
        slot.prev_mult_frac.store(prev.mult_frac);
        slot.gen.store(gen, Ordering::Release);
    }
}

impl<C: Counter + fmt::Debug> fmt::Debug for Clock<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clock")
            .field("counter", &self.counter)
            .field("scale", &self.scale())
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<C: Counter + defmt::Format> defmt::Format for Clock<C> {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(
            f,
            "Clock {{ counter: {}, scale: {} }}",
            self.counter,
            self.scale()
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::frequency::{Accuracy, Source};
    use core::cell::Cell;

    /// A counter the test moves by hand.
    struct Manual(Cell<u64>, u32);
    impl Counter for Manual {
        fn ticks(&self) -> u64 {
            self.0.get()
        }
        fn bits(&self) -> u32 {
            self.1
        }
    }

    fn hz(hz: u64) -> Frequency {
        Frequency::from_hz(hz, Source::User, Accuracy::Exact).unwrap()
    }

    #[test]
    fn counts_from_its_epoch() {
        let c = Manual(Cell::new(5_000), 64);
        let clock = Clock::new(&c, hz(1_000_000_000));
        assert_eq!(clock.now().as_nanos(), 0);
        c.0.set(5_000 + 1_234_567);
        assert_eq!(clock.now().as_nanos(), 1_234_567);
        assert_eq!(clock.ticks(), 5_000 + 1_234_567);
        assert_eq!(clock.millihz(), 1_000_000_000_000);
    }

    #[test]
    fn recalibration_continues_the_timeline() {
        let c = Manual(Cell::new(0), 64);
        let clock = Clock::new(&c, hz(1_000_000_000));
        c.0.set(10_000_000); // 10 ms at 1 GHz
        let before = clock.now();
        clock.recalibrate(hz(2_000_000_000)).unwrap();
        // Inside the handover the old scale still applies.
        assert_eq!(clock.now(), before);
        c.0.set(10_500_000);
        assert_eq!(clock.now().as_nanos(), 10_500_000);
        // From the handover point (1 ms of old ticks later) the new scale takes over.
        c.0.set(11_000_000);
        assert_eq!(clock.now().as_nanos(), 11_000_000);
        c.0.set(13_000_000);
        assert_eq!(clock.now().as_nanos(), 12_000_000);
        assert_eq!(clock.millihz(), 2_000_000_000_000);
        // A second recalibration once the timeline has started.
        clock.recalibrate(hz(1_000_000_000)).unwrap();
        c.0.set(14_000_000 + 1_000);
        assert!(clock.now().as_nanos() >= 12_000_000);
    }

    #[test]
    fn busy_within_handover() {
        let c = Manual(Cell::new(0), 64);
        let clock = Clock::new(&c, hz(1_000_000_000));
        c.0.set(1_000);
        clock.recalibrate(hz(1_000_000_001)).unwrap();
        assert_eq!(clock.recalibrate(hz(1_000_000_002)), Err(ClockError::Busy));
        c.0.set(1_000 + 1_000_000);
        assert_eq!(clock.recalibrate(hz(1_000_000_002)), Ok(()));
    }

    #[test]
    fn narrow_counter_wraps_with_updates() {
        // A 24-bit counter at 1 MHz wraps every 16.7 s; update at least every half wrap.
        let c = Manual(Cell::new(0xff_f000), 24);
        let clock = Clock::new(&c, hz(1_000_000));
        let mut last = clock.now();
        let mut raw: u64 = 0xff_f000;
        for _ in 0..100 {
            raw += 3_000_000; // 3 s
            c.0.set(raw & 0xff_ffff);
            let now = clock.now();
            assert!(now >= last);
            assert_eq!((now - last).as_micros(), 3_000_000);
            last = now;
            clock.update().unwrap();
        }
        assert_eq!(last.as_nanos(), 300_000_000_000);
    }

    #[test]
    fn rebase_after_a_counter_reset() {
        // A TSC that restarts from 0 after suspend: the clock stands still (it never spins),
        // recalibration is refused while the counter is behind, and rebase continues time.
        let c = Manual(Cell::new(10_000), 64);
        let clock = Clock::new(&c, hz(1_000_000_000));
        c.0.set(10_000 + 5_000_000_000); // 5 s
        let before = clock.now();
        assert_eq!(before.as_nanos(), 5_000_000_000);
        c.0.set(1_000); // reset
        assert!(clock.now() <= before);
        assert_eq!(clock.recalibrate(hz(1_000_000_000)), Err(ClockError::Busy));
        // Suspended for 2 s: continue from 7 s.
        let resume = before + core::time::Duration::from_secs(2);
        clock.rebase(resume, hz(1_000_000_000)).unwrap();
        assert_eq!(clock.now(), resume);
        c.0.set(1_000 + 500);
        assert_eq!(clock.now().as_nanos(), 7_000_000_500);
        // Never earlier than what the clock reads, whatever the caller passes.
        clock.rebase(Instant::ZERO, hz(1_000_000_000)).unwrap();
        assert_eq!(clock.now().as_nanos(), 7_000_000_500);
        assert_eq!(clock.recalibrate(hz(2_000_000_000)), Ok(()));
    }

    #[test]
    fn delta_of_raw_readings() {
        let c = Manual(Cell::new(100), 64);
        let clock = Clock::new(&c, hz(1_000_000));
        let a = clock.raw();
        c.0.set(1_100);
        let b = clock.raw();
        assert_eq!(clock.delta(a, b).as_micros(), 1_000);
        assert_eq!(clock.delta(b, a), core::time::Duration::ZERO);
    }
}
