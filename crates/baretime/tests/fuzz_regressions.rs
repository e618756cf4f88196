//! Regression tests for what the fuzz targets (fuzz/, `cargo xtask fuzz`) found, each input
//! inlined: the operations the fuzz input decoded to (`cargo fuzz fmt`), replayed through the
//! public API as the target did, with the target's assertion.
//!
//! Both are in the `clock` target's reset mode (a 64-bit counter that may be reset far
//! behind everything it has read, as a TSC is on resume, until `rebase`): while the counter
//! is behind, `now()` stands still at the clock's high-water mark plus two granules, which
//! must be no earlier than anything it has returned (`Clock`'s docs). Each time the
//! mark had stopped following the readings, so the standing-still value was older than a
//! reading already handed out.

use std::cell::Cell;

use baretime::{Accuracy, Clock, Counter, Frequency, Instant, Source};

/// A 64-bit counter the test sets by hand.
struct Manual(Cell<u64>);

impl Counter for Manual {
    fn ticks(&self) -> u64 {
        self.0.get()
    }
    fn bits(&self) -> u32 {
        64
    }
}

/// `now()`, asserting it is no earlier than `last` (then raised to it).
fn read<C: Counter>(clock: &Clock<C>, last: &mut Instant, at: &str) {
    let t = clock.now();
    assert!(t >= *last, "{at}: time went back: {t:?} after {last:?}");
    *last = t;
}

/// Fuzz input `Input { bits: 139, mode: 247, start_value: 18446744070068866047, uninit:
/// false, first_millihz: u64::MAX, read_after_each: true, ops: [Now, Pass([
/// 18446744070102450175, 72057594037927935]), Reset(65531)] }` (crash-838d3f5a). The
/// counter starts 3.6 × 10^9 ticks before 2^64 and wraps through it; the mark's next counter
/// value had saturated at 2^64 − 1, so no reading after the wrap raised the mark again:
/// after the reset time stood still at 2.1 ms, after 19.4 s had been read. Fixed by comparing
/// the counter with the mark's next value modulo 2^64 (and setting it at start).
#[test]
fn mark_follows_a_counter_that_wraps_through_2_pow_64() {
    // The target's rate for first_millihz = u64::MAX in reset mode: f0 + (u64::MAX >> 1) % f0.
    let lo = Frequency::MIN_HZ * 1000;
    let f0 = lo + u64::MAX % (Frequency::MAX_HZ * 1000 / 2 - lo);
    let millihz = f0 + (u64::MAX >> 1) % f0;
    let rate = Frequency::from_millihz(millihz, Source::User, Accuracy::Exact).unwrap();
    let start = 18_446_744_070_068_866_047u64;
    let c = Manual(Cell::new(start));
    let clock = Clock::new(&c, rate);
    let mut last = Instant::ZERO;
    read(&clock, &mut last, "Now");
    read(&clock, &mut last, "read after Now");
    // Pass: the next read takes the first step, capped at 2^40 ticks (reset mode).
    c.0.set(start.wrapping_add(1 << 40));
    read(&clock, &mut last, "read after Pass");
    assert!(last.as_nanos() > 19_000_000_000, "{last:?}");
    // Reset(65531): 2^32 + 65531 ticks behind the start value.
    c.0.set(start.wrapping_sub((1 << 32) + 65_531));
    read(&clock, &mut last, "read after Reset");
}

/// Found while writing the `clock` target's reset mode (by reading `rebase` and the mark):
/// reset, rebase, run on, reset again. The rebase
/// re-based the clock on a lower counter value, but the mark's next counter value stayed
/// where the counter had been before the reset, so readers never raised the mark again:
/// after the second reset time stood still at the first rebase's value, 100 s back. Fixed
/// by setting the next value to the new base whenever a write found the counter behind (or
/// late).
#[test]
fn second_reset_after_a_rebase_does_not_take_time_back() {
    let hz = |hz| Frequency::exact_hz(hz).unwrap();
    let c = Manual(Cell::new(1_000_000_000_000));
    let clock = Clock::new(&c, hz(1_000_000_000));
    let mut last = Instant::ZERO;
    read(&clock, &mut last, "start");
    c.0.set(c.0.get() + 10_000_000_000); // 10 s
    read(&clock, &mut last, "10 s");
    c.0.set(1_000_000); // reset on resume
    read(&clock, &mut last, "behind");
    clock.rebase(Instant::ZERO, hz(1_000_000_000)).unwrap();
    read(&clock, &mut last, "rebased");
    c.0.set(c.0.get() + 100_000_000_000); // 100 s more
    read(&clock, &mut last, "100 s after the rebase");
    c.0.set(1_000); // reset again
    read(&clock, &mut last, "behind again");
    clock.rebase(Instant::ZERO, hz(1_000_000_000)).unwrap();
    read(&clock, &mut last, "rebased again");
}

/// Fuzz input (crash-b410d695, `cargo xtask fuzz 60`): `Input { bits: 112, mode: 112,
/// start_value: 7595718147997985129, uninit: false, first_millihz: 18385672241628391211,
/// read_after_each: false, ops: [Now, Rebase { at_ns: 13816973012072644543, millihz:
/// 13816973012072644543 }, Pass([32263]), Now, Now, Now, Reset(7523660585271276467), Pass(..),
/// Pass(..), Now, Now, Now] }`, here at 1 GHz with round numbers. A rebase moved time far
/// forward (to its `at`) but left the mark where it was; readings less than a granule of
/// ticks later did not raise it, so after a reset time stood still at the rebase's `at`,
/// 765 ns before a reading already handed out. Fixed by setting the mark's next counter value
/// to the new base on every rebase, so that the first reading after it raises the mark.
#[test]
fn reset_soon_after_a_forward_rebase_does_not_take_time_back() {
    let hz = |hz| Frequency::exact_hz(hz).unwrap();
    let c = Manual(Cell::new(1_000_000_000_000));
    let clock = Clock::new(&c, hz(1_000_000_000));
    let mut last = Instant::ZERO;
    read(&clock, &mut last, "start");
    let at = Instant::from_nanos(1_000_000_000_000_000);
    clock.rebase(at, hz(1_000_000_000)).unwrap();
    c.0.set(c.0.get() + 32_263);
    read(&clock, &mut last, "after the rebase");
    assert!(last > at, "{last:?}");
    c.0.set(1_000_000); // reset
    read(&clock, &mut last, "behind");
}
