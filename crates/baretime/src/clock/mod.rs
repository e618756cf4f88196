//! [`Clock`]: a counter plus a timeline, published lock-free; time never goes back and never
//! jumps, through recalibrations, narrow-counter wraps, counter resets and stalls of any
//! length.
//!
//! The promises this file keeps are in [`Clock`]'s docs (numbered 1 to 7, referred to below
//! as "promise N"); what follows is how it keeps them.
//!
//! # The timeline
//!
//! A *timeline* is `F(t) = base_ns + ⌊(t − base_ticks) × mult⌋` (`mult` the tick length in
//! 64.64 fixed point, see [`Scale`]) for counter values `t` from `base_ticks` up to an
//! *end*. Versions of it are published through a ring of two generation-checked slots
//! (`sync::Published`: FreeBSD's timehands, read like Linux's seqcount): a reader loads the
//! generation, **then reads the counter**, then the slot, and accepts the result only if
//! the slot was not rewritten meanwhile. Readers never wait for the writer: the slot being
//! written is never the one they read.
//!
//! Every timeline has an end, and a reader never extrapolates past it: beyond the end,
//! time stands still at `F(end)`. The end starts at the *deadline* — half the counter's
//! wrap (2^62 ticks for 64-bit counters) — and is moved earlier once, when the next version
//! takes over.
//!
//! # Handing over to a new version (recalibrate, update, rebase)
//!
//! The writer (one at a time):
//!
//! 0. waits, if the counter has not yet reached the newest timeline's base (the last write
//!    was less than a margin ago), until it has — or, for a counter that does not move,
//!    for a bounded number of reads;
//! 1. *closes* the current timeline: stores "closing" into its end (tagged with the version
//!    number), then reads the counter `t` and proposes the end `c = t + margin` (the margin
//!    is [`HANDOVER_NS`] in ticks, at most 1/16 of the wrap; a narrow reading clearly
//!    before the base proposes the base, a 64-bit one in the handover `t + margin` or the
//!    base if that is later: another CPU may lead it by up to [`LAG_NS`] and have passed the
//!    base), which a compare-and-swap makes final — unless someone else's proposal got
//!    there first;
//! 2. publishes the next version: `F'(t) = F⁺(c) + ⌊(t − c) × mult'⌋` for `t ≥ c`, and for
//!    the few ticks before `c` a copy of the old timeline *with its carry*, `F⁺(t)`.
//!
//! ## The carry: no write loses time
//!
//! Each slot also holds the fraction of a nanosecond that its base's time has beyond
//! `base_ns` (`base_frac`, in 2^-64 ns). The fast path does not add it (an add with carry
//! more after the counter read: 1.16x of the raw ordered read against 1.15x, read_ratio on an
//! AMD EPYC KVM guest); the writer does:
//! `F⁺(t) = base_ns + ⌊base_frac / 2^64 + (t − base_ticks) × mult⌋`, and the next slot's
//! `base_frac` is what `F⁺(c)`'s floor dropped. So `F(t) ≤ F⁺(t) ≤ F(t) + 1`, and `F⁺` is
//! the sum of every timeline's ticks × its tick length (64.64 fixed point), floored, however
//! many writes there were: a reading is never ahead of the counter's time at the rates in
//! force and less than 2 ns behind it (promise 2). Taking `F(c)` instead dropped up to a
//! nanosecond per write: a 3-bit counter at 2 GHz + 1 Hz (a tick 0.4999 ns) updated every
//! tick stood still, and any clock updated N times fell up to N ns behind.
//!
//! The next version's copy of the old timeline before `c` adds the old carry too (the slot
//! keeps it as `prev_carry`), so that on each version a reading just before its base and
//! one just after lie on one floored timeline: two CPUs whose counters are less than
//! [`LAG_NS`] apart never read times further apart than that across a base (with the old
//! readers' `F` before `c` and `F⁺` after, a CPU lagging by just under `LAG_NS` read a
//! nanosecond too far below the mark, was taken for a counter behind and stood at the
//! ceiling, and the leading CPU's next reading went back a granule). The price: a reading
//! before `c` may read a nanosecond more on the new version than on the old one, so a
//! publication can move time forward by that nanosecond while the counter stands — toward
//! the counter's time, never past it.
//!
//! A reader that finds the end "closing" does not wait: it reads the counter itself and
//! proposes an end the same way (a *helper*). This is what makes a stalled writer harmless.
//!
//! ## A rebase from a counter that has not reached the base
//!
//! The close point is never before the base, and a reading before the base is on the
//! handover's copy, which does not look at the end: a write from a counter still there (one
//! that hardly moves, after the writer's bounded wait) closes at the base. An `update` or a
//! `recalibrate` then starts its rate there (promise 2: "the base itself where the counter
//! had not reached it"); a `rebase` is asked to start from the counter's value now. It first
//! *stops* the handover (`Clock::stops`, decided like a close point: announced, then a margin —
//! at the copy's rate too — after a counter read made since, helpers included): the old
//! version's readers past the stop — in the handover or past the base, where the close at
//! the base would have stood them at the base's time, which a faster new rate reaches later —
//! stand at the copy's time there, and the new rate starts at the stop, from the copy moved
//! up to `at` (or the mark) at the writer's reading. Where the
//! copy stands still between that reading and the stop, the new rate starts at the reading.
//! Starting it from an unannounced reading instead let an old reader read past that reading
//! on the copy, at the copy's rate and with its carry, before the publication, and read more
//! than a later reader of the new version.
//!
//! ## Why time never goes back
//!
//! Take two calls to [`Clock::now`], the first finished before the second began.
//!
//! - *Both used the same version.* A reader returns `F(min(t, end))` for its counter value
//!   `t` (or `F` of the end it sees: ends only move from "open" through "closing" to one
//!   final `c`). Counter values read later are not smaller, `F` is non-decreasing, and a
//!   reader that saw the final `c` clamps at it. The one case to rule out is a reader that
//!   still saw the end open with a `t` *after* `c`: it read its counter before the
//!   "closing" store became visible, and whoever proposed `c` read the counter after seeing
//!   that store, so `t ≤ t_proposer < c`. (The margin also covers a counter read that the
//!   CPU performs a few instructions late, e.g. loads passing `LFENCE; RDTSC`.)
//! - *The second used a newer version.* Readers of the old version return at most `F(c)`,
//!   and `F(t)` for their reading `t`; the new version reads `F⁺(t) ≥ F(t)` before `c`
//!   (no more than `F⁺(c)`), starts at `F⁺(c) ≥ F(c)` and is non-decreasing.
//! - *The second used an older version* cannot happen: it loaded the generation after the
//!   first call did.
//!
//! ## The high-water mark (64-bit counters)
//!
//! The argument above assumes the counter does not go back. For 64-bit counters, which a
//! reset can send anywhere, every reading is also judged against a high-water mark of the
//! times handed out: a nanosecond count that only grows (`fetch_max`), so a stale or late
//! raise can never lower it. A reader loads it *before* its counter read, then
//!
//! - returns a time in `[mark, mark + MARK_GRANULE_NS)` as it is (one subtraction and a
//!   compare on the fast path);
//! - raises the mark to a time past that (an atomic maximum once per granule: every time
//!   handed out is below `mark + MARK_GRANULE_NS`, the *ceiling*), after confirming one more
//!   than 1 ms past it (promise 7);
//! - returns the mark for a time less than [`LAG_NS`] below it, and the ceiling for one
//!   further below (promise 6); neither raises the mark, so a CPU that stands still does
//!   not push time on.
//!
//! Loading the mark first means a reader stalled after its counter read is never taken for
//! a counter that went back. The mark does not depend on the rate or on any timeline, so a
//! recalibration by any ratio, a rebase or a reset cannot make it wrong. A close point
//! proposed from a reading behind the base is where the timeline reaches the ceiling. A
//! write whose close point came out that way more than a margin before its own reading (the
//! counter was reset back between them) does not run its new rate from there, over ticks
//! that passed before it read the counter (promise 2): it is a write from a counter behind
//! (promise 6) — a rebase starts afresh, an update or a recalibration keeps the old rate
//! and returns [`ClockError::Behind`].
//!
//! ## Narrow counters, late updates
//!
//! A counter of fewer than 64 bits wraps, so a reading `t` is interpreted by its distance
//! `d = t − base_ticks (mod 2^bits)`: up to the deadline (half a wrap) it is time on the
//! timeline; beyond, [`Clock::update`] was not called in time (*late*). A reading in the
//! last quarter of the wrap is taken as late too (a DWT or a 32-bit timer is one global
//! counter: it misses updates, it does not lag) unless it falls in the handover just
//! before the base.
//!
//! - **Late**: time stands still at the deadline's value. Whoever sees a reading past the
//!   deadline — a reader, a helper's own reading, the writer — latches the timeline before
//!   going on, so that it stays there even when the counter comes round again. The next
//!   `update`/`recalibrate` starts a new timeline from that value and returns
//!   [`ClockError::Late`]; [`Clock::health`] counts it.
//! - **A version published late** (the writer stalled about a wrap between closing and
//!   publishing): the writer reads the counter as it publishes and drops the handover when
//!   the base is already behind it (publishing the version latched if it is past its own
//!   deadline), and a reading in the handover of a version whose predecessor was latched
//!   stands still at the base: a reading a wrap later is never taken for one just before
//!   the base.
//! - A reader whose answer depends on the timeline's end (anything past the fast path)
//!   accepts it only if its version was still the current one when it finished; otherwise
//!   it reads again.
//! - A latch holds against a writer stalled since it judged its reading (it read the counter
//!   on time; a reader then latched the timeline at its open end, the deadline, and the
//!   counter came round): the writer, and any helper, looks at the latch *after* the close is
//!   announced and then proposes the deadline; a latching reader looks at the end again
//!   after its latch (and any reader looks at the latch before the end), so one that returned
//!   the deadline's time saw the end open after its latch, before the close was announced,
//!   and the closer sees that latch (`SeqCst` on both sides). Before, a close read a wrap
//!   later closed the latched timeline below the time its readers had returned: half a wrap
//!   back. A narrow reading in the handover before a latched version's base is one a wrap
//!   later too: it stands at the end (helping a close announced after the latch to the
//!   deadline first), never at the handover's time.
//! - What no one can see: a wrap during which nobody reads the counter *and finishes* (a
//!   reader stalled between its counter read and its latch has not said what it saw) loses
//!   a wrap. The late zone — from the deadline to the handover before the base a wrap later
//!   (at most `3 × reach / 2` ticks: three margins at the larger rate's, at most 3/16 of the
//!   wrap) — is at least 5/16 of the wrap long, so a clock read at least once per quarter
//!   wrap (half of [`Clock::update_interval`]) sees every missed update (promise 5). Call
//!   [`Clock::update`] at least once per [`Clock::update_interval`]. An `update` does nothing
//!   only when its first reading had not passed the base (the last write's handover was not
//!   over): one that did nothing a few ticks past the base left it up to a margin before the
//!   call, and the next update an interval later found the deadline that much nearer (its
//!   close clamped short of a margin after its read, or late, promises 2 and 5).
//!
//! ## Targets without 64-bit atomics
//!
//! There (thumbv6m/7m/7em, riscv32imc) the gate words that decide a timeline's end are
//! 32-bit atomics: ends are offsets below 2^31 with "closing" as bit 31, and the clock reads
//! every counter modulo 2^32, so a 64-bit counter is treated as a 32-bit one (promise 5:
//! `update` at least once per [`Clock::update_interval`]; a reset is then a jump the clock
//! cannot tell from time passing: [`Clock::rebase`] it). The timeline's words are two 32-bit
//! halves, checked by the generation. No path of the clock takes a lock on any target: it
//! needs only 32-bit loads, stores and compare-and-swap — the target's own (thumbv7m/7em),
//! or (thumbv6m, riscv32imc) portable-atomic's inside a critical section or with
//! interrupts off, which an interrupt handler cannot deadlock on, on a single core.
//!
//! **Counters that warp between CPUs** by more than [`LAG_NS`] (baretime-diag's `WarpCheck` finds
//! them) break the assumption that counters agree. What still holds for a 64-bit counter:
//! time never jumps (promise 2, against the most-ahead CPU), and a lagging CPU stands still
//! at the mark or its ceiling rather than returning old times; what does not: strict order
//! across CPUs, and on a lagging CPU (a granule, promise 1). For strict order read through
//! [`crate::MonotonicClock`]. `tests/interleave.rs` (warp mode) checks this on 2–4 CPUs with
//! offsets up to ±2 ms.

use core::fmt;
use core::time::Duration;

use crate::counter::{Counter, Width};

mod read;
mod slow;
mod snapshot;
mod timeline;
mod write;

use crate::delay::Delay;
use crate::frequency::Frequency;
use crate::instant::{Instant, RawInstant};
use crate::scale::{mul_q64, saturate_u64, Scale};
use crate::sync::{
    fence, hook, spin_loop, AtomicBool, AtomicU32, GateWord, Mark, Ordering, PlainWord, Point,
    Published, RelaxedU64, Version, Words, WIDE_ATOMICS,
};
pub(crate) use snapshot::{Place, Snapshot};
use timeline::*;

/// The fastest rate the crate accepts: what an unstarted clock's waits count with.
const FASTEST: Scale = Scale::new(Frequency::FASTEST);

/// The handover margin: a new timeline takes over this long after the writer's counter
/// read (at most 1/16 of a narrow counter's wrap, at least one tick).
pub(crate) const HANDOVER_NS: u64 = 20_000;

/// How far CPUs' counters may disagree and still count as one counter (promises 1 and 6
/// of [`Clock`]'s docs): a 64-bit reading whose time is less than this below the latest
/// time the clock handed out is another CPU's, lagging a little, and stands at that time;
/// one further below means the counter went back (a reset, or a CPU lagging by more), and
/// [`ClockHealth::counter_behind`] says so.
pub const LAG_NS: u64 = HANDOVER_NS;

/// How far past the clock's high-water mark a 64-bit reading may be before the mark is
/// raised (an atomic maximum, once per this much time): the mark is never more than this
/// behind the latest time handed out, a counter that went back stands at most this much
/// above it, and where the counter steps back a time may read at most this much below one
/// already handed out (promise 1).
pub const MARK_GRANULE_NS: u64 = 1 << 12;

/// A reading this far past the high-water mark is confirmed by a second counter read, and
/// the smaller time is used (promise 7): one glitched read is never the new time.
const CONFIRM_NS: u64 = 1_000_000;

/// How many counter reads a writer spends waiting for the previous handover to finish (the
/// counter to reach the newest timeline's base, at most a handover margin away) before it
/// writes from the base all the same (a counter that does not move).
const HANDOVER_WAIT_READS: u32 = 1 << 14;

/// Why a [`Clock`] did not do what was asked, or what it found while doing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ClockError {
    /// Nothing was published: another writer is active right now (promise 4 of
    /// [`Clock`]). A program with one writer never sees it. Harmless: that writer
    /// publishes; try again later if this write mattered.
    Busy,
    /// The deadline was missed: the counter was more than [`Clock::update_interval`] past
    /// the timeline's base. Time stood still from the deadline until this call, which has
    /// re-based the clock (and applied the new rate, for `recalibrate`): the clock runs
    /// again, that time is lost.
    Late,
    /// The counter reads behind what the clock has handed out, by more than
    /// [`LAG_NS`], or before the timeline's base by more than its handover (promise 6 of
    /// [`Clock`]): it was reset or stepped back, or
    /// this CPU's counter lags another's. Nothing was published: a counter that was reset is
    /// judged at the rate in force until [`Clock::rebase`] continues from a time you give.
    /// On counters that warp between CPUs by more than `LAG_NS`, write from the CPU whose
    /// counter leads (or repair the warp: baretime-x86's `TscAdjust`).
    Behind,
    /// The clock was made with [`Clock::uninit`] and has not been started.
    NotStarted,
    /// [`Clock::start`] on a clock that already runs.
    Started,
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClockError::Busy => "clock busy: another writer is active",
            ClockError::Late => {
                "clock updated late: time stood still from the deadline until this update"
            }
            ClockError::Behind => {
                "counter behind the time the clock has handed out: if it was reset, rebase the clock"
            }
            ClockError::NotStarted => "clock not started",
            ClockError::Started => "clock already started",
        })
    }
}

impl core::error::Error for ClockError {}

/// What a [`Clock`] has noticed about its counter and its writers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ClockHealth {
    /// Writes that found the deadline missed ([`ClockError::Late`]).
    pub late_updates: u32,
    /// Whether a reader has found the counter behind the timeline.
    pub counter_behind: bool,
}

/// The scale a clock runs `frequency` at: [`Scale::new`]'s, except on targets without 64-bit
/// atomics, where the tick length's fraction is rounded up to a multiple of 2^-32 ns (at most
/// 2^-32 ns longer: 2.3 × 10^-10 of a 1 GHz counter's tick, 2.3 × 10^-8 at 100 GHz) so that the
/// fast path multiplies 32-bit halves (`advance_narrow`). Rounded up, a tick count from its
/// inverse (taken from the exact rate) is never short of the time asked.
fn in_force(frequency: Frequency) -> Scale {
    let scale = Scale::new(frequency);
    if WIDE_ATOMICS {
        scale
    } else {
        scale.frac_rounded_up_to_2_pow_32()
    }
}

/// What a writer wants.
#[derive(Clone, Copy, Debug)]
enum Write {
    /// Re-base at the same rate.
    Update,
    /// Continue at a new rate.
    Recalibrate(Scale),
    /// Start again from the counter's value now, at `at` ns or later.
    Rebase(u64, Scale),
    /// Start a clock made with `uninit`.
    Start(Scale),
}

/// A clock on a [`Counter`]: nanoseconds since its creation, recalibrated lock-free; time
/// never goes back and never jumps, through recalibrations, narrow-counter wraps, counter
/// resets and stalls of any length ([the promises](#the-promises) below, each with its bound).
///
/// `Clock<C>` is `Sync` when `C` is: share it (a `static`, an `Arc`) and read it from any
/// CPU or interrupt handler. Readers never lock and never wait for a writer, and no call —
/// `now`, `update`, `recalibrate`, `rebase`, `start`, `delay` — takes a lock on any target,
/// so an interrupt handler may call any of them whatever the code it interrupted was doing
/// (a writer interrupted by another writer gets [`ClockError::Busy`], never a deadlock).
///
/// ```
/// use baretime::{Clock, FnCounter, Frequency};
/// use core::sync::atomic::{AtomicU64, Ordering};
///
/// // A counter of the user's own: here a fake 64-bit one that advances 1000 ticks per read.
/// static TICKS: AtomicU64 = AtomicU64::new(0);
/// let counter = FnCounter::new(|| TICKS.fetch_add(1000, Ordering::Relaxed), 64);
/// let clock = Clock::new(counter, Frequency::exact_hz(1_000_000_000).unwrap());
/// let a = clock.now();
/// let b = clock.now();
/// assert_eq!((b - a).as_nanos(), 1000);
/// ```
///
/// # The promises
///
/// Each is an assertion of the interleaving test (`tests/interleave.rs`), which draws its
/// environment from everything listed here: counter resets to any value, lags up to
/// [`LAG_NS`], recalibrations by any ratio within [`Frequency`]'s range, `rebase` and `start`
/// anywhere, a stall at every call into the counter (`ticks()`, `bits()`) and at every step of
/// the protocol, every width.
///
/// 1. **Order.** A [`Clock::now`] that finished before another began (on one CPU, or on
///    CPUs whose counters agree to within [`LAG_NS`]) never returns more than it — through
///    recalibrations, updates, rebases, late updates (read as promise 5 says), and counter
///    resets. The exceptions, and their bounds: where a 64-bit counter itself steps back (a
///    reset, a CPU whose counter lags), a time may read up to [`MARK_GRANULE_NS`] (4.1 µs)
///    below one already handed out, never more; where a narrow counter's update is missed
///    and the clock is not read as often as promise 5 says, by less than a wrap period. A
///    narrow counter is taken to be one global counter that never steps back: a step back
///    reads as time that went round the wrap (promise 5), so do not reset one under a
///    running clock (rebase it) nor read one that lags between CPUs.
/// 2. **No jump.** Time moves with the counter at the rate in force: no reading is ahead of
///    the counter's time by more than [`MARK_GRANULE_NS`] plus a handover margin
///    (20 µs rounded up to whole ticks: less than 20 µs plus one tick), except where
///    [`Clock::rebase`] asks for it. A rebase to a time at or before the clock's continues
///    the timeline (no jump, however often it is repeated). Nor does time fall behind the
///    counter: however many `update`s, `recalibrate`s and such rebases run, however close
///    together (every tick of a 3-bit counter at 100 GHz), a reading is less than 2 ns below
///    the counter's ticks at the rates in force (each rate from its write's close point: a
///    handover margin after a counter read made during the write — the writer's own, or that
///    of a reader that found the old timeline closing — or, where that would be later, the
///    timeline's deadline (a write more than an interval after the base), or the base itself
///    where the counter had not reached it; each tick length kept to 2^-64 ns, which adds at
///    most 3 × 10⁻¹⁸ of the time: 0.1 ns after a year — on targets without 64-bit atomics
///    to 2^-32 ns, rounded up, so that the read multiplies 32-bit halves: at most
///    2.3 × 10⁻¹⁰ of a 1 GHz counter's time, 2.3 × 10⁻⁸ at 100 GHz), on every width and rate — no write
///    loses the fraction of a nanosecond it closes on — except where time stands still by
///    promises 3, 5 and 6. (So a write may move a reading forward by that nanosecond while
///    the counter stands: toward the counter's time, never past it.)
/// 3. **Stalls.** Readers never lock and never wait. A writer stalled anywhere (an
///    interrupt, an SMI, a vCPU preemption) costs at most time standing still, for no longer
///    than the stall: while a writer is between closing the old timeline and publishing the
///    next, readers that reach the close point stand still there; when it publishes, time
///    continues from that point, and the catch-up equals the stall, never more. A reader
///    stalled anywhere returns a time read within its call.
/// 4. **Writers.** One writer at a time: a second gets [`ClockError::Busy`], which means only
///    that — another writer is active right now. A single writer is never refused: a write
///    that comes within a handover margin of the last waits for it to finish (writers may
///    wait, at most a handover margin of counter time: 20 µs rounded up to whole ticks;
///    readers never).
/// 5. **Cadence.** A counter narrower than 64 bits — and on targets without 64-bit atomics
///    every counter, read modulo 2^32 there — needs [`Clock::update`] at least once per
///    [`Clock::update_interval`] (from the start of one call to the start of the next).
///    Updates spaced by exactly that, each finishing within a handover margin of its
///    start, are never late (an update interrupted for longer between its counter reads can
///    be). A late update is detected — time stands still from the deadline until the next
///    write, which returns [`ClockError::Late`] and starts again from there
///    ([`ClockHealth::late_updates`] counts them) — provided the clock is read at least once
///    per half [`Clock::update_interval`] (a quarter of the wrap) while an update is overdue:
///    by [`Clock::now`] (or anything built on it) or a write, a call that finishes (one stalled
///    between its counter read and its return has not said what it saw). The clock sees the
///    counter only modulo its wrap, and only when it is read: with updates on time this needs
///    nothing more, but an update missed with nobody reading past the deadline is not
///    detected — a reading up to a wrap later is taken for one before the deadline (or in the
///    last write's handover), a whole wrap is lost for each one missed, `update` returns `Ok`,
///    and a reading may be below one handed out before by less than a wrap period (at the
///    slower of the last two rates in force).
/// 6. **A counter behind the clock** (64-bit: a TSC reset by suspend to RAM, a counter
///    reprogrammed by firmware, a CPU lagging by more than [`LAG_NS`]): a reading whose time
///    is below what the clock has already handed out — on any timeline, the current one or
///    an older one, above the base or below it — is judged against that, not against the
///    base (a reading before a timeline's base by how far back it went). Less than
///    [`LAG_NS`] below, it stands at the high-water mark, at most [`MARK_GRANULE_NS`] below
///    the latest time handed out (a CPU lagging a little); further below, time stands still
///    at most [`MARK_GRANULE_NS`] above the latest time handed out,
///    [`ClockHealth::counter_behind`] says so, and `update` and `recalibrate` return
///    [`ClockError::Behind`] and change nothing (on counters that warp by more than
///    [`LAG_NS`], write from the CPU whose counter leads). So do `update` and `recalibrate`
///    from a reading before the timeline's base by more than its handover, even one not
///    below what was handed out (a reset back to a time nobody read since): a timeline
///    closes at or after its base, so a write from there would make time jump to the
///    base's. The handover reaches back two handover margins in ticks of the faster of the
///    timeline's rate and the one before it (a CPU lagging by a margin at either rate is not
///    behind): after a recalibration to a rate R times slower, a reset back by less than
///    that (up to 40 µs × R of the new rate's time) is judged only against what was handed
///    out: where that is not above its time, the counter reads on the previous timeline, at
///    its rate, until it reaches the base again (time moves that slowly meanwhile, never
///    back, and is not flagged). [`Clock::rebase`] continues from a time the caller gives,
///    or from the clock's own time if later (its time at the rebase's counter reading: no
///    earlier than the latest time handed out or, where the counter stepped back by less
///    than [`LAG_NS`] since, than the high-water mark, up to [`MARK_GRANULE_NS`] below it,
///    as promise 1 allows), and that time then counts as handed out, whether or not anyone
///    reads it (on another CPU, less the lag of its counter behind the rebasing CPU's): a
///    counter that steps back after the rebase's reading is judged against it. From a
///    counter behind, that time may be a ceiling's or a leading CPU's, up to
///    [`MARK_GRANULE_NS`] and the CPUs' lag ahead of the rebasing CPU's counter: each reset
///    back followed by such a rebase may move time on by that much.
/// 7. **A glitch is not the new time.** A 64-bit reading more than 1 ms past the latest
///    time handed out (and less than the 2^62-tick deadline past the timeline's base: one
///    further ahead reads as behind, promise 6) is confirmed by a second counter read, by
///    readers and writers alike, and the smaller is used (a reading a fresh timeline starts
///    from — `start`, a rebase — and the one a publication drops its handover by are
///    confirmed whatever their time: the earlier is used): one
///    glitched read (a counter erratum's read that hit its retry bound, a bad TSC_ADJUST on
///    one read) never becomes the time, and nothing has to be waited out. Two glitched reads
///    in a row do become it; time then stands still until the counter catches up (the
///    clock cannot tell them from time that passed while nobody read it). So does one read
///    ahead by 1 ms or less, which the clock cannot tell from time either: time moves on by
///    that much, then stands still (as behind it, promise 6: flagged, writes return
///    [`ClockError::Behind`]) until the counter catches up, at most that 1 ms.
///
/// The promises are for counters of 3 bits or more: a 1- or 2-bit counter's handover
/// margin is half its wrap, and no timeline fits beside it (the clock runs, never panics,
/// and promises nothing more there).
///
/// How the clock keeps them — the timelines, the handover, the high-water mark, and why
/// time never goes back — is argued step by step at the top of its source, `src/clock.rs`.
pub struct Clock<C: Counter> {
    timeline: Published<WORDS>,
    gates: [Gate; 2],
    counter: C,
    writer: AtomicBool,
    late_updates: AtomicU32,
    behind: AtomicBool,
    /// A high-water mark in nanoseconds (64-bit counters): never above a time the clock
    /// handed out, and every time it handed out is below `mark + MARK_GRANULE_NS` (see
    /// `ceiling`). It only grows, so no stale raise can undo a newer one.
    mark: Mark,
    /// Per slot, where readings in its timeline's handover stop (a rebase from a counter that
    /// has not reached the base: `Clock::stop_handover`): 0 while they run on the copy,
    /// [`STOPPING`] while the point is being decided, then [`STOPPED`] and how many ticks
    /// before the base it is. Apart from the gates, which the fast path reads: two gates of
    /// four words fill one cache line.
    stops: [GateWord; 2],
    /// Per slot, the handover margin of its timeline (ticks at its rate, `Geometry::margin`),
    /// stored by the writer that publishes it: the next writer loads it rather than compute
    /// it again (a tick count from nanoseconds: tens of instructions on a 32-bit core).
    margins: [PlainWord; 2],
    /// The writer's own note (read and written under its flag): `number + 1` of the version
    /// in force when the other slot holds its rate words — its rate, the previous rate, the
    /// slowest rate — and an update at that rate would write them unchanged (its previous
    /// rate is its rate, its slowest no faster), so a steady update stores only the words it
    /// changes (`Clock::publish_step`); 0 otherwise. Every other publication clears it.
    settled: AtomicU32,
    /// Per slot, its rate's ticks per nanosecond in 32.32 fixed point, rounded down
    /// (`timeline::per_ns`): written with the slot's words inside the publication
    /// and read inside the generation check, as they are, so that the one-pass deadline
    /// (`Clock::quick_deadline`) guesses its tick with two multiplies.
    inverses: [RelaxedU64; 2],
    /// Called after a write that moved the timeline's deadlines ([`Clock::on_write`]).
    on_write: Option<fn()>,
}

/// A clock that has not started: one literal for `Clock::uninit`'s `const` and loom versions.
macro_rules! unstarted {
    ($counter:expr) => {
        Clock {
            timeline: Published::new([0; WORDS]),
            gates: [Gate::new(), Gate::new()],
            counter: $counter,
            writer: AtomicBool::new(false),
            late_updates: AtomicU32::new(0),
            behind: AtomicBool::new(false),
            mark: Mark::new(),
            stops: [GateWord::new(0), GateWord::new(0)],
            margins: [PlainWord::new(0), PlainWord::new(0)],
            settled: AtomicU32::new(0),
            inverses: [RelaxedU64::new(0), RelaxedU64::new(0)],
            on_write: None,
        }
    };
}

impl<C: Counter> Clock<C> {
    /// A clock on `counter` at `frequency`, whose epoch (`Instant::ZERO`) is now.
    pub fn new(counter: C, frequency: Frequency) -> Clock<C> {
        let clock = Clock::uninit(counter);
        // A fresh clock has no other writer and has not started: this cannot fail.
        let _ = clock.start(frequency);
        clock
    }

    /// A clock that has not started yet, for a `static`: `const`, no counter read. Until
    /// [`Clock::start`], [`Clock::now`] reads [`Instant::ZERO`] and `update`/`recalibrate`
    /// return [`ClockError::NotStarted`]. Start it once at boot, after calibration; it is
    /// read lock-free from anywhere afterwards, with no `unsafe` in sight. The platform
    /// crates' counters (baretime-x86's `Tsc`, baretime-aarch64's `GenericTimer`) go in the
    /// `static` the same way as this one:
    ///
    /// ```
    /// use baretime::{Clock, ClockError, Counter, Frequency, Instant};
    /// # use core::sync::atomic::{AtomicU64, Ordering};
    /// # static REGISTER: AtomicU64 = AtomicU64::new(0);
    ///
    /// /// The board's 64-bit cycle counter.
    /// struct Cycles;
    /// impl Counter for Cycles {
    ///     fn ticks(&self) -> u64 {
    ///         REGISTER.fetch_add(100, Ordering::Relaxed) // read the register here
    ///     }
    ///     fn bits(&self) -> u32 {
    ///         64
    ///     }
    /// }
    ///
    /// static CLOCK: Clock<Cycles> = Clock::uninit(Cycles);
    ///
    /// assert_eq!(CLOCK.now(), Instant::ZERO); // before start: the epoch, always
    /// // At boot, once the rate is known (`calibrate_and_verify`'s `chosen`, say):
    /// let hz = Frequency::nominal_hz(24_000_000, 20_000).unwrap(); // 24 MHz ±20 ppm
    /// CLOCK.start(hz).unwrap();
    /// let t0 = CLOCK.now();
    /// assert!(CLOCK.now() >= t0);
    /// // A second start is refused: the timeline has begun.
    /// assert_eq!(CLOCK.start(hz), Err(ClockError::Started));
    /// ```
    #[cfg(not(loom))]
    pub const fn uninit(counter: C) -> Clock<C> {
        unstarted!(counter)
    }

    /// A clock that has not started yet (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn uninit(counter: C) -> Clock<C> {
        unstarted!(counter)
    }

    /// This clock, calling `hook` after every write that can move a deadline computed before
    /// it by more than a nanosecond: [`Clock::start`], [`Clock::recalibrate`],
    /// [`Clock::rebase`], and an [`Clock::update`] that returns [`ClockError::Late`]. An update
    /// on time moves a deadline's tick by less than 2 ns of ticks, plus one (both timelines
    /// read less than 2 ns below the counter's time, promise 2; above 1 GHz that is several
    /// ticks): a tick that moved later is caught by the wake's [`Clock::check`], one that
    /// moved earlier wakes that much late — under 2 ns — and is not worth a call per update. Called by the writer, after its write, outside the clock's
    /// writer flag, in whatever context wrote (an interrupt handler, say). `const`, for the
    /// `static`: an alarm service re-arms itself without anyone remembering to (with
    /// baretime-embassy: `Clock::uninit(MyCounter).on_write(rearm)` with
    /// `fn rearm() { DRIVER.on_alarm() }`).
    ///
    /// ```
    /// use baretime::{Clock, FnCounter, Frequency};
    /// use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
    ///
    /// static TICKS: AtomicU64 = AtomicU64::new(0);
    /// fn ticks() -> u64 {
    ///     TICKS.load(Ordering::Relaxed)
    /// }
    /// static REARMS: AtomicU32 = AtomicU32::new(0);
    /// fn rearm() {
    ///     REARMS.fetch_add(1, Ordering::Relaxed); // e.g. DRIVER.on_alarm()
    /// }
    /// static CLOCK: Clock<FnCounter<fn() -> u64>> =
    ///     Clock::uninit(FnCounter::new(ticks as fn() -> u64, 32)).on_write(rearm);
    ///
    /// let hz = |hz| Frequency::exact_hz(hz).unwrap();
    /// CLOCK.start(hz(1_000_000)).unwrap();
    /// assert_eq!(REARMS.load(Ordering::Relaxed), 1);
    /// TICKS.store(1_000, Ordering::Relaxed);
    /// CLOCK.update().unwrap(); // on time: deadlines stay put
    /// assert_eq!(REARMS.load(Ordering::Relaxed), 1);
    /// CLOCK.recalibrate(hz(1_000_100)).unwrap();
    /// assert_eq!(REARMS.load(Ordering::Relaxed), 2);
    /// ```
    pub const fn on_write(self, hook: fn()) -> Clock<C> {
        let mut clock = self;
        clock.on_write = Some(hook);
        clock
    }

    /// Starts a clock made with [`Clock::uninit`]: its epoch (`Instant::ZERO`) is now, and it
    /// runs at `frequency`. [`ClockError::Started`] if it already runs; `Busy` if another
    /// writer is active.
    pub fn start(&self, frequency: Frequency) -> Result<(), ClockError> {
        self.write(Write::Start(in_force(frequency)))
    }

    #[inline(always)]
    fn gate(&self, slot: usize) -> &Gate {
        of_slot(&self.gates, slot)
    }

    /// The handover stop word of `slot` (`Clock::stops`).
    #[inline(always)]
    fn stop_word(&self, slot: usize) -> &GateWord {
        of_slot(&self.stops, slot)
    }

    /// The counter this clock reads.
    pub fn counter(&self) -> &C {
        &self.counter
    }

    /// A raw reading, the cheapest timestamp: convert differences later with
    /// [`Clock::delta`].
    #[inline(always)]
    pub fn raw(&self) -> RawInstant {
        RawInstant::from_ticks(self.counter.ticks())
    }

    /// The time from `start` to `end` (raw readings of this clock's counter) at the current
    /// scale; zero if `end` is behind `start` (modulo the counter's width).
    pub fn delta(&self, start: RawInstant, end: RawInstant) -> Duration {
        match Width::of(&self.counter).elapsed(start.as_ticks(), end.as_ticks()) {
            Some(ticks) => Duration::from_nanos(self.scale().ticks_to_ns(ticks)),
            None => Duration::ZERO,
        }
    }

    /// The width the clock reads its counter in: the counter's own, and at most 32 bits where
    /// the target lacks 64-bit atomics (a wider counter is then read modulo 2^32 and needs
    /// [`Clock::update`] like any narrow one).
    #[inline(always)]
    fn width(&self) -> Width {
        let width = Width::of(&self.counter);
        if WIDE_ATOMICS || width.mask() <= u64::from(u32::MAX) {
            width
        } else {
            Width::new(32)
        }
    }

    /// Time since `earlier` (zero if `earlier` is later).
    pub fn elapsed(&self, earlier: Instant) -> Duration {
        self.now().saturating_duration_since(earlier)
    }

    /// The scale in force (a consistent snapshot): the rate with [`Scale::millihz`], ticks to
    /// nanoseconds and back.
    pub fn scale(&self) -> Scale {
        self.timeline
            .read(|_, words| (Timebase::load(words).scale, false))
    }

    /// The longest time between the starts of two [`Clock::update`] calls that is never
    /// late (promise 5): half the counter's wrap period less a handover margin and a tick, at
    /// the rate in force, rounded down. Updates spaced by exactly this are never
    /// [`ClockError::Late`]; call `update` at least this often — from a periodic tick at half
    /// of it, say, to leave room for a late tick. For 64-bit counters it is about 2^62 ticks:
    /// 146 years at 1 GHz, 29 years at 5 GHz, 533 days at 100 GHz. Past it a reading is
    /// taken as behind (promise 6), so a 64-bit counter faster than about 5 GHz that runs for
    /// decades needs `update` too (and where the target lacks 64-bit atomics every counter
    /// does: the clock reads counters modulo 2^32 there). Before [`Clock::start`], the
    /// interval at
    /// the fastest rate the crate accepts ([`Frequency::MAX_HZ`]), which is the shortest.
    pub fn update_interval(&self) -> Duration {
        let geometry = Geometry::of(self.width());
        let scale = self.scale_or_fastest();
        let ticks = geometry
            .deadline
            .saturating_sub(geometry.margin(&scale))
            .saturating_sub(1);
        Duration::from_nanos(scale.ticks_to_ns(ticks))
    }

    /// The scale in force, or before [`Clock::start`] the fastest rate the crate accepts:
    /// waits computed from it are never short, whatever the rate turns out to be.
    fn scale_or_fastest(&self) -> Scale {
        let scale = self.scale();
        if scale.millihz() == 0 {
            FASTEST
        } else {
            scale
        }
    }

    /// What the clock has noticed: late updates, a counter behind its timeline.
    pub fn health(&self) -> ClockHealth {
        ClockHealth {
            late_updates: self.late_updates.load(Ordering::Relaxed),
            counter_behind: self.behind.load(Ordering::Relaxed),
        }
    }

    /// A busy-wait [`Delay`] on this clock's counter at the scale in force *now*: it does
    /// not follow later recalibrations (take a new one after `recalibrate`). Before
    /// [`Clock::start`] the rate is not known yet: the delay then counts ticks as if the
    /// counter ran at [`Frequency::MAX_HZ`], so it waits at least what it is asked (and far
    /// longer on a slower counter) — a driver that waits before the boot code started the
    /// clock is never cut short.
    pub fn delay(&self) -> Delay<&C> {
        Delay::with_scale(&self.counter, self.scale_or_fastest())
    }

    /// Continues the timeline at `frequency` from a point just ahead (promise 2 of [`Clock`]):
    /// no jump, no step back. Waits only if the last write was less than a handover margin
    /// ago, until it has taken over (promise 4). Errors: [`ClockError::Busy`] if another
    /// writer is active right now; [`ClockError::Late`] if the deadline was missed (the new
    /// rate is applied all the same); [`ClockError::Behind`] if the counter reads behind
    /// what the clock has handed out (nothing changes).
    ///
    /// The three writers — `recalibrate`, [`Clock::update`], [`Clock::rebase`] — on a counter
    /// the example moves by hand:
    ///
    /// ```
    /// use baretime::{Clock, ClockError, FnCounter, Frequency, Instant};
    /// use core::cell::Cell;
    /// use core::time::Duration;
    ///
    /// let ticks = Cell::new(0u64);
    /// let counter = FnCounter::new(|| ticks.get(), 64);
    /// let hz = |hz| Frequency::exact_hz(hz).unwrap();
    /// let clock = Clock::new(&counter, hz(1_000_000)); // 1 tick = 1 µs
    /// ticks.set(1_000_000);
    /// let t1 = clock.now();
    /// assert_eq!(t1, Instant::from_nanos(1_000_000_000));
    ///
    /// // A new calibration says the counter runs at 1.1 MHz: the timeline bends, no jump.
    /// clock.recalibrate(hz(1_100_000)).unwrap();
    /// assert!(clock.now() >= t1);
    /// ticks.set(2_100_000); // 1.1 million ticks later: one second at the new rate
    /// let t2 = clock.now();
    /// assert!(t2 - t1 >= Duration::from_millis(999) && t2 - t1 <= Duration::from_millis(1001));
    ///
    /// // Resume from suspend: the counter restarted from 0. Time stands still instead of
    /// // going back, and recalibrating from a counter behind the clock is refused.
    /// ticks.set(500);
    /// assert!(clock.now() >= t2);
    /// assert!(clock.health().counter_behind);
    /// assert_eq!(clock.recalibrate(hz(1_100_000)), Err(ClockError::Behind));
    /// // A 64-bit counter never needs `update`; behind, it is refused as well.
    /// assert_eq!(clock.update(), Err(ClockError::Behind));
    /// // The kernel knows it slept 30 s: continue from there.
    /// clock.rebase(t2 + Duration::from_secs(30), hz(1_100_000)).unwrap();
    /// ticks.set(500 + 1_100_000); // one second after the resume
    /// assert!(clock.now() - t2 >= Duration::from_millis(30_999)); // 30 s asleep + 1 s
    /// ```
    pub fn recalibrate(&self, frequency: Frequency) -> Result<(), ClockError> {
        self.write(Write::Recalibrate(in_force(frequency)))
    }

    /// Re-bases the timeline at the same rate. A clock on a counter narrower than 64 bits
    /// needs it at least once per [`Clock::update_interval`] (from a periodic tick, say);
    /// 64-bit counters never do.
    ///
    /// Returns `Ok` when it re-based, and also when there is nothing to do: the last write's
    /// handover was not over when it was called (the counter had not passed that write's close
    /// point, at most a handover margin, 20 µs, after it; it waits for the counter to get
    /// there). An update that finds the counter past the base re-bases, however recent the
    /// base: the next is then due an interval from this one's start. `Busy` means another
    /// writer is active right now (harmless: that writer re-bases). `Late` means this call
    /// came more than [`Clock::update_interval`] after the last write: time stood still from
    /// the deadline until now (it runs again). `Behind`: see [`ClockError::Behind`].
    pub fn update(&self) -> Result<(), ClockError> {
        self.write(Write::Update)
    }

    /// Starts a new timeline at `at` (never earlier than the clock's time: promise 6) from the
    /// counter's value now, at `frequency`: for a counter that was reset or jumped — a TSC
    /// after suspend to RAM, a counter reprogrammed by firmware — where `recalibrate`
    /// returns [`ClockError::Behind`]. Pass the time the clock should continue from (the last
    /// reading before the suspend plus the time spent suspended, say). Readers racing this
    /// call see time stand still until it is published. Returns `Busy` only if another
    /// writer is active.
    pub fn rebase(&self, at: Instant, frequency: Frequency) -> Result<(), ClockError> {
        self.write(Write::Rebase(at.as_nanos(), in_force(frequency)))
    }
}

impl<C: Counter + fmt::Debug> fmt::Debug for Clock<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clock")
            .field("counter", &self.counter)
            .field("scale", &self.scale())
            .field("health", &self.health())
            .finish()
    }
}
