//! Simulated counters and reference timers for [baretime](https://docs.rs/baretime), for
//! testing calibration — ours or a user's — against hardware that misbehaves on purpose,
//! reproducibly.
//!
//! A [`SimWorld`] holds the true time (in picoseconds) and a seeded PRNG. A [`SimCounter`]
//! and a [`SimReference`] borrow the world and turn true time into ticks, each described by a
//! [`SimTimer`]: nominal rate, frequency error and drift, width (wrap), quantization, start
//! value, read cost and jitter, and a [`SimFault`]. Every read *takes time*: it advances the
//! world's clock by its cost (with jitter), and the value is latched part-way through. The
//! world can also stall the whole machine like an SMI ([`SimWorld::with_smi`]): reads that
//! straddle a stall take 100 µs longer, exactly what bracket rejection must catch. Each stall
//! begins a new *regime* in which a device's reads may cost more, mostly on one side of the
//! latch ([`SimTimer::with_regime_cost`]), as an emulated target's do after its host
//! scheduled it out: disturbances that stay inside narrow brackets and shift their midpoints
//! for milliseconds at a time.
//!
//! [`FaultyRead`] models the aarch64 counter errata ([`baretime_aarch64::Erratum`]): give it
//! the true count at each read and it returns what the buggy hardware would, to test a
//! workaround (or code that must survive without one) on any host.
//!
//! Everything is integer arithmetic and `no_std`, like baretime; interior mutability is
//! `Cell`, so a world is single-threaded (`!Sync`). Every module is private and each item has
//! one path, the list below.
//!
//! ```
//! use baretime::{calibrate, Config};
//! use baretime_sim::{SimCounter, SimReference, SimTimer, SimWorld};
//! use core::time::Duration;
//!
//! let world = SimWorld::new(7).with_smi(10, Duration::from_micros(100));
//! let tsc = SimCounter::new(&world, SimTimer::new(2_300_000_000).with_error_ppb(12_000));
//! let pit = SimReference::new(&world, SimTimer::pit(), "pit");
//! let cal = calibrate(&tsc, pit, Config::new().with_max_duration(Duration::from_millis(20))).unwrap();
//! let true_mhz = tsc.timer().true_millihz();
//! let err_ppb = cal.frequency.as_millihz().abs_diff(true_mhz) * 1_000_000_000 / true_mhz;
//! assert!(err_ppb <= cal.frequency.accuracy().bound_ppb());
//! ```

#![cfg_attr(not(test), no_std)]
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

mod faulty;
#[cfg(feature = "defmt")]
mod format;
mod wide;

pub use faulty::FaultyRead;

// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use core::cell::Cell;
use core::time::Duration;

use crate::wide::mul_div;
use baretime::Reference;
use baretime::{Accuracy, Frequency, Source};
use baretime::{Counter, Width};

const PS_PER_S: u64 = 1_000_000_000_000;

/// The slowest rate the crate accepts, checked at compile time (a fallback never reached).
const SLOWEST: Frequency =
    match Frequency::from_millihz(Frequency::MIN_HZ * 1000, Source::Reference, Accuracy::Exact) {
        Some(f) => f,
        None => panic!("Frequency::MIN_HZ is outside Frequency's range"),
    };

fn ps_of(d: Duration) -> u64 {
    saturate_u64(d.as_nanos().saturating_mul(1000))
}

/// True time, a seeded PRNG, and machine-wide stalls, shared by simulated devices.
#[derive(Debug)]
pub struct SimWorld {
    now_ps: Cell<u64>,
    rng: Cell<u64>,
    /// The seed, from which each regime's draw is derived (not from `rng`, whose sequence
    /// stays what it was before regimes existed).
    seed: u64,
    smi_mean_gap_ps: u64,
    smi_ps: u64,
    next_smi_ps: Cell<u64>,
    smis: Cell<u64>,
}

impl SimWorld {
    /// A world at true time 0 with PRNG `seed` and no stalls.
    pub fn new(seed: u64) -> Self {
        SimWorld {
            now_ps: Cell::new(0),
            rng: Cell::new(seed),
            seed,
            smi_mean_gap_ps: 0,
            smi_ps: 0,
            next_smi_ps: Cell::new(u64::MAX),
            smis: Cell::new(0),
        }
    }

    /// SMI-like stalls: about `per_second` times per second of true time (gaps uniform
    /// between 0 and twice the mean), the whole machine stops for `stall`.
    pub fn with_smi(self, per_second: u32, stall: Duration) -> Self {
        let gap = PS_PER_S.checked_div(u64::from(per_second)).unwrap_or(0);
        let w = SimWorld {
            smi_mean_gap_ps: gap,
            smi_ps: ps_of(stall),
            ..self
        };
        if gap > 0 {
            let first = w
                .now_ps()
                .saturating_add(w.random_below(gap.saturating_mul(2)));
            w.next_smi_ps.set(first);
        }
        w
    }

    /// True time, in picoseconds.
    pub fn now_ps(&self) -> u64 {
        self.now_ps.get()
    }

    /// True time.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now_ps() / 1000)
    }

    /// Number of stalls so far.
    pub fn smi_count(&self) -> u64 {
        self.smis.get()
    }

    /// The current regime: the number of stalls so far (see [`SimTimer::with_regime_cost`]).
    fn regime(&self) -> u64 {
        self.smi_count()
    }

    /// Uniform in `0..=max`, the same for the whole current regime.
    fn regime_draw(&self, max: u64) -> u64 {
        let mut z = self.seed.wrapping_add(
            self.regime()
                .wrapping_add(1)
                .wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let span = u128::from(max).saturating_add(1);
        u64::try_from((u128::from(z).saturating_mul(span)) >> 64).unwrap_or(max)
    }

    /// Lets `ps` picoseconds of work pass, plus any stall that begins meanwhile.
    pub fn advance_ps(&self, ps: u64) {
        let mut end = self.now_ps().saturating_add(ps);
        if self.smi_mean_gap_ps > 0 {
            let mut next = self.next_smi_ps.get();
            while next <= end {
                end = end.saturating_add(self.smi_ps);
                self.smis.set(self.smis.get().saturating_add(1));
                let gap = self
                    .random_below(self.smi_mean_gap_ps.saturating_mul(2))
                    .max(1);
                next = next.saturating_add(self.smi_ps).saturating_add(gap);
            }
            self.next_smi_ps.set(next);
        }
        self.now_ps.set(end);
    }

    /// Lets `d` pass (see [`SimWorld::advance_ps`]).
    pub fn advance(&self, d: Duration) {
        self.advance_ps(ps_of(d));
    }

    /// The next PRNG output (SplitMix64).
    pub fn random(&self) -> u64 {
        let s = self.rng.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.rng.set(s);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 if `n` is 0).
    pub fn random_below(&self, n: u64) -> u64 {
        // Lemire's multiply-shift: the high half of a 64×64 product is below n.
        u64::try_from((u128::from(self.random()).wrapping_mul(u128::from(n))) >> 64).unwrap_or(0)
    }

    /// `base` ± up to `jitter`, uniform.
    fn jittered(&self, base: u64, jitter: u64) -> u64 {
        if jitter == 0 {
            return base;
        }
        let r = self.random_below(jitter.saturating_mul(2).saturating_add(1));
        base.saturating_add(r).saturating_sub(jitter)
    }
}

/// A fault a simulated device develops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SimFault {
    /// None.
    None,
    /// From this true time on, the count stands still.
    StuckAfter(Duration),
    /// From this true time on, the count is `by` ticks lower (one step back, then onward).
    BackwardsAt {
        /// When.
        at: Duration,
        /// Ticks.
        by: u64,
    },
    /// The first read at or after this true time returns a value `by` ticks too high.
    SpikeAt {
        /// When.
        at: Duration,
        /// Ticks.
        by: u64,
    },
}

/// How a simulated device counts and reads. Build with [`SimTimer::new`] or a preset, then
/// the `const` setters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SimTimer {
    nominal_millihz: u64,
    error_ppb: i64,
    drift_ppb_per_s: i64,
    bits: u32,
    quantum: u64,
    start: u64,
    read_ps: u64,
    jitter_ps: u64,
    latch_permille: u64,
    regime_ps: u64,
    regime_before_permille: u64,
    fault: SimFault,
}

impl SimTimer {
    /// A 64-bit device at `hz` (clamped to ≥ 1 Hz) with no error, reads of 20 ns ± 2 ns: a
    /// CPU counter such as the TSC.
    pub const fn new(hz: u64) -> Self {
        SimTimer {
            nominal_millihz: if hz == 0 {
                1000
            } else {
                hz.saturating_mul(1000)
            },
            error_ppb: 0,
            drift_ppb_per_s: 0,
            bits: 64,
            quantum: 1,
            start: 0,
            read_ps: 20_000,
            jitter_ps: 2_000,
            latch_permille: 500,
            regime_ps: 0,
            regime_before_permille: 500,
            fault: SimFault::None,
        }
    }

    /// The PC's 8254 PIT: 1.193182 MHz, 16 bits, each read 1 µs ± 0.3 µs.
    pub const fn pit() -> Self {
        Self::new(1_193_182)
            .with_bits(16)
            .with_read_cost(Duration::from_micros(1), Duration::from_nanos(300))
    }

    /// The ACPI PM timer: 3.579545 MHz, 24 bits, each read 0.7 µs ± 0.1 µs.
    pub const fn acpi_pm() -> Self {
        Self::new(3_579_545)
            .with_bits(24)
            .with_read_cost(Duration::from_nanos(700), Duration::from_nanos(100))
    }

    /// The true rate differs from the nominal one by this many ppb (positive: faster).
    /// Clamped above -10^9.
    pub const fn with_error_ppb(mut self, ppb: i64) -> Self {
        self.error_ppb = if ppb <= -1_000_000_000 {
            -999_999_999
        } else {
            ppb
        };
        self
    }

    /// The true rate changes by this many ppb per second of true time (temperature drift).
    pub const fn with_drift_ppb_per_s(mut self, ppb: i64) -> Self {
        self.drift_ppb_per_s = ppb;
        self
    }

    /// Width in bits (1..=64): the count wraps at 2^bits.
    pub const fn with_bits(mut self, bits: u32) -> Self {
        self.bits = if bits == 0 {
            1
        } else if bits > 64 {
            64
        } else {
            bits
        };
        self
    }

    /// Reads are rounded down to a multiple of `ticks` (a coarse clock, a counter that steps
    /// by more than one).
    pub const fn with_quantum(mut self, ticks: u64) -> Self {
        self.quantum = if ticks == 0 { 1 } else { ticks };
        self
    }

    /// The count at true time 0 (to start near a wrap, say).
    pub const fn with_start_ticks(mut self, ticks: u64) -> Self {
        self.start = ticks;
        self
    }

    /// Each read takes `cost` ± `jitter` (uniform) of true time.
    pub const fn with_read_cost(mut self, cost: Duration, jitter: Duration) -> Self {
        let c = cost.as_nanos().saturating_mul(1000);
        let j = jitter.as_nanos().saturating_mul(1000);
        self.read_ps = saturate_u64(c);
        self.jitter_ps = saturate_u64(j);
        self
    }

    /// Where in a read the value is latched, in thousandths of its cost (default 500).
    pub const fn with_latch_at_permille(mut self, permille: u32) -> Self {
        self.latch_permille = if permille > 1000 {
            1000
        } else {
            permille as u64
        };
        self
    }

    /// In each regime of the world (from one stall to the next, see [`SimWorld::with_smi`])
    /// every read costs an extra amount, drawn uniformly between 0 and `extra` when the
    /// regime begins, of which `before_permille` thousandths come before the latch.
    ///
    /// This is what QEMU's `aarch64-virt` shows for semihosting's elapsed time (a trap to the
    /// host) read between two generic-timer reads: between host preemptions the narrow
    /// brackets are wider or narrower by about 150 ns for milliseconds at a time, three
    /// quarters of the difference after the latch, so the bracket midpoints shift with the
    /// width by about a quarter of it. A fit through the midpoints takes that shift, from one
    /// regime to the next, for a rate (issue 15).
    pub const fn with_regime_cost(mut self, extra: Duration, before_permille: u32) -> Self {
        self.regime_ps = saturate_u64(extra.as_nanos().saturating_mul(1000));
        self.regime_before_permille = if before_permille > 1000 {
            1000
        } else {
            before_permille as u64
        };
        self
    }

    /// The fault this device develops.
    pub const fn with_fault(mut self, fault: SimFault) -> Self {
        self.fault = fault;
        self
    }

    /// The nominal (declared) rate, in mHz.
    pub const fn nominal_millihz(&self) -> u64 {
        self.nominal_millihz
    }

    /// The true rate at true time 0, in mHz (rounded down).
    pub fn true_millihz(&self) -> u64 {
        self.true_millihz_at(Duration::ZERO)
    }

    /// The true rate at true time `t`, in mHz (rounded down).
    pub fn true_millihz_at(&self, t: Duration) -> u64 {
        let t_s_ppb = i128::from(self.drift_ppb_per_s)
            .saturating_mul(i128::try_from(t.as_nanos()).unwrap_or(i128::MAX))
            / 1_000_000_000;
        let scale = 1_000_000_000i128
            .saturating_add(i128::from(self.error_ppb))
            .saturating_add(t_s_ppb)
            .max(0);
        let v = mul_div(
            u128::from(self.nominal_millihz),
            scale.unsigned_abs(),
            1_000_000_000,
        )
        .unwrap_or(u128::MAX);
        saturate_u64(v)
    }

    /// The nominal rate as a [`Frequency`] (source [`Source::Reference`], exact), or `None`
    /// outside the crate's range.
    pub const fn nominal(&self) -> Option<Frequency> {
        Frequency::from_millihz(self.nominal_millihz, Source::Reference, Accuracy::Exact)
    }

    /// The ideal count (before faults, quantization and wrap) at true time `t_ps`.
    fn ideal(&self, t_ps: u64) -> u64 {
        // ticks = f_mHz · (t·(10^9 + err) + drift·t²/(2·10^12)) / 10^24, t in ps.
        let t = i128::from(t_ps);
        let linear = t.saturating_mul(1_000_000_000i128.saturating_add(i128::from(self.error_ppb)));
        let quad = i128::from(self.drift_ppb_per_s)
            .saturating_mul(t.saturating_mul(t) / 2_000_000_000_000);
        let phase = linear.saturating_add(quad).max(0).unsigned_abs();
        let ticks = mul_div(
            u128::from(self.nominal_millihz),
            phase,
            1_000_000_000_000_000_000_000_000,
        )
        .unwrap_or(u128::MAX);
        self.start.wrapping_add(saturate_u64(ticks))
    }

    /// The value a read latched at true time `t_ps` returns; `spike_armed` is set until the
    /// one read that a [`SimFault::SpikeAt`] hits, which clears it.
    fn value(&self, t_ps: u64, spike_armed: &Cell<bool>) -> u64 {
        let mut v = match self.fault {
            SimFault::StuckAfter(at) => self.ideal(t_ps.min(ps_of(at))),
            SimFault::BackwardsAt { at, by } if t_ps >= ps_of(at) => {
                self.ideal(t_ps).wrapping_sub(by)
            }
            SimFault::SpikeAt { at, by } if t_ps >= ps_of(at) && spike_armed.get() => {
                spike_armed.set(false);
                self.ideal(t_ps).wrapping_add(by)
            }
            _ => self.ideal(t_ps),
        };
        v = v
            .checked_div(self.quantum)
            .unwrap_or(v)
            .saturating_mul(self.quantum);
        v & Width::new(self.bits).mask()
    }

    /// Performs one read in `world`: time passes, the value is latched part-way.
    fn read(&self, world: &SimWorld, spike_armed: &Cell<bool>) -> u64 {
        let part = |ps: u64, permille: u64| {
            u64::try_from(u128::from(ps).saturating_mul(u128::from(permille)) / 1000).unwrap_or(ps)
        };
        let cost = world.jittered(self.read_ps, self.jitter_ps);
        let extra = if self.regime_ps == 0 {
            0
        } else {
            world.regime_draw(self.regime_ps)
        };
        let before = part(cost, self.latch_permille)
            .saturating_add(part(extra, self.regime_before_permille));
        world.advance_ps(before);
        let v = self.value(world.now_ps(), spike_armed);
        world.advance_ps(cost.saturating_add(extra).saturating_sub(before));
        v
    }
}

/// A simulated [`Counter`] living in a [`SimWorld`].
#[derive(Debug)]
pub struct SimCounter<'w> {
    world: &'w SimWorld,
    timer: SimTimer,
    spike_armed: Cell<bool>,
}

impl<'w> SimCounter<'w> {
    /// A counter behaving as `timer` says.
    pub fn new(world: &'w SimWorld, timer: SimTimer) -> Self {
        SimCounter {
            world,
            timer,
            spike_armed: Cell::new(true),
        }
    }

    /// Its description (true rate, faults).
    pub fn timer(&self) -> &SimTimer {
        &self.timer
    }
}

impl Counter for SimCounter<'_> {
    fn ticks(&self) -> u64 {
        self.timer.read(self.world, &self.spike_armed)
    }
    fn bits(&self) -> u32 {
        self.timer.bits
    }
}

/// A simulated [`Reference`] living in a [`SimWorld`]. It declares its *nominal* rate (with
/// [`Accuracy::Exact`] unless [`SimReference::with_accuracy`] says otherwise); give its timer
/// an error to simulate a reference that is not what it claims.
#[derive(Debug)]
pub struct SimReference<'w> {
    world: &'w SimWorld,
    timer: SimTimer,
    name: &'static str,
    accuracy: Accuracy,
    spike_armed: Cell<bool>,
}

impl<'w> SimReference<'w> {
    /// A reference behaving as `timer` says, called `name` in reports.
    pub fn new(world: &'w SimWorld, timer: SimTimer, name: &'static str) -> Self {
        SimReference {
            world,
            timer,
            name,
            accuracy: Accuracy::Exact,
            spike_armed: Cell::new(true),
        }
    }

    /// Declares this accuracy for its nominal rate (a PIT crystal's ±100 ppm, say).
    pub fn with_accuracy(self, accuracy: Accuracy) -> Self {
        SimReference { accuracy, ..self }
    }

    /// Its description.
    pub fn timer(&self) -> &SimTimer {
        &self.timer
    }
}

impl Reference for SimReference<'_> {
    fn read(&mut self) -> u64 {
        self.timer.read(self.world, &self.spike_armed)
    }
    fn bits(&self) -> u32 {
        self.timer.bits
    }
    fn frequency(&self) -> Frequency {
        // Out-of-range nominal rates are clamped into range: a simulation may lie.
        let mhz = self.timer.nominal_millihz.clamp(
            Frequency::MIN_HZ.saturating_mul(1000),
            Frequency::MAX_HZ.saturating_mul(1000),
        );
        Frequency::from_millihz(mhz, Source::Reference, self.accuracy).unwrap_or(SLOWEST)
    }
    fn name(&self) -> &'static str {
        self.name
    }
}

/// `v` as a `u64`, saturating at `u64::MAX`.
const fn saturate_u64(v: u128) -> u64 {
    if v > u64::MAX as u128 {
        u64::MAX
    } else {
        v as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_take_time_and_count_at_the_true_rate() {
        let w = SimWorld::new(1);
        let c = SimCounter::new(
            &w,
            SimTimer::new(1_000_000_000).with_read_cost(Duration::from_nanos(10), Duration::ZERO),
        );
        assert_eq!(c.ticks(), 5); // latched half-way through a 10 ns read
        assert_eq!(w.now_ps(), 10_000);
        w.advance(Duration::from_millis(1));
        assert_eq!(c.ticks(), 1_000_015);
        let fast = SimTimer::new(1_000_000_000).with_error_ppb(1_000);
        assert_eq!(fast.ideal(PS_PER_S), 1_000_001_000);
        assert_eq!(fast.true_millihz(), 1_000_001_000_000);
        let drifting = SimTimer::new(1_000_000_000).with_drift_ppb_per_s(2_000);
        assert_eq!(drifting.ideal(PS_PER_S), 1_000_001_000); // ∫ 2000 ppb/s · t dt over 1 s
        assert_eq!(
            drifting.true_millihz_at(Duration::from_secs(1)),
            1_000_002_000_000
        );
    }

    #[test]
    fn wrap_quantum_and_faults() {
        let spike = Cell::new(true);
        let t = SimTimer::new(1_000_000).with_bits(8).with_start_ticks(250);
        assert_eq!(t.value(10_000_000, &spike), (250 + 10) & 0xff);
        let t = SimTimer::new(1_000_000).with_quantum(16);
        assert_eq!(t.value(40_000_000, &spike), 32);
        let t = SimTimer::new(1_000_000).with_fault(SimFault::StuckAfter(Duration::from_micros(5)));
        assert_eq!(t.value(40_000_000, &spike), 5);
        let t = SimTimer::new(1_000_000).with_fault(SimFault::BackwardsAt {
            at: Duration::from_micros(5),
            by: 3,
        });
        assert_eq!(
            (t.value(4_000_000, &spike), t.value(5_000_000, &spike)),
            (4, 2)
        );
        let t = SimTimer::new(1_000_000).with_fault(SimFault::SpikeAt {
            at: Duration::from_micros(5),
            by: 100,
        });
        assert_eq!(
            (t.value(6_000_000, &spike), t.value(7_000_000, &spike)),
            (106, 7)
        );
    }

    #[test]
    fn stalls_arrive_at_the_configured_rate() {
        let w = SimWorld::new(3).with_smi(10, Duration::from_micros(100));
        for _ in 0..10_000 {
            w.advance(Duration::from_micros(100)); // one second of work in total
        }
        assert!((5..=15).contains(&w.smi_count()), "{}", w.smi_count());
        assert_eq!(w.now_ps(), PS_PER_S + w.smi_count() * 100_000_000);
    }

    #[test]
    fn prng_is_seeded_and_bounded() {
        let (a, b) = (SimWorld::new(9), SimWorld::new(9));
        assert_eq!(a.random(), b.random());
        assert!((0..1000).all(|_| a.random_below(7) < 7));
        assert_eq!(a.random_below(0), 0);
    }
}
