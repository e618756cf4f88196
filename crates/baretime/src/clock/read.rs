//! The fast path of [`Clock::now`]: what a reviewer audits on each target.

use super::*;

impl<C: Counter> Clock<C> {
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
        // Nothing published nor begun since `begin`: one compare (a write under way sends the
        // reader to the slow path, which accepts a version still whole).
        let open = before_end & self.timeline.unchanged(s1);
        // 64-bit counters: a time in [mark, mark + MARK_GRANULE_NS) is returned as it is
        // (a subtraction and a compare); anything else goes past the mark.
        if open & ((width != Width::FULL) | (ns.wrapping_sub(mark) < MARK_GRANULE_NS)) {
            return Instant::from_nanos(ns);
        }
        Instant::from_nanos(self.now_cold(width, mark, open.then_some(ns)))
    }

    /// The counter's time on `version`'s timeline if the fast path applies (the timeline
    /// open and the reading before its end).
    #[inline(always)]
    pub(super) fn read_fast(
        &self,
        width: Width,
        version: Version,
        words: &Words<WORDS>,
    ) -> Option<u64> {
        let (before_end, ns) = self.convert(width, version, words);
        before_end.then_some(ns)
    }

    /// A counter read and its time on `version`'s timeline, and whether the reading is before
    /// the timeline's end as it stood after the read (the time is computed either way: the
    /// fast path branches once, on every check together).
    #[inline(always)]
    pub(super) fn convert(
        &self,
        width: Width,
        version: Version,
        words: &Words<WORDS>,
    ) -> (bool, u64) {
        let t = self.counter.ticks();
        hook(Point::ReadCounter);
        let [b, base_ns, int, frac, ..] = words;
        #[cfg(any(loom, target_has_atomic = "64"))]
        {
            let (b, base_ns, int, frac) = (b.load(), base_ns.load(), int.load(), frac.load());
            // After the counter read: a reader that passes here with the timeline open read
            // its counter before any close of it became visible.
            let lim = self.gate(version.slot).lim.load(Ordering::Relaxed);
            let d = width.delta(b, t);
            (d < lim, advance(base_ns, d, int, frac))
        }
        #[cfg(not(any(loom, target_has_atomic = "64")))]
        {
            // Without 64-bit atomics the clock reads counters modulo 2^32 (`Clock::width`), so
            // the base's low half is all a distance needs; the tick length's integer part is
            // below 2^32 (asserted below) and its fraction is kept to 2^-32 ns there
            // (`in_force`): one load each, 32 × 32 → 64-bit multiplies.
            let (b, base_ns, int, frac) = (
                b.load_low(),
                base_ns.load(),
                int.load_low(),
                frac.load_high(),
            );
            let lim = self.gate(version.slot).lim.load(Ordering::Relaxed);
            #[allow(clippy::cast_possible_truncation)] // modulo 2^32: the width is ≤ 32 bits
            let d = (t as u32).wrapping_sub(b) & (width.mask() as u32);
            (u64::from(d) < lim, advance_narrow(base_ns, d, int, frac))
        }
    }
}

/// The tick length's integer part is below 2^32 for every rate the crate accepts (at most
/// 10^6 ns, at [`Frequency::MIN_HZ`]): the 32-bit fast path loads its low half alone.
const _: () = assert!(
    Scale::new(Frequency::SLOWEST).mult_int() < 1 << 32
        && Scale::new(Frequency::FASTEST).mult_int() == 0
);

/// [`advance`] on targets without 64-bit atomics: for a distance below 2^32 and a tick length
/// `int + frac_hi / 2^32` ns (`in_force`: its fraction's low half is zero there), in two
/// 32 × 32 → 64-bit multiplies where the `u128` product is a library call:
/// `base_ns + d × int + ⌊d × frac_hi / 2^32⌋`, which is `advance`'s `⌊d × (int + frac / 2^64)⌋`
/// exactly when `frac`'s low half is zero.
///
/// No overflow: `d × int < 2^32 × 2^20`, `⌊d × frac_hi / 2^32⌋ < 2^32`. The sum with `base_ns`
/// wraps instead of saturating: a writer opens the fast path (`Gate::open`) only for a
/// timeline whose time at its deadline does not saturate, and a time computed on a closed
/// fast path is not used.
#[cfg(any(test, not(any(loom, target_has_atomic = "64"))))]
#[inline(always)]
#[allow(clippy::arithmetic_side_effects)] // bounds proven above
pub(super) fn advance_narrow(base_ns: u64, d: u32, int: u32, frac_hi: u32) -> u64 {
    let d = u64::from(d);
    let part = (d * u64::from(frac_hi)) >> 32;
    base_ns.wrapping_add(d * u64::from(int) + part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The 32-bit fast path's arithmetic is `advance`'s, exactly, for every distance below
        /// 2^32 and every rate the crate accepts as the clock keeps it there (`in_force`).
        #[test]
        fn advance_narrow_is_advance(
            base_ns in any::<u64>(),
            d in any::<u32>(),
            millihz in Frequency::MIN_HZ * 1000..=Frequency::MAX_HZ * 1000,
        ) {
            let frequency = Frequency::from_millihz(
                millihz,
                crate::frequency::Source::User,
                crate::frequency::Accuracy::Exact,
            )
            .unwrap();
            let scale = Scale::new(frequency).frac_rounded_up_to_2_pow_32();
            let (int, frac) = (scale.mult_int(), scale.mult_frac());
            prop_assert_eq!(frac & 0xffff_ffff, 0);
            // At most 2^-32 ns longer than the exact tick, never shorter.
            let exact = Scale::new(frequency);
            prop_assert!((int, frac) >= (exact.mult_int(), exact.mult_frac()));
            let wide = advance(base_ns, u64::from(d), int, frac);
            let narrow = advance_narrow(base_ns, d, int as u32, (frac >> 32) as u32);
            if wide < u64::MAX {
                prop_assert_eq!(narrow, wide);
            }
        }
    }
}
