//! [`WallClock`]: the time of day, as Unix nanoseconds = a [`Clock`]'s time + an offset that
//! only its writers change (a step, reported, or an adjtime-like slew); readers never lock
//! and never wait, and the monotonic [`Clock`] is never touched.
//!
//! # The timeline of the wall time
//!
//! A version of the wall time is a function of the clock's time `t` (ns), kept in one
//! generation-checked snapshot ([`Published`]: the Clock's own publication primitive), made
//! of up to [`PIECES`] *pieces* `p₀ … p_k` with bases `B₀ ≤ … ≤ B_k`. Each piece is
//!
//! `p(t) = U + d ± min(off, ⌊d × ppm / 10⁶⌋)`, `d = t − B` (`t ≥ B`),
//!
//! with `U` the wall time at its base `B`, and a slew of `off` ns at `ppm` running from `B`
//! (`p(t) = U − (B − t)`, 0 at the least, before it). The version's value at `t` is the last
//! piece whose base is at most `t` (the first if none). Integer arithmetic in `u128`,
//! saturated to `u64` at the end: no input overflows.
//!
//! - **Monotone during a slew.** For `ppm ≤ 10⁶` (the crate takes at most [`MAX_SLEW_PPM`]),
//!   `⌊(d+1) × ppm / 10⁶⌋ − ⌊d × ppm / 10⁶⌋ ≤ 1`, so `p(d+1) ≥ p(d)` whichever the sign,
//!   and once the correction reaches `off` it stays there: the slew ends exactly on time
//!   (its remaining offset 0, no overshoot), and neither its start (`p(B) = U`) nor its end
//!   jumps. A slew changes the wall time by at most `ppm × 10⁻⁶` of the elapsed time, plus
//!   a nanosecond per reading.
//! - **Continuity (invariant C).** Each piece starts where the one before it is at its
//!   base: `p_{i+1}(B_{i+1}) = p_i(B_{i+1})` (a step, `set`, is the one exception, by
//!   design). With each piece non-decreasing, a version is non-decreasing in `t`.
//!
//! # A write
//!
//! 1. The writer reads the clock, `t_w`, waiting (at most [`HANDOVER_WAIT_READS`] clock
//!    reads) for it to pass the newest base `B_k`. A clock that stands still (a 64-bit
//!    counter reset before the kernel's `rebase`, a slow counter between ticks, a clock
//!    after a recalibration) does not get there: the writer goes on all the same.
//! 2. It *closes* the current version: it stores "closing" (tagged with the version number)
//!    into the version's end, then reads the clock and proposes the end
//!    `e = reading + HANDOVER_NS` by compare-and-swap. A reader that finds the end "closing"
//!    proposes one the same way from a clock reading of its own (so a writer stalled there
//!    costs nobody a wait); the first proposal wins (half by half, with 32-bit
//!    compare-and-swap: "The end, in two halves" below shows that the end decided is then
//!    between two proposals, which is all the argument uses). Every reader evaluates its version at
//!    `min(t, e)`. A reader that saw the end open read its clock before the "closing" store
//!    was visible to it, and whoever proposed `e` read the clock after seeing that store, so
//!    the reader's `t` is below `e` (the margin covers a clock read a few instructions late
//!    and CPUs whose clocks are up to [`crate::LAG_NS`] apart). So **every value the old
//!    version hands out, ever, is `V_old(min(t, e))` for the reader's `t`**; and a reader of
//!    the new version read its clock after it saw the new version's words, written after
//!    `t_w`, so its `t ≥ t_w` (the Clock is monotone across CPUs).
//! 3. The new piece is based at `e` and starts from `V_old(e)` (a slew) or from the time
//!    asked (a step).
//! 4. The new version is the old version's pieces in force anywhere in `[t_w, e)` — the one
//!    in force at `t_w` and those beginning after it and before `e` — then the new piece. A
//!    piece followed by one of equal base is dropped (its range is empty) unless it is the
//!    first kept, and pieces beginning at or after `e` are dropped.
//!
//! **Why the wall time never goes back (and never jumps) across a write**, whatever the
//! clock's time does between the write's reading and `e` — stands still, or never reaches
//! `e`. For `t_w ≤ t < e` the new version's piece in force at `t` is the old one's (the kept
//! pieces are exactly those in force on `[t_w, e)`, bases unchanged), so `V_new(t) =
//! V_old(t)`; from `e` on it is the new piece, which starts at `V_old(e)`. So a reading of
//! the new version agrees with every reading the old one gave at the same clock time, and
//! from `e` on moves at the new piece's rate from where they stood: no reading already handed
//! out is contradicted, including those of readers that read the clock before `B_k` (which
//! the previous single-function prefix lost: the adversary's findings). Two readings, the
//! first finished before the second began, have `t₁ ≤ t₂` (the Clock's promise); on one
//! version they are ordered by monotonicity, on consecutive versions by the equality above
//! (`V_old(min(t₁, e)) ≤ V_old(min(t₂, e)) ≤ V_new(t₂)`), and on versions further apart by
//! induction (each write's `t_w` is at or after every earlier reading's `t` that happened
//! before it). Invariant (C) holds for the new version: the kept pieces keep their links,
//! the new piece starts at `V_old(e)`, the value at `e` of the last kept piece (or, where an
//! old piece began exactly at `e` and was dropped, its start, equal by (C) to that value).
//!
//! **Writes before the previous handover** (the clock has not passed `B_k` after the wait):
//! the old pieces beginning after `t_w` are the ones the new version must keep, which is why
//! a version holds more than two. Every old base is at most `t_w + HANDOVER_NS` (the newest
//! is `e_prev`, from a clock reading made before this writer's `t_w`), so at most one
//! distinct base sits at exactly `t_w + HANDOVER_NS` (an end decided in halves is at most
//! the larger of two proposals, each from a clock reading made before the previous writer
//! published, so before this writer's `t_w`). A writer that finds more than one
//! piece beginning in `(t_w, t_w + HANDOVER_NS)` returns [`WallError::Busy`] before it
//! touches anything; otherwise it keeps at most three old pieces and the new one:
//! [`PIECES`]. Writes while the clock stands still exactly never refuse: each hands over at
//! the same `e`, and the piece the previous write added there is dropped. A refusal needs
//! the clock to have moved between two earlier writes, both still less than a handover
//! margin behind it: three writes within 100 µs of clock time on a clock that creeps.
//!
//! **A stalled writer.** Past `e`, readers of a version being replaced stand at `V_old(e)`
//! until the writer publishes; then they read the new piece at their clock time, which has
//! run on from `e`: a catch-up equal to the stall past the handover, as the Clock's own
//! stalled writers cost (the wall time stays exactly the clock's time plus the offsets).
//!
//! # The end, in two halves
//!
//! The end is decided with 32-bit compare-and-swap only, so that the wall clock runs
//! wherever the [`Clock`] does (Cortex-M0/M3/M4, RISC-V 32: no 64-bit atomics), on every
//! target the same way: a version's end is at most [`MAX_END`] (2^62 ns of clock time), its
//! high half `e >> 31` and its low half `e mod 2^31` each decided by the first
//! compare-and-swap, in that order ([`End`]). Whoever proposes a half has read the clock
//! after it saw the close announced (the low half's proposers after they saw the high half
//! decided, which came later still): every proposal `p` is a valid end, at or above the
//! bound `L` that the readers who saw the end open are below. The high half `h` is one
//! proposal's; a low half's proposer whose own proposal has another high half proposes
//! the nearest value under `h` instead — `h·2^31 + (2^31 − 1)` if its own is above, `h·2^31`
//! if below. The end decided is therefore between the smallest and the largest proposal
//! that won a half: if the low half's winner `p` has high half `h`, the end is `p`; if
//! above, the end is `h·2^31 + 2^31 − 1`, below `p` and at or above the high half's winner;
//! if below, the end is `h·2^31`, above `p ≥ L` and at most the high half's winner. So it is
//! at or above `L`, as a single proposal is, and each half's winner read the clock before
//! the writer published (the writer decides both halves before it goes on), as the
//! arguments above need. A half not decided carries the version number (its low 30 bits):
//! a reader whose version's slot was reused meanwhile finds another number, proposes
//! nothing, and its read is rejected by the generation check.

use core::cmp::Ordering as Cmp;
use core::fmt;

use crate::clock::Clock;
use crate::counter::Counter;
use crate::instant::Instant;
use crate::sync::{AtomicBool, AtomicU32, Ordering, Published, Words};

/// The largest slew rate [`WallClock::slew`] accepts, in ppm: the wall time may run at
/// between half and one and a half times the clock's rate while it slews. (Linux's
/// `adjtime` slews at 500 ppm; a boot that corrects a fraction of a second in a few seconds
/// needs far more.)
pub const MAX_SLEW_PPM: u32 = 500_000;

/// How far after the writer's clock reading a new version takes over (ns): the handover
/// margin (module docs), five times [`crate::LAG_NS`].
const HANDOVER_NS: u64 = 100_000;

/// How many clock reads a writer waits for the previous version's base to pass (at most a
/// handover margin of clock time) before it writes all the same (a clock that stands still).
const HANDOVER_WAIT_READS: u32 = 1 << 14;

/// An end not decided: still open (or a read of a slot reused meanwhile, which the
/// generation check rejects).
const OPEN: u64 = u64::MAX;
/// The latest end (and base) a version can have: 2^62 − 2 ns of clock time, 146 years; its
/// high half fits in 31 bits.
const MAX_END: u64 = (1 << 62) - 2;
/// Bits in an end's low half ([`End`]).
const HALF: u32 = 31;
const HALF_MASK: u64 = (1 << HALF) - 1;
/// The bit of a half not decided yet: a tag, with the version number's low 30 bits.
const TAG: u32 = 1 << 31;
const NUMBER_MASK: u32 = (1 << 30) - 1;
/// The high half of an open end (no version's tag).
const OPEN_HI: u32 = TAG | (1 << 30);

/// `a × b` for `b < 2^32`, as a 96-bit number: its top 64 bits and its low 32 (ordered as
/// the product is), in `u64` multiplications only.
fn wide(a: u64, b: u64) -> (u64, u64) {
    let (ah, al) = (a >> 32, a & 0xffff_ffff);
    let b = b & 0xffff_ffff;
    // Each product of two values below 2^32 is below 2^64; the top 64 bits of a × b are
    // below 2^64, so the sum does not saturate.
    let low = al.saturating_mul(b);
    (
        ah.saturating_mul(b).saturating_add(low >> 32),
        low & 0xffff_ffff,
    )
}

/// The tag of version `number`'s halves while they are not decided.
fn tag(number: u32) -> u32 {
    TAG | (number & NUMBER_MASK)
}

/// An end's high half (ends are at most [`MAX_END`]: it fits in 31 bits).
fn high(end: u64) -> u32 {
    u32::try_from(end.min(MAX_END) >> HALF).unwrap_or(0)
}

/// Where a slot's version ends, decided half by half by the first compare-and-swap on each
/// (module docs, "The end, in two halves").
struct End {
    /// [`OPEN_HI`]; the version's tag while its close is announced; then `end >> 31`.
    hi: AtomicU32,
    /// The version's tag; then `end mod 2^31`.
    lo: AtomicU32,
}

impl End {
    #[cfg(not(loom))]
    const fn new() -> End {
        End {
            hi: AtomicU32::new(OPEN_HI),
            lo: AtomicU32::new(TAG),
        }
    }
    /// Loom's atomics have no `const fn new` (the loom model, `loom-model/tests/loom_wall.rs`).
    #[cfg(loom)]
    fn new() -> End {
        End {
            hi: AtomicU32::new(OPEN_HI),
            lo: AtomicU32::new(TAG),
        }
    }
}

/// The most functions (pieces) one version holds: the one in force at the writer's clock
/// reading, at most two that begin before the new handover, and the new one (module docs,
/// "Writes before the previous handover").
const PIECES: usize = 4;
/// Words of one piece: meta (present, sign, rate), the wall time at the base, the base, the
/// offset.
const PIECE_WORDS: usize = 4;
/// Where the health words follow the pieces: the steps (high 32 bits) and slews (low), and
/// the latest step; published with the pieces, so that a reading of them is whole on any
/// target.
const HEALTH_AT: usize = PIECES * PIECE_WORDS;
/// Words of one version.
const WORDS: usize = HEALTH_AT + 2;

/// Meta bits of a piece: present, negative; the rate above them.
const P_PRESENT: u64 = 1;
const P_NEG: u64 = 2;
const PPM_SHIFT: u32 = 8;
const PPM_MASK: u64 = 0x00ff_ffff;

/// Why a [`WallClock`] did not do what was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WallError {
    /// The wall time has not been set yet ([`WallClock::set`]): nothing to slew.
    NotSet,
    /// Another writer is active right now, or (rarely) two distinct handovers of earlier
    /// writes are still less than 100 µs ahead of this write's clock reading (a clock that
    /// creeps: [`WallClock`], "Writers and the handover"); nothing was changed. Retry once
    /// the clock has passed the older of them (at most 100 µs of clock time).
    Busy,
    /// The time asked would be before 1970-01-01T00:00:00Z (Unix time 0) at the new
    /// version's base; nothing was changed.
    BeforeEpoch,
    /// The time asked is beyond what the wall clock holds: past `u64::MAX` Unix ns (the year
    /// 2554), or a seconds count whose nanoseconds overflow; nothing was changed.
    OutOfRange,
    /// A slew rate of 0 ppm or above [`MAX_SLEW_PPM`].
    BadRate,
}

impl fmt::Display for WallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WallError::NotSet => "wall time not set",
            WallError::Busy => "wall clock busy: another writer is active",
            WallError::BeforeEpoch => "wall time before 1970 (Unix time 0)",
            WallError::OutOfRange => "wall time beyond u64 Unix nanoseconds (2554)",
            WallError::BadRate => "slew rate of 0 ppm or above MAX_SLEW_PPM",
        })
    }
}

impl core::error::Error for WallError {}

/// What a [`WallClock`]'s writers have done: the steps, with the latest one's size, and the
/// slews.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct WallHealth {
    /// Steps: every [`WallClock::set`] after the first (which sets, it does not step);
    /// saturates at `u32::MAX` (never wraps).
    pub steps: u32,
    /// The latest step, in ns (positive: forward), saturated to `i64` (±292 years).
    pub last_step_ns: i64,
    /// Slews started ([`WallClock::slew`] with a non-zero offset); saturates at `u32::MAX`
    /// (never wraps).
    pub slews: u32,
}

impl WallHealth {
    fn load(words: &Words<WORDS>) -> WallHealth {
        let w = |i: usize| words.get(i).map_or(0, |x| x.load());
        let counts = w(HEALTH_AT);
        WallHealth {
            steps: u32::try_from(counts >> 32).unwrap_or(u32::MAX),
            slews: u32::try_from(counts & 0xffff_ffff).unwrap_or(u32::MAX),
            last_step_ns: w(HEALTH_AT.saturating_add(1)) as i64,
        }
    }

    fn store(&self, words: &Words<WORDS>) {
        if let Some(word) = words.get(HEALTH_AT) {
            word.store(u64::from(self.steps) << 32 | u64::from(self.slews));
        }
        if let Some(word) = words.get(HEALTH_AT.saturating_add(1)) {
            word.store(self.last_step_ns as u64);
        }
    }
}

/// A real-time clock's seconds edge: the Unix second that began, and the [`Clock`]'s
/// readings that bracket the moment it began, measured by [`SecondsEdge::measure`] (the
/// platform crates' RTC readers use it: baretime-x86's CMOS RTC, baretime-aarch64's PL031;
/// a reader of another RTC can too). The edge is between `before` and `after`;
/// [`WallClock::set_at_edge`] sets the wall time at their midpoint, so the setting is good to
/// half the bracket plus the RTC's own error (how well it was set, its crystal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SecondsEdge {
    /// The Unix time, in whole seconds, that began at the edge.
    pub unix_seconds: u64,
    /// A clock reading made before the RTC read that last saw the previous second began.
    pub before: Instant,
    /// A clock reading made after the RTC read that first saw `unix_seconds` ended.
    pub after: Instant,
}

/// How long [`SecondsEdge::measure`] waits for the seconds to change: a second, plus 10 % (an
/// RTC's update cycle, a slow crystal), plus a 100 ms margin.
const EDGE_WAIT_NS: u128 = 1_200_000_000;

impl SecondsEdge {
    /// Waits for a real-time clock's next seconds edge: polls `read_seconds` until what it
    /// returns changes, each poll bracketed by `clock` readings, and returns the value it
    /// changed to with the readings before the last poll that saw the previous value and
    /// after the first that saw the new one — the edge lies between them.
    ///
    /// `read_seconds` is one poll of the RTC: `Some` of its seconds (a seconds register, or
    /// a whole count of Unix seconds: the edge's `unix_seconds` is whatever it returned; a
    /// reader whose poll reads only a register reads the full time after the edge and puts
    /// it there), or `None` when the RTC cannot be read right now (an update in progress),
    /// which counts as the previous second. An interrupt (or a vCPU preempted) during the poll
    /// widens the bracket: poll with interrupts masked, or check
    /// [`SecondsEdge::width_ns`] and measure the next edge.
    ///
    /// `None` when the value did not change: at the first poll that finds more than 1.2 s of
    /// `clock` time gone since the call (so the wait overshoots 1.2 s by up to one poll), or
    /// after `max_polls` polls, whichever comes first — a [`Clock`] not started yet (its time
    /// stands at zero) never reaches 1.2 s, and the poll count ends the wait there.
    pub fn measure<C: Counter>(
        clock: &Clock<C>,
        max_polls: u32,
        mut read_seconds: impl FnMut() -> Option<u64>,
    ) -> Option<SecondsEdge> {
        let start = clock.now();
        let mut first = None;
        let mut before = start;
        let mut polls = 0u32;
        loop {
            let b = clock.now();
            polls = polls.saturating_add(1);
            if polls > max_polls || b.saturating_duration_since(start).as_nanos() > EDGE_WAIT_NS {
                return None;
            }
            let Some(seconds) = read_seconds() else {
                before = b; // not readable: the previous second still
                continue;
            };
            let after = clock.now();
            match first {
                None => first = Some(seconds),
                Some(s) if s != seconds => {
                    return Some(SecondsEdge {
                        unix_seconds: seconds,
                        before,
                        after,
                    })
                }
                Some(_) => {}
            }
            before = b;
        }
    }

    /// The middle of the bracket: the clock's time of the edge, good to half
    /// [`SecondsEdge::width_ns`].
    pub(crate) fn midpoint(&self) -> Instant {
        let (a, b) = (self.before.as_nanos(), self.after.as_nanos());
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        Instant::from_nanos(lo.saturating_add(hi.saturating_sub(lo) / 2))
    }

    /// How wide the bracket is, in ns.
    pub fn width_ns(&self) -> u64 {
        self.after.as_nanos().abs_diff(self.before.as_nanos())
    }
}

/// One function of the wall time: `W(t) = wall + d ± min(off, ⌊d × ppm / 10⁶⌋)`, `d = t − base`
/// (before the base: `wall − (base − t)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fn_ {
    wall: u64,
    base: u64,
    off: u64,
    ppm: u32,
    neg: bool,
}

impl Fn_ {
    /// A step to `wall` at `base`: no slew.
    const fn at(wall: u64, base: u64) -> Fn_ {
        Fn_ {
            wall,
            base,
            off: 0,
            ppm: 0,
            neg: false,
        }
    }

    /// The slew's correction after `d` ns, `min(off, ⌊d × ppm / 10⁶⌋)`, exactly, without
    /// `u128` multiplication or division (software routines of hundreds of instructions on
    /// a 32-bit core: they made a reading cost 1 265 instructions on the Cortex-M4, 45 times
    /// `Clock::now`). Whether the slew is over is a compare of 96-bit products ([`wide`]);
    /// while it runs, `d = q × 10⁶ + r` gives `⌊d × ppm / 10⁶⌋ = q × ppm + ⌊r × ppm / 10⁶⌋`
    /// in `u64`s.
    fn correction(&self, d: u64) -> u64 {
        let ppm = u64::from(self.ppm);
        if self.off == 0 || wide(d, ppm) >= wide(self.off, 1_000_000) {
            return self.off;
        }
        let (q, r) = (d / 1_000_000, d % 1_000_000);
        // r × ppm < 2^20 × 2^24: no overflow; q × ppm < off here (q × ppm × 10⁶ ≤ d × ppm).
        q.saturating_mul(ppm)
            .saturating_add(r.saturating_mul(ppm) / 1_000_000)
            .min(self.off)
    }

    /// `W(t)`, saturated at `u64::MAX` ns; before the base, the base's value less the time
    /// to it (at the clock's rate, 0 at the least).
    fn eval(&self, t: u64) -> u64 {
        if t < self.base {
            return self.wall.saturating_sub(self.base.saturating_sub(t));
        }
        let d = t.saturating_sub(self.base);
        let c = u128::from(self.correction(d));
        let w = u128::from(self.wall).saturating_add(u128::from(d));
        // A negative correction is at most d × ppm / 10⁶ ≤ d / 2: w ≥ c.
        let w = if self.neg {
            w.saturating_sub(c)
        } else {
            w.saturating_add(c)
        };
        u64::try_from(w).unwrap_or(u64::MAX)
    }

    /// The slew still to run at `t`, signed (saturated to `i64`).
    fn remaining(&self, t: u64) -> i64 {
        let left = self
            .off
            .saturating_sub(self.correction(t.saturating_sub(self.base)));
        // In i128: a slew of i64::MIN counts whole (2^63 left, negative).
        let left = i128::from(left);
        let signed = if self.neg {
            left.saturating_neg()
        } else {
            left
        };
        i64::try_from(signed.clamp(i128::from(i64::MIN), i128::from(i64::MAX))).unwrap_or(0)
    }
}

/// One version: its pieces, functions in order of base (`len` of them, at least one). The
/// wall time at `t` is the last piece whose base is at most `t` (the first if none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Version_ {
    pieces: [Fn_; PIECES],
    len: usize,
}

impl Version_ {
    /// The first version: one piece.
    fn first(f: Fn_) -> Version_ {
        Version_ {
            pieces: [f; PIECES],
            len: 1,
        }
    }

    fn live(&self) -> &[Fn_] {
        self.pieces.get(..self.len).unwrap_or(&[])
    }

    /// The index of the piece in force at `t`.
    fn index_at(&self, t: u64) -> usize {
        self.live().iter().rposition(|p| p.base <= t).unwrap_or(0)
    }

    /// The piece in force at `t`.
    fn at(&self, t: u64) -> Fn_ {
        let i = self.index_at(t);
        self.live().get(i).copied().unwrap_or(self.pieces[0])
    }

    /// The newest piece (the slew running now or ahead).
    fn last(&self) -> Fn_ {
        self.live().last().copied().unwrap_or(self.pieces[0])
    }

    /// The wall time at clock time `t`.
    fn eval(&self, t: u64) -> u64 {
        self.at(t).eval(t)
    }

    /// How many pieces after the one in force at `t_w` begin before `t_w + HANDOVER_NS`
    /// (pieces of equal base counted once): a writer proceeds only if at most one does.
    fn ahead(&self, t_w: u64) -> usize {
        let i = self.index_at(t_w);
        let limit = t_w.saturating_add(HANDOVER_NS);
        let mut n = 0usize;
        let mut prev = None;
        for p in self.live().iter().skip(i.saturating_add(1)) {
            if p.base < limit && prev != Some(p.base) {
                n = n.saturating_add(1);
            }
            prev = Some(p.base);
        }
        n
    }

    /// The version after this one when a write whose clock reading was `t_w` hands over at
    /// `e` to `next` (based at `e`): the pieces in force anywhere in `[t_w, e)` — the one in
    /// force at `t_w` and those beginning after it and before `e` — then `next`. A piece
    /// followed by one of equal base is dropped (its range is empty), unless it is the first
    /// kept (it serves readings before its base).
    fn successor(&self, t_w: u64, e: u64, next: Fn_) -> Version_ {
        let mut kept = [next; PIECES - 1];
        let mut n = 0usize;
        let i = self.index_at(t_w);
        for (j, p) in self.live().iter().enumerate().skip(i) {
            if j > i && p.base >= e {
                break;
            }
            if n > 1 {
                if let Some(prev) = kept.get(n.saturating_sub(1)) {
                    if prev.base == p.base {
                        n = n.saturating_sub(1);
                    }
                }
            }
            if let Some(slot) = kept.get_mut(n) {
                *slot = *p;
                n = n.saturating_add(1);
            } else {
                // More than the writer's check allows (a clock that went back): keep the
                // newest; the oldest serve readings that no longer happen.
                kept.rotate_left(1);
                if let Some(slot) = kept.last_mut() {
                    *slot = *p;
                }
            }
        }
        let mut out = Version_::first(next);
        for (k, p) in kept.iter().take(n).enumerate() {
            if let Some(slot) = out.pieces.get_mut(k) {
                *slot = *p;
            }
        }
        if let Some(slot) = out.pieces.get_mut(n) {
            *slot = next;
        }
        out.len = n.saturating_add(1);
        out
    }

    /// The piece in force at `t` of the version in `words` ([`Version_::at`]; the newest for
    /// `u64::MAX`), loading only that piece and the others' meta and base: a reader's work,
    /// without copying a whole version.
    fn piece_at(words: &Words<WORDS>, t: u64) -> Option<Fn_> {
        let w = |i: usize| words.get(i).map_or(0, |x| x.load());
        let mut found = None;
        for k in 0..PIECES {
            let at = k.saturating_mul(PIECE_WORDS);
            let meta = w(at);
            if meta & P_PRESENT == 0 {
                break;
            }
            let base = w(at.saturating_add(2));
            if found.is_none() || base <= t {
                found = Some((at, meta, base));
            }
        }
        found.map(|(at, meta, base)| Fn_ {
            wall: w(at.saturating_add(1)),
            base,
            off: w(at.saturating_add(3)),
            ppm: u32::try_from((meta >> PPM_SHIFT) & PPM_MASK).unwrap_or(0),
            neg: meta & P_NEG != 0,
        })
    }

    fn load(words: &Words<WORDS>) -> Option<Version_> {
        let w = |i: usize| words.get(i).map_or(0, |x| x.load());
        let mut v: Option<Version_> = None;
        for k in 0..PIECES {
            let at = k.saturating_mul(PIECE_WORDS);
            let meta = w(at);
            if meta & P_PRESENT == 0 {
                break;
            }
            let f = Fn_ {
                wall: w(at.saturating_add(1)),
                base: w(at.saturating_add(2)),
                off: w(at.saturating_add(3)),
                ppm: u32::try_from((meta >> PPM_SHIFT) & PPM_MASK).unwrap_or(0),
                neg: meta & P_NEG != 0,
            };
            match v.as_mut() {
                None => v = Some(Version_::first(f)),
                Some(v) => {
                    if let Some(slot) = v.pieces.get_mut(k) {
                        *slot = f;
                        v.len = k.saturating_add(1);
                    }
                }
            }
        }
        v
    }

    /// Stores the live pieces and, after them, an absent piece's meta (0) that ends a
    /// load: the words beyond are never read.
    fn store(&self, words: &Words<WORDS>) {
        for k in 0..self.len.saturating_add(1).min(PIECES) {
            let at = k.saturating_mul(PIECE_WORDS);
            let values = match self.live().get(k) {
                Some(p) => {
                    let mut meta = P_PRESENT | (u64::from(p.ppm) & PPM_MASK) << PPM_SHIFT;
                    if p.neg {
                        meta |= P_NEG;
                    }
                    [meta, p.wall, p.base, p.off]
                }
                None => {
                    if let Some(word) = words.get(at) {
                        word.store(0);
                    }
                    continue;
                }
            };
            for (i, v) in values.into_iter().enumerate() {
                if let Some(word) = words.get(at.saturating_add(i)) {
                    word.store(v);
                }
            }
        }
    }
}

/// The time of day: Unix nanoseconds, the [`Clock`]'s time plus an offset, set from a
/// real-time clock and corrected by a step ([`WallClock::set`], reported) or a slew
/// ([`WallClock::slew`], adjtime-like: the wall time runs faster or slower by at most a
/// rate you give until the offset is absorbed, exactly). The monotonic clock is never
/// touched: measure intervals and deadlines on the [`Clock`], and ask the wall clock only
/// what time of day it is.
///
/// `const`, over a `&'static Clock` for a kernel's `static`s, read lock-free from any CPU or
/// interrupt handler (one [`Clock::now`] and a generation-checked snapshot; a reader never
/// waits for a writer, even one it interrupted). One writer at a time; a second gets
/// [`WallError::Busy`]. Built wherever the [`Clock`] is: it needs 32-bit compare-and-swap
/// only (the target's, or on a Cortex-M0 or RISC-V `imc` portable-atomic's, taken with
/// interrupts off as the Clock's own are), never 64-bit atomics.
///
/// ```
/// use baretime::{Clock, FnCounter, Frequency, Instant, WallClock};
/// use core::sync::atomic::{AtomicU64, Ordering};
///
/// static TICKS: AtomicU64 = AtomicU64::new(0);
/// fn ticks() -> u64 {
///     TICKS.load(Ordering::Relaxed)
/// }
/// static CLOCK: Clock<FnCounter<fn() -> u64>> = Clock::uninit(FnCounter::new(ticks as fn() -> u64, 64));
/// static WALL: WallClock<'static, FnCounter<fn() -> u64>> = WallClock::new(&CLOCK);
///
/// CLOCK.start(Frequency::exact_hz(1_000_000_000).unwrap()).unwrap(); // 1 tick = 1 ns
/// assert_eq!(WALL.unix_ns(), None); // not set yet
/// // The RTC said 2024-01-01T00:00:00Z when the clock read 0 (its seconds edge).
/// WALL.set(1_704_067_200_000_000_000, Instant::ZERO).unwrap();
/// TICKS.store(1_000_000_000, Ordering::Relaxed); // one second later
/// assert_eq!(WALL.unix_ns(), Some(1_704_067_201_000_000_000));
/// // NTP says we are 5 ms behind: slew it in at 500 ppm (10 s), never stepping.
/// WALL.slew(5_000_000, 500).unwrap();
/// TICKS.store(12_000_000_000, Ordering::Relaxed); // 11 s later: the slew is over
/// assert_eq!(WALL.slew_remaining_ns(), 0);
/// assert_eq!(WALL.unix_ns(), Some(1_704_067_212_005_000_000));
/// ```
///
/// # What it promises
///
/// - **Readers never wait**, and a reading is one version of the wall time evaluated at a
///   clock reading made within the call. A reader retries only when two writes completed
///   during its read, so its retries are not bounded by a number, only by the writers:
///   under writes back to back without end it retries as long as they go on (each write
///   first waits for the previous handover, so with a moving clock there is at most one
///   write per 100 µs of clock time).
/// - **A slew never moves the wall time back** and never jumps it: from its start (the
///   handover: 100 µs after the write's clock reading) the wall time runs at the clock's
///   rate ± `max_ppm`, and ends with exactly the offset asked absorbed — the remaining
///   offset is 0 at the end, never overshot. Monotone across CPUs as the [`Clock`] itself
///   is.
/// - **A step is reported**: [`WallClock::set`] returns its size and sign, and
///   [`WallClock::health`] counts the steps. It cancels any slew in progress (as
///   `settimeofday` cancels `adjtime`).
/// - The wall time saturates at `u64::MAX` ns (the year 2554); no input overflows or
///   panics.
/// - A writer stalled between closing a version and publishing the next for longer than
///   the 100 µs handover margin makes the wall time stand still from the handover until it
///   publishes, then catch up: the catch-up equals the stall past the handover, as the
///   [`Clock`]'s stalled writers cost, and the wall time stays exactly the clock's time plus
///   the offsets. A write refused ([`WallError`]) touches nothing: it does not end the
///   version another writer is closing.
///
/// # The formula
///
/// The wall time at the clock's time `t` (ns) is `U + d ± min(off, ⌊d × ppm / 10⁶⌋)`,
/// `d = t − B`: `U` the wall time at the latest write's handover `B`, and its slew of `off`
/// ns at `ppm` (none for a step). The correction is rounded down, so a slew forward is at
/// most `off` ahead and a slew back at most `off` behind, reached exactly at
/// `B + ⌈off × 10⁶ / ppm⌉`. A reading whose clock time is before `B` (a reader that read
/// the clock before a write it overlapped took over) gets the previous write's formula
/// there; before the first setting's handover the wall time runs back from `U` at the
/// clock's rate, to 0 at the least. The result saturates at `u64::MAX`. It never goes back:
/// each formula is non-decreasing (a correction grows by at most 1 ns per ns, and the
/// crate's rates are at most 0.5), and a write's new formula starts at the handover from
/// the value the previous one has there, while readings before the handover keep the
/// previous formula (the module docs of `wall.rs` give the proof).
///
/// # Writers and the handover
///
/// A write first waits, for at most 16 384 clock reads, for the clock to pass the previous
/// write's handover; then it takes over 100 µs after its own clock reading. On a clock that
/// stands still (a 64-bit counter reset before the kernel's [`Clock::rebase`], a 1 kHz
/// counter between ticks, the moments after a recalibration) every write pays those reads
/// and goes on: writes in a row at one clock time all take over at the same handover, and
/// the wall time stands still with the clock, then goes on from where it stood. A write
/// whose clock reading finds two or more *distinct* handovers still ahead of it by less than
/// 100 µs (earlier writes made within the last 100 µs at different clock times: a clock that
/// creeps) returns [`WallError::Busy`] with nothing changed. Writes at one clock time share
/// one handover, so a burst of them never counts twice; refused writes leave no handover.
/// Try again once the clock has passed the older of the two pending handovers: at most
/// 100 µs of clock time.
///
/// On a [`Clock`] not started yet (its time stands at zero) a `WallClock` can be set and
/// slewed as above (each write pays its 16 384 reads); the wall time stands still until the
/// clock starts, then runs from there, with the handovers at 100 µs of the clock's time.
///
/// # Leap seconds
///
/// Unix time does not count them: a day is always 86 400 s, and so is this clock's. A leap
/// second is the user's to apply: a step of −1 s at the leap (what most kernels do), or a
/// slew (a smear: Google's and AWS's 24-hour smear is [`WallClock::slew`] of −1 s at
/// 11.6 ppm started 12 h before the leap). The RTC readers return what the RTC says, which
/// never shows second 60.
pub struct WallClock<'a, C: Counter> {
    clock: &'a Clock<C>,
    /// The versions, with the health beside their pieces.
    versions: Published<WORDS>,
    /// Per slot, the end of its version.
    ends: [End; 2],
    writer: AtomicBool,
}

impl<'a, C: Counter> WallClock<'a, C> {
    /// A wall clock on `clock`, not set yet (`const`: for a `static` beside the clock's).
    #[cfg(not(loom))]
    pub const fn new(clock: &'a Clock<C>) -> WallClock<'a, C> {
        WallClock {
            clock,
            versions: Published::new([0; WORDS]),
            ends: [End::new(), End::new()],
            writer: AtomicBool::new(false),
        }
    }

    /// A wall clock on `clock` (the loom model's: loom's atomics have no `const fn new`).
    #[cfg(loom)]
    pub fn new(clock: &'a Clock<C>) -> WallClock<'a, C> {
        WallClock {
            clock,
            versions: Published::new([0; WORDS]),
            ends: [End::new(), End::new()],
            writer: AtomicBool::new(false),
        }
    }

    /// The clock this wall clock runs on.
    pub fn clock(&self) -> &'a Clock<C> {
        self.clock
    }

    fn end(&self, slot: usize) -> &End {
        let [even, odd] = &self.ends;
        if slot & 1 == 0 {
            even
        } else {
            odd
        }
    }

    /// The end of version `number` (in `slot`): what is decided of it, each half not yet
    /// decided proposed from one clock reading made now (first compare-and-swap wins; module
    /// docs, "The end, in two halves"). [`OPEN`] while open, or when the slot was reused (the
    /// read that asked is stale and will be rejected).
    fn close(&self, slot: usize, number: u32) -> u64 {
        let end = self.end(slot);
        let tag = tag(number);
        let mut mine = None;
        let mut proposal = || {
            *mine.get_or_insert_with(|| {
                self.clock
                    .now()
                    .as_nanos()
                    .saturating_add(HANDOVER_NS)
                    .min(MAX_END)
            })
        };
        let decide = |half: &AtomicU32, value: u32| match half.compare_exchange(
            tag,
            value,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => Some(value),
            Err(actual) if actual & TAG == 0 => Some(actual),
            Err(_) => None,
        };
        let hi = match end.hi.load(Ordering::SeqCst) {
            h if h & TAG == 0 => Some(h),
            h if h == tag => decide(&end.hi, high(proposal())),
            _ => None,
        };
        let Some(hi) = hi else { return OPEN };
        let lo = match end.lo.load(Ordering::SeqCst) {
            l if l & TAG == 0 => Some(l),
            l if l == tag => {
                // The nearest value under the decided high half to this proposal.
                let p = proposal();
                let lo = match high(p).cmp(&hi) {
                    Cmp::Equal => p & HALF_MASK,
                    Cmp::Greater => HALF_MASK,
                    Cmp::Less => 0,
                };
                decide(&end.lo, u32::try_from(lo).unwrap_or(0))
            }
            _ => None,
        };
        match lo {
            Some(lo) => u64::from(hi) << HALF | u64::from(lo),
            None => OPEN,
        }
    }

    /// For one read: the clock time to evaluate the version at, and the version's piece in
    /// force then (`newest`: its newest piece instead).
    fn read(&self, newest: bool) -> Option<(Fn_, u64)> {
        self.versions.read(|version, words| {
            let t = self.clock.now().as_nanos();
            // Open: `OPEN`, above every `t`; a reused slot's: `OPEN` too, and rejected.
            let t = t.min(self.close(version.slot, version.number));
            let at = if newest { u64::MAX } else { t };
            (Version_::piece_at(words, at).map(|p| (p, t)), false)
        })
    }

    /// The time of day in Unix nanoseconds (UTC, leap seconds not counted), or `None` before
    /// the first [`WallClock::set`].
    pub fn unix_ns(&self) -> Option<u64> {
        self.read(false).map(|(p, t)| p.eval(t))
    }

    /// The slew still to run, in ns (positive: the wall time is being moved forward); 0 when
    /// none runs or the wall time is not set. A slew asked for counts whole from the call on
    /// (it begins at the handover, 100 µs after the write reads the clock).
    pub fn slew_remaining_ns(&self) -> i64 {
        // Before the base, the slew has not begun: all of it is still to run.
        self.read(true).map_or(0, |(p, t)| p.remaining(t))
    }

    /// What the writers have done: steps (with the latest's size), slews.
    pub fn health(&self) -> WallHealth {
        self.versions
            .read(|_, words| (WallHealth::load(words), false))
    }

    /// Sets the wall time: at the clock's time `at` it was `unix_ns` (a real-time clock's
    /// reading and the clock's time of that reading; `at` may be in the past). From the
    /// handover on (100 µs after the write reads the clock) the wall time is `unix_ns` plus the
    /// clock's time since `at`; any slew in progress is cancelled.
    ///
    /// Returns the step — how far the wall time moved at the handover, positive forward —
    /// or `None` for the first setting, which is no step. Errors: [`WallError::BeforeEpoch`]
    /// or [`WallError::OutOfRange`] when the wall time at the handover would be outside
    /// `0..=u64::MAX` ns (nothing changes), [`WallError::Busy`] (another writer, or see
    /// [`WallClock`]'s "Writers and the handover").
    pub fn set(&self, unix_ns: u64, at: Instant) -> Result<Option<i128>, WallError> {
        let target = |c: u64| {
            // Sums of u64s in i128: exact.
            let w = i128::from(unix_ns)
                .saturating_add(i128::from(c))
                .saturating_sub(i128::from(at.as_nanos()));
            if w < 0 {
                Err(WallError::BeforeEpoch)
            } else {
                u64::try_from(w).map_err(|_| WallError::OutOfRange)
            }
        };
        // Refused before anything is written when the clock's time now says so already.
        target(self.clock.now().as_nanos().saturating_add(HANDOVER_NS))?;
        self.write(|old, e| {
            let wall = target(e)?;
            let main = Fn_::at(wall, e);
            Ok(match old {
                None => (main, Outcome::Set),
                Some(old) => {
                    let step = i128::from(wall).saturating_sub(i128::from(old.eval(e)));
                    (main, Outcome::Step(step))
                }
            })
        })
        .map(|outcome| match outcome {
            Outcome::Step(step) => Some(step),
            _ => None,
        })
    }

    /// [`WallClock::set`] from a real-time clock's seconds edge: the wall time was
    /// `edge.unix_seconds` at the middle of the bracket (good to half
    /// [`SecondsEdge::width_ns`], plus the RTC's own error).
    pub fn set_at_edge(&self, edge: &SecondsEdge) -> Result<Option<i128>, WallError> {
        let ns = edge
            .unix_seconds
            .checked_mul(1_000_000_000)
            .ok_or(WallError::OutOfRange)?;
        self.set(ns, edge.midpoint())
    }

    /// Slews the wall time by `offset_ns` (positive: forward), adjtime-like: from the
    /// handover on (100 µs after the write reads the clock) it runs faster (or slower) than
    /// the clock by `max_ppm` parts per million until the offset is absorbed, then at the
    /// clock's rate
    /// again — exactly `offset_ns` ahead (behind) of where it would have been, never
    /// overshooting, never going back, no jump at either end. A slew of `|offset_ns|` ns
    /// takes `|offset_ns| × 10⁶ / max_ppm` ns of clock time (0.5 s at 250 000 ppm: 2 s).
    ///
    /// Replaces any slew in progress (as `adjtime` does) and returns what was left of it *at
    /// the handover* — the moment the new slew takes over, 100 µs after this call's clock
    /// reading — not at the call: what [`WallClock::slew_remaining_ns`] said just before the
    /// call, less what the old slew absorbed until the handover. An offset of 0 cancels the
    /// slew in progress; any `i64`, `i64::MIN` included, is absorbed whole. Errors:
    /// [`WallError::NotSet`], [`WallError::BadRate`] (0, or above [`MAX_SLEW_PPM`]),
    /// [`WallError::Busy`] (another writer, or see "Writers and the handover").
    pub fn slew(&self, offset_ns: i64, max_ppm: u32) -> Result<i64, WallError> {
        if max_ppm == 0 || max_ppm > MAX_SLEW_PPM {
            return Err(WallError::BadRate);
        }
        // Refused before anything is touched: this check reads the words only, never the
        // clock nor a closing version's end (a reader's `unix_ns` would propose that end, and
        // a refused write must change nothing).
        if !self
            .versions
            .read(|_, words| (Version_::load(words).is_some(), false))
        {
            return Err(WallError::NotSet);
        }
        let outcome = self.write(|old, e| {
            let old = old.ok_or(WallError::NotSet)?;
            // What was left of the slew in force at the handover `e`.
            let was = old.at(e);
            let main = Fn_ {
                wall: old.eval(e),
                base: e,
                off: offset_ns.unsigned_abs(),
                ppm: max_ppm,
                neg: offset_ns < 0,
            };
            let outcome = Outcome::Slew {
                left: was.remaining(e),
                started: offset_ns != 0,
            };
            Ok((main, outcome))
        })?;
        match outcome {
            Outcome::Slew { left, .. } => Ok(left),
            _ => Ok(0),
        }
    }

    /// One write: waits (a bounded number of clock reads) for the clock to pass the newest
    /// base, closes the current version at a point `e` just ahead, and publishes the
    /// successor whose new piece, based at `e`, `make` builds from the old version and `e`.
    /// If `make` refuses, the old version is published again unchanged. `Busy`, with nothing
    /// touched, if the old version has more than one piece beginning between the writer's
    /// clock reading and 100 µs after it (module docs, "Writes before the previous
    /// handover").
    fn write(
        &self,
        make: impl FnOnce(Option<&Version_>, u64) -> Result<(Fn_, Outcome), WallError>,
    ) -> Result<Outcome, WallError> {
        if self
            .writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(WallError::Busy);
        }
        let (version, words) = self.versions.current();
        let old = Version_::load(words);
        let mut t_w = self.clock.now().as_nanos();
        if let Some(old) = &old {
            // The previous handover first: the clock past the newest base (bounded, for a
            // clock that stands still).
            let mut reads = 0;
            while t_w < old.last().base && reads < HANDOVER_WAIT_READS {
                reads = reads.saturating_add(1);
                crate::sync::spin_loop();
                t_w = self.clock.now().as_nanos();
            }
            if old.ahead(t_w) > PIECES - 3 {
                self.writer.store(false, Ordering::Release);
                return Err(WallError::Busy);
            }
        }
        self.announce(version.slot, version.number);
        let e = self.close(version.slot, version.number);
        let made = make(old.as_ref(), e).map(|(next, outcome)| {
            let v = match &old {
                Some(old) => old.successor(t_w, e, next),
                None => Version_::first(next),
            };
            (v, outcome)
        });
        self.finish(old, made)
    }

    /// Announces the close of version `number` (in `slot`): readers from now on propose its
    /// end themselves if the writer has not.
    fn announce(&self, slot: usize, number: u32) {
        self.end(slot).hi.store(tag(number), Ordering::SeqCst);
    }

    /// Publishes what `make` built (or `old` again if it refused) with the health updated
    /// (a step, a slew started), and lets the next writer in.
    fn finish(
        &self,
        old: Option<Version_>,
        made: Result<(Version_, Outcome), WallError>,
    ) -> Result<Outcome, WallError> {
        let next = match &made {
            Ok((next, _)) => Some(*next),
            Err(_) => old,
        };
        let mut health = WallHealth::load(self.versions.current().1);
        match &made {
            Ok((_, Outcome::Step(step))) => {
                // Saturating: a count that wrapped would read as few.
                health.steps = health.steps.saturating_add(1);
                health.last_step_ns =
                    i64::try_from(*step).unwrap_or(if *step < 0 { i64::MIN } else { i64::MAX });
            }
            Ok((_, Outcome::Slew { started: true, .. })) => {
                health.slews = health.slews.saturating_add(1);
            }
            _ => {}
        }
        self.versions.publish(|new, slot| {
            let end = self.end(new.slot);
            end.lo.store(tag(new.number), Ordering::Relaxed);
            end.hi.store(OPEN_HI, Ordering::Relaxed);
            health.store(slot);
            match next {
                Some(next) => next.store(slot),
                None => {
                    for word in slot.iter().take(HEALTH_AT) {
                        word.store(0);
                    }
                }
            }
        });
        self.writer.store(false, Ordering::Release);
        made.map(|(_, outcome)| outcome)
    }
}

/// What a write did.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// The first setting.
    Set,
    /// A step of this many ns.
    Step(i128),
    /// A slew, replacing one with `left` to run; `started`: a non-zero one (counted).
    Slew { left: i64, started: bool },
}

impl<C: Counter> fmt::Debug for WallClock<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WallClock")
            .field("unix_ns", &self.unix_ns())
            .field("slew_remaining_ns", &self.slew_remaining_ns())
            .field("health", &self.health())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FnCounter, Frequency};
    use proptest::prelude::*;
    use std::cell::Cell;

    /// A clock on a hand-moved 64-bit counter at 1 GHz (1 tick = 1 ns), started at tick 0:
    /// its time is the tick count.
    fn ns_clock(t: &Cell<u64>) -> Clock<FnCounter<impl Fn() -> u64 + '_>> {
        let start = t.replace(0);
        let clock = Clock::new(
            FnCounter::new(move || t.get(), 64),
            Frequency::exact_hz(1_000_000_000).unwrap(),
        );
        t.set(start);
        clock
    }

    impl<C: Counter> WallClock<'_, C> {
        /// The end of the version in `slot` if both halves are decided (proposes nothing).
        fn decided(&self, slot: usize) -> Option<u64> {
            let end = self.end(slot);
            let (hi, lo) = (end.hi.load(Ordering::SeqCst), end.lo.load(Ordering::SeqCst));
            (hi & TAG == 0 && lo & TAG == 0).then(|| u64::from(hi) << HALF | u64::from(lo))
        }
    }

    /// A simulated RTC over the hand-moved clock: each poll moves the clock by `step` ns; the
    /// count goes from 41 to 42 at clock time `edge`, and is unreadable (`None`, an update in
    /// progress) for the `busy` ns before it.
    fn poll_rtc(t: &Cell<u64>, step: u64, edge: u64, busy: u64) -> Option<u64> {
        t.set(t.get() + step);
        let now = t.get();
        t.set(now + step);
        if now >= edge {
            Some(42)
        } else if now + busy >= edge {
            None
        } else {
            Some(41)
        }
    }

    /// The edge lies in the bracket, with the new count; unreadable polls count as the
    /// previous second; no change is `None` after 1.2 s of clock time, or after the poll
    /// limit on a clock that stands still.
    #[test]
    fn seconds_edge_measure_brackets_the_edge() {
        for (step, edge, busy) in [
            (1_000, 300_000_000, 0),
            (7_777, 999_999_999, 2_000_000),
            (50_000_000, 123_456_789, 60_000_000),
            (1, 10, 0),
        ] {
            let t = Cell::new(0);
            let clock = ns_clock(&t);
            let e =
                SecondsEdge::measure(&clock, u32::MAX, || poll_rtc(&t, step, edge, busy)).unwrap();
            assert_eq!(e.unix_seconds, 42);
            assert!(
                e.before.as_nanos() <= edge && edge <= e.after.as_nanos(),
                "{e:?} {edge}"
            );
            // Two polls (four clock steps, one before the count changed) at most.
            assert!(e.width_ns() <= 4 * step, "{e:?}");
        }
        // Never changes: gives up at the first poll past 1.2 s.
        let t = Cell::new(0);
        let clock = ns_clock(&t);
        assert_eq!(
            SecondsEdge::measure(&clock, u32::MAX, || poll_rtc(&t, 1_000_000, u64::MAX, 0)),
            None
        );
        assert!(
            (1_200_000_000..1_205_000_000).contains(&t.get()),
            "{}",
            t.get()
        );
        // A clock that stands still: the poll limit.
        let polls = Cell::new(0u32);
        assert_eq!(
            SecondsEdge::measure(&clock, 1_000, || {
                polls.set(polls.get() + 1);
                Some(7)
            }),
            None
        );
        assert_eq!(polls.get(), 1_000);
    }

    /// Halves decided from two proposals on either side of a 2^31 ns boundary: the end is
    /// between them, whichever came first (module docs, "The end, in two halves").
    #[test]
    fn an_end_from_two_proposals_lies_between_them() {
        // Clock readings whose proposals (reading + H) fall either side of the boundary.
        let boundary = (7u64 << HALF) - HANDOVER_NS;
        for (first, second) in [
            (boundary - 10, boundary + 10),
            (boundary + 10, boundary - 10),
            (boundary + 5, boundary + 9),
        ] {
            let t = Cell::new(0);
            let clock = ns_clock(&t);
            let wall = WallClock::new(&clock);
            wall.set(0, Instant::ZERO).unwrap();
            t.set(boundary - 1_000_000);
            let (v, _) = wall.versions.current();
            wall.announce(v.slot, v.number);
            // The first proposer wins the high half, then stalls.
            let end = wall.end(v.slot);
            let hi = high(first + HANDOVER_NS);
            assert!(end
                .hi
                .compare_exchange(tag(v.number), hi, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok());
            // The second decides the low half from its own reading.
            t.set(second);
            let e = wall.close(v.slot, v.number);
            let (lo, hi) = (first.min(second), first.max(second));
            assert!(
                (lo + HANDOVER_NS..=hi + HANDOVER_NS).contains(&e),
                "{first} then {second}: end {e}"
            );
            assert_eq!(wall.decided(v.slot), Some(e));
            assert_eq!(wall.close(v.slot, v.number), e); // decided for good
        }
    }

    /// The health is published with the pieces: a refused write keeps it, a step and a
    /// started slew count.
    #[test]
    fn health_is_published_with_the_version() {
        let t = Cell::new(0);
        let clock = ns_clock(&t);
        let wall = WallClock::new(&clock);
        wall.set(1_000_000_000, Instant::ZERO).unwrap();
        t.set(1_000_000);
        wall.set(3_000_000_000, Instant::from_nanos(1_000_000))
            .unwrap();
        wall.slew(0, 1).unwrap(); // cancels nothing: not a slew started
        wall.slew(5, 1).unwrap();
        assert_eq!(
            wall.set(0, Instant::from_nanos(u64::MAX)),
            Err(WallError::BeforeEpoch)
        );
        let h = wall.health();
        assert_eq!((h.steps, h.slews), (1, 1));
        // At the handover 1 ms + H: 3 s + H against 1 s + 1 ms + H.
        assert_eq!(h.last_step_ns, 1_999_000_000);
    }

    #[test]
    fn function_is_monotone_and_ends_exact() {
        for (off, ppm, neg) in [
            (500_000_000, 250_000, false),
            (7, 1, true),
            (1, 500_000, true),
        ] {
            let f = Fn_ {
                wall: 1000,
                base: 10,
                off,
                ppm,
                neg,
            };
            let end = 10 + off * 1_000_000 / u64::from(ppm) + 1_000_000;
            let mut prev = f.eval(0);
            for t in (0..end)
                .step_by(((end / 10_000) as usize).max(1))
                .chain([end])
            {
                let w = f.eval(t);
                assert!(w >= prev);
                prev = w;
            }
            assert_eq!(f.remaining(end), 0);
            let exact = 1000 + (end - 10);
            assert_eq!(f.eval(end), if neg { exact - off } else { exact + off });
        }
    }

    #[test]
    fn set_then_step_is_reported() {
        let t = Cell::new(0);
        let clock = ns_clock(&t);
        let wall = WallClock::new(&clock);
        assert_eq!(wall.unix_ns(), None);
        assert_eq!(wall.slew(1, 1), Err(WallError::NotSet));
        assert_eq!(wall.set(5_000_000_000, Instant::ZERO), Ok(None));
        t.set(1_000_000);
        assert_eq!(wall.unix_ns(), Some(5_001_000_000));
        // Two seconds back at the handover.
        t.set(2_000_000);
        let step = wall.set(
            3_002_000_000 + HANDOVER_NS,
            Instant::from_nanos(2_000_000 + HANDOVER_NS),
        );
        assert_eq!(step, Ok(Some(-2_000_000_000)));
        t.set(3_000_000);
        assert_eq!(wall.unix_ns(), Some(3_003_000_000));
        let h = wall.health();
        assert_eq!((h.steps, h.last_step_ns), (1, -2_000_000_000));
        // A time before 1970 is refused, nothing changes.
        assert_eq!(
            wall.set(0, Instant::from_nanos(u64::MAX)),
            Err(WallError::BeforeEpoch)
        );
        assert_eq!(wall.unix_ns(), Some(3_003_000_000));
        assert_eq!(wall.slew(1, 0), Err(WallError::BadRate));
        assert_eq!(wall.slew(1, MAX_SLEW_PPM + 1), Err(WallError::BadRate));
    }

    #[test]
    fn slew_replaces_and_returns_what_was_left() {
        let t = Cell::new(0);
        let clock = ns_clock(&t);
        let wall = WallClock::new(&clock);
        wall.set(0, Instant::ZERO).unwrap();
        t.set(1_000_000);
        assert_eq!(wall.slew(1_000_000, 1_000), Ok(0)); // 1 ms at 1000 ppm: 1 s
        t.set(1_000_000 + HANDOVER_NS + 500_000_000);
        assert_eq!(wall.slew_remaining_ns(), 500_000);
        let before = wall.unix_ns().unwrap();
        // At the handover, 100 µs later at 1000 ppm, 100 ns more were absorbed.
        assert_eq!(wall.slew(-10, 1_000), Ok(499_900));
        assert!(wall.unix_ns().unwrap() >= before);
        t.set(10_000_000_000);
        assert_eq!(wall.slew_remaining_ns(), 0);
        // Absorbed: 500.1 µs of the first slew, then −10 ns.
        assert_eq!(wall.unix_ns(), Some(10_000_000_000 + 500_100 - 10));
        assert_eq!(wall.health().slews, 2);
    }

    /// A writer stalled between announcing the close and proposing the end: the next reader
    /// proposes it, readers past it stand still there (no wait, no step back), and the
    /// version published later continues from it.
    #[test]
    fn a_stalled_writer_costs_time_standing_still_never_a_wait() {
        let t = Cell::new(0);
        let clock = ns_clock(&t);
        let wall = WallClock::new(&clock);
        wall.set(0, Instant::ZERO).unwrap();
        t.set(1_000_000);
        // The writer: flag taken, close announced, then stalled.
        assert!(wall
            .writer
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok());
        let (v, words) = wall.versions.current();
        let old = Version_::load(words);
        wall.announce(v.slot, v.number);
        assert_eq!(wall.unix_ns(), Some(1_000_000)); // proposes 1 ms + H
        assert_eq!(wall.decided(v.slot), Some(1_000_000 + HANDOVER_NS));
        t.set(1_000_000 + 5 * HANDOVER_NS);
        assert_eq!(wall.unix_ns(), Some(1_000_000 + HANDOVER_NS)); // stands at the end
        assert_eq!(wall.slew(1, 1), Err(WallError::Busy));
        // The writer resumes: its proposal loses to the reader's.
        let c = wall.close(v.slot, v.number);
        assert_eq!(c, 1_000_000 + HANDOVER_NS);
        let old = old.unwrap();
        let main = Fn_ {
            wall: old.eval(c),
            base: c,
            off: 1_000,
            ppm: 1_000,
            neg: false,
        };
        let next = old.successor(1_000_000, c, main);
        assert!(matches!(
            wall.finish(
                Some(old),
                Ok((
                    next,
                    Outcome::Slew {
                        left: 0,
                        started: true
                    }
                ))
            ),
            Ok(Outcome::Slew { left: 0, .. })
        ));
        // From the end on, at the slew's rate (the stall past the end caught up, as the
        // Clock's): 400 µs later, 400 ns absorbed.
        assert_eq!(wall.unix_ns(), Some(1_000_000 + 5 * HANDOVER_NS + 400));
        assert_eq!(wall.slew_remaining_ns(), 600);
    }

    /// Three writes within 100 µs of clock time on a creeping clock: the third finds two
    /// pieces beginning ahead of it and is refused with nothing changed; once the clock
    /// moves on it goes through.
    #[test]
    fn a_write_short_of_two_handovers_on_a_creeping_clock_is_busy() {
        let t = Cell::new(0);
        let clock = ns_clock(&t);
        let wall = WallClock::new(&clock);
        wall.set(1_000_000_000, Instant::ZERO).unwrap();
        t.set(HANDOVER_NS);
        wall.slew(-1_000_000, MAX_SLEW_PPM).unwrap(); // takes over at 2H
        t.set(HANDOVER_NS + 10);
        wall.slew(1_000, 1).unwrap(); // at 2H + 10: short of 2H, keeps three pieces
        t.set(HANDOVER_NS + 20);
        let before = (wall.unix_ns(), wall.slew_remaining_ns(), wall.health());
        let (v, words) = wall.versions.current();
        let version = Version_::load(words);
        assert_eq!(wall.slew(0, 1), Err(WallError::Busy));
        let (v2, words2) = wall.versions.current();
        assert_eq!((v2.number, Version_::load(words2)), (v.number, version));
        assert_eq!(wall.end(v.slot).hi.load(Ordering::SeqCst), OPEN_HI);
        assert_eq!(
            (wall.unix_ns(), wall.slew_remaining_ns(), wall.health()),
            before
        );
        t.set(2 * HANDOVER_NS); // past both: the 1 µs slew (from 2H + 10) has all of it left
        assert_eq!(wall.slew(0, 1), Ok(1_000));
    }

    proptest! {
        /// Any slew on any setting: readings along the clock never go back, the slew ends
        /// exactly (its offset absorbed, remaining 0), and nothing overflows for any u64.
        #[test]
        fn slew_is_monotone_and_exact(
            unix in any::<u64>(),
            start in 0u64..(1 << 60),
            offset in any::<i64>(),
            ppm in 1u32..=MAX_SLEW_PPM,
            steps in proptest::collection::vec(any::<u64>(), 1..40),
        ) {
            let t = Cell::new(start);
            let clock = ns_clock(&t);
            let wall = WallClock::new(&clock);
            if wall.set(unix, Instant::from_nanos(start)).is_err() {
                return Ok(()); // past u64::MAX at the handover
            }
            prop_assert_eq!(wall.slew(offset, ppm), Ok(0));
            let base = start + HANDOVER_NS;
            let before = wall.unix_ns().unwrap();
            let mut prev = before;
            let mut now = start;
            for s in steps {
                now = now.saturating_add(s >> (s % 64)).min(1 << 61);
                t.set(now);
                let w = wall.unix_ns().unwrap();
                prop_assert!(w >= prev, "back from {} to {} at {}", prev, w, now);
                prev = w;
            }
            // The end: exact, unless it is beyond the clock's range.
            let duration = u128::from(offset.unsigned_abs()) * 1_000_000 / u128::from(ppm) + 1;
            if let Some(end) = u64::try_from(u128::from(base) + duration).ok().filter(|e| *e < (1 << 61)) {
                let end = end.max(now);
                t.set(end);
                prop_assert_eq!(wall.slew_remaining_ns(), 0);
                let plain = i128::from(unix) + i128::from(end - start);
                let want = (plain + i128::from(offset)).clamp(0, i128::from(u64::MAX));
                let got = i128::from(wall.unix_ns().unwrap());
                // Saturation at u64::MAX is the one place the sum is not exact.
                if plain + i128::from(offset.max(0)) <= i128::from(u64::MAX) {
                    prop_assert_eq!(got, want);
                }
            }
        }

        /// The function itself, for any u64 input and any rate the crate takes: no panic, no
        /// step back from t to any later t', at most 1 + ppm / 10⁶ per ns (no jump), and the
        /// remaining slew never grows.
        #[test]
        fn function_never_overflows(
            wall in any::<u64>(), base in any::<u64>(), off in any::<u64>(),
            ppm in 1u32..=MAX_SLEW_PPM, neg: bool, t in any::<u64>(), dt in any::<u64>(),
        ) {
            let f = Fn_ { wall, base, off, ppm, neg };
            let t2 = t.saturating_add(dt);
            let (a, b) = (f.eval(t), f.eval(t2));
            prop_assert!(b >= a);
            let most = u128::from(t2 - t) * (1_000_000 + u128::from(ppm)) / 1_000_000 + 1;
            prop_assert!(u128::from(b - a) <= most);
            prop_assert!(f.remaining(t2).unsigned_abs() <= f.remaining(t).unsigned_abs());
        }

        /// Slews at any pace on a clock that stands still, creeps or moves: between writes
        /// the wall time never goes back and never moves more than 1.5 × the clock's time
        /// (plus a ns a reading), and the offsets absorbed add up once the clock moves on.
        #[test]
        fn unspaced_writes_never_go_back(
            ops in proptest::collection::vec(
                (prop_oneof![Just(0u64), 0u64..3, 0u64..150_000], -2_000_000i64..2_000_000,
                 1u32..=MAX_SLEW_PPM, any::<bool>()), 1..12),
        ) {
            let t = Cell::new(0);
            let clock = ns_clock(&t);
            let wall = WallClock::new(&clock);
            const U: u64 = 1 << 62;
            wall.set(U, Instant::ZERO).unwrap();
            let mut now = 0u64;
            let mut prev = (0u64, wall.unix_ns().unwrap());
            let mut absorbed = 0i128;
            let check = |now: u64, prev: &mut (u64, u64)| -> Result<(), TestCaseError> {
                let w = wall.unix_ns().unwrap();
                prop_assert!(w >= prev.1, "back from {} to {} at {}", prev.1, w, now);
                let most = u128::from(now - prev.0) * 3 / 2 + 2;
                prop_assert!(
                    u128::from(w - prev.1) <= most,
                    "jump {} in {} ns", w - prev.1, now - prev.0
                );
                *prev = (now, w);
                Ok(())
            };
            for (adv, off, ppm, write) in ops {
                now += adv;
                t.set(now);
                check(now, &mut prev)?;
                if write {
                    match wall.slew(off, ppm) {
                        Ok(left) => absorbed += i128::from(off) - i128::from(left),
                        Err(e) => prop_assert_eq!(e, WallError::Busy),
                    }
                    check(now, &mut prev)?;
                }
            }
            // Long after: every slew over (the slowest, 2 ms at 1 ppm, takes 2 000 s of the
            // clock's time), the offsets add up.
            now += 2_000_000_000_000 + 10_000_000_000;
            t.set(now);
            check(now, &mut prev)?;
            prop_assert_eq!(wall.slew_remaining_ns(), 0);
            prop_assert_eq!(
                i128::from(wall.unix_ns().unwrap()),
                i128::from(U) + i128::from(now) + absorbed
            );
        }

        /// Steps of any size at any time: the step reported is the move at the handover.
        #[test]
        fn step_is_reported_exactly(a in any::<u64>(), b in any::<u64>(), at in 0u64..(1 << 60)) {
            let t = Cell::new(at);
            let clock = ns_clock(&t);
            let wall = WallClock::new(&clock);
            if wall.set(a, Instant::from_nanos(at)).is_err() { return Ok(()); }
            match wall.set(b, Instant::from_nanos(at)) {
                Ok(Some(step)) => {
                    // Both handovers are at `at + HANDOVER_NS` (the clock did not move).
                    t.set(at + HANDOVER_NS);
                    let now = wall.unix_ns().unwrap();
                    prop_assert_eq!(i128::from(now), i128::from(b) + i128::from(HANDOVER_NS));
                    prop_assert_eq!(step, i128::from(b) - i128::from(a));
                }
                Ok(None) => prop_assert!(false, "a second set is a step"),
                Err(e) => prop_assert_eq!(e, WallError::OutOfRange),
            }
        }
    }
}
