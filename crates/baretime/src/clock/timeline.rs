//! A timeline slot's words, its gate, and the arithmetic on one timeline: what readers and
//! writers share.

use super::*;
#[cfg(target_pointer_width = "32")]
use crate::scale::mul_q64_narrow;

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
pub(super) const WORDS: usize = 15;

/// Where `inv_shift` sits in the millihz word: millihz is below 2^47 (100 GHz), the shift
/// below 128.
pub(super) const SHIFT_AT: u32 = 56;

/// The end of a timeline while it is being closed: this bit and the version number (its low
/// 31 bits where gate words are 32-bit).
pub(super) const CLOSING: u64 = if WIDE_ATOMICS { 1 << 63 } else { 1 << 31 };
/// Ends are offsets from `base_ticks` below this (the 64-bit deadline is `2^62 − 1`; with
/// 32-bit gate words, where counters are read modulo 2^32, `2^31 − 1`).
pub(super) const OFFSET_LIMIT: u64 = if WIDE_ATOMICS { 1 << 62 } else { 1 << 31 };

/// How far (at the faster of the two rates) a 64-bit reading may be before the previous
/// timeline's base and still be run back at that rate (`Timebase::is_behind`): a CPU that
/// lags by [`LAG_NS`], across two handovers. Further back is a counter that went back, to
/// before the newest rate was in force.
pub(super) const BEFORE_PREVIOUS_NS: u64 = LAG_NS + 2 * HANDOVER_NS;

/// The end of a timeline that a rebase from a counter behind (promise 6) is replacing (64-bit
/// gate words only, where a rebase can find the counter behind): its readers stand at the
/// mark's ceiling until the fresh timeline is published. Not a close tag: those carry a
/// 32-bit version number below bit 62.
pub(super) const REBASING: u64 = CLOSING | (1 << 62);

/// A timeline's handover stop (`Clock::stops`) while it is being decided.
pub(super) const STOPPING: u64 = if WIDE_ATOMICS { 1 << 63 } else { 1 << 31 };
/// A decided handover stop: this bit and its distance before the base in ticks (below
/// 3/16 of the wrap: under 2^30 for a 32-bit counter).
pub(super) const STOPPED: u64 = STOPPING >> 1;

/// The close tag of `version`.
pub(super) fn closing(version: Version) -> u64 {
    CLOSING | (u64::from(version.number) & CLOSING.wrapping_sub(1))
}

/// The mutable part of a slot, beside its words: where its timeline ends.
pub(super) struct Gate {
    /// Readers take the fast path for `d < lim`: `deadline + 1` while the timeline is open,
    /// 0 once it is closing, closed or latched (then the slow path reads `end`).
    pub(super) lim: PlainWord,
    /// The end as an offset from `base_ticks` (the deadline while open), or
    /// `CLOSING | version` while a close point is being decided.
    pub(super) end: GateWord,
    /// `version + 1` once a reader or the writer saw the timeline past its end: it then
    /// stays at its end.
    pub(super) latched: AtomicU32,
    /// The margin (ticks) the writer closing this timeline proposes with — the smaller of
    /// the old and the new rate's — stored before it announces the close, so that helpers
    /// propose with it too; 0 while open.
    pub(super) margin: GateWord,
}

impl Gate {
    #[cfg(not(loom))]
    pub(super) const fn new() -> Gate {
        Gate {
            lim: PlainWord::new(0),
            end: GateWord::new(0),
            latched: AtomicU32::new(0),
            margin: GateWord::new(0),
        }
    }
    #[cfg(loom)]
    pub(super) fn new() -> Gate {
        Gate {
            lim: PlainWord::new(0),
            end: GateWord::new(0),
            latched: AtomicU32::new(0),
            margin: GateWord::new(0),
        }
    }

    /// Opens the gate for a fresh timeline (the writer, before publishing it); `fast`: whether
    /// readers may take the fast path on it (otherwise every reading takes the slow path,
    /// which reads the same time).
    #[inline]
    pub(super) fn open(&self, deadline: u64, fast: bool) {
        self.latched.store(0, Ordering::Relaxed);
        self.margin.store(0, Ordering::Relaxed);
        self.end.store(deadline, Ordering::Relaxed);
        self.lim.store(
            if fast { deadline.saturating_add(1) } else { 0 },
            Ordering::Relaxed,
        );
    }
}

/// Where a reading falls, seen from a timeline's base.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Zone {
    /// Up to the deadline.
    Valid,
    /// Past the deadline, up to three quarters of the wrap.
    Late,
    /// The last quarter of the wrap: before the base.
    Behind,
}

/// The zones of a counter width, and the handover margin.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    pub(super) width: Width,
    pub(super) deadline: u64,
    pub(super) late_end: u64,
}

impl Geometry {
    #[inline(always)]
    pub(super) fn of(width: Width) -> Geometry {
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

    pub(super) fn zone(&self, d: u64) -> Zone {
        if d <= self.deadline {
            Zone::Valid
        } else if d <= self.late_end {
            Zone::Late
        } else {
            Zone::Behind
        }
    }

    /// [`HANDOVER_NS`] in ticks at `scale`, within 1..=max(1, wrap/16).
    pub(super) fn margin(&self, scale: &Scale) -> u64 {
        scale
            .ns_to_ticks_ceil(HANDOVER_NS)
            .clamp(1, (self.width.mask() >> 4).max(1))
    }

    /// Whether a reading in `zone` means the timeline is past its deadline. A narrow counter
    /// that far round has come round again; a 64-bit counter behind the base was reset, or
    /// is read on a CPU whose counter lags the one the base came from (counters that warp
    /// between CPUs): it is not late, and must not make time jump to the deadline.
    pub(super) fn is_late(&self, zone: Zone) -> bool {
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
    #[inline]
    pub(super) fn proposal(
        &self,
        tb: &Timebase,
        t: u64,
        margin: u64,
        behind: impl FnOnce() -> u64,
    ) -> u64 {
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
pub(super) const REORDER_NS: u64 = 500;

/// The close point, as an offset from the base, that a reading `before` ticks before the
/// base of `tb` proposes: the base itself when the reading is clearly before it (by
/// [`REORDER_NS`] or more), so that no reader can have passed the base and the timeline
/// continues unchanged at the new rate; otherwise the reading plus the margin.
pub(super) fn from_base(tb: &Timebase, margin: u64, before: u64) -> u64 {
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
pub(super) fn stop_at(width: Width, tb: &Timebase, t: u64, margin: u64) -> u64 {
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
pub(super) fn of_slot<T>(pair: &[T; 2], slot: usize) -> &T {
    let [even, _] = pair;
    // In bounds: an address computed from the parity, not a choice between two.
    pair.get(slot & 1).unwrap_or(even)
}

/// The margin a helper proposes a close point or a handover stop with: the closing writer's
/// (stored before it announced the close), or `tb`'s own if that is smaller.
pub(super) fn helper_margin(gate: &Gate, geometry: &Geometry, tb: &Timebase) -> u64 {
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
pub(super) fn advance(base_ns: u64, ticks: u64, int: u64, frac: u64) -> u64 {
    if int == 0 {
        base_ns.saturating_add(saturate_u64(mul_q64(ticks, 0, frac)))
    } else {
        saturate_u64(mul_q64(ticks, int, frac).saturating_add(base_ns as u128))
    }
}

/// `base_ns + ⌊carry / 2^64 + ticks × (int + frac / 2^64)⌋` and the fraction of a nanosecond
/// that floor drops (in 2^-64 ns), or `(u64::MAX, 0)` where the time saturates. At least
/// `advance(base_ns, ticks, int, frac)`, by at most 1 ns.
#[inline]
pub(super) fn carried(base_ns: u64, carry: u64, ticks: u64, int: u64, frac: u64) -> (u64, u64) {
    // A 32-bit core's clock: the same sum in 32 × 32 → 64-bit multiplies (`mul_q64_narrow`).
    #[cfg(target_pointer_width = "32")]
    if (ticks | int) >> 32 == 0 {
        #[allow(clippy::cast_possible_truncation)] // both below 2^32
        let (whole, part) = mul_q64_narrow(ticks as u32, int as u32, frac, carry);
        return match whole.checked_add(base_ns) {
            Some(ns) => (ns, part),
            None => (u64::MAX, 0),
        };
    }
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

/// Ticks per nanosecond in 32.32 fixed point at `scale`'s tick length (as the readers'
/// formula has it, `mult`), rounded down: `⌊2^96 / mult⌋` (below 2^39: a tick is at least
/// 0.01 ns). For a span `s` below 2^32 ns, `⌈s × per_ns / 2^32⌉` is the least tick count
/// whose time reaches `s` or one less (short by less than `s / 2^32` ticks: exact where
/// that count is a whole multiple of the tick, as deadlines on a timer of whole-nanosecond
/// ticks are), with two 32 × 32 → 64-bit multiplies and no shift by a variable
/// (`Clock::quick_deadline`). 0 for a clock not started.
pub(super) fn per_ns(scale: &Scale) -> u64 {
    let (int, frac) = (scale.mult_int(), scale.mult_frac());
    // A tick length kept to 2^-32 ns (every one where the target lacks 64-bit atomics,
    // `in_force`): `⌊2^64 / (mult / 2^32)⌋`, a 64-bit division there rather than a 128-bit
    // one (about 2 000 instructions on a Cortex-M4, in every `start` and `recalibrate`).
    if frac & 0xffff_ffff == 0 && int >> 32 == 0 {
        let mult = int << 32 | frac >> 32;
        // 2^64 = (2^64 − 1) + 1: one more than `u64::MAX`'s quotient where its remainder is
        // one short of the divisor.
        return match (u64::MAX.checked_div(mult), u64::MAX.checked_rem(mult)) {
            (Some(q), Some(r)) if r.checked_add(1) == Some(mult) => q.saturating_add(1),
            (Some(q), _) => q,
            _ => 0,
        };
    }
    let mult = u128::from(int) << 64 | u128::from(frac);
    (1u128 << 96).checked_div(mult).map_or(0, saturate_u64)
}

/// A scale's tick length (64.64 fixed point) as a pair that orders as the length does.
pub(super) fn mult(scale: &Scale) -> (u64, u64) {
    (scale.mult_int(), scale.mult_frac())
}

/// One timeline as the writer builds it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timebase {
    pub(super) base_ticks: u64,
    pub(super) base_ns: u64,
    pub(super) scale: Scale,
    pub(super) prev_ticks: u64,
    pub(super) prev_ns: u64,
    pub(super) prev_int: u64,
    pub(super) prev_frac: u64,
    /// The previous timeline's `base_frac`: its copy in the handover reads it with its carry
    /// (`before_base`), as the close point's time was computed.
    pub(super) prev_carry: u64,
    pub(super) hand: u64,
    /// The longest tick (`mult`) of any timeline since the start: the slowest rate used.
    pub(super) slow: (u64, u64),
    /// The fraction of a nanosecond (in 2^-64 ns) by which the counter's time at the base
    /// exceeds `base_ns`: what the floor of the close point's time dropped, carried into
    /// the next timeline by the writer (`Timebase::carried_at`). Readers do not add it
    /// (they read at most a nanosecond less for it, never more); without it a narrow counter
    /// whose ticks are shorter than a nanosecond, updated every tick or two, lost up to a
    /// nanosecond per write and stood still.
    pub(super) base_frac: u64,
}

impl Timebase {
    /// This timeline continued at `scale` from its close point `c` (ticks after its base),
    /// where its time with the carry is `carried`: the same timeline, its handover unchanged,
    /// where it closed at its base (the counter had not reached it, and no reader had);
    /// otherwise a new base at the close point, with this timeline before it (readings before
    /// the old base, a handover not over when the write closed, stand at the old base: the new
    /// handover reaches back over the old one, `reach` ticks and up to half as much again).
    pub(super) fn continued(
        &self,
        width: Width,
        c: u64,
        carried: (u64, u64),
        scale: Scale,
        reach: u64,
    ) -> Timebase {
        if c == 0 {
            return Timebase { scale, ..*self };
        }
        Timebase {
            base_ticks: width.add(self.base_ticks, c),
            scale,
            prev_ticks: self.base_ticks,
            prev_ns: self.base_ns,
            prev_int: self.scale.mult_int(),
            prev_frac: self.scale.mult_frac(),
            prev_carry: self.base_frac,
            hand: if c < reach {
                c.saturating_add(self.hand)
                    .min(reach.saturating_add(reach >> 1))
            } else {
                reach
            },
            slow: self.slow,
            base_ns: carried.0,
            base_frac: carried.1,
        }
    }

    /// The slowest rate used so far, which carries over to every timeline (a fresh one too):
    /// this one's, the one it follows (`tb`) and the slowest of both.
    pub(super) fn slowest_with(&self, tb: &Timebase) -> (u64, u64) {
        self.slow
            .max(tb.slow)
            .max(mult(&tb.scale))
            .max(mult(&self.scale))
    }

    #[inline]
    pub(super) fn load(w: &Words<WORDS>) -> Timebase {
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

    /// Stores this timeline into `slot` (the writer, inside `Published::publish`), with
    /// `hand` for its handover: word by word, in `Timebase::load`'s order (an array built
    /// first and copied cost a 32-bit core sixty instructions more per write).
    #[inline]
    pub(super) fn store(&self, slot: &Words<WORDS>, hand: u64) {
        let [b, base_ns, int, frac, prev_ticks, prev_ns, prev_int, prev_frac, h, inv, millihz, slow_int, slow_frac, base_frac, prev_carry] =
            slot;
        b.store(self.base_ticks);
        base_ns.store(self.base_ns);
        int.store(self.scale.mult_int());
        frac.store(self.scale.mult_frac());
        prev_ticks.store(self.prev_ticks);
        prev_ns.store(self.prev_ns);
        prev_int.store(self.prev_int);
        prev_frac.store(self.prev_frac);
        h.store(hand);
        inv.store(self.scale.inv_mult());
        millihz
            .store(self.scale.millihz() | u64::from(self.scale.inv_shift()).wrapping_shl(SHIFT_AT));
        slow_int.store(self.slow.0);
        slow_frac.store(self.slow.1);
        base_frac.store(self.base_frac);
        prev_carry.store(self.prev_carry);
    }

    /// A timeline starting at `base_ns` from counter value `t`, with no predecessor to hand
    /// over from: the `hand` ticks before `t` read as `base_ns` (the clock is then at its
    /// start, not behind).
    pub(super) fn fresh(t: u64, base_ns: u64, scale: Scale, hand: u64) -> Timebase {
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
    pub(super) fn before_base(&self, width: Width, t: u64) -> u64 {
        self.before_base_carried(width, t).0
    }

    /// [`Timebase::before_base`] and the fraction of a nanosecond its floor drops (in 2^-64
    /// ns): what a timeline based at `t` carries on.
    pub(super) fn before_base_carried(&self, width: Width, t: u64) -> (u64, u64) {
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
    pub(super) fn is_behind(&self, t: u64, mark: u64) -> bool {
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
    #[inline]
    pub(super) fn carried_at(&self, d: u64) -> (u64, u64) {
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
    pub(super) fn carried_value(&self, geometry: &Geometry, t: u64) -> Option<(u64, u64)> {
        let width = geometry.width;
        let d = width.delta(self.base_ticks, t);
        if geometry.zone(d) == Zone::Valid {
            return Some(self.carried_at(d));
        }
        let before = width.delta(t, self.base_ticks);
        (before <= self.hand).then(|| self.before_base_carried(width, t))
    }

    /// Its value `d` ticks after its base.
    pub(super) fn at(&self, d: u64) -> u64 {
        advance(
            self.base_ns,
            d,
            self.scale.mult_int(),
            self.scale.mult_frac(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `per_ns` is `⌊2^96 / mult⌋` for every tick length the clock keeps, on either path.
        #[test]
        fn per_ns_is_the_floor(
            millihz in Frequency::MIN_HZ * 1000..=Frequency::MAX_HZ * 1000,
            rounded in any::<bool>(),
        ) {
            let f = Frequency::from_millihz(
                millihz,
                crate::frequency::Source::User,
                crate::frequency::Accuracy::Exact,
            )
            .unwrap();
            let scale = if rounded {
                Scale::new(f).frac_rounded_up_to_2_pow_32()
            } else {
                Scale::new(f)
            };
            let mult = u128::from(scale.mult_int()) << 64 | u128::from(scale.mult_frac());
            prop_assert_eq!(u128::from(per_ns(&scale)), (1u128 << 96) / mult);
        }
    }

    /// Where the tick length is a power of two (2^-3 ns: 8 GHz), the 64-bit path's quotient
    /// of `u64::MAX` is one short.
    #[test]
    fn per_ns_of_a_power_of_two() {
        let scale = Scale::new(Frequency::exact_hz(8_000_000_000).unwrap());
        assert_eq!((scale.mult_int(), scale.mult_frac()), (0, 1 << 61));
        assert_eq!(per_ns(&scale), 8 << 32);
    }
}
