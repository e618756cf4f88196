//! The cross-CPU warp check (the public docs are on [`WarpCheck`]).

use core::hint::spin_loop;

use crate::atomic::{AtomicU32, Ordering};
use crate::saturate_u64;
use baretime::{Counter, Frequency, Width};

/// The most CPUs one [`WarpCheck`] compares (its docs say 256). A kernel with more checks a
/// subset (or several subsets in turn). The limit keeps the step number, which counts every step of every pair's
/// phase, in 32 bits, and the joined-CPU set in 256 bits (32 bytes).
pub(crate) const MAX_WARP_CPUS: u32 = 256;

/// Checks per ordered pair of CPUs below which a check that found no warp says
/// [`WarpVerdict::Inconclusive`] rather than [`WarpVerdict::Consistent`]: 1000.
///
/// A constant offset between two counters larger than a handover shows in the very first
/// check; what repeated checks add is a chance at the *fastest* handovers, which set the
/// smallest warp the check can see, and at intermittent warps (a CPU whose counter is rewritten,
/// an SMI between its read and the handover). The first handovers are slow (cold caches, a CPU
/// waking from idle); after that each one's latency is close to independent of the others, so
/// if 1 % of handovers are fast ones, 1000 checks miss all of them with probability
/// 0.99^1000 ≈ 4 × 10⁻⁵, and an offset that shows in 1 % of the handovers is missed as rarely.
/// 1000 checks per ordered pair take a millisecond or less per pair of CPUs (a handover is
/// 0.1–2 µs), so the bound costs a kernel little at boot. For scale: Linux's tsc_sync checks
/// each CPU that comes up against one CPU already up, for 2 ms (same package) or 20 ms
/// (another package; `loop_timeout()`), by time rather than by count, which at those
/// handover times is thousands to hundreds of thousands of reads in both directions mixed.
pub const CONSISTENT_MIN_CHECKS_PER_PAIR: u32 = 1000;

/// Words in the joined-CPU bit set.
const JOINED_WORDS: usize = (MAX_WARP_CPUS / 32) as usize;

/// `timeout` before any participant timed out.
const NO_TIMEOUT: u32 = u32::MAX;

/// How long a participant waits for its turn before it gives up: asked once when a wait
/// begins, then after every unsuccessful look at the token.
///
/// Implement it for any clock the caller trusts (a deadline on a reference timer, a tick
/// budget on the counter under test); [`Spins`] and [`TickBudget`] are ready-made, and with
/// the feature `std` so is `StdPatience` (wall-clock time per wait).
pub trait Patience {
    /// A wait begins.
    fn begin(&mut self);
    /// The token was not there yet: `true` to give up.
    fn expired(&mut self) -> bool;
}

/// Gives up after a number of looks at the token per wait (each followed by a spin-loop
/// hint: a PAUSE of ~10–140 cycles on x86_64, a YIELD on aarch64). Independent of any
/// counter, so it also ends the wait when the counter under test is stuck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Spins {
    limit: u64,
    left: u64,
}

impl Spins {
    /// At most `limit` looks at the token per wait.
    pub const fn new(limit: u64) -> Spins {
        Spins { limit, left: limit }
    }
}

impl Patience for Spins {
    fn begin(&mut self) {
        self.left = self.limit;
    }
    fn expired(&mut self) -> bool {
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                false
            }
            None => true,
        }
    }
}

/// Gives up when `counter` has advanced by `ticks` since the wait began (modulo its width).
/// Usually the counter under test; a stuck counter never ends the wait (use [`Spins`] where
/// that matters).
#[derive(Clone, Copy, Debug)]
pub struct TickBudget<'a, C: Counter + ?Sized> {
    counter: &'a C,
    ticks: u64,
    start: u64,
}

impl<'a, C: Counter + ?Sized> TickBudget<'a, C> {
    /// At most `ticks` of `counter` per wait.
    pub const fn new(counter: &'a C, ticks: u64) -> TickBudget<'a, C> {
        TickBudget {
            counter,
            ticks,
            start: 0,
        }
    }
}

impl<C: Counter + ?Sized> Patience for TickBudget<'_, C> {
    fn begin(&mut self) {
        self.start = self.counter.ticks();
    }
    fn expired(&mut self) -> bool {
        let w = Width::of(self.counter);
        // A counter that stepped back is not past the budget (elapsed is None): wait on.
        w.elapsed(self.start, self.counter.ticks())
            .is_some_and(|d| d >= self.ticks.min(w.half()))
    }
}

/// Wall-clock time per wait, on std's monotonic clock.
#[cfg(feature = "std")]
impl Patience for StdPatience {
    fn begin(&mut self) {
        self.deadline = std::time::Instant::now().checked_add(self.per_wait);
        self.looks = 0;
    }
    fn expired(&mut self) -> bool {
        self.looks = self.looks.saturating_add(1);
        if self.looks > YIELD_AFTER_LOOKS {
            std::thread::yield_now();
        } else if self.looks % 64 != 0 {
            // Reading the time at every look would slow down the look that sees the token,
            // and so every handover: only every 64th does.
            return false;
        }
        self.deadline
            .is_some_and(|deadline| std::time::Instant::now() >= deadline)
    }
}

/// Looks at the token after which [`StdPatience`] yields the CPU on every look.
#[cfg(feature = "std")]
const YIELD_AFTER_LOOKS: u32 = 1000;

/// A [`Patience`] of wall-clock time per wait, on std's monotonic clock (feature `std`).
/// After 1000 looks in one wait (tens of microseconds) it yields the CPU at every look, so
/// that with more participants than free CPUs the token's holder gets to run; a handover
/// that took that long measured nothing fine-grained anyway.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug)]
pub struct StdPatience {
    per_wait: core::time::Duration,
    deadline: Option<std::time::Instant>,
    looks: u32,
}

#[cfg(feature = "std")]
impl StdPatience {
    /// At most `per_wait` per wait.
    pub const fn new(per_wait: core::time::Duration) -> StdPatience {
        StdPatience {
            per_wait,
            deadline: None,
            looks: 0,
        }
    }
}

/// Why a participant stopped before its last check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum WarpError {
    /// `cpu` is not below the check's [`WarpCheck::cpus`].
    CpuOutOfRange {
        /// The CPU number given.
        cpu: u32,
        /// CPUs the check compares.
        cpus: u32,
    },
    /// `cpu` already joined this check: each CPU takes part once.
    AlreadyJoined {
        /// The CPU number given twice.
        cpu: u32,
    },
    /// This participant's patience ran out while it waited for `waiting_for` to take its turn:
    /// that CPU never arrived, or stalled. The other participants end with
    /// [`WarpError::Aborted`].
    Timeout {
        /// The CPU that gave up.
        cpu: u32,
        /// The CPU whose turn it was.
        waiting_for: u32,
    },
    /// Another participant timed out, so the check ended early.
    Aborted {
        /// The CPU whose turn it was when the check was given up.
        waiting_for: u32,
    },
}

impl core::fmt::Display for WarpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            WarpError::CpuOutOfRange { cpu, cpus } => {
                write!(f, "CPU {cpu} is outside the warp check's {cpus} CPUs")
            }
            WarpError::AlreadyJoined { cpu } => {
                write!(f, "CPU {cpu} already joined the warp check")
            }
            WarpError::Timeout { cpu, waiting_for } => {
                write!(f, "CPU {cpu} gave up waiting for CPU {waiting_for}")
            }
            WarpError::Aborted { waiting_for } => {
                write!(f, "warp check given up while waiting for CPU {waiting_for}")
            }
        }
    }
}

impl core::error::Error for WarpError {}

/// What one participant did: its checks (reads compared with the other CPU's read just
/// before) and how many of them warped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Participation {
    /// Reads this CPU compared with another CPU's.
    pub checks: u32,
    /// Those that were behind the other CPU's read.
    pub warps: u32,
}

/// What a warp check concluded; see [`WarpReport::verdict`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WarpVerdict {
    /// No warp in at least [`CONSISTENT_MIN_CHECKS_PER_PAIR`] checks of every ordered pair of
    /// at least two CPUs: timestamps taken on different CPUs compare (to within a handover).
    Consistent,
    /// A read on `to_cpu` was `max_warp_ticks` behind a read made just before on `from_cpu`
    /// (the largest such step back seen): timestamps from different CPUs do not compare.
    Warped {
        /// The largest step back, in ticks.
        max_warp_ticks: u64,
        /// The CPU that read first (ahead).
        from_cpu: u32,
        /// The CPU that read after it and got less (behind).
        to_cpu: u32,
    },
    /// No warp, but too few checks to say so: fewer than two CPUs, a pair left out, or
    /// fewer than [`CONSISTENT_MIN_CHECKS_PER_PAIR`] checks in some direction of some pair.
    Inconclusive,
}

impl WarpVerdict {
    /// `consistent`, `warp` or `inconclusive` (the report's `warp_verdict`).
    pub const fn token(&self) -> &'static str {
        match self {
            WarpVerdict::Consistent => "consistent",
            WarpVerdict::Warped { .. } => "warp",
            WarpVerdict::Inconclusive => "inconclusive",
        }
    }
}

/// The figures of a warp check ([`WarpCheck::report`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct WarpReport {
    /// CPUs the check was set up to compare.
    pub cpus: u32,
    /// CPUs that made at least one check (read after another CPU).
    pub cpus_covered: u32,
    /// Unordered pairs of CPUs to compare: `cpus × (cpus − 1) / 2`.
    pub pairs: u32,
    /// Unordered pairs compared in both directions (at least one check each way).
    pub pairs_compared: u32,
    /// Checks made: reads compared with another CPU's read just before. Every one is a
    /// handover between two CPUs.
    pub checks: u64,
    /// The fewest checks of any ordered pair (i → j: j's read after i's) of the `cpus`
    /// (0 if a pair was left out or there is no pair).
    pub min_checks_per_pair: u32,
    /// Checks whose read was behind the other CPU's.
    pub warps: u32,
    /// The largest step back, in ticks (0 without a warp).
    pub max_warp_ticks: u64,
    /// Where it was seen: (the CPU that read first, the CPU that read behind it).
    pub warp_pair: Option<(u32, u32)>,
    /// Set when a participant timed out: the CPU it waited for.
    pub timed_out_waiting_for: Option<u32>,
}

impl WarpReport {
    /// The verdict: [`WarpVerdict::Warped`] if any check warped; [`WarpVerdict::Consistent`]
    /// only if no check warped across at least two CPUs, with every ordered pair checked at
    /// least [`CONSISTENT_MIN_CHECKS_PER_PAIR`] times; else [`WarpVerdict::Inconclusive`].
    ///
    /// ```
    /// use baretime_diag::{WarpReport, WarpVerdict};
    /// // Nothing compared says nothing.
    /// assert_eq!(WarpReport::default().verdict(), WarpVerdict::Inconclusive);
    /// ```
    pub fn verdict(&self) -> WarpVerdict {
        if self.warps > 0 {
            let (from_cpu, to_cpu) = self.warp_pair.unwrap_or((u32::MAX, u32::MAX));
            return WarpVerdict::Warped {
                max_warp_ticks: self.max_warp_ticks,
                from_cpu,
                to_cpu,
            };
        }
        let covered = self.cpus >= 2
            && self.pairs_compared == self.pairs
            && self.min_checks_per_pair >= CONSISTENT_MIN_CHECKS_PER_PAIR;
        if covered {
            WarpVerdict::Consistent
        } else {
            WarpVerdict::Inconclusive
        }
    }

    /// True only for [`WarpVerdict::Consistent`]: no warp *and* enough checks.
    pub fn is_consistent(&self) -> bool {
        self.verdict() == WarpVerdict::Consistent
    }

    /// [`WarpReport::max_warp_ticks`] in nanoseconds at the counter rate `frequency`, rounded
    /// up (a warp is never reported smaller than it was).
    pub fn max_warp_ns(&self, frequency: &Frequency) -> u64 {
        // ns = ticks × 10^12 / mHz: < 2^64 × 2^40 fits u128; a rate is never 0 mHz.
        let num = u128::from(self.max_warp_ticks).saturating_mul(1_000_000_000_000);
        let den = u128::from(frequency.as_millihz());
        let ns = num.checked_div(den).map_or(0, |q| {
            let exact = num.checked_rem(den) == Some(0);
            if exact {
                q
            } else {
                q.saturating_add(1)
            }
        });
        saturate_u64(ns)
    }
}

/// A cross-CPU warp check for up to 256 CPUs, shared by all participants and usable in a
/// `static`. 32-bit atomics only (the step number, the last reading in two
/// halves, the results), with read-modify-write only to join; no allocation.
///
/// Each of the CPUs `0..cpus` calls [`WarpCheck::participate`] once, pinned there, with
/// interrupts (or preemption) off if it can: a participant preempted while the token is its
/// own holds up every other. The CPU numbers are the check's own; map the kernel's CPU ids to
/// `0..cpus`. The sections below give the schedule.
///
/// A check runs once: each CPU joins it once, and the token only moves forward. To check
/// again (after repairing `TSC_ADJUST`, say) use another `WarpCheck`: each is 80 bytes.
///
/// ```
/// use baretime_diag::{Spins, WarpCheck, WarpVerdict};
/// use baretime::FnCounter;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// static CHECK: WarpCheck = WarpCheck::new(2, 1000);
/// let time = AtomicU64::new(1_000_000);
/// std::thread::scope(|s| {
///     for cpu in 0..2 {
///         let time = &time;
///         s.spawn(move || {
///             // CPU 1's counter is 5000 ticks behind CPU 0's.
///             let counter = FnCounter::new(
///                 move || time.fetch_add(1, Ordering::Relaxed) - 5000 * u64::from(cpu),
///                 64,
///             );
///             CHECK.participate(cpu, &counter, &mut Spins::new(1 << 30))
///         });
///     }
/// });
/// let r = CHECK.report();
/// assert_eq!(r.checks, 2000);
/// assert_eq!(
///     r.verdict(),
///     WarpVerdict::Warped { max_warp_ticks: 4999, from_cpu: 0, to_cpu: 1 }
/// );
/// ```
///
/// # Why a token
///
/// A warp check compares a counter read on one CPU with a read on another CPU that happened
/// *just before* it: if the later read is smaller, the two CPUs' counters disagree (a "warp")
/// by at least that much. The earlier design let every participant take a spin lock, read,
/// compare with the last read of any CPU and release; on a 2-vCPU machine the CPU that had just
/// released the lock took it again almost every time (a waiter looks only every PAUSE), and
/// 400 000 checks compared two CPUs once. Here the right to read is a token with a schedule:
/// a participant reads only when the token says it is its turn, and the schedule never gives
/// two turns in a row to one CPU, so **every check is a handover between two CPUs**.
///
/// # The schedule
///
/// The CPUs are compared pair by pair, in the order (0, 1), (0, 2), …, (0, n−1), (1, 2), …:
/// one *phase* per unordered pair {i, j}, i < j. A phase is `2K + 1` steps, K being
/// [`WarpCheck::checks_per_pair`]: i, j, i, j, …, i. The first step only reads and publishes;
/// each of the other 2K reads is compared with the read of the step before, which the other
/// CPU of the pair made: K checks of i → j (j's read after i's) and K of j → i. Every ordered
/// pair of CPUs gets exactly K checks, and the CPUs outside the pair wait. Pairs are compared
/// one at a time as Linux's `check_tsc_warp()` compares the boot CPU with each CPU that comes
/// up, but every pair, not only the pairs with the boot CPU, and with a fixed number of
/// handovers rather than a fixed time.
///
/// The token is one 32-bit step number: the holder of step `s` reads its counter, compares,
/// publishes its reading, and stores `s + 1` with release ordering; the holder of `s + 1` waits
/// for that value with acquire loads. The counter read must itself be ordered after earlier
/// loads, as the crate's CPU counters' [`Counter`] impls are (LFENCE; RDTSC and ISB; MRS),
/// so a read is made after the previous holder's read in real time. The smallest warp a check
/// can see is the time a handover takes (one cache line moving between the two CPUs, ~100 ns);
/// smaller offsets hide in it, as they do in Linux's check.
///
/// # Never waiting for ever
///
/// A participant that never arrives (a CPU that did not boot, a thread that was not spawned)
/// must not hang the others: every wait is bounded by a [`Patience`] the caller chooses
/// ([`Spins`], [`TickBudget`], or its own). The first participant whose patience runs out
/// records which CPU it was waiting for and ends with [`WarpError::Timeout`]; every other
/// participant then ends with [`WarpError::Aborted`] at its next wait, and the report counts
/// only the checks that were made: its verdict is [`WarpVerdict::Inconclusive`] unless a warp
/// was already seen.
///
/// # In a kernel
///
/// ```no_run
/// # #[cfg(target_arch = "x86_64")] {
/// use baretime_x86::Tsc;
/// use baretime_diag::{TickBudget, WarpCheck, WarpVerdict};
///
/// static CHECK: WarpCheck = WarpCheck::new(4, 2000); // CPUs 0..4, 2000 checks each way
/// # let cpu = 0;
///
/// // On each CPU `cpu` in 0..4, interrupts off; give up on a partner after ~1 s of TSC
/// // (a slow AP bring-up counts: the wait for a CPU's first turn is one wait too).
/// let Ok(tsc) = Tsc::probe() else { return };
/// let mine = CHECK.participate(cpu, &tsc, &mut TickBudget::new(&tsc, 3_000_000_000));
///
/// // On the boot CPU, once CHECK.finished() == 4:
/// match CHECK.report().verdict() {
///     WarpVerdict::Consistent => { /* one Clock for all CPUs */ }
///     WarpVerdict::Warped { max_warp_ticks, from_cpu, to_cpu } => { /* TSC_ADJUST, guard */ }
///     WarpVerdict::Inconclusive => { /* too few checks, or a CPU missing */ }
/// }
/// # let _ = mine;
/// # }
/// ```
#[derive(Debug)]
pub struct WarpCheck {
    cpus: u32,
    checks_per_pair: u32,
    /// The step whose holder may read now; `total_steps()` when done.
    step: AtomicU32,
    /// The last reading (written by the holder of the step before, read by the next holder:
    /// ordered by the step's release/acquire).
    last_lo: AtomicU32,
    last_hi: AtomicU32,
    /// Results, written only by the token's holder.
    warps: AtomicU32,
    max_warp_lo: AtomicU32,
    max_warp_hi: AtomicU32,
    warp_from: AtomicU32,
    warp_to: AtomicU32,
    /// The CPU waited for when the first participant timed out, or `NO_TIMEOUT`.
    timeout: AtomicU32,
    /// Participants that returned (done, timed out or aborted).
    finished: AtomicU32,
    joined: [AtomicU32; JOINED_WORDS],
}

impl WarpCheck {
    /// A check of CPUs `0..cpus` (at most 256; more are cut to it, and a kernel with more
    /// checks a subset, or several subsets in turn) with
    /// `checks_per_pair` checks of each ordered pair (at least 1, and at most what keeps the
    /// step number in 32 bits: ≥ 2¹⁵ for 256 CPUs, ≥ 2³⁰ for 2). [`WarpCheck::cpus`] and
    /// [`WarpCheck::checks_per_pair`] say what was kept.
    pub const fn new(cpus: u32, checks_per_pair: u32) -> WarpCheck {
        let cpus = if cpus > MAX_WARP_CPUS {
            MAX_WARP_CPUS
        } else {
            cpus
        };
        let phases = pairs_of(cpus);
        // Steps = phases × (2K + 1) ≤ u32::MAX: K ≤ (u32::MAX / phases − 1) / 2.
        let max_k = match u32::MAX.checked_div(phases) {
            Some(per_phase) => per_phase.saturating_sub(1) / 2,
            None => u32::MAX / 2,
        };
        let k = if checks_per_pair == 0 {
            1
        } else if checks_per_pair > max_k {
            max_k
        } else {
            checks_per_pair
        };
        WarpCheck {
            cpus,
            checks_per_pair: k,
            step: AtomicU32::new(0),
            last_lo: AtomicU32::new(0),
            last_hi: AtomicU32::new(0),
            warps: AtomicU32::new(0),
            max_warp_lo: AtomicU32::new(0),
            max_warp_hi: AtomicU32::new(0),
            warp_from: AtomicU32::new(0),
            warp_to: AtomicU32::new(0),
            timeout: AtomicU32::new(NO_TIMEOUT),
            finished: AtomicU32::new(0),
            joined: [const { AtomicU32::new(0) }; JOINED_WORDS],
        }
    }

    /// CPUs compared.
    pub const fn cpus(&self) -> u32 {
        self.cpus
    }

    /// Checks of each ordered pair when the check completes.
    pub const fn checks_per_pair(&self) -> u32 {
        self.checks_per_pair
    }

    /// Steps of one pair's phase: 2K + 1 (≤ u32::MAX by `new`'s bound on K).
    fn phase_steps(&self) -> u32 {
        self.checks_per_pair.saturating_mul(2).saturating_add(1)
    }

    /// Steps of the whole check (≤ u32::MAX by `new`'s bound on K).
    fn total_steps(&self) -> u32 {
        pairs_of(self.cpus).saturating_mul(self.phase_steps())
    }

    /// Runs CPU `cpu`'s part of the check, on that CPU: waits for each of its turns, reads
    /// `counter`, compares with the other CPU's reading just before, passes the token on.
    /// Returns when `cpu`'s last turn is done (the others may still be running; read
    /// [`WarpCheck::report`] once every participant has returned).
    ///
    /// `counter` is this CPU's view of the counter (every participant reads its own CPU's
    /// counter; a simulation can give each its own). `patience` bounds every wait: see
    /// [`Patience`] and [`WarpCheck`]'s docs, "Never waiting for ever".
    pub fn participate<C: Counter + ?Sized, P: Patience + ?Sized>(
        &self,
        cpu: u32,
        counter: &C,
        patience: &mut P,
    ) -> Result<Participation, WarpError> {
        if cpu >= self.cpus {
            return Err(WarpError::CpuOutOfRange {
                cpu,
                cpus: self.cpus,
            });
        }
        // cpu < cpus ≤ 256: the word index is < 8 = JOINED_WORDS and the shift < 32.
        let bit = 1u32.wrapping_shl(cpu % 32);
        let Some(word) = self.joined.get((cpu / 32) as usize) else {
            return Err(WarpError::CpuOutOfRange {
                cpu,
                cpus: self.cpus,
            });
        };
        if word.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            return Err(WarpError::AlreadyJoined { cpu });
        }

        let result = self.turns(cpu, counter, patience);
        // Release: whoever sees the count sees every result this participant wrote.
        self.finished.fetch_add(1, Ordering::Release);
        result
    }

    /// Participants that have returned from [`WarpCheck::participate`] after joining (done,
    /// timed out or aborted). When it reaches [`WarpCheck::cpus`], [`WarpCheck::report`] is
    /// final; a kernel's boot CPU can wait for that (bounded, as it likes) before reading it.
    pub fn finished(&self) -> u32 {
        self.finished.load(Ordering::Acquire)
    }

    /// `cpu`'s turns, in order.
    fn turns<C: Counter + ?Sized, P: Patience + ?Sized>(
        &self,
        cpu: u32,
        counter: &C,
        patience: &mut P,
    ) -> Result<Participation, WarpError> {
        let width = Width::of(counter);
        let phase_steps = self.phase_steps();
        let mut done = Participation::default();
        let mut base = 0u32;
        for i in 0..self.cpus {
            for j in i.saturating_add(1)..self.cpus {
                if cpu == i || cpu == j {
                    // i takes the even positions 0, 2, …, 2K; j the odd ones 1, 3, …, 2K − 1.
                    let mut q = u32::from(cpu == j);
                    let other = if cpu == i { j } else { i };
                    while q < phase_steps {
                        let s = base.saturating_add(q);
                        self.wait_for(cpu, s, patience)?;
                        let now = counter.ticks();
                        if q > 0 {
                            done.checks = done.checks.saturating_add(1);
                            if self.compare(width, now, other, cpu) {
                                done.warps = done.warps.saturating_add(1);
                            }
                        }
                        self.last_hi.store((now >> 32) as u32, Ordering::Relaxed);
                        self.last_lo.store(now as u32, Ordering::Relaxed);
                        self.step.store(s.saturating_add(1), Ordering::Release);
                        q = q.saturating_add(2);
                    }
                }
                base = base.saturating_add(phase_steps);
            }
        }
        Ok(done)
    }

    /// Waits until the token is at step `s`.
    fn wait_for<P: Patience + ?Sized>(
        &self,
        cpu: u32,
        s: u32,
        patience: &mut P,
    ) -> Result<(), WarpError> {
        patience.begin();
        loop {
            if self.step.load(Ordering::Acquire) == s {
                return Ok(());
            }
            let waiting_for = self.timeout.load(Ordering::Relaxed);
            if waiting_for != NO_TIMEOUT {
                return Err(WarpError::Aborted { waiting_for });
            }
            if patience.expired() {
                let at = self.step.load(Ordering::Acquire);
                if at == s {
                    return Ok(());
                }
                let waiting_for = self.holder_of(at);
                return match self.timeout.compare_exchange(
                    NO_TIMEOUT,
                    waiting_for,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => Err(WarpError::Timeout { cpu, waiting_for }),
                    Err(first) => Err(WarpError::Aborted { waiting_for: first }),
                };
            }
            spin_loop();
        }
    }

    /// Compares this turn's reading with the one before (made by `other`); records a warp.
    fn compare(&self, width: Width, now: u64, other: u32, cpu: u32) -> bool {
        let prev = join(
            self.last_hi.load(Ordering::Relaxed),
            self.last_lo.load(Ordering::Relaxed),
        );
        if width.elapsed(prev, now).is_some() {
            return false;
        }
        // Only the token's holder writes the results: plain loads and stores suffice.
        let warps = self.warps.load(Ordering::Relaxed);
        self.warps.store(warps.saturating_add(1), Ordering::Relaxed);
        let back = width.delta(now, prev); // how far `now` is behind `prev`
        let max = join(
            self.max_warp_hi.load(Ordering::Relaxed),
            self.max_warp_lo.load(Ordering::Relaxed),
        );
        if back > max {
            self.max_warp_hi
                .store((back >> 32) as u32, Ordering::Relaxed);
            self.max_warp_lo.store(back as u32, Ordering::Relaxed);
            self.warp_from.store(other, Ordering::Relaxed);
            self.warp_to.store(cpu, Ordering::Relaxed);
        }
        true
    }

    /// The CPU that holds step `s` (the last CPU when `s` is past the end).
    fn holder_of(&self, s: u32) -> u32 {
        let phase_steps = self.phase_steps();
        let phase = s.checked_div(phase_steps).unwrap_or(0);
        let q = s.checked_rem(phase_steps).unwrap_or(0);
        let (i, j) = self.pair(phase);
        if q % 2 == 0 {
            i
        } else {
            j
        }
    }

    /// The pair of phase `phase` (the last pair past the end).
    fn pair(&self, phase: u32) -> (u32, u32) {
        let mut p = 0u32;
        let mut last = (0, 0);
        for i in 0..self.cpus {
            for j in i.saturating_add(1)..self.cpus {
                last = (i, j);
                if p == phase {
                    return last;
                }
                p = p.saturating_add(1);
            }
        }
        last
    }

    /// What the check found so far. Exact once every participant has returned
    /// ([`WarpCheck::finished`]; the step number is read with acquire ordering, and each
    /// result was written before the step that followed it); while participants run, the
    /// figures may be a check apart.
    pub fn report(&self) -> WarpReport {
        // Acquire: synchronise with the participants that have returned.
        let _ = self.finished.load(Ordering::Acquire);
        let k = self.checks_per_pair;
        let phase_steps = self.phase_steps();
        let phases = pairs_of(self.cpus);
        let s = self.step.load(Ordering::Acquire).min(self.total_steps());
        let full = s.checked_div(phase_steps).unwrap_or(0);
        let q = s.checked_rem(phase_steps).unwrap_or(0);
        // In the phase under way, positions 1..q were checks: ⌊q/2⌋ at odd positions (i → j)
        // and ⌊(q − 1)/2⌋ at even ones (j → i).
        let (ij, ji) = (q / 2, q.saturating_sub(1) / 2);
        let checks = u64::from(full)
            .saturating_mul(u64::from(k).saturating_mul(2))
            .saturating_add(u64::from(q.saturating_sub(1)));
        let pairs_compared = full.saturating_add(u32::from(ji > 0));
        let min_checks_per_pair = if phases == 0 {
            0
        } else if full >= phases {
            k
        } else if full.saturating_add(1) == phases {
            ij.min(ji)
        } else {
            0
        };
        // CPUs with at least one check: those of the phases done, and of the one under way
        // once j has checked (q ≥ 2) and i too (q ≥ 3).
        let mut seen = [0u32; JOINED_WORDS];
        let mut mark = |cpu: u32| {
            if let Some(w) = seen.get_mut((cpu / 32) as usize) {
                *w |= 1u32.wrapping_shl(cpu % 32);
            }
        };
        let mut p = 0u32;
        'all: for i in 0..self.cpus {
            for j in i.saturating_add(1)..self.cpus {
                if p < full {
                    mark(i);
                    mark(j);
                } else {
                    if q >= 2 {
                        mark(j);
                    }
                    if q >= 3 {
                        mark(i);
                    }
                    break 'all;
                }
                p = p.saturating_add(1);
            }
        }
        let cpus_covered = seen.iter().map(|w| w.count_ones()).sum();
        let warps = self.warps.load(Ordering::Relaxed);
        let timeout = self.timeout.load(Ordering::Relaxed);
        WarpReport {
            cpus: self.cpus,
            cpus_covered,
            pairs: phases,
            pairs_compared,
            checks,
            min_checks_per_pair,
            warps,
            max_warp_ticks: join(
                self.max_warp_hi.load(Ordering::Relaxed),
                self.max_warp_lo.load(Ordering::Relaxed),
            ),
            warp_pair: (warps > 0).then(|| {
                (
                    self.warp_from.load(Ordering::Relaxed),
                    self.warp_to.load(Ordering::Relaxed),
                )
            }),
            timed_out_waiting_for: (timeout != NO_TIMEOUT).then_some(timeout),
        }
    }
}

/// Unordered pairs of `cpus` CPUs: `cpus × (cpus − 1) / 2`, saturating (≤ 32 640 for the
/// 256 CPUs `new` allows).
const fn pairs_of(cpus: u32) -> u32 {
    let n = cpus as u64;
    // n ≤ 2^32: n × (n − 1) < 2^64.
    let p = n.saturating_mul(n.saturating_sub(1)) / 2;
    if p > u32::MAX as u64 {
        u32::MAX
    } else {
        p as u32
    }
}

fn join(hi: u32, lo: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baretime::{Accuracy, FnCounter, Source};
    use core::sync::atomic::AtomicU64;
    use std::vec::Vec;

    /// Waits as long as it takes, yielding the CPU after a while (the tests run more threads
    /// than this machine has CPUs), except for a CPU that is absent: a wait for it ends after
    /// 10 000 looks. Deterministic whatever the scheduler does.
    struct Test<'a> {
        check: &'a WarpCheck,
        absent: Option<u32>,
        looks: u32,
    }

    impl Patience for Test<'_> {
        fn begin(&mut self) {
            self.looks = 0;
        }
        fn expired(&mut self) -> bool {
            self.looks += 1;
            if self.looks > 100 {
                std::thread::yield_now();
            }
            let holder = self
                .check
                .holder_of(self.check.step.load(Ordering::Relaxed));
            self.looks > 10_000 && self.absent == Some(holder)
        }
    }

    /// Runs `check` with one thread per CPU `0..cpus` except `absent`, each reading `time`
    /// (one tick per read) minus its own offset, masked to `bits`; returns each participant's
    /// result.
    fn run(
        check: &WarpCheck,
        absent: Option<u32>,
        offsets: &[u64],
        start: u64,
        bits: u32,
    ) -> Vec<Result<Participation, WarpError>> {
        let time = AtomicU64::new(start);
        let mask = Width::new(bits).mask();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..check.cpus())
                .filter(|&cpu| Some(cpu) != absent)
                .map(|cpu| {
                    let (time, offset) = (&time, offsets[cpu as usize]);
                    s.spawn(move || {
                        let c = FnCounter::new(
                            move || {
                                time.fetch_add(1, Ordering::Relaxed).wrapping_sub(offset) & mask
                            },
                            bits,
                        );
                        let mut patience = Test {
                            check,
                            absent,
                            looks: 0,
                        };
                        check.participate(cpu, &c, &mut patience)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn a_cpu_behind_is_found_with_its_pair_and_size() {
        // CPU 2 is 5000 ticks behind 0 and 1. Reads are one tick apart (only the token's
        // holder reads), so each read on 2 right after one on 0 or 1 is exactly 4999 behind.
        let w = WarpCheck::new(3, 200);
        for r in run(&w, None, &[0, 0, 5000], 1_000_000, 64) {
            r.unwrap();
        }
        let r = w.report();
        assert_eq!(
            (r.cpus, r.cpus_covered, r.pairs, r.pairs_compared),
            (3, 3, 3, 3)
        );
        assert_eq!((r.checks, r.min_checks_per_pair), (1200, 200));
        // 0 → 2 and 1 → 2 warp, every time; 2 → 0, 2 → 1 and 0 ↔ 1 never.
        assert_eq!(r.warps, 400);
        assert_eq!(r.max_warp_ticks, 4999);
        assert_eq!(r.warp_pair, Some((0, 2)));
        assert_eq!(
            r.verdict(),
            WarpVerdict::Warped {
                max_warp_ticks: 4999,
                from_cpu: 0,
                to_cpu: 2
            }
        );
        assert!(!r.is_consistent());
        let ghz = Frequency::from_hz(1_000_000_000, Source::User, Accuracy::Exact).unwrap();
        assert_eq!(r.max_warp_ns(&ghz), 4999);
        let three = Frequency::from_hz(3_000_000_000, Source::User, Accuracy::Exact).unwrap();
        assert_eq!(r.max_warp_ns(&three), 1667); // 1666.33 rounded up
    }

    #[test]
    fn a_cpu_ahead_warps_the_other_way() {
        let w = WarpCheck::new(3, 50);
        run(&w, None, &[0, 0u64.wrapping_sub(7000), 0], 1 << 40, 64);
        let r = w.report();
        // Reads on 0 and 2 right after one on 1 are 6999 behind it.
        assert_eq!(
            (r.warps, r.max_warp_ticks, r.warp_pair),
            (100, 6999, Some((1, 0)))
        );
    }

    #[test]
    fn a_warp_across_the_wrap_of_a_narrow_counter() {
        // 16 bits, starting just below the wrap; CPU 1 is 0x20 behind.
        let w = WarpCheck::new(2, 100);
        run(&w, None, &[0, 0x20], 0xFFF0, 16);
        let r = w.report();
        assert_eq!(
            (r.warps, r.max_warp_ticks, r.warp_pair),
            (100, 0x1F, Some((0, 1)))
        );
    }

    #[test]
    fn every_check_is_a_handover_between_two_cpus() {
        // Each read records its CPU; a read by the CPU that read last would be a check that
        // compares nothing (what the spin-lock design did almost always).
        let w = WarpCheck::new(4, 300);
        let last = AtomicU32::new(u32::MAX);
        let (reads, same) = (AtomicU32::new(0), AtomicU32::new(0));
        std::thread::scope(|s| {
            for cpu in 0..4 {
                let (w, last, reads, same) = (&w, &last, &reads, &same);
                s.spawn(move || {
                    let c = FnCounter::new(
                        || {
                            reads.fetch_add(1, Ordering::Relaxed);
                            if last.swap(cpu, Ordering::Relaxed) == cpu {
                                same.fetch_add(1, Ordering::Relaxed);
                            }
                            u64::from(reads.load(Ordering::Relaxed))
                        },
                        64,
                    );
                    let mut patience = Test {
                        check: w,
                        absent: None,
                        looks: 0,
                    };
                    w.participate(cpu, &c, &mut patience).unwrap()
                });
            }
        });
        let r = w.report();
        // 6 pairs × 2 × 300 checks, plus each phase's first read.
        assert_eq!(r.checks, 3600);
        assert_eq!(reads.load(Ordering::Relaxed), 3606);
        // Only a phase's first read can follow the same CPU's (0's last read of (0, 1) and
        // its first of (0, 2), and so on): never one that is compared.
        assert!(same.load(Ordering::Relaxed) <= 5, "{same:?}");
        assert_eq!(r.min_checks_per_pair, 300);
        assert_eq!(r.verdict(), WarpVerdict::Inconclusive); // 300 < 1000
    }

    #[test]
    fn coverage_gates_the_verdict() {
        let short = WarpCheck::new(2, CONSISTENT_MIN_CHECKS_PER_PAIR - 1);
        run(&short, None, &[0, 0], 0, 64);
        let r = short.report();
        assert_eq!(
            (r.warps, r.min_checks_per_pair),
            (0, CONSISTENT_MIN_CHECKS_PER_PAIR - 1)
        );
        assert_eq!(r.verdict(), WarpVerdict::Inconclusive);
        assert!(!r.is_consistent());

        let enough = WarpCheck::new(2, CONSISTENT_MIN_CHECKS_PER_PAIR);
        run(&enough, None, &[0, 0], 0, 64);
        let r = enough.report();
        assert_eq!(r.verdict(), WarpVerdict::Consistent);
        assert_eq!(r.verdict().token(), "consistent");
        assert!(r.is_consistent());

        // One CPU compares nothing, however long it runs.
        let alone = WarpCheck::new(1, 1_000_000);
        run(&alone, None, &[0], 0, 64);
        let r = alone.report();
        assert_eq!((r.checks, r.pairs), (0, 0));
        assert_eq!(r.verdict(), WarpVerdict::Inconclusive);
        // Nor does a report with no run.
        assert_eq!(WarpReport::default().verdict(), WarpVerdict::Inconclusive);
    }

    #[test]
    fn a_participant_that_never_arrives_ends_in_a_timeout() {
        // Alone, CPU 0 makes step 0 and waits for CPU 1's step 1.
        let w = WarpCheck::new(2, 10);
        let c = FnCounter::new(|| 5, 64);
        assert_eq!(
            w.participate(0, &c, &mut Spins::new(10_000)),
            Err(WarpError::Timeout {
                cpu: 0,
                waiting_for: 1
            })
        );
        let r = w.report();
        assert_eq!((r.checks, r.pairs_compared, r.cpus_covered), (0, 0, 0));
        assert_eq!(r.timed_out_waiting_for, Some(1));
        assert_eq!(r.verdict(), WarpVerdict::Inconclusive);
        // CPU 1 arriving late finds the check given up.
        assert_eq!(
            w.participate(1, &c, &mut Spins::new(10)),
            Err(WarpError::Aborted { waiting_for: 1 })
        );
    }

    #[test]
    fn a_tick_budget_ends_the_wait() {
        let w = WarpCheck::new(2, 10);
        let time = AtomicU64::new(0);
        let c = FnCounter::new(|| time.fetch_add(1, Ordering::Relaxed), 64);
        let e = w.participate(1, &c, &mut TickBudget::new(&c, 1000));
        assert_eq!(
            e,
            Err(WarpError::Timeout {
                cpu: 1,
                waiting_for: 0
            })
        );
        // About 1000 reads of the budget's own (no other reads were made).
        let t = time.load(Ordering::Relaxed);
        assert!((1001..1100).contains(&t), "{t}");
    }

    #[test]
    fn three_cpus_with_one_missing_compare_only_the_pair_that_came() {
        let w = WarpCheck::new(3, 100);
        let results = run(&w, Some(2), &[0, 0, 0], 0, 64);
        let timeouts = results
            .iter()
            .filter(|r| matches!(r, Err(WarpError::Timeout { waiting_for: 2, .. })))
            .count();
        let aborts = results
            .iter()
            .filter(|r| matches!(r, Err(WarpError::Aborted { waiting_for: 2 })))
            .count();
        assert_eq!((timeouts, aborts), (1, 1), "{results:?}");
        assert_eq!(w.finished(), 2);
        let r = w.report();
        assert_eq!(r.timed_out_waiting_for, Some(2));
        // (0, 1) done both ways; CPU 0 made the first read of (0, 2), compared with nothing.
        assert_eq!((r.checks, r.pairs_compared, r.cpus_covered), (200, 1, 2));
        assert_eq!(r.min_checks_per_pair, 0);
        assert_eq!(r.verdict(), WarpVerdict::Inconclusive);
    }

    #[test]
    fn bad_cpu_numbers_are_typed_errors() {
        let w = WarpCheck::new(2, 1);
        let c = FnCounter::new(|| 0, 64);
        assert_eq!(
            w.participate(2, &c, &mut Spins::new(1)),
            Err(WarpError::CpuOutOfRange { cpu: 2, cpus: 2 })
        );
        assert_eq!(
            w.participate(u32::MAX, &c, &mut Spins::new(1)),
            Err(WarpError::CpuOutOfRange {
                cpu: u32::MAX,
                cpus: 2
            })
        );
        let alone = WarpCheck::new(1, 1);
        assert_eq!(
            alone.participate(0, &c, &mut Spins::new(1)),
            Ok(Participation::default())
        );
        assert_eq!(
            alone.participate(0, &c, &mut Spins::new(1)),
            Err(WarpError::AlreadyJoined { cpu: 0 })
        );
    }

    #[test]
    fn sizes_are_clamped_to_what_fits() {
        let w = WarpCheck::new(10_000, u32::MAX);
        assert_eq!(w.cpus(), MAX_WARP_CPUS);
        let steps = u64::from(pairs_of(w.cpus())) * (2 * u64::from(w.checks_per_pair()) + 1);
        assert!(steps <= u64::from(u32::MAX));
        assert!(w.checks_per_pair() >= 1 << 15);
        assert_eq!(WarpCheck::new(2, 0).checks_per_pair(), 1);
        assert_eq!(core::mem::size_of::<WarpCheck>(), 80); // as the docs say
        assert!(WarpCheck::new(2, u32::MAX).checks_per_pair() >= 1 << 30);
        // The holder schedule: (0,1) then (0,2), (1,2); i on even positions.
        let w = WarpCheck::new(3, 2);
        let holders: Vec<u32> = (0..15).map(|s| w.holder_of(s)).collect();
        assert_eq!(holders, [0, 1, 0, 1, 0, 0, 2, 0, 2, 0, 1, 2, 1, 2, 1]);
    }
}
