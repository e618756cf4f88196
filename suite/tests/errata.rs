//! The aarch64 counter errata against their simulated faulty counters (`FaultyRead`).
//!
//! For each erratum, a million reads of a slow true counter (a tick every four reads or so,
//! as the workarounds assume) that every 64 reads jumps to just short of a carry into bit
//! 10..=40 — bit 32's included, where 858921 strikes — go through the model:
//!
//! - with the erratum's workaround, every value is a true one (between the truth before and
//!   after the read), the sequence never goes back, and no read hits the retry bound;
//! - without it, the same reads show the bug: glitches, steps back and untrue values. So
//!   the first half can fail: it fails wherever the workaround lets a glitch through.
//!
//! A `Clock` on the 858921 model shows what the bug does to time: without the workaround it
//! runs ahead of the truth by about 2^32 ticks (4.3 s at 1 GHz), with it never by more than
//! a nanosecond.

use core::cell::Cell;
use core::time::Duration;

use baretime::{Clock, FnCounter, Frequency};
use baretime_aarch64::Erratum;
use baretime_sim::FaultyRead;
use baretime_sim::SimWorld;

const CALLS: u64 = 1_000_000;

/// A true counter: 0 or 1 tick per raw read (1 in 4), with jumps to just before carries.
struct Truth {
    now: Cell<u64>,
    rng: SimWorld,
}

impl Truth {
    fn new(seed: u64) -> Truth {
        Truth {
            now: Cell::new(0x3_FFFF_F000),
            rng: SimWorld::new(seed),
        }
    }
    /// One raw read's worth of time.
    fn step(&self) -> u64 {
        let t = self.now.get() + u64::from(self.rng.random_below(4) == 0);
        self.now.set(t);
        t
    }
    /// Jumps forward to a few ticks short of the next multiple of 2^b, b in 10..=40.
    fn jump_near_a_carry(&self) {
        let b = 10 + self.rng.random_below(31) as u32;
        let unit = 1u64 << b;
        let next = (self.now.get() / unit + 1) * unit;
        self.now.set(next - self.rng.random_below(8));
    }
}

#[derive(Debug, Default, PartialEq)]
struct Tally {
    glitches: u64,
    back: u64,
    untrue: u64,
    unsettled: u64,
    raw_reads: u64,
    /// Reads during which bit 32 of the truth carried.
    bit32_carries_in_a_read: u64,
}

fn run(erratum: Erratum, workaround: bool, seed: u64) -> Tally {
    let truth = Truth::new(seed);
    let model = FaultyRead::new(erratum, seed ^ 0x5eed);
    let raw = || model.read(truth.step());
    let mut tally = Tally::default();
    let mut last = 0;
    for i in 0..CALLS {
        if i % 64 == 63 {
            truth.jump_near_a_carry();
        }
        let t0 = truth.now.get();
        let v = if workaround {
            let r = erratum.read(raw);
            tally.unsettled += u64::from(!r.settled);
            r.ticks
        } else {
            raw()
        };
        let t1 = truth.now.get();
        tally.bit32_carries_in_a_read += (t0 ^ t1) >> 32 & 1;
        tally.untrue += u64::from(v < t0 || v > t1);
        tally.back += u64::from(v < last);
        last = v;
    }
    tally.glitches = model.glitches();
    tally.raw_reads = model.reads();
    tally
}

fn check(erratum: Erratum) {
    for seed in [1, 2] {
        let on = run(erratum, true, seed);
        let off = run(erratum, false, seed);
        println!("{erratum}: seed {seed}: with the workaround {on:?}; without {off:?}");
        assert!(
            on.glitches > 100,
            "{erratum}: the model hardly struck: {on:?}"
        );
        assert_eq!(
            (on.back, on.untrue, on.unsettled),
            (0, 0, 0),
            "{erratum}: the workaround let a glitch through: {on:?}"
        );
        assert!(
            off.glitches > 100 && off.back > 0 && off.untrue > 0,
            "{erratum}: without the workaround the model shows no bug: {off:?}"
        );
        assert!(
            on.raw_reads < CALLS * 4,
            "{erratum}: too many retries: {on:?}"
        );
    }
}

#[test]
fn fsl_a008585_garbage_reads() {
    check(Erratum::FslA008585);
}

#[test]
fn hisilicon_161010101_reads_off_by_multiples_of_32() {
    check(Erratum::Hisilicon161010101);
}

#[test]
fn arm_858921_bit_32_carry() {
    check(Erratum::Arm858921);
    // The carries the test is about did happen, thousands of times, during a read.
    assert!(run(Erratum::Arm858921, true, 1).bit32_carries_in_a_read > 3_000);
}

#[test]
fn sun50i_unknown1_low_bits_at_rollover() {
    check(Erratum::Sun50iUnknown1);
}

/// A workaround is no use against another erratum's glitches: the tests above catch what
/// they are meant to, and would catch a mix-up of the rules.
#[test]
fn each_workaround_is_specific() {
    // 858921's single re-read does not catch random garbage.
    let truth = Truth::new(3);
    let model = FaultyRead::new(Erratum::FslA008585, 3).with_one_in(10);
    let mut untrue = 0;
    for _ in 0..100_000 {
        let t0 = truth.now.get();
        let v = Erratum::Arm858921.read(|| model.read(truth.step())).ticks;
        untrue += u32::from(v < t0 || v > truth.now.get());
    }
    assert!(untrue > 0);
}

/// The bug seen through a `Clock` (1 GHz, so a tick is a nanosecond): a read at a bit-32
/// carry is about 2^32 ns ahead. The clock confirms every reading that far past its
/// high-water mark with a second read and keeps the smaller (clock promise 7), so one glitched
/// read never becomes the time, with or without the workaround; with it, no read is wrong in
/// the first place.
#[test]
fn a_clock_on_the_858921_model() {
    let lead_ns = |workaround: bool| {
        let truth = Truth::new(9);
        let model = FaultyRead::new(Erratum::Arm858921, 9);
        let read = || {
            let raw = || model.read(truth.step());
            if workaround {
                Erratum::Arm858921.read(raw).ticks
            } else {
                raw()
            }
        };
        let clock = Clock::new(
            FnCounter::new(read, 64),
            Frequency::exact_hz(1_000_000_000).unwrap(),
        );
        let (c0, t0) = (clock.now(), truth.now.get());
        let mut max_lead = 0i128;
        for i in 0..200_000u64 {
            if i % 64 == 63 {
                truth.jump_near_a_carry();
            }
            let elapsed: Duration = clock.now() - c0;
            let true_ns = truth.now.get() - t0;
            max_lead = max_lead.max(elapsed.as_nanos() as i128 - i128::from(true_ns));
        }
        max_lead
    };
    let off = lead_ns(false);
    let on = lead_ns(true);
    println!("Clock lead over the true counter: {off} ns without the workaround, {on} ns with it");
    assert!(off <= 1, "a glitched read became the time: {off} ns");
    assert!(on <= 1, "the clock ran ahead with the workaround: {on} ns");
}

/// Why the Allwinner rule is mainline Linux's (low 9 bits all ones or zeros, whatever the
/// direction) and not the variant some trees carry ("and the value went back"): a forward
/// glitch (7ff → fff) does not go back, so the variant returns it, and the next true read
/// goes back.
#[test]
fn sun50i_direction_test_would_miss_forward_glitches() {
    let went_back_variant = |raw: &dyn Fn() -> u64| {
        let mut new = raw();
        for _ in 0..150 {
            let old = new;
            new = raw();
            let back = (new.wrapping_sub(old) as i64) < 0;
            if !(back && new.wrapping_add(1) & 0x3FF <= 1) {
                break;
            }
        }
        new
    };
    let truth = Truth::new(5);
    let model = FaultyRead::new(Erratum::Sun50iUnknown1, 5);
    let raw = || model.read(truth.step());
    let (mut untrue, mut last, mut back) = (0, 0, 0);
    for i in 0..200_000u64 {
        if i % 64 == 63 {
            truth.jump_near_a_carry();
        }
        let t0 = truth.now.get();
        let v = went_back_variant(&raw);
        untrue += u32::from(v < t0 || v > truth.now.get());
        back += u32::from(v < last);
        last = v;
    }
    assert!(untrue > 0 && back > 0, "untrue {untrue}, back {back}");
}

proptest::proptest! {
    /// Whatever the raw reads are, a workaround read ends within its bound, counts its reads
    /// exactly, returns one of the values it read, and when it says `settled` the rule held.
    #[test]
    fn any_raw_reads_are_bounded(
        values in proptest::collection::vec(proptest::prelude::any::<u64>(), 1..64),
        small in proptest::collection::vec(0u64..40, 1..64),
        which in 0usize..4,
        use_small: bool,
    ) {
        let erratum = Erratum::ALL[which];
        // Small steps make the rules settle; arbitrary values mostly do not.
        let values: Vec<u64> = if use_small {
            small.iter().scan(1u64 << 32, |t, d| { *t += d; Some(*t) }).collect()
        } else {
            values
        };
        let seen = core::cell::RefCell::new(Vec::new());
        let raw = || {
            let mut s = seen.borrow_mut();
            let v = values[s.len() % values.len()];
            s.push(v);
            v
        };
        let r = erratum.read(raw);
        let seen = seen.into_inner();
        proptest::prop_assert!(r.reads >= 1 && r.reads <= erratum.max_reads());
        proptest::prop_assert_eq!(r.reads as usize, seen.len());
        proptest::prop_assert!(seen.contains(&r.ticks));
        if r.settled {
            let n = seen.len();
            match erratum {
                Erratum::FslA008585 => proptest::prop_assert_eq!(seen[n - 2], seen[n - 1]),
                Erratum::Hisilicon161010101 => {
                    proptest::prop_assert!(seen[n - 1].wrapping_sub(seen[n - 2]) < 32)
                }
                Erratum::Sun50iUnknown1 => {
                    proptest::prop_assert!(r.ticks.wrapping_add(1) & 0x1FF > 1)
                }
                _ => proptest::prop_assert_eq!(n, 2),
            }
        } else {
            proptest::prop_assert_eq!(r.reads, erratum.max_reads());
            proptest::prop_assert_eq!(r.ticks, seen[seen.len() - 1]);
        }
    }
}
