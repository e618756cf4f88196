//! `mode=errata`: the counter errata's workarounds on the real CNTVCT_EL0, wrapped in the
//! crate's faulty-read models ([`FaultyRead`]).
//!
//! QEMU's counter has none of the four bugs, so each model plays one over the real count:
//! the "true" count a model sees is `(CNTVCT_EL0 >> shift) + offset`. The shift slows the
//! counter until a tick spans about four reads, as on the parts with these errata (a 24 or
//! 25 MHz counter under a GHz core), which A-008585's and HiSilicon's rules need; the offset
//! puts each batch of reads a few ticks before a carry into bit 32, where 858921 strikes
//! (every carry into bit 32 is also one into bits 10..=31, where the Allwinner bug strikes).
//!
//! For each erratum, the same reads with the workaround and without it, then a `Clock` and a
//! `Delay` on the model: `<token>_on_*` and `<token>_off_*` counts of the model's glitches,
//! steps back (monotonicity check), untrue values (outside the true count before and after
//! the read) and reads that hit the retry bound; the clock's largest lead over the true
//! count; the shortest of a few 1 ms delays, each across a carry, measured on the true count.

use core::fmt::Write;

use baretime::{Accuracy, Clock, FnCounter, Frequency, Source};
use baretime_aarch64::{discover, Erratum, GenericTimer};
use baretime_sim::FaultyRead;

/// Workaround reads per erratum and side.
const CALLS: u64 = 100_000;
/// Reads per batch: each batch starts [`LEAD_TICKS`] before a carry into bit 32.
const BATCH: u64 = 256;
/// How far before the carry a batch starts, in slowed ticks.
const LEAD_TICKS: u64 = 16;
/// `Clock::now` calls per erratum and side.
const CLOCK_CALLS: u64 = 20_000;
/// The delays timed, each `DELAY_NS` long and across a carry.
const DELAYS: u32 = 5;
const DELAY_NS: u64 = 1_000_000;
/// How far the clock may read ahead of the true count: its tick → ns conversion rounds
/// (≤ 1 ns) at each of the two readings a lead compares.
const LEAD_ROUNDING_NS: u64 = 2;

/// The true count the models see: the real counter slowed by `shift` bits, plus `offset`.
struct Truth {
    timer: GenericTimer,
    shift: u32,
    offset: core::cell::Cell<u64>,
}

impl Truth {
    fn now(&self) -> u64 {
        (self.timer.read_ordered() >> self.shift).wrapping_add(self.offset.get())
    }
    /// Moves the count forward to `ticks` before the next carry into bit 32 that is more than
    /// `ticks` away (the count never goes back).
    fn before_next_carry(&self, ticks: u64) {
        let now = self.now();
        let next = (((now + ticks) >> 32) + 1) << 32;
        let target = next - ticks;
        self.offset
            .set(self.offset.get().wrapping_add(target.wrapping_sub(now)));
    }
}

#[derive(Default)]
struct Tally {
    glitches: u64,
    back: u64,
    untrue: u64,
    unsettled: u64,
    raw_reads: u64,
}

/// Runs the scenario; `true` when every workaround held (the kernel's exit status).
pub fn run(out: &mut impl Write, timer: GenericTimer) -> bool {
    // How many real ticks a read takes, to slow the counter to about four reads a tick.
    let t0 = timer.read_ordered();
    for _ in 0..1000 {
        core::hint::black_box(timer.read_ordered());
    }
    let per_1000 = timer.read_ordered().wrapping_sub(t0);
    let mut shift = 0;
    while (1000u64 << shift) < per_1000.saturating_mul(4) && shift < 32 {
        shift += 1;
    }
    let cntfrq_mhz = discover().cntfrq.saturating_mul(1000);
    let Some(slow) = Frequency::from_millihz(
        cntfrq_mhz >> shift,
        Source::Cntfrq,
        Accuracy::Nominal { tolerance_ppb: 0 },
    ) else {
        let _ = writeln!(out, "error=slowed_rate_out_of_range shift={shift}");
        return false;
    };
    let slow_tick_ns = 1_000_000_000_000u64.div_ceil(slow.as_millihz());
    let _ = writeln!(
        out,
        "errata_ticks_per_1000_reads={per_1000} errata_shift={shift} errata_slow_millihz={} errata_slow_tick_ns={slow_tick_ns} errata_calls={CALLS} errata_delay_ns={DELAY_NS} errata_lead_rounding_ns={LEAD_ROUNDING_NS}",
        slow.as_millihz()
    );
    let truth = Truth {
        timer,
        shift,
        offset: core::cell::Cell::new(0),
    };

    let mut ok = true;
    for (i, erratum) in Erratum::ALL.into_iter().enumerate() {
        let seed = 0x5eed + i as u64;
        let name = erratum.token();
        for workaround in [true, false] {
            let side = if workaround { "on" } else { "off" };
            let t = reads(&truth, erratum, workaround, seed);
            let _ = writeln!(
                out,
                "{name}_{side}_glitches={} {name}_{side}_back={} {name}_{side}_untrue={} {name}_{side}_unsettled={} {name}_{side}_raw_reads={}",
                t.glitches, t.back, t.untrue, t.unsettled, t.raw_reads
            );
            let (lead_ns, delay_min_ns) = clock(&truth, slow, erratum, workaround, seed);
            let _ = writeln!(
                out,
                "{name}_{side}_clock_lead_ns={lead_ns} {name}_{side}_delay_min_ns={delay_min_ns}"
            );
            if workaround {
                ok &= t.glitches > 0 && t.back == 0 && t.untrue == 0 && t.unsettled == 0;
                ok &= lead_ns <= LEAD_ROUNDING_NS && delay_min_ns + slow_tick_ns >= DELAY_NS;
            } else {
                ok &= t.glitches > 0 && t.back + t.untrue > 0;
            }
        }
    }
    let _ = writeln!(out, "errata_ok={}", u8::from(ok));
    ok
}

/// [`CALLS`] reads of the model over `truth`, through `erratum`'s workaround or not.
fn reads(truth: &Truth, erratum: Erratum, workaround: bool, seed: u64) -> Tally {
    let model = FaultyRead::new(erratum, seed);
    let raw = || model.read(truth.now());
    let mut t = Tally::default();
    let mut last = 0;
    for i in 0..CALLS {
        if i % BATCH == 0 {
            truth.before_next_carry(LEAD_TICKS);
        }
        let before = truth.now();
        let v = if workaround {
            let r = erratum.read(raw);
            t.unsettled += u64::from(!r.settled);
            r.ticks
        } else {
            raw()
        };
        let after = truth.now();
        t.untrue += u64::from(v < before || v > after);
        t.back += u64::from(v < last);
        last = v;
    }
    t.glitches = model.glitches();
    t.raw_reads = model.reads();
    t
}

/// A `Clock` on the model: its largest lead over the true count (ns; 0 if never ahead), and
/// the shortest of [`DELAYS`] delays of [`DELAY_NS`], each started half-way before a carry
/// into bit 32 and measured on the true count.
fn clock(
    truth: &Truth,
    slow: Frequency,
    erratum: Erratum,
    workaround: bool,
    seed: u64,
) -> (u64, u64) {
    let model = FaultyRead::new(erratum, seed ^ 0xc10c);
    let read = || {
        let raw = || model.read(truth.now());
        if workaround {
            erratum.read(raw).ticks
        } else {
            raw()
        }
    };
    let to_ns = |ticks: u64| {
        let ns = u128::from(ticks) * 1_000_000_000_000 / u128::from(slow.as_millihz());
        u64::try_from(ns).unwrap_or(u64::MAX)
    };
    truth.before_next_carry(LEAD_TICKS);
    let clock = Clock::new(FnCounter::new(read, 64), slow);
    // The true count first: the clock's first reading is then taken after it, so the clock
    // is never ahead of the truth unless a read was (TCG's first, translating run of this
    // code can put tens of microseconds between two reads).
    let t0 = truth.now();
    let c0 = clock.now();
    let mut lead = 0u64;
    for i in 1..=CLOCK_CALLS {
        if i % BATCH == 0 {
            truth.before_next_carry(LEAD_TICKS);
        }
        let elapsed = (clock.now() - c0).as_nanos();
        let true_ns = u128::from(to_ns(truth.now().wrapping_sub(t0)));
        lead = lead.max(u64::try_from(elapsed.saturating_sub(true_ns)).unwrap_or(u64::MAX));
    }
    let delay = clock.delay();
    let half_delay_ticks = DELAY_NS * slow.as_millihz() / 2_000_000_000_000;
    let mut shortest = u64::MAX;
    for _ in 0..DELAYS {
        truth.before_next_carry(half_delay_ticks.max(1));
        let start = truth.now();
        delay.wait_ns(DELAY_NS);
        shortest = shortest.min(to_ns(truth.now().wrapping_sub(start)));
    }
    (lead, shortest)
}
