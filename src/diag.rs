//! Diagnostics: what a counter costs to read, how its consecutive reads step, and whether
//! it agrees across CPUs.
//!
//! - [`ReadStats::measure`]: read cost (ticks per read over a tight loop), a log2 histogram of
//!   consecutive-read deltas (the idea of PostgreSQL's `pg_test_timing`), backwards steps,
//!   zero deltas (a stuck or coarse counter), minimum and maximum delta.
//! - [`WarpCheck`]: Linux's `check_tsc_warp` idea without threads of our own. Each CPU runs
//!   [`WarpCheck::participate`] on one shared `WarpCheck`; in turn, under a small spin lock,
//!   each reads the counter and checks that the value is not below the last value *any* CPU
//!   read. A read that happens after another CPU's read must not be smaller: if it is, the
//!   counters of the two CPUs disagree (a "warp"), and timestamps taken on different CPUs
//!   cannot be compared. `warp_check_threads` (feature `std`) runs it on host threads.
//!
//! No allocation, integer arithmetic only. [`ReadStats`] uses no atomics; [`WarpCheck`] uses
//! 32-bit atomics with compare-and-swap only, so it builds wherever the target has those
//! (Cortex-M3 and up, RISC-V with the A extension) and, with the feature `portable-atomic`
//! and a way to provide compare-and-swap, on targets without it (Cortex-M0/M0+, RISC-V
//! without A).
//!
//! Wrapping counters ([`Counter::bits`] < 64) are compared modulo their width: a step of more
//! than half the range forwards is taken as a step backwards.
//!
//! No panic for any counter values (any [`Width::mask`](crate::Width::mask), too): the lints
//! below deny unchecked arithmetic and indexing outside tests.

use core::hint::black_box;
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
use core::hint::spin_loop;

#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
use crate::sync::{target::AtomicU32, Ordering};

use crate::{Counter, Frequency};

/// Buckets in a [`Histogram`]: one for 0 and one per power of two up to 2^63.
pub const HISTOGRAM_BUCKETS: usize = 65;

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

    /// The smallest and largest delta of bucket `k` (`None` for `k` ≥ [`HISTOGRAM_BUCKETS`]).
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

    /// The counts, bucket by bucket.
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
        let mask = crate::counter::Width::of(counter).mask();
        let first = counter.ticks();
        let mut last = first;
        for _ in 0..reads {
            last = black_box(counter.ticks());
        }
        let tight_loop_ticks = last.wrapping_sub(first) & mask;

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
            let delta = now.wrapping_sub(prev) & mask;
            prev = now;
            if delta > mask / 2 {
                s.backwards_steps = s.backwards_steps.saturating_add(1);
                s.max_backwards_ticks = s.max_backwards_ticks.max(backwards_by(mask, delta));
                run = 0;
                continue;
            }
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
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// Read cost in picoseconds per read at the counter rate `frequency`, rounded to nearest
    /// (0 for 0 reads).
    pub fn read_cost_ps(&self, frequency: &Frequency) -> u64 {
        // ps = ticks × 10^12 / (reads × Hz) = ticks × 10^15 / (reads × mHz).
        // num < 2^64 × 2^50, den < 2^32 × 2^57: both exact in u128, and so is num + den / 2.
        let num = u128::from(self.tight_loop_ticks).saturating_mul(1_000_000_000_000_000);
        let den = u128::from(self.reads).saturating_mul(u128::from(frequency.as_millihz()));
        match num.saturating_add(den / 2).checked_div(den) {
            Some(ps) => u64::try_from(ps).unwrap_or(u64::MAX),
            None => 0,
        }
    }

    /// True when no read went backwards.
    pub fn is_monotonic(&self) -> bool {
        self.backwards_steps == 0
    }
}

/// The outcome of a warp check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct WarpReport {
    /// Participants that ran.
    pub participants: u32,
    /// Checks made (locked read-compare-store steps).
    pub checks: u32,
    /// Checks whose read came after another participant's read: only these compare two CPUs.
    pub handovers: u32,
    /// Checks whose read was below the last read of any participant.
    pub warps: u32,
    /// Largest such difference, in ticks.
    pub max_warp_ticks: u64,
}

impl WarpReport {
    /// True when no warp was seen.
    pub fn is_consistent(&self) -> bool {
        self.warps == 0
    }
}

/// A cross-CPU warp check shared by all participants (one per CPU), built from 32-bit atomics
/// only.
///
/// Each check takes a spin lock, reads the counter, compares the value with the last value
/// stored by any participant, stores its own and releases the lock. The lock's acquire
/// ordering puts the read after the previous holder's read; the counter read must itself be
/// ordered after earlier loads, as the crate's CPU counters' [`Counter`] impls are (LFENCE;
/// RDTSC and ISB; MRS).
///
/// The caller runs [`WarpCheck::participate`] once on each CPU it wants to compare,
/// pinned there, with interrupts (or preemption) off if it can: a participant preempted
/// while it holds the lock makes the others spin until it runs again.
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
#[derive(Debug, Default)]
pub struct WarpCheck {
    lock: AtomicU32,
    last_lo: AtomicU32,
    last_hi: AtomicU32,
    /// Participant id of the last read (meaningless while `checks` is 0).
    last_owner: AtomicU32,
    arrived: AtomicU32,
    ran: AtomicU32,
    checks: AtomicU32,
    handovers: AtomicU32,
    warps: AtomicU32,
    max_warp_lo: AtomicU32,
    max_warp_hi: AtomicU32,
}

#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
impl WarpCheck {
    /// A fresh check (usable in a `static`).
    pub const fn new() -> WarpCheck {
        WarpCheck {
            lock: AtomicU32::new(0),
            last_lo: AtomicU32::new(0),
            last_hi: AtomicU32::new(0),
            last_owner: AtomicU32::new(0),
            arrived: AtomicU32::new(0),
            ran: AtomicU32::new(0),
            checks: AtomicU32::new(0),
            handovers: AtomicU32::new(0),
            warps: AtomicU32::new(0),
            max_warp_lo: AtomicU32::new(0),
            max_warp_hi: AtomicU32::new(0),
        }
    }

    /// Runs one participant: waits until `participants` have arrived (so that they overlap),
    /// then makes `iterations` checks. `id` tells participants apart (use the CPU number;
    /// ids are compared, not interpreted).
    ///
    /// Every one of the `participants` must call this, or the others wait for ever; use
    /// [`WarpCheck::run`] to skip the rendezvous.
    pub fn participate<C: Counter + ?Sized>(
        &self,
        id: u32,
        participants: u32,
        counter: &C,
        iterations: u32,
    ) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        while self.arrived.load(Ordering::Acquire) < participants {
            spin_loop();
        }
        self.run(id, counter, iterations);
    }

    /// Runs one participant without a rendezvous: `iterations` checks.
    pub fn run<C: Counter + ?Sized>(&self, id: u32, counter: &C, iterations: u32) {
        self.ran.fetch_add(1, Ordering::Relaxed);
        for _ in 0..iterations {
            self.check_once(id, counter);
        }
    }

    /// One check by participant `id`: returns true when this read warped (was below the last
    /// read of any participant, itself included).
    pub fn check_once<C: Counter + ?Sized>(&self, id: u32, counter: &C) -> bool {
        let mask = crate::counter::Width::of(counter).mask();
        self.acquire();
        // `checks` counts the reads stored so far (saturating, so never back to 0): 0 means
        // there is no earlier read to compare with. Every u32 is a distinct id.
        let first = self.checks.load(Ordering::Relaxed) == 0;
        let owner = self.last_owner.load(Ordering::Relaxed);
        let prev = join(
            self.last_hi.load(Ordering::Relaxed),
            self.last_lo.load(Ordering::Relaxed),
        );
        let now = counter.ticks();
        let mut warped = false;
        if !first {
            if owner != id {
                bump(&self.handovers);
            }
            let delta = now.wrapping_sub(prev) & mask;
            if delta > mask / 2 {
                warped = true;
                bump(&self.warps);
                let back = backwards_by(mask, delta);
                let max = join(
                    self.max_warp_hi.load(Ordering::Relaxed),
                    self.max_warp_lo.load(Ordering::Relaxed),
                );
                if back > max {
                    self.max_warp_hi
                        .store((back >> 32) as u32, Ordering::Relaxed);
                    self.max_warp_lo.store(back as u32, Ordering::Relaxed);
                }
            }
        }
        self.last_hi.store((now >> 32) as u32, Ordering::Relaxed);
        self.last_lo.store(now as u32, Ordering::Relaxed);
        self.last_owner.store(id, Ordering::Relaxed);
        bump(&self.checks);
        self.release();
        warped
    }

    /// What the participants found so far.
    pub fn report(&self) -> WarpReport {
        self.acquire();
        let r = WarpReport {
            participants: self.ran.load(Ordering::Relaxed),
            checks: self.checks.load(Ordering::Relaxed),
            handovers: self.handovers.load(Ordering::Relaxed),
            warps: self.warps.load(Ordering::Relaxed),
            max_warp_ticks: join(
                self.max_warp_hi.load(Ordering::Relaxed),
                self.max_warp_lo.load(Ordering::Relaxed),
            ),
        };
        self.release();
        r
    }

    fn acquire(&self) {
        while self
            .lock
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.lock.load(Ordering::Relaxed) != 0 {
                spin_loop();
            }
        }
    }

    fn release(&self) {
        self.lock.store(0, Ordering::Release);
    }
}

/// Prints the counts so far without taking the lock (a participant may be mid-check, so the
/// figures can be one check apart): formatting never waits, even from an interrupt handler
/// that preempted a participant.
#[cfg(feature = "defmt")]
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
impl defmt::Format for WarpCheck {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "WarpCheck {{ participants: {=u32}, checks: {=u32}, handovers: {=u32}, warps: {=u32} }}",
            self.ran.load(Ordering::Relaxed),
            self.checks.load(Ordering::Relaxed),
            self.handovers.load(Ordering::Relaxed),
            self.warps.load(Ordering::Relaxed),
        )
    }
}

/// How far back a wrapped difference `delta` (> `mask / 2`) steps: `mask - delta + 1`, which
/// is in 1..=mask/2 + 1 because `delta` is in mask/2 + 1..=mask (it was masked).
fn backwards_by(mask: u64, delta: u64) -> u64 {
    mask.saturating_sub(delta).saturating_add(1)
}

#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
fn join(hi: u32, lo: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

/// Saturating increment of a counter only written under the lock.
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
fn bump(a: &AtomicU32) {
    let v = a.load(Ordering::Relaxed);
    a.store(v.saturating_add(1), Ordering::Relaxed);
}

/// Runs a [`WarpCheck`] on `threads` host threads sharing `counter`, `iterations` checks
/// each. The OS schedules the threads (they are not pinned), so this compares whatever CPUs
/// they land on; [`WarpReport::handovers`] says how often the check crossed threads.
///
/// Threads that cannot be spawned are left out ([`WarpReport::participants`] counts those
/// that ran).
#[cfg(feature = "std")]
#[cfg(any(feature = "portable-atomic", target_has_atomic = "32"))]
pub fn warp_check_threads<C: Counter + Sync + ?Sized>(
    counter: &C,
    threads: u32,
    iterations: u32,
) -> WarpReport {
    use crate::sync::target::AtomicBool;
    let check = WarpCheck::new();
    let go = AtomicBool::new(false);
    std::thread::scope(|s| {
        for id in 0..threads {
            let (check, go) = (&check, &go);
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                while !go.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                check.run(id, counter, iterations);
            });
            if spawned.is_err() {
                break;
            }
        }
        // Every spawned thread waits for this, so they start together.
        go.store(true, Ordering::Release);
    });
    check.report()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Accuracy, FnCounter, Source};
    use core::sync::atomic::AtomicU64;
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

    #[test]
    fn warp_between_two_cpus_is_found() {
        let time = AtomicU64::new(1_000_000);
        let tick = || time.fetch_add(10, Ordering::Relaxed);
        let ahead = FnCounter::new(|| tick() + 5_000, 64);
        let behind = FnCounter::new(&tick, 64);
        let w = WarpCheck::new();
        assert!(!w.check_once(0, &ahead));
        assert!(!w.check_once(0, &ahead));
        assert!(w.check_once(1, &behind)); // ~5000 ticks below CPU 0's last read
        assert!(!w.check_once(1, &behind)); // own reads move forward
        assert!(!w.check_once(0, &ahead));
        let r = w.report();
        assert_eq!((r.checks, r.warps, r.handovers), (5, 1, 2));
        assert!(
            r.max_warp_ticks > 4_900 && r.max_warp_ticks <= 5_000,
            "{}",
            r.max_warp_ticks
        );
        assert!(!r.is_consistent());
    }

    #[test]
    fn every_id_is_its_own_participant() {
        // u32::MAX and 0 are two participants: each check after the first hands over.
        let time = AtomicU64::new(0);
        let c = FnCounter::new(|| time.fetch_add(1, Ordering::Relaxed), 64);
        let w = WarpCheck::new();
        for id in [u32::MAX, 0, u32::MAX, 0] {
            w.check_once(id, &c);
        }
        assert_eq!(w.report().handovers, 3);
    }

    #[test]
    fn synchronised_cpus_show_no_warp() {
        let time = AtomicU64::new(0);
        let c = FnCounter::new(|| time.fetch_add(3, Ordering::Relaxed), 64);
        let w = WarpCheck::new();
        for i in 0..100 {
            assert!(!w.check_once(i % 3, &c));
        }
        let r = w.report();
        assert_eq!((r.checks, r.warps, r.max_warp_ticks), (100, 0, 0));
        assert!(r.is_consistent());
    }

    #[test]
    fn warp_check_on_a_wrapping_counter() {
        let w = WarpCheck::new();
        let near_top = FnCounter::new(|| 0xFFF0, 16);
        let wrapped = FnCounter::new(|| 0x0010, 16);
        w.check_once(0, &near_top);
        assert!(!w.check_once(1, &wrapped)); // +0x20 across the wrap
        assert!(w.check_once(0, &near_top)); // -0x20
        assert_eq!(w.report().max_warp_ticks, 0x20);
    }

    #[test]
    fn participants_rendezvous_and_run() {
        let time = AtomicU64::new(0);
        let c = FnCounter::new(|| time.fetch_add(1, Ordering::Relaxed), 64);
        let w = WarpCheck::new();
        std::thread::scope(|s| {
            for id in 0..3 {
                let (w, c) = (&w, &c);
                s.spawn(move || w.participate(id, 3, c, 200));
            }
        });
        let r = w.report();
        assert_eq!((r.participants, r.checks, r.warps), (3, 600, 0));
    }

    #[cfg(feature = "std")]
    #[test]
    fn threads_helper_counts_and_detects() {
        let time = AtomicU64::new(0);
        let good = FnCounter::new(|| time.fetch_add(1, Ordering::Relaxed), 64);
        let r = warp_check_threads(&good, 2, 1_000);
        assert_eq!((r.participants, r.checks, r.warps), (2, 2_000, 0));

        // Reads alternate between a fast and a slow view: the second check warps, whichever
        // thread makes it, because reads happen under the lock in sequence.
        let n = AtomicU64::new(0);
        let skewed = FnCounter::new(
            || {
                let i = n.fetch_add(1, Ordering::Relaxed);
                i * 10 + if i % 2 == 0 { 1_000_000 } else { 0 }
            },
            64,
        );
        let r = warp_check_threads(&skewed, 2, 100);
        assert_eq!(r.checks, 200);
        assert_eq!(r.warps, 100);
        assert!(r.max_warp_ticks >= 999_000);
    }
}
