//! The atomics the [`crate::Clock`] is built from, and its one publication primitive,
//! [`Published`]: a ring of two generation-checked snapshots (FreeBSD's `timehands`, read
//! the way Linux's seqcount readers are).
//!
//! `loom` replaces the atomics in the model-checking build (`RUSTFLAGS="--cfg loom"`).
//! Snapshot words are `u64`s read and written with relaxed atomics, as two `u32` halves on
//! targets without 64-bit atomics: the generation check rejects any read that raced a write,
//! torn halves included.
//!
//! # The protocol
//!
//! One `seq` counts half-steps: `2k` while version `k` is published and nothing is being
//! written, `2k + 1` while version `k + 1` is being written. Version `k` lives in slot
//! `k mod 2`.
//!
//! - Writer (one at a time, the caller guarantees it): `seq = 2k + 1` (release); release
//!   fence; write slot `(k + 1) mod 2` (relaxed); `seq = 2k + 2` (release).
//! - Reader: `s₁ = seq` (acquire); use slot `(s₁ / 2) mod 2` (relaxed loads); acquire fence;
//!   `s₂ = seq` (relaxed); accept if `s₂ − 2⌊s₁/2⌋ ≤ 2`, i.e. the writer has not started
//!   writing the *next* version into the same slot, which happens at `s = 2k + 3` — or, for
//!   a reader that needs the version to have been the current one throughout, `≤ 1`.
//!
//! If a reader saw any word written after the writer's store of an odd `seq` and release
//! fence, its acquire fence synchronises with that fence, so its `s₂` is at least that odd
//! value and the read is rejected (Boehm, "Can seqlocks get along with programming language
//! memory models?", MSPC 2012). An accepted read therefore saw one version whole. A reader
//! never waits for a writer: the slot it reads is never the one being written, whatever the
//! writer is doing or however long it is stalled; it retries only when two publications
//! overtook it. The odd store is a release store so that a reader which loads it also sees
//! the version before it.

pub(crate) use core::sync::atomic::Ordering;

/// What a reader does while it waits for a writer's store: a CPU hint, or a yield to the
/// model checker (a spin loop would never end under loom).
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// The target's atomics, none of which ever takes a lock: `core`'s where the target has
/// compare-and-swap for them, else (thumbv6m, riscv32imc) `portable-atomic`'s 32-bit ones,
/// whose compare-and-swap runs inside a critical section or with interrupts off (its
/// `critical-section` or `unsafe-assume-single-core` feature) — never portable-atomic's
/// lock table, on which an interrupt handler could spin for ever. 64-bit atomics only where
/// the target has them natively. Both take `core`'s [`Ordering`].
///
/// The Clock's atomics come from here except under loom; `diag` takes its own from here
/// always, as it is outside the model and builds its `WarpCheck` in a `const fn`.
#[cfg_attr(loom, allow(unused_imports))]
pub(crate) mod target {
    #[cfg(target_has_atomic = "64")]
    pub(crate) use core::sync::atomic::AtomicU64;
    #[cfg(any(target_has_atomic = "32", not(feature = "portable-atomic")))]
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicU32};
    #[cfg(all(not(target_has_atomic = "32"), feature = "portable-atomic"))]
    pub(crate) use portable_atomic::{AtomicBool, AtomicU32};
}

// `fence` is `core`'s on every target: it needs no compare-and-swap, and portable-atomic's
// own `fence` is a re-export of it on every target this crate builds for, except that on x86
// its `SeqCst` fence is a cheaper instruction with the same effect.
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};
#[cfg(all(not(loom), target_has_atomic = "64"))]
pub(crate) use target::AtomicU64;
#[cfg(not(loom))]
pub(crate) use target::{AtomicBool, AtomicU32};

/// A 32-bit word that is only ever loaded and stored, never compare-and-swapped: the
/// generation, the halves of a timeline's words, the fast path's gate limit. `core`'s on every
/// target, loom's under loom: where portable-atomic supplies the compare-and-swap (thumbv6m,
/// riscv32imc), its critical-section build takes a critical section for *every* operation,
/// loads included (two calls around each load of the fast path: 20 on the Cortex-M0), where
/// the target's own 32-bit load and store are single-copy atomic.
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::AtomicU32 as PlainU32;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU32 as PlainU32;

/// Whether the Clock's gate words and high-water mark are 64-bit: where the target has
/// 64-bit atomics (and under loom). Elsewhere they are 32-bit, and the Clock reads at most
/// the low 32 bits of a counter, so that every value it keeps in them fits.
pub(crate) const WIDE_ATOMICS: bool = cfg!(any(loom, target_has_atomic = "64"));

/// The Clock's atomics exist where it does (see `lib.rs`).
#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
pub(crate) use clock_words::{GateWord, Mark, PlainWord};

#[cfg(any(loom, feature = "portable-atomic", target_has_atomic = "32"))]
mod clock_words {
    use super::*;

    /// A word of a timeline's gate: an offset from the timeline's base, or a close tag. A
    /// `u64` in the interface; 32 bits wide where the target lacks 64-bit atomics, where the
    /// Clock keeps every value below 2^32 (see [`WIDE_ATOMICS`]).
    pub(crate) struct GateWord {
        #[cfg(any(loom, target_has_atomic = "64"))]
        v: AtomicU64,
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        v: AtomicU32,
    }

    /// `v` in the gate word's width (values are below 2^32 where it is 32-bit).
    #[cfg(not(any(loom, target_has_atomic = "64")))]
    #[inline(always)]
    const fn narrow(v: u64) -> u32 {
        v as u32
    }

    impl GateWord {
        #[cfg(all(not(loom), target_has_atomic = "64"))]
        pub(crate) const fn new(v: u64) -> Self {
            GateWord {
                v: AtomicU64::new(v),
            }
        }
        #[cfg(loom)]
        pub(crate) fn new(v: u64) -> Self {
            GateWord {
                v: AtomicU64::new(v),
            }
        }
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        pub(crate) const fn new(v: u64) -> Self {
            GateWord {
                v: AtomicU32::new(narrow(v)),
            }
        }

        #[inline(always)]
        pub(crate) fn load(&self, order: Ordering) -> u64 {
            #[allow(clippy::useless_conversion)] // u32 -> u64 on 32-bit gates
            u64::from(self.v.load(order))
        }

        #[inline(always)]
        pub(crate) fn store(&self, v: u64, order: Ordering) {
            #[cfg(any(loom, target_has_atomic = "64"))]
            self.v.store(v, order);
            #[cfg(not(any(loom, target_has_atomic = "64")))]
            self.v.store(narrow(v), order);
        }

        /// `v` as a gate word holds it: its low 32 bits where gate words are 32-bit (the
        /// Clock keeps every value below 2^32 there), `v` elsewhere.
        #[inline(always)]
        pub(crate) const fn held(v: u64) -> u64 {
            #[cfg(any(loom, target_has_atomic = "64"))]
            return v;
            #[cfg(not(any(loom, target_has_atomic = "64")))]
            return narrow(v) as u64;
        }

        #[inline]
        pub(crate) fn compare_exchange(
            &self,
            current: u64,
            new: u64,
            success: Ordering,
            failure: Ordering,
        ) -> Result<u64, u64> {
            #[cfg(any(loom, target_has_atomic = "64"))]
            return self.v.compare_exchange(current, new, success, failure);
            #[cfg(not(any(loom, target_has_atomic = "64")))]
            return self
                .v
                .compare_exchange(narrow(current), narrow(new), success, failure)
                .map(u64::from)
                .map_err(u64::from);
        }
    }

    /// A gate word that is only loaded and stored (the fast path's limit): a [`GateWord`]
    /// whose 32-bit form is [`PlainU32`], a native load on every target.
    pub(crate) struct PlainWord {
        #[cfg(any(loom, target_has_atomic = "64"))]
        v: AtomicU64,
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        v: PlainU32,
    }

    impl PlainWord {
        #[cfg(all(not(loom), target_has_atomic = "64"))]
        pub(crate) const fn new(v: u64) -> Self {
            PlainWord {
                v: AtomicU64::new(v),
            }
        }
        #[cfg(loom)]
        pub(crate) fn new(v: u64) -> Self {
            PlainWord {
                v: AtomicU64::new(v),
            }
        }
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        pub(crate) const fn new(v: u64) -> Self {
            PlainWord {
                v: PlainU32::new(narrow(v)),
            }
        }

        #[inline(always)]
        pub(crate) fn load(&self, order: Ordering) -> u64 {
            #[allow(clippy::useless_conversion)] // u32 -> u64 on 32-bit gates
            u64::from(self.v.load(order))
        }

        #[inline(always)]
        pub(crate) fn store(&self, v: u64, order: Ordering) {
            #[cfg(any(loom, target_has_atomic = "64"))]
            self.v.store(v, order);
            #[cfg(not(any(loom, target_has_atomic = "64")))]
            self.v.store(narrow(v), order);
        }
    }

    /// The Clock's high-water mark (nanoseconds; only grows). Used for 64-bit counters only,
    /// which exist for the Clock only where the target has 64-bit atomics: elsewhere it is
    /// empty and reads 0.
    pub(crate) struct Mark {
        #[cfg(any(loom, target_has_atomic = "64"))]
        v: AtomicU64,
    }

    impl Mark {
        #[cfg(all(not(loom), target_has_atomic = "64"))]
        pub(crate) const fn new() -> Self {
            Mark {
                v: AtomicU64::new(0),
            }
        }
        #[cfg(loom)]
        pub(crate) fn new() -> Self {
            Mark {
                v: AtomicU64::new(0),
            }
        }
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        pub(crate) const fn new() -> Self {
            Mark {}
        }

        /// The mark (relaxed: coherence of this one location is all that is needed).
        #[inline(always)]
        pub(crate) fn load(&self) -> u64 {
            #[cfg(any(loom, target_has_atomic = "64"))]
            return self.v.load(Ordering::Relaxed);
            #[cfg(not(any(loom, target_has_atomic = "64")))]
            return 0;
        }

        /// Raises the mark to `ns` if it is below.
        pub(crate) fn raise(&self, ns: u64) {
            #[cfg(any(loom, target_has_atomic = "64"))]
            self.v.fetch_max(ns, Ordering::Relaxed);
            #[cfg(not(any(loom, target_has_atomic = "64")))]
            let _ = ns;
        }
    }
}

/// A `u64` that is read and written with relaxed atomics (possibly as two halves).
pub(crate) struct RelaxedU64 {
    #[cfg(all(target_has_atomic = "64", not(loom)))]
    v: core::sync::atomic::AtomicU64,
    #[cfg(all(target_has_atomic = "64", loom))]
    v: loom::sync::atomic::AtomicU64,
    #[cfg(not(target_has_atomic = "64"))]
    lo: PlainU32,
    #[cfg(not(target_has_atomic = "64"))]
    hi: PlainU32,
}

impl RelaxedU64 {
    #[cfg(all(target_has_atomic = "64", not(loom)))]
    pub(crate) const fn new(v: u64) -> Self {
        RelaxedU64 {
            v: core::sync::atomic::AtomicU64::new(v),
        }
    }
    #[cfg(all(target_has_atomic = "64", loom))]
    pub(crate) fn new(v: u64) -> Self {
        RelaxedU64 {
            v: loom::sync::atomic::AtomicU64::new(v),
        }
    }
    #[cfg(not(target_has_atomic = "64"))]
    pub(crate) const fn new(v: u64) -> Self {
        RelaxedU64 {
            lo: PlainU32::new(v as u32),
            hi: PlainU32::new((v >> 32) as u32),
        }
    }

    #[inline(always)]
    pub(crate) fn load(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        {
            self.v.load(Ordering::Relaxed)
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            let lo = self.lo.load(Ordering::Relaxed) as u64;
            let hi = self.hi.load(Ordering::Relaxed) as u64;
            (hi << 32) | lo
        }
    }

    /// The low 32 bits alone: one load where the word is two halves (the 32-bit fast path
    /// of `Clock::now`, whose words there are below 2^32 or read modulo 2^32).
    #[inline(always)]
    #[cfg_attr(target_has_atomic = "64", allow(dead_code))]
    pub(crate) fn load_low(&self) -> u32 {
        #[cfg(target_has_atomic = "64")]
        {
            self.v.load(Ordering::Relaxed) as u32
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            self.lo.load(Ordering::Relaxed)
        }
    }

    /// The high 32 bits alone (see [`RelaxedU64::load_low`]).
    #[inline(always)]
    #[cfg_attr(target_has_atomic = "64", allow(dead_code))]
    pub(crate) fn load_high(&self) -> u32 {
        #[cfg(target_has_atomic = "64")]
        {
            (self.v.load(Ordering::Relaxed) >> 32) as u32
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            self.hi.load(Ordering::Relaxed)
        }
    }

    /// A word the clock keeps below 2^32 where the target lacks 64-bit atomics (there it reads
    /// counters modulo 2^32, and a tick's whole nanoseconds are below 2^20): its low half
    /// alone there, so that the arithmetic on it is 32-bit; the whole word elsewhere.
    #[inline(always)]
    pub(crate) fn load_narrow(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        {
            self.load()
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            u64::from(self.load_low())
        }
    }

    /// A tick length's fraction (2^-64 ns), whose low half the clock keeps zero where the
    /// target lacks 64-bit atomics (its `in_force`): its high half alone there.
    #[inline(always)]
    pub(crate) fn load_frac(&self) -> u64 {
        #[cfg(target_has_atomic = "64")]
        {
            self.load()
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            u64::from(self.load_high()) << 32
        }
    }

    #[inline(always)]
    pub(crate) fn store(&self, v: u64) {
        #[cfg(target_has_atomic = "64")]
        {
            self.v.store(v, Ordering::Relaxed)
        }
        #[cfg(not(target_has_atomic = "64"))]
        {
            self.lo.store(v as u32, Ordering::Relaxed);
            self.hi.store((v >> 32) as u32, Ordering::Relaxed);
        }
    }
}

/// A version's slot: `N` words, read with [`Published::read`].
pub(crate) type Words<const N: usize> = [RelaxedU64; N];

/// A ring of two snapshots of `N` words, published by one writer at a time and read
/// lock-free (see the module docs for the protocol and its argument).
///
/// Cache-line aligned: the sequence number and the first words of slot 0 share a line.
#[repr(C, align(64))]
pub(crate) struct Published<const N: usize> {
    seq: PlainU32,
    slots: [Words<N>; 2],
}

/// Which version a reader is looking at: the version number (`k`) and its slot (`k mod 2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) number: u32,
    pub(crate) slot: usize,
}

impl<const N: usize> Published<N> {
    /// Version 0 holding `words`.
    #[cfg(not(loom))]
    pub(crate) const fn new(words: [u64; N]) -> Self {
        let mut slots = [
            [const { RelaxedU64::new(0) }; N],
            [const { RelaxedU64::new(0) }; N],
        ];
        let mut i = 0;
        // i < N: in bounds, and no overflow.
        #[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
        while i < N {
            slots[0][i] = RelaxedU64::new(words[i]);
            i += 1;
        }
        Published {
            seq: PlainU32::new(0),
            slots,
        }
    }

    /// Version 0 holding `words` (loom's atomics have no `const fn new`).
    #[cfg(loom)]
    pub(crate) fn new(words: [u64; N]) -> Self {
        Published {
            seq: PlainU32::new(0),
            slots: [
                core::array::from_fn(|i| RelaxedU64::new(words[i])),
                core::array::from_fn(|_| RelaxedU64::new(0)),
            ],
        }
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> &Words<N> {
        // The choice that is cheapest where it is made (`read_ratio` on an AMD EPYC guest;
        // `cargo xtask qemu cost` on a Cortex-M4/M0). On a 64-bit core, one of two addresses
        // per word (x86: a conditional move each, off the critical path): an address computed
        // from the parity needed a multiply by the slot's 120 bytes before the first load,
        // and the plain read cost 1.07x the raw read instead of 1.02-1.04x. On a 32-bit core,
        // the computed address: the choice was a branch and two copies of every load
        // (Clock::now 41 instructions instead of 28 on the M4, 152 instead of 133 on the M0).
        let [even, odd] = &self.slots;
        if cfg!(target_pointer_width = "64") {
            if i & 1 == 0 {
                even
            } else {
                odd
            }
        } else {
            // `i & 1` is in bounds.
            self.slots.get(i & 1).unwrap_or(even)
        }
    }

    /// Runs `f` on one whole published version and returns its result. `f` may run more
    /// than once (it is rerun when two publications overtook it), and its result is used
    /// only from a run that saw one version whole; `f` must not rely on its words being
    /// consistent for anything it *stores* (tag such stores with the version).
    ///
    /// `f` also says whether its result needs the version to have been the *current* one
    /// until after `f` ran (`true`), or only to have been read whole (`false`); a run that
    /// needs it and was overtaken by a publication is rerun.
    #[inline(always)]
    pub(crate) fn read<R>(&self, mut f: impl FnMut(Version, &Words<N>) -> (R, bool)) -> R {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            hook(Point::ReadSeq);
            let number = s1 >> 1;
            let slot = (number & 1) as usize;
            let (r, current) = f(Version { number, slot }, self.slot(slot));
            fence(Ordering::Acquire);
            let s2 = self.seq.load(Ordering::Relaxed);
            // Version `number` is current until `seq` reaches 2·number + 2, and its slot
            // whole until 2·number + 3.
            if s2.wrapping_sub(s1 & !1) <= if current { 1 } else { 2 } {
                return r;
            }
            hook(Point::ReadRetry);
            spin_loop();
        }
    }

    /// The start of a reader's fast path, spelled out (for `Clock::now`, whose branches
    /// then fold into one): the version published now, its words, and the sequence value
    /// that [`Published::unchanged`] checks afterwards.
    #[inline(always)]
    pub(crate) fn begin(&self) -> (Version, &Words<N>, u32) {
        let s1 = self.seq.load(Ordering::Acquire);
        hook(Point::ReadSeq);
        let number = s1 >> 1;
        let slot = (number & 1) as usize;
        (Version { number, slot }, self.slot(slot), s1)
    }

    /// Whether nothing was published, nor begun, since [`Published::begin`] returned `s1`:
    /// stricter than [`Published::try_read`]'s check (a write that began meanwhile fails it, and the
    /// reader takes its slow path), and one compare on the fast path.
    #[inline(always)]
    pub(crate) fn unchanged(&self, s1: u32) -> bool {
        fence(Ordering::Acquire);
        self.seq.load(Ordering::Relaxed) == s1
    }

    /// One attempt of [`Published::read`] for a reader's fast path: `f` runs once and may
    /// decline (`None`); its result is returned only if the version it saw was current
    /// throughout. `None` otherwise: take the full `read`.
    #[inline(always)]
    pub(crate) fn try_read<R>(&self, f: impl FnOnce(Version, &Words<N>) -> Option<R>) -> Option<R> {
        let s1 = self.seq.load(Ordering::Acquire);
        hook(Point::ReadSeq);
        let number = s1 >> 1;
        let slot = (number & 1) as usize;
        let r = f(Version { number, slot }, self.slot(slot));
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        if s2.wrapping_sub(s1 & !1) <= 2 {
            r
        } else {
            None
        }
    }

    /// The version published now, with its words, for the one writer (which alone changes
    /// them, so relaxed loads see its own last stores).
    pub(crate) fn current(&self) -> (Version, &Words<N>) {
        let number = self.seq.load(Ordering::Relaxed) >> 1;
        let slot = (number & 1) as usize;
        (Version { number, slot }, self.slot(slot))
    }

    /// Writes version `current + 1` into the other slot and publishes it. `fill` writes the
    /// words (and anything the caller keeps beside them for that slot). One writer at a time.
    #[inline]
    pub(crate) fn publish(&self, fill: impl FnOnce(Version, &Words<N>)) -> Version {
        let s = self.seq.load(Ordering::Relaxed) & !1;
        let next = s.wrapping_add(2);
        let number = next >> 1;
        let version = Version {
            number,
            slot: (number & 1) as usize,
        };
        self.seq.store(s | 1, Ordering::Release);
        fence(Ordering::Release);
        hook(Point::WriteOpen);
        fill(version, self.slot(version.slot));
        hook(Point::WriteFilled);
        self.seq.store(next, Ordering::Release);
        version
    }
}

/// Places in the clock's protocol where the interleaving test may stall a reader or the
/// writer. Debug builds only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[doc(hidden)]
#[repr(u32)]
pub enum Point {
    /// Reader: after loading `seq`, before the counter read.
    ReadSeq,
    /// Reader: after the counter read, before the slot's words.
    ReadCounter,
    /// Reader: before its second `seq` load failed a read (about to retry).
    ReadRetry,
    /// Reader (slow path): about to propose a close point.
    ReadHelp,
    /// Reader (slow path): about to latch a missed deadline.
    ReadLatch,
    /// Reader: about to read the counter again to confirm a reading far past the mark.
    ReadConfirm,
    /// Writer: holds the lock, before its counter read.
    WriteLocked,
    /// Writer: after its counter read, before closing the current timeline.
    WriteRead,
    /// Writer: judged its reading against the current timeline (not latched, not late), about
    /// to close it.
    WriteJudged,
    /// Writer: announced the close, before reading the counter for its proposal.
    WriteClosing,
    /// Writer: after the close is decided, before publishing.
    WriteClosed,
    /// Writer: odd `seq` stored, before filling the slot.
    WriteOpen,
    /// Writer: slot filled, before the even `seq` store.
    WriteFilled,
}

/// Calls the installed test hook at `point` (debug builds with `std` only; nothing otherwise).
#[inline(always)]
pub(crate) fn hook(point: Point) {
    #[cfg(all(debug_assertions, feature = "std", not(loom)))]
    test_hook::call(point);
    #[cfg(not(all(debug_assertions, feature = "std", not(loom))))]
    let _ = point;
}

/// The interleaving test's hook: a function called at every [`Point`]. Debug builds with
/// `std` only.
#[cfg(all(debug_assertions, feature = "std", not(loom)))]
#[doc(hidden)]
pub mod test_hook {
    use super::Point;
    use core::sync::atomic::{AtomicBool, Ordering};
    use std::sync::RwLock;

    static INSTALLED: AtomicBool = AtomicBool::new(false);
    static HOOK: RwLock<Option<fn(Point)>> = RwLock::new(None);

    /// Installs `f` (or removes the hook with `None`). Process-wide: a test that installs
    /// one must be alone in its test binary.
    pub fn set(f: Option<fn(Point)>) {
        if let Ok(mut h) = HOOK.write() {
            *h = f;
        }
        INSTALLED.store(f.is_some(), Ordering::SeqCst);
    }

    #[inline(always)]
    pub(crate) fn call(point: Point) {
        if INSTALLED.load(Ordering::Relaxed) {
            let f = HOOK.read().ok().and_then(|h| *h);
            if let Some(f) = f {
                f(point);
            }
        }
    }
}
