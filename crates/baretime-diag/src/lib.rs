//! Diagnostics: what a counter costs to read, how its consecutive reads step, and whether
//! it agrees across CPUs.
//!
//! - [`ReadStats::measure`]: read cost (ticks per read over a tight loop), a log2 histogram of
//!   consecutive-read deltas (the idea of PostgreSQL's `pg_test_timing`), backwards steps,
//!   zero deltas (a stuck or coarse counter), minimum and maximum delta.
//! - [`WarpCheck`]: does the counter agree across CPUs? A token passes between the CPUs in a
//!   schedule that compares every ordered pair, so that every check compares a read on one CPU
//!   with a read just before on another (see [`WarpCheck`]'s docs). Each CPU runs
//!   [`WarpCheck::participate`] (no threads of our own; every wait bounded by a
//!   [`Patience`]); [`WarpReport::verdict`] says `Consistent` only after
//!   [`CONSISTENT_MIN_CHECKS_PER_PAIR`] checks of every pair. `warp_check_threads` (feature
//!   `std`) runs it on host threads, each pinned to its own CPU where the OS allows, each
//!   wait bounded by `StdPatience`.
//!
//! No allocation, integer arithmetic only. [`ReadStats`] uses no atomics; [`WarpCheck`] uses
//! 32-bit atomics, with read-modify-write only to join, so it builds wherever the target has
//! compare-and-swap on 32 bits (Cortex-M3 and up, RISC-V with the A extension) and, with the
//! feature `portable-atomic` and a way to provide compare-and-swap, on targets without it
//! (Cortex-M0/M0+, RISC-V without A).
//!
//! Wrapping counters ([`Counter::bits`] < 64) are compared modulo their width: a step of more
//! than half the range forwards is taken as a step backwards.
//!
//! No panic for any counter values (and any width a [`Counter`] states): the crate's lints
//! (in lib.rs) deny unchecked arithmetic and indexing outside tests.
//!
//! Every module is private and each item has one path, the list below.

#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::float_arithmetic
    )
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(all(not(test), feature = "std"))]
extern crate std;

use core::hint::black_box;

use baretime::{Counter, Frequency, Width};

#[cfg(feature = "defmt")]
mod format;
// The OS call the threaded warp check needs: the crate's one `unsafe`, not hardware.
#[cfg(all(feature = "std", target_os = "linux"))]
mod pin;
#[cfg(feature = "std")]
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
mod threads;
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
mod warp;

/// The target's 32-bit atomics, which never take a lock: `core`'s where the target has
/// compare-and-swap, portable-atomic's (a critical section, or interrupts off) elsewhere.
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
mod atomic {
    #[cfg(target_has_atomic = "32")]
    pub(crate) use core::sync::atomic::AtomicU32;
    pub(crate) use core::sync::atomic::Ordering;
    #[cfg(not(target_has_atomic = "32"))]
    pub(crate) use portable_atomic::AtomicU32;
}

#[cfg(feature = "std")]
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
pub use threads::{warp_check_threads, ThreadedWarp};
#[cfg(feature = "std")]
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
pub use warp::StdPatience;
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
pub use warp::{
    Participation, Patience, Spins, TickBudget, WarpCheck, WarpError, WarpReport, WarpVerdict,
    CONSISTENT_MIN_CHECKS_PER_PAIR,
};

// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Buckets in a [`Histogram`]: one for 0 and one per power of two up to 2^63.
const HISTOGRAM_BUCKETS: usize = 65;

/// A log2 histogram of tick deltas: bucket 0 counts deltas of 0, bucket `k` ≥ 1 counts
/// deltas in `2^(k-1) ..= 2^k - 1`. Counts saturate at `u32::MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Histogram {
    counts: [u32; HISTOGRAM_BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub const fn new() -> Histogram {
        Histogram {
            counts: [0; HISTOGRAM_BUCKETS],
        }
    }

    /// The bucket a delta falls in.
    pub const fn bucket_of(delta: u64) -> usize {
        // leading_zeros ≤ 64 = BITS: no wrap; the result is 0..=64.
        u64::BITS.wrapping_sub(delta.leading_zeros()) as usize
    }

    /// The smallest and largest delta of bucket `k` (`None` for `k` ≥ 65, past the last).
    pub const fn bucket_range(k: usize) -> Option<(u64, u64)> {
        match k {
            0 => Some((0, 0)),
            1..=64 => {
                // k - 1 ≤ 63: the shift is in range, and lo - 1 + lo = 2^k - 1 ≤ u64::MAX.
                let lo = 1u64.wrapping_shl((k as u32).wrapping_sub(1));
                Some((lo, lo.wrapping_sub(1).wrapping_add(lo)))
            }
            _ => None,
        }
    }

    /// Counts one delta.
    pub fn record(&mut self, delta: u64) {
        // bucket_of is at most 64 < HISTOGRAM_BUCKETS: the bucket always exists.
        if let Some(c) = self.counts.get_mut(Self::bucket_of(delta)) {
            *c = c.saturating_add(1);
        }
    }

    /// The counts, bucket by bucket: 65 of them, bucket 0 first.
    pub const fn counts(&self) -> &[u32; HISTOGRAM_BUCKETS] {
        &self.counts
    }

    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        // At most 65 × (2^32 - 1): no overflow, but say so without a panicking `sum`.
        self.counts
            .iter()
            .fold(0u64, |sum, &c| sum.saturating_add(u64::from(c)))
    }

    /// The non-empty buckets as `(smallest delta, largest delta, count)`, smallest first.
    pub fn nonzero(&self) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c != 0)
            .filter_map(|(k, &c)| Self::bucket_range(k).map(|(lo, hi)| (lo, hi, c)))
    }

    /// An upper bound on the `permille`/1000 quantile: the largest delta of the first bucket
    /// at which the running count reaches that share (`None` when empty).
    pub fn quantile_upper_bound(&self, permille: u32) -> Option<u64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let permille = u64::from(permille.min(1000));
        // total < 2^39 (65 buckets × 2^32): × 1000 fits u64.
        let need = total.saturating_mul(permille).div_ceil(1000).max(1);
        let mut seen = 0u64;
        for (k, &c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(u64::from(c));
            if seen >= need {
                return Self::bucket_range(k).map(|(_, hi)| hi);
            }
        }
        None
    }
}

/// The result of [`ReadStats::measure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ReadStats {
    /// Reads in each of the two loops (the tight loop and the delta loop).
    pub reads: u32,
    /// Ticks from the first to the last read of the tight loop of `reads` back-to-back reads
    /// (modulo the counter width).
    pub tight_loop_ticks: u64,
    /// Deltas of 0: the counter did not advance between two reads (stuck, or coarser than a
    /// read).
    pub zero_deltas: u32,
    /// Longest run of consecutive zero deltas.
    pub longest_stuck_run: u32,
    /// Reads that returned less than the read before.
    pub backwards_steps: u32,
    /// Largest backwards step, in ticks (0 without one).
    pub max_backwards_ticks: u64,
    /// Smallest forward delta (0 when there was none, or when a delta was 0).
    pub min_delta_ticks: u64,
    /// Smallest non-zero forward delta: the counter's effective resolution, read cost included.
    pub min_nonzero_delta_ticks: Option<u64>,
    /// Largest forward delta (an interrupt, SMI or preemption shows up here).
    pub max_delta_ticks: u64,
    /// Forward deltas of the delta loop, by power of two. Backwards steps are not in it.
    pub histogram: Histogram,
}

impl ReadStats {
    /// Reads `counter` `reads` + 1 times back to back (read cost), then `reads` + 1 times
    /// more, classifying each of the `reads` consecutive deltas.
    ///
    /// Takes as long as 2 × `reads` counter reads plus a few instructions each; no timing is
    /// asserted, no allocation made. The reads are not reordered or elided by the compiler
    /// ([`core::hint::black_box`]).
    pub fn measure<C: Counter + ?Sized>(counter: &C, reads: u32) -> ReadStats {
        let width = Width::of(counter);
        let first = counter.ticks();
        let mut last = first;
        for _ in 0..reads {
            last = black_box(counter.ticks());
        }
        let tight_loop_ticks = width.delta(first, last);

        let mut s = ReadStats {
            reads,
            tight_loop_ticks,
            zero_deltas: 0,
            longest_stuck_run: 0,
            backwards_steps: 0,
            max_backwards_ticks: 0,
            min_delta_ticks: u64::MAX,
            min_nonzero_delta_ticks: None,
            max_delta_ticks: 0,
            histogram: Histogram::new(),
        };
        let mut run = 0u32;
        let mut prev = counter.ticks();
        for _ in 0..reads {
            let now = black_box(counter.ticks());
            let step = width.elapsed(prev, now);
            let back_ticks = width.delta(now, prev); // how far behind, if it is
            prev = now;
            let Some(delta) = step else {
                s.backwards_steps = s.backwards_steps.saturating_add(1);
                s.max_backwards_ticks = s.max_backwards_ticks.max(back_ticks);
                run = 0;
                continue;
            };
            s.histogram.record(delta);
            s.min_delta_ticks = s.min_delta_ticks.min(delta);
            s.max_delta_ticks = s.max_delta_ticks.max(delta);
            if delta == 0 {
                // Both count at most `reads` (a u32) events: saturation never triggers.
                s.zero_deltas = s.zero_deltas.saturating_add(1);
                run = run.saturating_add(1);
                s.longest_stuck_run = s.longest_stuck_run.max(run);
            } else {
                run = 0;
                s.min_nonzero_delta_ticks =
                    Some(s.min_nonzero_delta_ticks.map_or(delta, |m| m.min(delta)));
            }
        }
        if s.min_delta_ticks == u64::MAX {
            s.min_delta_ticks = 0;
        }
        s
    }

    /// Read cost in thousandths of a tick per read (0 for 0 reads).
    pub fn millitick_per_read(&self) -> u64 {
        // < 2^64 × 10^3: exact in u128; no reads, no cost.
        let v = u128::from(self.tight_loop_ticks)
            .saturating_mul(1000)
            .checked_div(u128::from(self.reads))
            .unwrap_or(0);
        saturate_u64(v)
    }

    /// Read cost in picoseconds per read at the counter rate `frequency`, rounded to nearest
    /// (0 for 0 reads).
    pub fn read_cost_ps(&self, frequency: &Frequency) -> u64 {
        // ps = ticks × 10^12 / (reads × Hz) = ticks × 10^15 / (reads × mHz).
        // num < 2^64 × 2^50, den < 2^32 × 2^57: both exact in u128, and so is num + den / 2.
        let num = u128::from(self.tight_loop_ticks).saturating_mul(1_000_000_000_000_000);
        let den = u128::from(self.reads).saturating_mul(u128::from(frequency.as_millihz()));
        match num.saturating_add(den / 2).checked_div(den) {
            Some(ps) => saturate_u64(ps),
            None => 0,
        }
    }

    /// True when no read went backwards.
    pub fn is_monotonic(&self) -> bool {
        self.backwards_steps == 0
    }
}

/// `v` as a `u64`, saturating at `u64::MAX`.
pub(crate) const fn saturate_u64(v: u128) -> u64 {
    if v > u64::MAX as u128 {
        u64::MAX
    } else {
        v as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baretime::{Accuracy, FnCounter, Source};
    use std::cell::Cell;

    /// A counter whose n-th read (from 0) returns `f(n)`.
    fn scripted(f: impl Fn(u64) -> u64) -> FnCounter<impl Fn() -> u64> {
        let n = Cell::new(0u64);
        FnCounter::new(
            move || {
                let i = n.get();
                n.set(i + 1);
                f(i)
            },
            64,
        )
    }

    #[test]
    fn histogram_buckets() {
        assert_eq!(Histogram::bucket_of(0), 0);
        assert_eq!(Histogram::bucket_of(1), 1);
        assert_eq!(Histogram::bucket_of(2), 2);
        assert_eq!(Histogram::bucket_of(3), 2);
        assert_eq!(Histogram::bucket_of(4), 3);
        assert_eq!(Histogram::bucket_of(u64::MAX), 64);
        assert_eq!(Histogram::bucket_range(0), Some((0, 0)));
        assert_eq!(Histogram::bucket_range(3), Some((4, 7)));
        assert_eq!(Histogram::bucket_range(64), Some((1 << 63, u64::MAX)));
        assert_eq!(Histogram::bucket_range(65), None);
        for d in [0u64, 1, 5, 1000, u64::MAX / 3, u64::MAX] {
            let (lo, hi) = Histogram::bucket_range(Histogram::bucket_of(d)).unwrap();
            assert!(lo <= d && d <= hi, "{d}");
        }
    }

    #[test]
    fn histogram_quantiles() {
        let mut h = Histogram::new();
        assert_eq!(h.quantile_upper_bound(500), None);
        for _ in 0..90 {
            h.record(20); // bucket 5: 16..=31
        }
        for _ in 0..10 {
            h.record(5000); // bucket 13: 4096..=8191
        }
        assert_eq!(h.total(), 100);
        assert_eq!(h.quantile_upper_bound(500), Some(31));
        assert_eq!(h.quantile_upper_bound(900), Some(31));
        assert_eq!(h.quantile_upper_bound(901), Some(8191));
        assert_eq!(h.quantile_upper_bound(5000), Some(8191));
        let buckets: std::vec::Vec<_> = h.nonzero().collect();
        assert_eq!(buckets, [(16, 31, 90), (4096, 8191, 10)]);
    }

    #[test]
    fn steady_counter() {
        let c = scripted(|i| 1_000 + i * 7);
        let s = ReadStats::measure(&c, 100);
        assert_eq!(s.tight_loop_ticks, 700);
        assert_eq!(s.millitick_per_read(), 7_000);
        assert_eq!((s.min_delta_ticks, s.max_delta_ticks), (7, 7));
        assert_eq!(s.min_nonzero_delta_ticks, Some(7));
        assert_eq!(s.histogram.counts()[3], 100);
        assert_eq!(s.histogram.total(), 100);
        assert_eq!((s.zero_deltas, s.backwards_steps), (0, 0));
        assert!(s.is_monotonic());
        // 7 ticks per read at 1 GHz: 7 ns.
        let ghz = Frequency::from_hz(1_000_000_000, Source::User, Accuracy::Exact).unwrap();
        assert_eq!(s.read_cost_ps(&ghz), 7_000);
    }

    #[test]
    fn stuck_counter() {
        let c = FnCounter::new(|| 42, 64);
        let s = ReadStats::measure(&c, 50);
        assert_eq!(s.tight_loop_ticks, 0);
        assert_eq!(s.zero_deltas, 50);
        assert_eq!(s.longest_stuck_run, 50);
        assert_eq!(s.histogram.counts()[0], 50);
        assert_eq!(s.min_nonzero_delta_ticks, None);
        assert_eq!((s.min_delta_ticks, s.max_delta_ticks), (0, 0));
        assert!(s.is_monotonic());
    }

    #[test]
    fn counter_with_backwards_steps_and_stalls() {
        // Delta loop reads are n = 11..=21 (the tight loop takes 0..=10).
        // Every read with n % 5 == 0 steps back 100 ticks; n in 17..=19 repeat n = 16.
        let c = scripted(|n| {
            let n = if (17..=19).contains(&n) { 16 } else { n };
            1_000 + n * 10 - if n % 5 == 0 { 100 } else { 0 }
        });
        let s = ReadStats::measure(&c, 10);
        // n = 15 and 20 step back (delta -90); 16 and 21 step forward 110.
        assert_eq!(s.backwards_steps, 2);
        assert_eq!(s.max_backwards_ticks, 90);
        assert_eq!(s.zero_deltas, 3);
        assert_eq!(s.longest_stuck_run, 3);
        assert_eq!(s.max_delta_ticks, 110);
        assert_eq!(s.min_delta_ticks, 0);
        assert_eq!(s.min_nonzero_delta_ticks, Some(10));
        assert_eq!(s.histogram.total(), 8);
        assert!(!s.is_monotonic());
    }

    #[test]
    fn narrow_counter_wraps_without_backwards_steps() {
        let c = FnCounter::new(
            {
                let n = Cell::new(0u64);
                move || {
                    n.set(n.get() + 1);
                    (n.get() * 1_000) & 0xFFFF
                }
            },
            16,
        );
        let s = ReadStats::measure(&c, 500);
        assert_eq!(s.backwards_steps, 0);
        assert_eq!((s.min_delta_ticks, s.max_delta_ticks), (1_000, 1_000));
        assert_eq!(s.tight_loop_ticks, (500 * 1_000) & 0xFFFF);
    }

    #[test]
    fn zero_reads() {
        let s = ReadStats::measure(&FnCounter::new(|| 5, 64), 0);
        assert_eq!(s.millitick_per_read(), 0);
        let ghz = Frequency::from_hz(1_000_000_000, Source::User, Accuracy::Exact).unwrap();
        assert_eq!(s.read_cost_ps(&ghz), 0);
        assert_eq!(s.histogram.total(), 0);
    }
}
