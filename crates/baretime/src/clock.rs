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
use crate::delay::Delay;
use crate::frequency::Frequency;
use crate::instant::{Instant, RawInstant};
use crate::scale::{mul_q64, saturate_u64, Scale};
use crate::sync::{
    fence, hook, spin_loop, AtomicBool, AtomicU32, GateWord, Mark, Ordering, Point, Published,
    Version, Words, WIDE_ATOMICS,
};

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

/// The words of a slot, in order (see `Timebase::words`): base_ticks, base_ns, mult_int,
/// mult_frac — the fast path's four, first — then the previous timeline for the `hand` ticks
/// just before base_ticks (prev_ticks, prev_ns, prev_int, prev_frac), hand, the rest of the
/// scale (inv_mult; millihz, below 2^47, with inv_shift in its top byte), and the longest tick
/// any timeline has had (slow_int, slow_frac: the slowest rate used, for readings before the
/// previous base, `Timebase::is_behind`), the base's fraction of a nanosecond (base_frac: the
/// writer's carry, which the fast path does not add) and the previous timeline's (prev_carry,
/// which its copy in the handover adds).
///
/// 15 words: a slot pair and the generation fit four cache lines. A 16th word (the shift in
/// a word of its own) cost the ordered `Clock::now` 3 % (read_ratio, AMD EPYC KVM guest:
/// 1.18x of the raw read against 1.15x), with the fast path's code unchanged.
const WORDS: usize = 15;

/// Where `inv_shift` sits in the millihz word: millihz is below 2^47 (100 GHz), the shift
/// below 128.
const SHIFT_AT: u32 = 56;

/// The end of a timeline while it is being closed: this bit and the version number (its low
/// 31 bits where gate words are 32-bit).
const CLOSING: u64 = if WIDE_ATOMICS { 1 << 63 } else { 1 << 31 };
/// Ends are offsets from `base_ticks` below this (the 64-bit deadline is `2^62 − 1`; with
/// 32-bit gate words, where counters are read modulo 2^32, `2^31 − 1`).
const OFFSET_LIMIT: u64 = if WIDE_ATOMICS { 1 << 62 } else { 1 << 31 };

/// How far (at the faster of the two rates) a 64-bit reading may be before the previous
/// timeline's base and still be run back at that rate (`Timebase::is_behind`): a CPU that
/// lags by [`LAG_NS`], across two handovers. Further back is a counter that went back, to
/// before the newest rate was in force.
const BEFORE_PREVIOUS_NS: u64 = LAG_NS + 2 * HANDOVER_NS;

/// The end of a timeline that a rebase from a counter behind (promise 6) is replacing (64-bit
/// gate words only, where a rebase can find the counter behind): its readers stand at the
/// mark's ceiling until the fresh timeline is published. Not a close tag: those carry a
/// 32-bit version number below bit 62.
const REBASING: u64 = CLOSING | (1 << 62);

/// A timeline's handover stop (`Clock::stops`) while it is being decided.
const STOPPING: u64 = if WIDE_ATOMICS { 1 << 63 } else { 1 << 31 };
/// A decided handover stop: this bit and its distance before the base in ticks (below
/// 3/16 of the wrap: under 2^30 for a 32-bit counter).
const STOPPED: u64 = STOPPING >> 1;

/// The close tag of `version`.
fn closing(version: Version) -> u64 {
    CLOSING | (u64::from(version.number) & CLOSING.wrapping_sub(1))
}

/// The mutable part of a slot, beside its words: where its timeline ends.
struct Gate {
    /// Readers take the fast path for `d < lim`: `deadline + 1` while the timeline is open,
    /// 0 once it is closing, closed or latched (then the slow path reads `end`).
    lim: GateWord,
    /// The end as an offset from `base_ticks` (the deadline while open), or
    /// `CLOSING | version` while a close point is being decided.
    end: GateWord,
    /// `version + 1` once a reader or the writer saw the timeline past its end: it then
    /// stays at its end.
    latched: AtomicU32,
    /// The margin (ticks) the writer closing this timeline proposes with — the smaller of
    /// the old and the new rate's — stored before it announces the close, so that helpers
    /// propose with it too; 0 while open.
    margin: GateWord,
}

impl Gate {
    #[cfg(not(loom))]
    const fn new() -> Gate {
        Gate {
            lim: GateWord::new(0),
            end: GateWord::new(0),
            latched: AtomicU32::new(0),
            margin: GateWord::new(0),
        }
    }
    #[cfg(loom)]
    fn new() -> Gate {
        Gate {
            lim: GateWord::new(0),
            end: GateWord::new(0),
            latched: AtomicU32::new(0),
            margin: GateWord::new(0),
        }
    }

    /// Opens the gate for a fresh timeline (the writer, before publishing it).
    fn open(&self, deadline: u64) {
        self.latched.store(0, Ordering::Relaxed);
        self.margin.store(0, Ordering::Relaxed);
        self.end.store(deadline, Ordering::Relaxed);
        self.lim
            .store(deadline.saturating_add(1), Ordering::Relaxed);
    }
}

/// Where a reading falls, seen from a timeline's base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Zone {
    /// Up to the deadline.
    Valid,
    /// Past the deadline, up to three quarters of the wrap.
    Late,
    /// The last quarter of the wrap: before the base.
    Behind,
}

/// The zones of a counter width, and the handover margin.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    width: Width,
    deadline: u64,
    late_end: u64,
}

impl Geometry {
    #[inline(always)]
    fn of(width: Width) -> Geometry {
        let mask = width.mask();
        let deadline = width.half().min(OFFSET_LIMIT.wrapping_sub(1));
        Geometry {
            width,
            deadline,
            // A 64-bit counter is never late: whatever is past the deadline (2^62 ticks) is
            // behind the base.
            late_end: if width == Width::FULL {
                deadline
            } else {
                mask.wrapping_sub(mask >> 2)
            },
        }
    }

    fn zone(&self, d: u64) -> Zone {
        if d <= self.deadline {
            Zone::Valid
        } else if d <= self.late_end {
            Zone::Late
        } else {
            Zone::Behind
        }
    }

    /// [`HANDOVER_NS`] in ticks at `scale`, within 1..=max(1, wrap/16).
    fn margin(&self, scale: &Scale) -> u64 {
        scale
            .ns_to_ticks_ceil(HANDOVER_NS)
            .clamp(1, (self.width.mask() >> 4).max(1))
    }

    /// Whether a reading in `zone` means the timeline is past its deadline. A narrow counter
    /// that far round has come round again; a 64-bit counter behind the base was reset, or
    /// is read on a CPU whose counter lags the one the base came from (counters that warp
    /// between CPUs): it is not late, and must not make time jump to the deadline.
    fn is_late(&self, zone: Zone) -> bool {
        match zone {
            Zone::Valid => false,
            Zone::Late => true,
            Zone::Behind => self.width != Width::FULL,
        }
    }

    /// The end a reading `t` proposes for a timeline based at `b`: `t + margin`, never past
    /// the deadline. A late reading proposes the deadline, which no reader of an open
    /// timeline has passed; a 64-bit reading behind the base proposes `behind()`, the point
    /// where the timeline reaches the clock's high-water mark (no earlier than anything
    /// handed out, at most its granules ahead), where the deadline would be a jump of 2^62
    /// ticks.
    ///
    /// A narrow reading still in the handover before the base (`hand` ticks: the counter has
    /// not reached the base yet) proposes itself plus the margin, or the base if that is
    /// later; a 64-bit one anywhere before the base proposes `behind()`, which is that or
    /// later.
    fn proposal(&self, tb: &Timebase, t: u64, margin: u64, behind: impl FnOnce() -> u64) -> u64 {
        let d = self.width.delta(tb.base_ticks, t);
        match self.zone(d) {
            Zone::Valid => d.saturating_add(margin).min(self.deadline),
            _ if self.width == Width::FULL => behind().min(self.deadline),
            _ if self.width.delta(t, tb.base_ticks) <= tb.hand => {
                from_base(tb, margin, self.width.delta(t, tb.base_ticks)).min(self.deadline)
            }
            _ => self.deadline,
        }
    }
}

/// How much later than its place in the program a counter read may be performed (loads
/// passing `LFENCE; RDTSC`, say): far less than this (a reorder buffer of a few hundred
/// instructions).
const REORDER_NS: u64 = 500;

/// The close point, as an offset from the base, that a reading `before` ticks before the
/// base of `tb` proposes: the base itself when the reading is clearly before it (by
/// [`REORDER_NS`] or more), so that no reader can have passed the base and the timeline
/// continues unchanged at the new rate; otherwise the reading plus the margin.
fn from_base(tb: &Timebase, margin: u64, before: u64) -> u64 {
    if tb.scale.ticks_to_ns(before) >= REORDER_NS {
        0
    } else {
        margin.saturating_sub(before)
    }
}

/// The handover stop (`Clock::stops`, decided) that a reading `t` proposes for `tb`: a margin
/// after it, as ticks before the base; 0 (the base itself) where that is at or past the base,
/// or where the reading is not in the handover (past the base, or further back: a reset).
///
/// The margin is no longer than [`HANDOVER_NS`] at the copy's rate either: the copy runs on up
/// to the stop, and a copy far slower than the rates around it (a rebase at 1 kHz between two
/// at 100 GHz) would otherwise run a margin of the fast rates' ticks at its own (2000 s).
fn stop_at(width: Width, tb: &Timebase, t: u64, margin: u64) -> u64 {
    let copy = u128::from(tb.prev_int) << 64 | u128::from(tb.prev_frac);
    let margin = match (u128::from(HANDOVER_NS) << 64).checked_div(copy) {
        Some(ticks) => margin.min(u64::try_from(ticks).unwrap_or(u64::MAX).saturating_add(1)),
        // A copy that stands still.
        None => margin,
    };
    let before = width.delta(t, tb.base_ticks);
    let ticks = if before != 0 && before <= tb.hand {
        before.saturating_sub(margin.max(1))
    } else {
        0
    };
    STOPPED | ticks
}

/// The even or odd one of a slot pair (the ring of two timeline slots).
#[inline(always)]
fn of_slot<T>(pair: &[T; 2], slot: usize) -> &T {
    let [even, odd] = pair;
    if slot & 1 == 0 {
        even
    } else {
        odd
    }
}

/// The margin a helper proposes a close point or a handover stop with: the closing writer's
/// (stored before it announced the close), or `tb`'s own if that is smaller.
fn helper_margin(gate: &Gate, geometry: &Geometry, tb: &Timebase) -> u64 {
    match gate.margin.load(Ordering::SeqCst) {
        0 => geometry.margin(&tb.scale),
        m => m.min(geometry.margin(&tb.scale)),
    }
}

/// `base_ns + ⌊ticks × (int + frac / 2^64)⌋`, saturating at `u64::MAX`.
///
/// Counters faster than 1 GHz have ticks shorter than a nanosecond (`int == 0`): then the
/// result is one multiply and one saturating add, the shortest chain after the counter read.
/// Otherwise the general `u128` sum, which cannot overflow (each term is below 2^128 − 2^65).
/// Non-decreasing in `ticks`, which is all the monotonicity argument needs of it.
#[inline(always)]
fn advance(base_ns: u64, ticks: u64, int: u64, frac: u64) -> u64 {
    if int == 0 {
        base_ns.saturating_add(saturate_u64(mul_q64(ticks, 0, frac)))
    } else {
        saturate_u64(mul_q64(ticks, int, frac).saturating_add(base_ns as u128))
    }
}

/// `base_ns + ⌊carry / 2^64 + ticks × (int + frac / 2^64)⌋` and the fraction of a nanosecond
/// that floor drops (in 2^-64 ns), or `(u64::MAX, 0)` where the time saturates. At least
/// `advance(base_ns, ticks, int, frac)`, by at most 1 ns.
fn carried(base_ns: u64, carry: u64, ticks: u64, int: u64, frac: u64) -> (u64, u64) {
    // ticks × frac + carry < 2^128 (the product is at most (2^64 − 1)^2 = 2^128 − 2^65 + 1,
    // the carry below 2^64); the saturating operations only guard the whole part.
    let part = u128::from(ticks)
        .saturating_mul(u128::from(frac))
        .saturating_add(u128::from(carry));
    let whole = u128::from(ticks)
        .saturating_mul(u128::from(int))
        .saturating_add(part >> 64)
        .saturating_add(u128::from(base_ns));
    if whole > u128::from(u64::MAX) {
        (u64::MAX, 0)
    } else {
        (saturate_u64(whole), part as u64)
    }
}

/// A scale's tick length (64.64 fixed point) as a pair that orders as the length does.
fn mult(scale: &Scale) -> (u64, u64) {
    (scale.mult_int(), scale.mult_frac())
}

/// One timeline as the writer builds it.
#[derive(Clone, Copy, Debug)]
struct Timebase {
    base_ticks: u64,
    base_ns: u64,
    scale: Scale,
    prev_ticks: u64,
    prev_ns: u64,
    prev_int: u64,
    prev_frac: u64,
    /// The previous timeline's `base_frac`: its copy in the handover reads it with its carry
    /// (`before_base`), as the close point's time was computed.
    prev_carry: u64,
    hand: u64,
    /// The longest tick (`mult`) of any timeline since the start: the slowest rate used.
    slow: (u64, u64),
    /// The fraction of a nanosecond (in 2^-64 ns) by which the counter's time at the base
    /// exceeds `base_ns`: what the floor of the close point's time dropped, carried into
    /// the next timeline by the writer (`Timebase::carried_at`). Readers do not add it
    /// (they read at most a nanosecond less for it, never more); without it a narrow counter
    /// whose ticks are shorter than a nanosecond, updated every tick or two, lost up to a
    /// nanosecond per write and stood still.
    base_frac: u64,
}

impl Timebase {
    /// This timeline, with the slowest rate used so far, which carries over to every
    /// timeline (a fresh one too): its own, the one it follows (`tb`) and the slowest of both.
    fn keeping_slowest(self, tb: &Timebase) -> Timebase {
        Timebase {
            slow: self
                .slow
                .max(tb.slow)
                .max(mult(&tb.scale))
                .max(mult(&self.scale)),
            ..self
        }
    }

    fn load(w: &Words<WORDS>) -> Timebase {
        let [b, base_ns, int, frac, prev_ticks, prev_ns, prev_int, prev_frac, hand, inv, millihz, slow_int, slow_frac, base_frac, prev_carry] =
            w;
        let millihz = millihz.load();
        Timebase {
            base_ticks: b.load(),
            base_ns: base_ns.load(),
            scale: Scale::from_parts(
                int.load(),
                frac.load(),
                inv.load(),
                u32::try_from(millihz.wrapping_shr(SHIFT_AT)).unwrap_or(u32::MAX),
                millihz & ((1 << SHIFT_AT) - 1),
            ),
            prev_ticks: prev_ticks.load(),
            prev_ns: prev_ns.load(),
            prev_int: prev_int.load(),
            prev_frac: prev_frac.load(),
            hand: hand.load(),
            slow: (slow_int.load(), slow_frac.load()),
            base_frac: base_frac.load(),
            prev_carry: prev_carry.load(),
        }
    }

    fn words(&self) -> [u64; WORDS] {
        [
            self.base_ticks,
            self.base_ns,
            self.scale.mult_int(),
            self.scale.mult_frac(),
            self.prev_ticks,
            self.prev_ns,
            self.prev_int,
            self.prev_frac,
            self.hand,
            self.scale.inv_mult(),
            self.scale.millihz() | u64::from(self.scale.inv_shift()).wrapping_shl(SHIFT_AT),
            self.slow.0,
            self.slow.1,
            self.base_frac,
            self.prev_carry,
        ]
    }

    /// A timeline starting at `base_ns` from counter value `t`, with no predecessor to hand
    /// over from: the `hand` ticks before `t` read as `base_ns` (the clock is then at its
    /// start, not behind).
    fn fresh(t: u64, base_ns: u64, scale: Scale, hand: u64) -> Timebase {
        Timebase {
            base_ticks: t,
            base_ns,
            scale,
            prev_ticks: t,
            prev_ns: base_ns,
            prev_int: 0,
            prev_frac: 0,
            prev_carry: 0,
            hand,
            slow: mult(&scale),
            base_frac: 0,
        }
    }

    /// The value of a reading `t` before the base, on the previous timeline with its carry
    /// (as the close point's time, this timeline's base, was computed: at most 1 ns above
    /// what the previous version's own readers computed, never below); a reading before the
    /// previous timeline's base too stands at that base.
    ///
    /// With the carry, a reading just before the base and one just after are on one
    /// timeline, the counter's time floored: two CPUs whose counters are apart by less than
    /// [`LAG_NS`] read times apart by no more, one on each side of a base (without it, a
    /// reading in the handover could be a nanosecond further below one after the base, and a
    /// CPU lagging by just under `LAG_NS` was taken for a counter behind).
    fn before_base(&self, width: Width, t: u64) -> u64 {
        self.before_base_carried(width, t).0
    }

    /// [`Timebase::before_base`] and the fraction of a nanosecond its floor drops (in 2^-64
    /// ns): what a timeline based at `t` carries on.
    fn before_base_carried(&self, width: Width, t: u64) -> (u64, u64) {
        let p = width.delta(self.prev_ticks, t);
        if p > width.delta(self.prev_ticks, self.base_ticks) {
            (self.prev_ns, self.prev_carry)
        } else {
            carried(
                self.prev_ns,
                self.prev_carry,
                p,
                self.prev_int,
                self.prev_frac,
            )
        }
    }

    /// Whether a 64-bit reading `t` is behind what the clock has handed out (`mark`, loaded
    /// before the reading) by more than [`LAG_NS`] (promise 6). On the timeline, by its
    /// time; before the base, within the previous timeline, by that timeline's time, as its
    /// readers computed it; before that (or before a fresh timeline, whose handover stands
    /// still), by the timeline run backwards at the faster of the two rates — or, before the
    /// previous base by more than [`BEFORE_PREVIOUS_NS`] at that rate (a reset to an older
    /// timeline), at the slowest rate any timeline has had: a reset is judged by how far back
    /// it went, not by where the timeline happens to start.
    fn is_behind(&self, t: u64, mark: u64) -> bool {
        let w = Width::FULL;
        let d = w.delta(self.base_ticks, t);
        if d < OFFSET_LIMIT {
            return self.at(d).saturating_add(LAG_NS) < mark;
        }
        let flat = self.prev_int == 0 && self.prev_frac == 0;
        let (ticks, ns, int, frac) = if flat {
            (
                self.base_ticks,
                self.base_ns,
                self.scale.mult_int(),
                self.scale.mult_frac(),
            )
        } else {
            (self.prev_ticks, self.prev_ns, self.prev_int, self.prev_frac)
        };
        let ahead = w.delta(ticks, t);
        if !flat && ahead <= w.delta(ticks, self.base_ticks) {
            return self.before_base(w, t).saturating_add(LAG_NS) < mark;
        }
        // Further back the counter may have run at either timeline's rate (two writes in one
        // handover): run back at the faster, which puts the reading latest.
        let faster = (int, frac).min((self.scale.mult_int(), self.scale.mult_frac()));
        let back = w.delta(t, ticks);
        // Unless it is before the previous timeline's base by more than a CPU that lags and
        // two handovers, even at the faster rate: then the counter went back (a reset) to a
        // time before that base, on an older timeline this one does not know, whose time
        // there may be far below the previous base's (which nobody may have read), and whose
        // rate may be any used before (a timeline that lasted less than a handover says
        // nothing of the rate before it; a recalibration and an update since make both rates
        // here new): run back at the slowest rate any timeline has had, which puts the reading
        // earliest. (At the faster, a recalibration from 1 kHz to 1 GHz put a reset 2 million
        // ticks back 2 ms before a base nobody read, not behind, where on the 1 kHz timeline
        // it is 2000 s before the time handed out.)
        let slower = (int, frac).max(mult(&self.scale)).max(self.slow);
        let (int, frac) = if !flat && advance(0, back, faster.0, faster.1) > BEFORE_PREVIOUS_NS {
            slower
        } else {
            faster
        };
        // `ns − back × mult + LAG_NS < mark`, without going below zero, and in `u128`, so that
        // neither side saturates: where the base's time saturates at `u64::MAX` (a counter
        // jumped 584 years of ticks ahead, and a write based a timeline there), a reading
        // reset back from it by as much was compared as `u64::MAX > u64::MAX`, taken for not
        // behind, and returned the saturated time nobody had read (promise 6). From a base
        // whose time saturated, a reading is judged as if the base read `u64::MAX`: one back
        // by more than the mark's distance from there stands still (at the mark's ceiling)
        // rather than jump to a saturated time.
        u128::from(mark).saturating_add(mul_q64(back, int, frac))
            > u128::from(ns).saturating_add(u128::from(LAG_NS))
    }

    /// The counter's time `d` ticks after the base, with the carry: `base_ns + ⌊base_frac /
    /// 2^64 + d × mult⌋` and the fraction that floor drops (in 2^-64 ns; 0 where the time
    /// saturates at `u64::MAX`). At least `at(d)`, by at most 1 ns, and never past the
    /// counter's time at the rate in force: a next timeline based here starts from it,
    /// so that time over any run of writes is the sum of ticks × tick length, less under a
    /// nanosecond, however many writes there are (promise 2).
    fn carried_at(&self, d: u64) -> (u64, u64) {
        carried(
            self.base_ns,
            self.base_frac,
            d,
            self.scale.mult_int(),
            self.scale.mult_frac(),
        )
    }

    /// Its value at a reading `t` with the carry, and the fraction that floor drops: on the
    /// timeline up to its deadline, [`Timebase::carried_at`]; in the handover before its base,
    /// [`Timebase::before_base_carried`]; `None` anywhere else.
    fn carried_value(&self, geometry: &Geometry, t: u64) -> Option<(u64, u64)> {
        let width = geometry.width;
        let d = width.delta(self.base_ticks, t);
        if geometry.zone(d) == Zone::Valid {
            return Some(self.carried_at(d));
        }
        let before = width.delta(t, self.base_ticks);
        (before <= self.hand).then(|| self.before_base_carried(width, t))
    }

    /// Its value `d` ticks after its base.
    fn at(&self, d: u64) -> u64 {
        advance(
            self.base_ns,
            d,
            self.scale.mult_int(),
            self.scale.mult_frac(),
        )
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
///    most 3 × 10⁻¹⁸ of the time: 0.1 ns after a year), on every width and rate — no write
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

    /// Starts a clock made with [`Clock::uninit`]: its epoch (`Instant::ZERO`) is now, and it
    /// runs at `frequency`. [`ClockError::Started`] if it already runs; `Busy` if another
    /// writer is active.
    pub fn start(&self, frequency: Frequency) -> Result<(), ClockError> {
        self.write(Write::Start(Scale::new(frequency)))
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

    /// Nanoseconds since the clock's epoch. Never goes back and never jumps (promises 1 and
    /// 2 of [`Clock`]), never blocks, never waits for a writer: it reads again
    /// only when two publications overtook it.
    #[inline]
    pub fn now(&self) -> Instant {
        let width = self.width();
        // The mark before the counter read: a reading is judged against times handed out
        // before it was made, so a reader stalled after its read is never taken for behind.
        let mark = self.mark.load();
        // The fast path: one attempt (`try_read` spelled out, so that its three checks fold
        // into one branch after the arithmetic), no call in it.
        let (version, words, s1) = self.timeline.begin();
        let (before_end, ns) = self.convert(width, version, words);
        let open = before_end & self.timeline.held(s1);
        // 64-bit counters: a time in [mark, mark + MARK_GRANULE_NS) is returned as it is
        // (a subtraction and a compare); anything else goes past the mark.
        if open & ((width != Width::FULL) | (ns.wrapping_sub(mark) < MARK_GRANULE_NS)) {
            return Instant::from_nanos(ns);
        }
        Instant::from_nanos(self.now_cold(width, mark, open.then_some(ns)))
    }

    /// `now()` past its fast path.
    #[cold]
    #[inline(never)]
    fn now_cold(&self, width: Width, mark: u64, fast: Option<u64>) -> u64 {
        let reading = match fast {
            Some(ns) => Some(ns),
            None => self.read_slow(width, mark),
        };
        if width == Width::FULL {
            self.settle(width, mark, reading, true)
        } else {
            // Narrow counters are never behind (a reading before the base is late).
            reading.unwrap_or(0)
        }
    }

    /// One reading past the fast path, read again as often as publications overtake it:
    /// its time, or `None` for a 64-bit reading behind the base.
    fn read_slow(&self, width: Width, mark: u64) -> Option<u64> {
        self.timeline.read(
            |version, words| match self.read_fast(width, version, words) {
                Some(ns) => (Some(ns), false),
                // Past the fast path the answer depends on the timeline's end, which only holds
                // for the version that is current.
                None => (self.now_slow(width, mark, version, words), true),
            },
        )
    }

    /// One whole reading, fast path or not (for a second, confirming read).
    fn read_once(&self, width: Width, mark: u64) -> Option<u64> {
        match self
            .timeline
            .try_read(|version, words| self.read_fast(width, version, words))
        {
            Some(ns) => Some(ns),
            None => self.read_slow(width, mark),
        }
    }

    /// Judges a 64-bit reading against the high-water mark `mark`, loaded before the
    /// reading was made (promises 1, 6 and 7): a time past the mark's granule raises the
    /// mark (a far one only once a second reading confirms it, and then the smaller of the
    /// two); a time behind the mark by less than [`LAG_NS`] (another CPU's counter lagging
    /// a little) stands at the mark; one further behind, or a reading behind the base
    /// (`None`), is a counter that went back: time stands at the mark's ceiling. Neither
    /// raises the mark.
    fn settle(&self, width: Width, mark: u64, reading: Option<u64>, confirm: bool) -> u64 {
        match reading {
            Some(ns) if ns >= mark.saturating_add(MARK_GRANULE_NS) => {
                // `u64::MAX`: a reading that saturated is as far as the mark's bound can say,
                // and may be the glitch too (the bound saturates with it near the top).
                if confirm && (ns > mark.saturating_add(CONFIRM_NS) || ns == u64::MAX) {
                    hook(Point::ReadConfirm);
                    // A reading this far ahead may be one glitched read: read again, and take
                    // the smaller (both are readings made within this call).
                    match self.read_once(width, mark) {
                        Some(again) if again < ns => {
                            // The smaller may still be the glitch: the first a true reading
                            // from before the counter was reset back. Still far past the mark,
                            // it is confirmed once more (a third read, the smaller kept).
                            let again = if again > mark.saturating_add(CONFIRM_NS) {
                                hook(Point::ReadConfirm);
                                match self.read_once(width, mark) {
                                    Some(third) if third < again => third,
                                    None => return self.settle(width, mark, None, false),
                                    Some(_) => again,
                                }
                            } else {
                                again
                            };
                            return self.settle(width, mark, Some(again), false);
                        }
                        None => return self.settle(width, mark, None, false),
                        Some(_) => {}
                    }
                }
                self.raise_mark(ns);
                ns
            }
            Some(ns) if ns >= mark => ns,
            Some(ns) if ns.saturating_add(LAG_NS) >= mark => mark,
            _ => {
                if !self.behind.load(Ordering::Relaxed) {
                    self.behind.store(true, Ordering::Relaxed);
                }
                self.ceiling()
            }
        }
    }

    /// The counter's time on `version`'s timeline if the fast path applies (the timeline
    /// open and the reading before its end).
    #[inline(always)]
    fn read_fast(&self, width: Width, version: Version, words: &Words<WORDS>) -> Option<u64> {
        let (before_end, ns) = self.convert(width, version, words);
        before_end.then_some(ns)
    }

    /// A counter read and its time on `version`'s timeline, and whether the reading is before
    /// the timeline's end as it stood after the read (the time is computed either way: the
    /// fast path branches once, on every check together).
    #[inline(always)]
    fn convert(&self, width: Width, version: Version, words: &Words<WORDS>) -> (bool, u64) {
        let t = self.counter.ticks();
        hook(Point::ReadCounter);
        let [b, base_ns, int, frac, ..] = words;
        let (b, base_ns, int, frac) = (b.load(), base_ns.load(), int.load(), frac.load());
        // After the counter read: a reader that passes here with the timeline open read its
        // counter before any close of it became visible.
        let lim = self.gate(version.slot).lim.load(Ordering::Relaxed);
        let d = width.delta(b, t);
        (d < lim, advance(base_ns, d, int, frac))
    }

    /// Raises the high-water mark to `ns`, or to [`MARK_GRANULE_NS`] short of `u64::MAX` where
    /// time saturates: the fast path's window `[mark, mark + MARK_GRANULE_NS)` (a wrapping
    /// subtraction and a compare) then never wraps round to small times, and the ceiling is
    /// still no earlier than any time handed out (it saturates at `u64::MAX`).
    fn raise_mark(&self, ns: u64) {
        self.mark
            .raise(ns.min(u64::MAX.saturating_sub(MARK_GRANULE_NS)));
    }

    /// A time no earlier than any `now()` has returned (64-bit counters), and at most
    /// [`MARK_GRANULE_NS`] past the latest.
    fn ceiling(&self) -> u64 {
        self.mark.load().saturating_add(MARK_GRANULE_NS)
    }

    /// Time since `earlier` (zero if `earlier` is later).
    pub fn elapsed(&self, earlier: Instant) -> Duration {
        self.now().saturating_duration_since(earlier)
    }

    /// Past the fast path: the handover, a closing or closed timeline, a late or behind
    /// counter. `None`: a 64-bit reading behind the base (judged against the mark by
    /// `settle`).
    #[cold]
    #[inline(never)]
    fn now_slow(
        &self,
        width: Width,
        mark: u64,
        version: Version,
        words: &Words<WORDS>,
    ) -> Option<u64> {
        let t = width.value(self.counter.ticks());
        hook(Point::ReadCounter);
        // Pairs with the release stores of `lim` (a close, a latch): what they published
        // before it is visible below.
        fence(Ordering::Acquire);
        let tb = Timebase::load(words);
        if tb.scale.millihz() == 0 {
            // Not started (`uninit`): the epoch.
            return Some(0);
        }
        // Confirmed as a helper's is (promise 7): past a close point a reading stands at the
        // end, a time within a margin of the mark that `settle` does not confirm, so one
        // glitched read would take time to the close point before the counter reaches it.
        let t = self.confirm(width, &tb, t, mark);
        let geometry = Geometry::of(width);
        let gate = self.gate(version.slot);
        let wide = width == Width::FULL;
        loop {
            // The latch before the end, both `SeqCst`: a latched timeline's end is returned
            // only as it stood after the latch was seen, so that a close announced after this
            // load sees the latch too (`close`) and proposes the deadline — loaded the other
            // way round, an open end (the deadline) read before a writer stalled since it
            // judged its reading announced its close, and a latch seen after it, returned the
            // deadline's time, and that writer's close read a wrap later closed the timeline
            // below it (half a wrap back, 16-bit counter, threads).
            let latched = self.is_latched(version);
            let end = gate.end.load(Ordering::SeqCst);
            let d = width.delta(tb.base_ticks, t);
            let zone = geometry.zone(d);
            if end & CLOSING == 0 && latched {
                return Some(tb.at(end));
            }
            if wide && end == REBASING {
                // A rebase from a counter behind is replacing this timeline: stand at the
                // mark's ceiling (`None`), where the fresh timeline starts or later. Not at the
                // base: its time was measured on whichever CPU the last write ran on, and the
                // fresh timeline counts on from the rebasing CPU's counter (which may lag it).
                return None;
            }
            if zone == Zone::Behind {
                if wide {
                    // Before the base: the previous timeline, as its own readers computed it
                    // (the handover, or a CPU whose counter lags), unless that is behind what
                    // was handed out (a reset: `None`, the mark's ceiling).
                    if tb.is_behind(t, mark) {
                        return None;
                    }
                    return Some(self.in_handover(&geometry, version, &tb, t));
                }
                // Not where this version is latched: a reading past its deadline was seen, so
                // this one came round a wrap later (it stands at the end, below; with a close
                // announced after the latch, it helps it to the deadline first). A writer
                // stalled between judging its reading and closing let a reader here read the
                // handover while the end was closing (the interleaving test, 8 bits: 37 µs
                // back).
                if width.delta(t, tb.base_ticks) <= tb.hand && !latched {
                    // The previous version was latched past its deadline: the counter has
                    // passed this version's base (which is at or before that deadline), so
                    // this is a narrow counter come round a wrap later, not a reading from
                    // just before the base: stand still at the base.
                    let prev_gate = self.gate(version.slot.wrapping_add(1));
                    if prev_gate.latched.load(Ordering::Acquire) == version.number {
                        return Some(tb.base_ns);
                    }
                    // The handover: the previous timeline, exactly as its own readers
                    // compute it.
                    return Some(self.in_handover(&geometry, version, &tb, t));
                }
                // A narrow counter this far round is more likely late by more than a
                // quarter wrap than behind: treated as late below.
            }
            if end & CLOSING != 0 {
                if end != closing(version) {
                    // A close of a later version in this slot: this read will be rejected.
                    return Some(tb.base_ns);
                }
                // Help decide the close point, with a counter read made after seeing it.
                hook(Point::ReadHelp);
                fence(Ordering::SeqCst);
                let t2 = width.value(self.counter.ticks());
                let t2 = self.confirm(width, &tb, t2, mark);
                let margin = helper_margin(gate, &geometry, &tb);
                // A latch made before the close was announced (seen after it, as `close` does):
                // its readers stood at the deadline.
                let proposal = if self.is_latched(version) {
                    geometry.deadline
                } else {
                    self.propose(&geometry, &tb, t2, margin, mark)
                };
                let _ =
                    gate.end
                        .compare_exchange(end, proposal, Ordering::SeqCst, Ordering::SeqCst);
                if geometry.is_late(geometry.zone(width.delta(tb.base_ticks, t2)))
                    && width.delta(t2, tb.base_ticks) > tb.hand
                {
                    // What this helper saw is past the deadline: say so before anyone can
                    // read the counter a wrap later.
                    self.latch(version);
                }
                continue;
            }
            if zone == Zone::Valid {
                if end == 0 {
                    // Closed at the base (the counter had not reached it): where a rebase stopped
                    // the handover before the base, its readers stand at the stop past the base
                    // too (none can have read past the base before the stop was announced: the
                    // stop is a margin after a counter read made since, which was before the
                    // base).
                    if let Some(before) = self.stopped(&geometry, version, &tb) {
                        let at = width.value(tb.base_ticks.wrapping_sub(before));
                        return Some(tb.before_base(width, at));
                    }
                }
                // Up to the end, or past a close point while the writer publishes: stand
                // still there.
                return Some(tb.at(d.min(end)));
            }
            // Past the deadline: latch so that a counter coming round again cannot take time
            // back, then stand still at the end as it stands after the latch (looked at again:
            // a close announced meanwhile may not have seen the latch, and decides it).
            hook(Point::ReadLatch);
            self.latch(version);
            if !self.is_latched(version) {
                // The slot holds a later version (latched at its own number): this read is
                // rejected (read again), and must not wait here for a latch of its own.
                return Some(tb.base_ns);
            }
        }
    }

    /// Whether `version`'s timeline is latched at its end (by `latch`).
    fn is_latched(&self, version: Version) -> bool {
        self.gate(version.slot).latched.load(Ordering::SeqCst) == version.number.wrapping_add(1)
    }

    /// A reading `t` before `tb`'s base, in its handover: the previous timeline's copy, up to
    /// where a rebase stopped it (`stop_handover`), standing still there.
    fn in_handover(&self, geometry: &Geometry, version: Version, tb: &Timebase, t: u64) -> u64 {
        let width = geometry.width;
        match self.stopped(geometry, version, tb) {
            Some(before) if width.delta(t, tb.base_ticks) < before => {
                tb.before_base(width, width.value(tb.base_ticks.wrapping_sub(before)))
            }
            _ => tb.before_base(width, t),
        }
    }

    /// Where a rebase stopped `tb`'s handover (`stop_handover`): how many ticks before the base
    /// (`None`: not stopped, or at the base). A stop being decided is helped first, with a
    /// counter read made after seeing it. `None` when loaded after a counter read means that
    /// read came before any stop was announced: whoever decides one reads the counter after
    /// announcing it, and stops a margin after that.
    fn stopped(&self, geometry: &Geometry, version: Version, tb: &Timebase) -> Option<u64> {
        let (gate, word) = (self.gate(version.slot), self.stop_word(version.slot));
        loop {
            let stop = word.load(Ordering::SeqCst);
            if stop & STOPPING == 0 {
                return Some(stop & !STOPPED).filter(|&before| before != 0);
            }
            hook(Point::ReadHelp);
            fence(Ordering::SeqCst);
            let t = geometry.width.value(self.counter.ticks());
            let margin = helper_margin(gate, geometry, tb);
            let _ = word.compare_exchange(
                STOPPING,
                stop_at(geometry.width, tb, t, margin),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    }

    /// Stops the readings in the handover of `version`'s timeline (a counter still short of
    /// its base): from a margin after a counter read made once that is announced, its readers
    /// stand still at the copy's time there instead of reading on (a rebase then starts its new
    /// rate from that point, where no reader has passed it). Returns how many ticks before the
    /// base the stop is (0: at the base, the counter a margin or less from it, or not in the
    /// handover), and this writer's counter reading.
    fn stop_handover(
        &self,
        version: Version,
        tb: &Timebase,
        geometry: &Geometry,
        margin: u64,
    ) -> (u64, u64) {
        let word = self.stop_word(version.slot);
        word.store(STOPPING, Ordering::SeqCst);
        hook(Point::WriteClosing);
        let t = self.read_after_fence(geometry);
        let proposal = stop_at(geometry.width, tb, t, margin);
        let stop =
            match word.compare_exchange(STOPPING, proposal, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => proposal,
                // A helper decided first; only this writer stores `STOPPING`.
                Err(stop) => stop,
            };
        (stop & !STOPPED, t)
    }

    /// Latches `version`'s timeline at its end: from now on its readers stand still there.
    fn latch(&self, version: Version) {
        let gate = self.gate(version.slot);
        gate.latched
            .fetch_max(version.number.wrapping_add(1), Ordering::SeqCst);
        gate.lim.store(0, Ordering::Release);
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
        self.write(Write::Recalibrate(Scale::new(frequency)))
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
        self.write(Write::Rebase(at.as_nanos(), Scale::new(frequency)))
    }

    /// Runs one write as the one writer, or returns `Busy` without waiting.
    fn write(&self, what: Write) -> Result<(), ClockError> {
        if self
            .writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(ClockError::Busy);
        }
        let result = self.write_locked(what);
        self.writer.store(false, Ordering::Release);
        result
    }

    fn write_locked(&self, what: Write) -> Result<(), ClockError> {
        hook(Point::WriteLocked);
        let geometry = Geometry::of(self.width());
        let width = geometry.width;
        let (version, words) = self.timeline.current();
        let tb = Timebase::load(words);
        let started = tb.scale.millihz() != 0;
        match (what, started) {
            (Write::Start(scale), false) => {
                // The epoch's reading, confirmed (promise 7): a glitched read here would be
                // the base, every true reading behind it until the counter caught up.
                let t = self.confirm_fresh(width, width.value(self.counter.ticks()));
                // The ticks just before the base read as the epoch: a CPU whose counter lags the
                // one that started the clock by up to the handover stands still at 0.
                let hand = geometry.margin(&scale).saturating_mul(2);
                self.publish(&geometry, &Timebase::fresh(t, 0, scale, hand));
                return Ok(());
            }
            (Write::Start(_), true) => return Err(ClockError::Started),
            (_, false) => return Err(ClockError::NotStarted),
            _ => {}
        }
        let gate = self.gate(version.slot);
        let margin = geometry.margin(&tb.scale);
        // The mark before the reading (as readers load it): what was handed out before.
        let mark = self.mark.load();
        let (t, stuck, passed) = self.read_past_handover(&tb, width, mark);
        let d = width.delta(tb.base_ticks, t);
        let before = width.delta(t, tb.base_ticks);
        let in_handover = before <= tb.hand;
        let latched = self.is_latched(version);
        let wide = width == Width::FULL;
        let zone = match geometry.zone(d) {
            _ if latched => Zone::Late,
            // Still in the handover after waiting (a counter that does not move, or hardly),
            // or a 64-bit reading before the base (a CPU whose counter lags, unless the mark
            // finds it behind, below): write from the base. The close point is decided by the
            // protocol, from a reading made after the close is announced.
            Zone::Behind if in_handover || wide => Zone::Valid,
            // A narrow counter this far round is late rather than behind (as readers judge).
            Zone::Behind => Zone::Late,
            zone => zone,
        };
        let d = if before != 0 && (in_handover || wide) && geometry.zone(d) == Zone::Behind {
            0
        } else {
            d
        };
        // 64-bit counters: judge the reading against what the clock has handed out (promise
        // 6), not against the base.
        // A reading behind what was handed out (promise 6): a rebase starts afresh from it;
        // an update or a recalibration changes nothing and says `Behind`, so that a counter
        // that was reset is judged at the rate it was judged by until the caller rebases
        // (a new rate would let a reset counter run on towards the time handed out).
        // So is one before the base by more than the handover reaches, even where what was
        // handed out is not above its time (nobody read the clock since the counter passed
        // it: a reset back to a time not yet read again). The close point cannot be before
        // the base, so a write from there would make the time jump to the base's, which
        // nobody read, for counter values that read far less a moment before (promise 2);
        // refused, the counter runs on towards the base on the timeline's handover.
        let before_hand =
            wide && !in_handover && geometry.zone(width.delta(tb.base_ticks, t)) == Zone::Behind;
        let behind = wide && (before_hand || tb.is_behind(t, mark));
        if behind && !self.behind.load(Ordering::Relaxed) {
            self.behind.store(true, Ordering::Relaxed);
        }
        let zone = match what {
            Write::Rebase(..) if behind => Zone::Behind,
            _ => zone,
        };
        if behind && !matches!(what, Write::Rebase(..)) {
            return Err(ClockError::Behind);
        }
        if let (Write::Update, Zone::Valid) = (what, zone) {
            if d < margin && !passed {
                // Nothing to do: the last write's handover was not over when this call began
                // (its first reading had not passed the base), so the base is no earlier than
                // this call's start, and the next update is due an interval from there.
                // (One whose first reading had passed the base writes, however recent the
                // base: doing nothing left the base up to a margin before this call, and the
                // next update an interval after it found the deadline a margin nearer — its
                // close clamped short of a margin after its read, and a write that took a few
                // ticks between its reads was late, promises 2 and 5.)
                return Ok(());
            }
        }
        let scale = match what {
            Write::Update => tb.scale,
            Write::Recalibrate(s) | Write::Rebase(_, s) | Write::Start(s) => s,
        };
        // The handover is computed with the old rate's formula and judged by the new one:
        // its margin is the smaller of the two rates' (ticks), so that a recalibration by a
        // large ratio neither stretches the old rate over a long handover nor jumps by many
        // old ticks.
        // The handover's reach back (readings before the new base still read the old
        // timeline) is sized by the larger, so that a CPU lagging by up to a margin at either
        // rate is never taken for late.
        let reach = margin.max(geometry.margin(&scale)).saturating_mul(2);
        let margin = margin.min(geometry.margin(&scale));
        // A fresh timeline starts from a counter reading made now (confirmed, promise 7).
        let fresh_reading = || self.confirm_fresh(width, self.read_after_fence(&geometry));
        // The time a rebase that continues a timeline (or starts from the handover) counts as
        // handed out (promise 6).
        let mut rebased_to = None;
        let next = match zone {
            Zone::Late => {
                // Hold every reader at the deadline, then start again from there.
                self.latch(version);
                let frozen = tb.at(geometry.deadline);
                self.count_late();
                let at = match what {
                    Write::Rebase(at, _) => at.max(frozen),
                    _ => frozen,
                };
                Timebase::fresh(fresh_reading(), at, scale, reach)
            }
            Zone::Behind => {
                // Only a rebase gets here (64-bit counters only: a narrow one is never
                // behind): hold the old timeline's readers at the mark's ceiling, whatever
                // their counter reads (`REBASING`), and start the fresh timeline there or
                // later. Not at the old base's time: that was measured on the CPU the last
                // write ran on, plus a margin, and the fresh timeline counts on from this
                // CPU's counter — on a CPU that lags, the lag would count twice (promise 2).
                gate.end.store(REBASING, Ordering::SeqCst);
                gate.lim.store(0, Ordering::SeqCst);
                let at = match what {
                    Write::Rebase(at, _) if wide => at.max(self.ceiling()),
                    Write::Rebase(at, _) => at.max(tb.base_ns),
                    _ => tb.base_ns,
                };
                Timebase::fresh(fresh_reading(), at, scale, reach)
            }
            Zone::Valid => {
                hook(Point::WriteJudged);
                let (c, late) = self.close(version, &tb, &geometry, margin, stuck);
                let end_ns = tb.at(c);
                // A 64-bit close point more than a margin before this write's own reading:
                // the close read was behind (the counter was reset back during the write) and
                // proposed where the timeline reaches the mark's ceiling. Continuing from
                // there at the new rate would run the ticks between `c` and this write's
                // reading — which passed before the write, at the old rate — at the new one
                // (a forward jump before the reset, read again later: ahead by the ratio,
                // promise 2: "each rate from its write's close point: a handover margin after
                // a counter read made during the write"). The write is from a counter behind
                // (promise 6): an update or a recalibration keeps the old rate and says `Behind`; a
                // rebase starts afresh from a reading made now, at the mark's ceiling or
                // later.
                // (Beyond `reach` and a margin: a helper on a CPU whose counter lags proposes
                // at most a lag before this write's reading, plus its margin.)
                let went_back = wide && c.saturating_add(reach).saturating_add(margin) < d;
                if went_back && !self.behind.load(Ordering::Relaxed) {
                    self.behind.store(true, Ordering::Relaxed);
                }
                if went_back && !late {
                    let next = match what {
                        Write::Rebase(at, _) => Timebase::fresh(
                            fresh_reading(),
                            at.max(end_ns).max(self.ceiling()),
                            scale,
                            reach,
                        ),
                        // Changes nothing (promise 6): the same timeline, base and rate,
                        // published again (the close point only ended the old version).
                        _ => tb,
                    };
                    let next = next.keeping_slowest(&tb);
                    self.publish(&geometry, &next);
                    return match what {
                        Write::Rebase(..) => {
                            self.raise_mark(next.base_ns);
                            Ok(())
                        }
                        _ => Err(ClockError::Behind),
                    };
                }
                // The next timeline starts from the counter's time at `c` with the carry, at
                // most 1 ns past `end_ns`, which the old version's readers stand at from `c`:
                // no step back, and no fraction of a nanosecond lost per write.
                let carried = tb.carried_at(c);
                if late {
                    // Stalled past the deadline after its first read (readers latched the
                    // timeline, or the close point came out at the deadline): start again
                    // from the end, as a late write does.
                    self.count_late();
                    let at = match what {
                        Write::Rebase(at, _) => at.max(end_ns),
                        _ => end_ns,
                    };
                    let fresh = Timebase::fresh(fresh_reading(), at, scale, reach);
                    let fresh = Timebase {
                        slow: fresh.slow.max(tb.slow).max(mult(&tb.scale)),
                        ..fresh
                    };
                    self.publish(&geometry, &fresh);
                    return match what {
                        Write::Rebase(..) => Ok(()),
                        _ => Err(ClockError::Late),
                    };
                }
                // The old timeline continued at the new rate from the close point: the same
                // timeline, its handover unchanged, where it closed at its base (the counter had
                // not reached it, and no reader had); otherwise a new base at the close point,
                // with the old timeline before it (readings before the old base, a handover not
                // over when this write closed, stand at the old base: the new handover reaches
                // back over the old one).
                let continued = if c == 0 {
                    Timebase { scale, ..tb }
                } else {
                    Timebase {
                        base_ticks: width.add(tb.base_ticks, c),
                        scale,
                        prev_ticks: tb.base_ticks,
                        prev_ns: tb.base_ns,
                        prev_int: tb.scale.mult_int(),
                        prev_frac: tb.scale.mult_frac(),
                        prev_carry: tb.base_frac,
                        hand: if c < reach {
                            c.saturating_add(tb.hand)
                                .min(reach.saturating_add(reach >> 1))
                        } else {
                            reach
                        },
                        slow: tb.slow,
                        base_ns: carried.0,
                        base_frac: carried.1,
                    }
                };
                match what {
                    // A rebase to a time ahead of the clock's time now starts afresh there, or
                    // at the close point if that is later (the jump it asks for); one to a
                    // time at or before now continues the timeline as a recalibration does
                    // (no jump, and no fraction of a nanosecond lost: promise 2).
                    Write::Rebase(at, _) if at > tb.at(d) => {
                        Timebase::fresh(fresh_reading(), at.max(end_ns), scale, reach)
                    }
                    // A counter still in the last write's handover after the wait (one that
                    // hardly moves, or one reset back into the handover, which the rebase is to
                    // cure): the new rate from a margin after a counter reading made now, at the
                    // old timeline's time there with its carry (its handover's copy), at the
                    // high-water mark if later, at `at` if later still (promise 6) — not from
                    // the base, where continuing would run the copy's rate up to it.
                    //
                    // The old version's readers read the copy (they do not stop at the close,
                    // which is at or after the base) and may read the counter past any reading
                    // the rebase makes before it publishes: so it first stops them
                    // (`stop_handover`, announced then decided as a close point is, helpers
                    // included), and its new rate starts at that stop, where they stand still
                    // until the publication. A fresh timeline from an unannounced reading
                    // instead read less than such a reader had, just past it: by the carry
                    // (1 ns: its fast path does not add it) where the new tick is longer, and
                    // by the rates' difference over the ticks the old reader read past it too
                    // where it is shorter.
                    //
                    // A stop at the base (the counter within a margin of it, or no longer in
                    // the handover): the continuation any write makes (the new rate from the
                    // close point: the base itself where the counter had not reached it,
                    // promise 2), moved up as a whole, its copy too, by what `at` or the mark
                    // asks beyond its time at a reading made now, so that the rebase lands
                    // there (promise 6). Its readers read at or above the old version's
                    // everywhere. A close point past the base (a reader passed it) gets the
                    // same.
                    Write::Rebase(at, _) if before != 0 && in_handover => {
                        let (stop, t) = if c == 0 {
                            self.stop_handover(version, &tb, &geometry, margin)
                        } else {
                            (0, 0)
                        };
                        let at_stop = width.value(tb.base_ticks.wrapping_sub(stop));
                        let (now, carry) = tb.before_base_carried(width, at_stop);
                        let ahead = width.delta(t, tb.base_ticks);
                        let still = c == 0
                            && ahead != 0
                            && ahead <= tb.hand
                            && (now, carry) == tb.before_base_carried(width, t);
                        if still || stop != 0 {
                            let mark = self.mark.load();
                            if still {
                                // The copy stands still from the reading to the stop, or to
                                // the base (a fresh timeline's, or before the copy's own
                                // start): no reader of either version can read past its time
                                // there, and the new rate runs from the reading itself, as a
                                // fresh timeline. (Continued from the base instead, a reading
                                // between the two was before a base at the new rate, and a tick
                                // of a slow one is further back than a lag: behind.)
                                let start = at.max(now).max(mark);
                                rebased_to = Some(start);
                                Timebase {
                                    base_frac: if start == now { carry } else { 0 },
                                    ..Timebase::fresh(t, start, scale, reach)
                                }
                            } else {
                                // The new version keeps the copy up to the stop, moved up as a
                                // whole by what `at` or the mark asks beyond its time at this
                                // writer's reading (so that the rebase lands there, promise 6,
                                // and time runs on from it to the stop at the copy's rate).
                                let (here, _) = tb.before_base_carried(width, t);
                                let next = |target: u64| {
                                    let up = target.saturating_sub(here);
                                    Timebase {
                                        base_ticks: at_stop,
                                        base_ns: now.saturating_add(up),
                                        base_frac: carry,
                                        scale,
                                        prev_ns: tb.prev_ns.saturating_add(up),
                                        hand: tb.hand.saturating_sub(stop),
                                        ..tb
                                    }
                                };
                                let target = at.max(here).max(mark);
                                // Should the new version judge this reading behind (promise 6:
                                // before the copy's own start, run back at another rate), it
                                // stands at the ceiling: the timeline starts there.
                                let target = if next(target).is_behind(t, mark) {
                                    target.max(self.ceiling())
                                } else {
                                    target
                                };
                                rebased_to = Some(target);
                                next(target)
                            }
                        } else {
                            let t = fresh_reading();
                            match continued.carried_value(&geometry, t) {
                                Some((now, _)) => {
                                    let start = at.max(now).max(self.mark.load());
                                    let up = start.saturating_sub(now);
                                    rebased_to = Some(start);
                                    Timebase {
                                        base_ns: continued.base_ns.saturating_add(up),
                                        prev_ns: continued.prev_ns.saturating_add(up),
                                        ..continued
                                    }
                                }
                                // The counter went back further during the write (a reset): a
                                // fresh timeline from the reading, at the close point's time
                                // with its carry, or later.
                                None => {
                                    let start = at.max(carried.0).max(self.mark.load());
                                    let carry = if start == carried.0 { carried.1 } else { 0 };
                                    rebased_to = Some(start);
                                    Timebase {
                                        base_frac: carry,
                                        ..Timebase::fresh(t, start, scale, reach)
                                    }
                                }
                            }
                        }
                    }
                    // A rebase to a time at or before the clock's continues from the clock's
                    // time at its reading (at least `at`), which counts as handed out (promise
                    // 6), as a fresh timeline's start does. (Counted from the reading, not the
                    // close point: the close point is a margin later, a time nobody has read;
                    // a counter reset back after the reading is promise 1's "where a 64-bit
                    // counter itself steps back", as it is after any reading.)
                    Write::Rebase(at, _) => {
                        let here = tb.carried_value(&geometry, t).map_or(0, |(ns, _)| ns);
                        rebased_to = Some(at.max(here));
                        continued
                    }
                    _ => continued,
                }
            }
        };
        let next = next.keeping_slowest(&tb);
        self.publish(&geometry, &next);
        if let (true, Some(ns)) = (wide, rebased_to) {
            // A rebase that continues a timeline: its time counts as handed out, as a fresh
            // timeline's start does (below).
            self.raise_mark(ns);
        }
        if let (Write::Rebase(..), true) = (what, wide && next.prev_int == 0 && next.prev_frac == 0)
        {
            // A fresh timeline from a rebase starts at the time the caller gave (promise 6):
            // it counts as handed out. Without this a counter that goes behind before anyone
            // read the new timeline stands at the ceiling of the old mark — below the target,
            // then jumping past it once a reader of the new timeline raises the mark.
            // (After the publication: a reader that loads this mark finds the new timeline.)
            self.raise_mark(next.base_ns);
        }
        match what {
            Write::Rebase(..) => Ok(()),
            _ if zone == Zone::Late => Err(ClockError::Late),
            _ if behind => Err(ClockError::Behind),
            _ => Ok(()),
        }
    }

    /// The writer's counter reading, made once the previous handover is over: while the
    /// counter is still before the newest timeline's base (at most a margin: the last write
    /// was just now), it waits — writers may wait, readers never — so that one writer
    /// calling twice in a row is never refused. A counter that does not move within
    /// [`HANDOVER_WAIT_READS`] reads is taken as it is.
    ///
    /// With the reading, whether the wait ran out (the counter stuck before the base), and
    /// whether the first reading had passed the base (not at it, not in the handover before
    /// it).
    fn read_past_handover(&self, tb: &Timebase, width: Width, mark: u64) -> (u64, bool, bool) {
        let mut t = width.value(self.counter.ticks());
        hook(Point::WriteRead);
        t = self.confirm(width, tb, t, mark);
        let passed = width.delta(t, tb.base_ticks) > tb.hand;
        let mut reads = 0u32;
        loop {
            let before = width.delta(t, tb.base_ticks);
            if before == 0 || before > tb.hand {
                return (t, false, passed);
            }
            if reads >= HANDOVER_WAIT_READS {
                return (t, true, passed);
            }
            spin_loop();
            reads = reads.saturating_add(1);
            // Confirmed as the first (promise 7): a glitched read here ends the wait and
            // becomes the reading a write is judged by (a rebase's target against it).
            t = self.confirm(width, tb, width.value(self.counter.ticks()), mark);
        }
    }

    /// Publishes `next` as the next version, its gate open.
    ///
    /// A writer stalled after closing may publish a version whose base the counter passed
    /// long ago. Its readers then cannot be before its base, and on a narrow counter a
    /// reading a wrap later would look like one in the handover: so when the counter is a
    /// margin or more past the base as the version is published, the handover is dropped,
    /// and a version already past its deadline is published latched (time stands still at
    /// its end until the next write, which finds it late).
    fn publish(&self, geometry: &Geometry, next: &Timebase) {
        let margin = geometry.margin(&next.scale);
        // Where a reading `t` falls for `next`: past its base by a margin or more (its
        // handover can go), and past its deadline as well (it must be latched).
        let place = |t: u64| {
            let d = geometry.width.delta(next.base_ticks, t);
            let past = geometry.width.delta(t, next.base_ticks) > next.hand && d >= margin;
            (past, past && geometry.is_late(geometry.zone(d)))
        };
        self.timeline.publish(|v, slot| {
            let gate = self.gate(v.slot);
            gate.open(geometry.deadline);
            self.stop_word(v.slot).store(0, Ordering::Relaxed);
            // Confirmed (promise 7): a glitched read here would drop the handover of a
            // counter that has not reached the base.
            let (past, late) =
                place(self.confirm_fresh(geometry.width, self.read_after_fence(geometry)));
            let mut next = *next;
            if past {
                next.hand = 0;
                if late {
                    gate.latched
                        .store(v.number.wrapping_add(1), Ordering::Relaxed);
                    gate.lim.store(0, Ordering::Relaxed);
                }
            }
            for (word, value) in slot.iter().zip(next.words()) {
                word.store(value);
            }
        });
        // A writer stalled after that read (before the version became visible) may publish a
        // narrow timeline whose deadline the counter has passed meanwhile, unseen: readers
        // read the previous version all along. Look once more, now that it is visible, and
        // latch it if so (a reading a wrap later would otherwise look like one on it).
        if geometry.width != Width::FULL {
            let (version, _) = self.timeline.current();
            if place(self.read_after_fence(geometry)).1 {
                self.latch(version);
            }
        }
    }

    /// One more late write (under the writer lock: no other writer counts).
    fn count_late(&self) {
        let n = self.late_updates.load(Ordering::Relaxed).saturating_add(1);
        self.late_updates.store(n, Ordering::Relaxed);
    }

    /// Closes the current timeline (step 1 of the module docs) and returns its end, and
    /// whether the timeline turned out to be past its deadline by then (the writer was
    /// stalled after its first read).
    fn close(
        &self,
        version: Version,
        tb: &Timebase,
        geometry: &Geometry,
        margin: u64,
        stuck: bool,
    ) -> (u64, bool) {
        let gate = self.gate(version.slot);
        let closing = closing(version);
        gate.margin.store(margin, Ordering::SeqCst);
        gate.end.store(closing, Ordering::SeqCst);
        gate.lim.store(0, Ordering::SeqCst);
        hook(Point::WriteClosing);
        let t = self.read_after_fence(geometry);
        let t = self.confirm(geometry.width, tb, t, self.mark.load());
        // Loaded after the close was announced (`SeqCst`, as the latch and a latching reader's
        // second look at the end): a reader that latched the timeline before it and returned
        // its end (open: the deadline) is seen here, however long this writer was stalled
        // since it judged its reading; the close point is then the deadline, where those
        // readers stood, never a reading a wrap later.
        let latched = self.is_latched(version);
        let before = geometry.width.delta(t, tb.base_ticks);
        // A counter that did not reach the base while the writer waited, and still has not:
        // no reader has passed the base (their readings came before this one), so the
        // timeline closes at its base and continues at the new rate, its handover unchanged.
        let still_stuck = stuck
            && before != 0
            && before <= tb.hand
            && (geometry.width != Width::FULL || !tb.is_behind(t, self.mark.load()));
        let proposal = if latched {
            geometry.deadline
        } else if still_stuck {
            0
        } else {
            self.propose(geometry, tb, t, margin, self.mark.load())
        };
        let end =
            match gate
                .end
                .compare_exchange(closing, proposal, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => proposal,
                // A helper decided first; only this writer stores `CLOSING`, so this is an end.
                Err(end) => end,
            };
        let late = latched
            || (geometry.is_late(geometry.zone(geometry.width.delta(tb.base_ticks, t)))
                && geometry.width.delta(t, tb.base_ticks) > tb.hand)
            || self.is_latched(version);
        if late {
            self.latch(version);
        }
        hook(Point::WriteClosed);
        (end, late)
    }

    /// The close point a reading `t` proposes for `tb` (step 1 of the module docs), judged
    /// against the mark `mark` (64-bit): a reading on the timeline whose time is behind what
    /// was handed out (a reset back during the write, not past the base) proposes where the
    /// timeline reaches the mark's ceiling, plus the margin, as one before the base does — its
    /// own time plus a margin would close the timeline below times already handed out, and the
    /// next would run on from there (promise 6).
    fn propose(&self, geometry: &Geometry, tb: &Timebase, t: u64, margin: u64, mark: u64) -> u64 {
        let width = geometry.width;
        if width == Width::FULL
            && geometry.zone(width.delta(tb.base_ticks, t)) == Zone::Valid
            && tb.is_behind(t, mark)
        {
            return self.ceiling_offset(tb, margin).min(geometry.deadline);
        }
        geometry.proposal(tb, t, margin, || self.behind_proposal(tb, t, margin))
    }

    /// The close point a 64-bit reading `t` before `tb`'s base proposes. In the handover
    /// and not behind the mark: the reading plus the margin, no earlier than the base — never
    /// the base itself for a reading clearly before it, as a narrow one proposes
    /// (`from_base`): a 64-bit counter may be read on a CPU that lags another by up to
    /// [`LAG_NS`], and that CPU's readers may have passed the base (a fresh timeline's base
    /// is a reading, with no margin after it) and handed out times there that the mark,
    /// raised once per granule, does not hold; a close at the base stood them still below
    /// those times, back by up to a granule on one CPU (promise 1). Otherwise where the
    /// timeline reaches the high-water mark's ceiling, plus the margin: a close point no
    /// reader has passed, not even one that stood at the ceiling.
    fn behind_proposal(&self, tb: &Timebase, t: u64, margin: u64) -> u64 {
        let before = Width::FULL.delta(t, tb.base_ticks);
        if before <= tb.hand && !tb.is_behind(t, self.mark.load()) {
            margin.saturating_sub(before)
        } else {
            self.ceiling_offset(tb, margin)
        }
    }

    /// Where `tb`'s timeline reaches the high-water mark's ceiling, plus `margin`: a close
    /// point that no reader has passed, not even one that stood at the ceiling.
    fn ceiling_offset(&self, tb: &Timebase, margin: u64) -> u64 {
        tb.scale
            .ns_to_ticks_ceil(self.ceiling().saturating_sub(tb.base_ns))
            .saturating_add(margin)
    }

    /// A 64-bit reading `t` whose time on `tb` is more than 1 ms past `mark` (loaded before
    /// it), confirmed by a second read, the nearer of the two kept (promise 7): one glitched
    /// read becomes neither a time, nor a close point, nor a timeline's base. Narrow
    /// readings, and readings not that far ahead, as they are.
    fn confirm(&self, width: Width, tb: &Timebase, t: u64, mark: u64) -> u64 {
        if width != Width::FULL {
            return t;
        }
        let d = width.delta(tb.base_ticks, t);
        let ns = tb.at(d);
        // Where time saturates (at `u64::MAX` ns) every reading's time is the same and says
        // nothing of how far ahead it is: confirm it all the same, or a glitched close read
        // there becomes a close point and a base ahead of the counter (the next write then
        // finds the counter before that base: `Behind`, with no step back).
        if d >= OFFSET_LIMIT || (ns != u64::MAX && ns <= mark.saturating_add(CONFIRM_NS)) {
            return t;
        }
        hook(Point::ReadConfirm);
        let again = width.value(self.counter.ticks());
        let d_again = width.delta(tb.base_ticks, again);
        if d_again < d || d_again >= OFFSET_LIMIT {
            again
        } else {
            t
        }
    }

    /// A 64-bit reading `t` that becomes a fresh timeline's base (`start`, a rebase, a late
    /// write) or decides a publication's handover, always confirmed by a second read, the earlier of the two kept (promise 7).
    /// `confirm` judges a reading by its time on the old timeline, which says nothing here:
    /// there is none before a start, and a rebase from a counter that was reset reads
    /// behind the old base, where `confirm` takes any reading as it is. A glitched base
    /// would put every true reading behind it (time standing at the mark's ceiling, writes
    /// refused with `Behind`) until the counter caught up with the glitch — up to 2^62
    /// ticks. Writes are rare: the second read costs nothing that matters.
    fn confirm_fresh(&self, width: Width, t: u64) -> u64 {
        if width != Width::FULL {
            return t;
        }
        hook(Point::ReadConfirm);
        let again = width.value(self.counter.ticks());
        // `again` before `t` (modulo 2^64, as the clock tells ahead from behind): `t` was
        // the glitch. Otherwise `t` (a glitch on `again` is ignored).
        if width.delta(t, again) >= OFFSET_LIMIT {
            again
        } else {
            t
        }
    }

    /// A counter reading made after the writer's stores are visible.
    fn read_after_fence(&self, geometry: &Geometry) -> u64 {
        fence(Ordering::SeqCst);
        geometry.width.value(self.counter.ticks())
    }
}

/// Where a counter reading falls on the timeline in force, for a deadline
/// (`crate::deadline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// On the timeline, this many ticks past its base (at most its deadline).
    On(u64),
    /// This many ticks (one or more) before the base: the handover (the counter has not
    /// reached the base of a version just published), or a 64-bit counter that lags or was
    /// reset.
    Before(u64),
    /// Where time stands still until the next write: the timeline latched, a narrow counter
    /// past its deadline, a clock not started.
    Still,
}

/// One version of the timeline and a counter reading made while it was the current one: what
/// a deadline is computed from (`crate::deadline`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Snapshot {
    /// The counter's value as it returned it (in the counter's own width).
    pub(crate) raw: u64,
    /// Where that reading falls.
    pub(crate) place: Place,
    /// The handover margin, in ticks at the rate in force.
    pub(crate) margin: u64,
    /// The timeline's deadline, as an offset from its base: past it time stands still until
    /// the next write.
    pub(crate) end: u64,
    /// The reading in the clock's width.
    t: u64,
    width: Width,
    tb: Timebase,
    /// Whether readings in the handover stand at the base (the previous version was latched:
    /// see `now_slow`).
    hand_at_base: bool,
}

impl Snapshot {
    /// The timeline's time at its base, in ns.
    pub(crate) fn base_ns(&self) -> u64 {
        self.tb.base_ns
    }

    /// The scale in force.
    pub(crate) fn scale(&self) -> Scale {
        self.tb.scale
    }

    /// Whether the clock had started.
    pub(crate) fn started(&self) -> bool {
        self.tb.scale.millihz() != 0
    }

    /// What a reading `k` ticks after this one reads on this version, as its readers compute
    /// it (a 64-bit reader may return more, from the high-water mark, never less): before the
    /// base, the handover's copy of the previous timeline; from the base, the timeline, which
    /// stands still past its end. Non-decreasing in `k`. Meaningful for `place` `On` or
    /// `Before`, for `k` up to where the reading reaches the end.
    pub(crate) fn value(&self, k: u64) -> u64 {
        let reading = self.width.add(self.t, k);
        match self.place {
            Place::Before(before) if k < before => {
                if self.hand_at_base {
                    self.tb.base_ns
                } else {
                    self.tb.before_base(self.width, reading)
                }
            }
            Place::Before(_) | Place::On(_) => {
                let d = self.width.delta(self.tb.base_ticks, reading);
                self.tb.at(d.min(self.end))
            }
            Place::Still => self.tb.base_ns,
        }
    }

    /// What the timeline would read `k` ticks after this reading if it ran on past its end
    /// at its rate, as an update on time continues it (to within a nanosecond's floor): for
    /// a deadline beyond the end. Non-decreasing in `k`.
    pub(crate) fn extrapolated(&self, k: u64) -> u64 {
        let d = match self.place {
            Place::On(d) => d.saturating_add(k),
            Place::Before(before) => k.saturating_sub(before),
            Place::Still => return self.tb.base_ns,
        };
        self.tb.at(d)
    }
}

impl<C: Counter> Clock<C> {
    /// The current version and a counter reading made while it was current (read again if a
    /// publication overtook it), for `crate::deadline`. Changes nothing.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let width = self.width();
        let geometry = Geometry::of(width);
        self.timeline.read(|version, words| {
            let raw = self.counter.ticks();
            let t = width.value(raw);
            fence(Ordering::Acquire);
            let tb = Timebase::load(words);
            let started = tb.scale.millihz() != 0;
            let latched = self.gate(version.slot).latched.load(Ordering::Acquire)
                == version.number.wrapping_add(1);
            let hand_at_base = width != Width::FULL
                && self
                    .gate(version.slot.wrapping_add(1))
                    .latched
                    .load(Ordering::Acquire)
                    == version.number;
            let d = width.delta(tb.base_ticks, t);
            let before = width.delta(t, tb.base_ticks);
            let place = match geometry.zone(d) {
                _ if latched || !started => Place::Still,
                Zone::Valid => Place::On(d),
                Zone::Behind if width == Width::FULL || before <= tb.hand => Place::Before(before),
                _ => Place::Still,
            };
            let scale = if started { tb.scale } else { FASTEST };
            let snapshot = Snapshot {
                raw,
                place,
                margin: geometry.margin(&scale),
                end: geometry.deadline,
                t,
                width,
                tb,
                hand_at_base,
            };
            (snapshot, true)
        })
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
