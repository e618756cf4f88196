//! Calibration fed arbitrary counter and reference streams: each read replays the next move
//! from the input (forward, stuck, a step back, a huge jump, any value at all) on a counter
//! and a reference of any width 1..=64, under a bounded `Config`. Once the input is spent,
//! both run on steadily (the reference one tick per read), so every run ends within the
//! configured reference time: no real time is involved anywhere.
//!
//! Checked: nothing panics; `calibrate` and `calibrate_and_verify` give the same result on
//! the same streams; on `Ok` the rate lies in the configured plausible range, its accuracy
//! is `Measured` with a nonzero bound equal to the reported uncertainty, and the verdict's
//! choice is the claim (confirmed) or the measurement (otherwise), as the verdict says.
//!
//! Rates, durations and steps are drawn so that most inputs can succeed (the checks on `Ok`
//! need runs that get there): `FUZZ_OUTCOMES=1` prints each run's outcome, to see how many
//! do (`-runs=0 fuzz/corpus/calibration` replays the corpus).
#![no_main]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::Duration;

use arbitrary::Arbitrary;
use baretime::{calibrate, calibrate_and_verify, Calibration, Config, Reference, Verdict};
use baretime::{Accuracy, Counter, Frequency, Source, Width};
use libfuzzer_sys::fuzz_target;

/// What the next read does.
#[derive(Arbitrary, Clone, Copy, Debug)]
enum Move {
    /// A small step forward.
    Forward(u16),
    /// A step forward of any size (wraps narrow counts, possibly several times).
    Jump(u64),
    /// No change: a stuck run.
    Stuck,
    /// A step back.
    Back(u64),
    /// Any value (masked to the width).
    Set(u64),
}

/// A stream of moves, then a steady step per read.
#[derive(Debug)]
struct Stream {
    value: Cell<u64>,
    moves: RefCell<VecDeque<Move>>,
    tail_step: u64,
    width: Width,
    bits: u32,
}

impl Stream {
    fn new(start: u64, moves: &[Move], tail_step: u64, bits: u32) -> Stream {
        let width = Width::new(bits);
        Stream {
            value: Cell::new(width.value(start)),
            moves: RefCell::new(moves.iter().copied().collect()),
            tail_step,
            width,
            bits,
        }
    }

    fn next(&self) -> u64 {
        let v = self.value.get();
        let next = self.moves.borrow_mut().pop_front();
        let v = match next {
            Some(Move::Forward(s)) => v.wrapping_add(u64::from(s)),
            Some(Move::Jump(s)) => v.wrapping_add(s),
            Some(Move::Stuck) => v,
            Some(Move::Back(s)) => v.wrapping_sub(s),
            Some(Move::Set(s)) => s,
            None => v.wrapping_add(self.tail_step),
        };
        let v = self.width.value(v);
        self.value.set(v);
        v
    }
}

impl Counter for Stream {
    fn ticks(&self) -> u64 {
        self.next()
    }
    fn bits(&self) -> u32 {
        self.bits
    }
}

struct Replayed {
    stream: Stream,
    frequency: Frequency,
}

impl Reference for Replayed {
    fn read(&mut self) -> u64 {
        self.stream.next()
    }
    fn bits(&self) -> u32 {
        self.stream.bits
    }
    fn frequency(&self) -> Frequency {
        self.frequency
    }
    fn name(&self) -> &'static str {
        "replayed"
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    counter_bits: u8,
    reference_bits: u8,
    counter_start: u64,
    reference_start: u64,
    /// The reference's stated rate (clamped into the accepted range).
    reference_millihz: u64,
    reference_tolerance_ppb: Option<u32>,
    /// In reference ticks, bounded below.
    max_duration_ticks: u16,
    stuck_after_ticks: u16,
    target_ppb: u32,
    min_samples: u8,
    /// The plausible counter rates; `None`: every rate a `Frequency` can have.
    plausible_hz: Option<(u64, u64)>,
    /// Counter ticks per reference tick once the input is spent.
    tail_counter_step: u32,
    claim_millihz: Option<u64>,
    claim_tolerance_ppb: Option<u32>,
    counter: Vec<Move>,
    reference: Vec<Move>,
}

/// Reference ticks at `millihz` → nanoseconds (rounded down, at least 1).
fn ticks_to_ns(ticks: u64, millihz: u64) -> u64 {
    let ns = u128::from(ticks) * 1_000_000_000_000 / u128::from(millihz);
    u64::try_from(ns).unwrap_or(u64::MAX).max(1)
}

fn frequency(millihz: u64, source: Source, tolerance_ppb: Option<u32>) -> Frequency {
    let lo = Frequency::MIN_HZ * 1000;
    let hi = Frequency::MAX_HZ * 1000;
    let accuracy = match tolerance_ppb {
        None => Accuracy::Exact,
        Some(t) => Accuracy::Nominal {
            tolerance_ppb: u64::from(t),
        },
    };
    // Spread over the decades (a uniform draw would almost always be tens of GHz): the low
    // bits pick a power of two, the rest a rate up to twice it.
    let scale = lo << (millihz % 27);
    let f = Frequency::from_millihz((scale + (millihz >> 5) % scale).min(hi), source, accuracy);
    f.expect("in range by construction")
}

fn check(cal: &Calibration, config: &Config) {
    let (min_hz, max_hz) = config.plausible_counter_hz();
    let mhz = cal.frequency.as_millihz();
    // Implausible only where the rate *and its bound* lie outside the range (the docs of
    // `Config`'s plausible range): a rate whose stated interval reaches into it is a result.
    let ppb = match cal.frequency.accuracy() {
        Accuracy::Measured { uncertainty_ppb } => uncertainty_ppb,
        _ => 0,
    };
    let slack =
        u64::try_from(u128::from(mhz) * u128::from(ppb) / 1_000_000_000).unwrap_or(u64::MAX);
    assert!(
        mhz.saturating_add(slack) + 1 >= min_hz * 1000
            && mhz.saturating_sub(slack) <= max_hz.saturating_mul(1000) + 1,
        "rate {mhz} mHz (± {slack}) outside the plausible {min_hz}..={max_hz} Hz: {cal:?}"
    );
    assert_eq!(cal.frequency.source(), Source::Calibrated);
    assert!(
        matches!(cal.frequency.accuracy(), Accuracy::Measured { .. }),
        "{cal:?}"
    );
    assert!(
        cal.frequency.accuracy().bound_ppb() > 0,
        "a measurement with a zero bound: {cal:?}"
    );
    assert!(
        cal.frequency.accuracy().bound_ppb() >= cal.measurement_ppb,
        "{cal:?}"
    );
    assert!(
        cal.samples_used >= 3,
        "a fit on fewer than 3 samples: {cal:?}"
    );
    if cal.met_target {
        assert!(
            config.target_ppb() > 0 && cal.measurement_ppb <= config.target_ppb(),
            "target met by a measurement worse than it: {cal:?}"
        );
    }
    assert_eq!(cal.reference, "replayed");
    let _ = cal.to_string();
}

fuzz_target!(|input: Input| {
    // Zeros (what a short input decodes to) give a run that can succeed: 64-bit counts, the
    // longest calibration, a counter that moves.
    let counter_bits = 64 - u32::from(input.counter_bits % 64);
    let reference_bits = 64 - u32::from(input.reference_bits % 64);
    let reference = frequency(
        input.reference_millihz,
        Source::Reference,
        input.reference_tolerance_ppb,
    );
    let rmhz = reference.as_millihz();
    let plausible = input
        .plausible_hz
        .unwrap_or((Frequency::MIN_HZ, Frequency::MAX_HZ));
    // At most 2^13 reference ticks of calibration (and 2^16 to call a count stuck): the
    // steady tail reaches the end within that many reads.
    let config = Config::new()
        .with_target_ppb(u64::from(input.target_ppb))
        .with_min_samples(u64::from(input.min_samples))
        .with_plausible_counter_hz(plausible.0, plausible.1)
        .with_max_duration(Duration::from_nanos(ticks_to_ns(
            8192 - u64::from(input.max_duration_ticks % 8192),
            rmhz,
        )))
        .with_stuck_after(Duration::from_nanos(ticks_to_ns(
            65536 - u64::from(input.stuck_after_ticks),
            rmhz,
        )));
    // The tail: the reference one tick per read, the counter its step per read (two counter
    // reads per reference read), kept within half its wrap so it reads as progress.
    // A shift from the low bits spreads it over the decades too.
    let k = u64::from(input.tail_counter_step);
    let counter_tail = (k >> (k % 32)).max(1).min(Width::new(counter_bits).half());
    let claim = input
        .claim_millihz
        .map(|m| frequency(m, Source::User, input.claim_tolerance_ppb));

    let streams = || {
        (
            Stream::new(
                input.counter_start,
                &input.counter,
                counter_tail,
                counter_bits,
            ),
            Replayed {
                stream: Stream::new(input.reference_start, &input.reference, 1, reference_bits),
                frequency: reference,
            },
        )
    };

    let (c, r) = streams();
    let plain = calibrate(&c, r, config);
    if std::env::var_os("FUZZ_OUTCOMES").is_some() {
        match &plain {
            Ok(_) => eprintln!("outcome Ok"),
            Err(e) => eprintln!("outcome {e:?}"),
        }
    }
    if let Ok(cal) = &plain {
        check(cal, &config);
    }

    // `calibrate_and_verify` judges a dead reference by its claim (as a rate hint, where the
    // config has none): compare it with `calibrate` given the same hint.
    let hinted = match (claim, config.rate_hint()) {
        (Some(f), None) => {
            let (c, r) = streams();
            calibrate(&c, r, config.with_rate_hint(f))
        }
        _ => plain.clone(),
    };
    let plain = hinted;
    let (c, r) = streams();
    let verified = calibrate_and_verify(&c, r, claim, config);
    match (&plain, &verified) {
        (Ok(cal), Ok(v)) => {
            assert_eq!(
                *cal, v.calibration,
                "the same streams calibrated differently"
            );
            let chosen = v.chosen;
            match v.verdict {
                Verdict::Unclaimed => assert!(claim.is_none() && chosen == cal.frequency),
                Verdict::Confirmed {
                    deviation_ppb,
                    allowed_ppb,
                } => {
                    assert_eq!(Some(chosen), claim);
                    assert!(deviation_ppb.unsigned_abs() <= allowed_ppb);
                }
                Verdict::Consistent {
                    deviation_ppb,
                    allowed_ppb,
                    ..
                } => {
                    assert_eq!(chosen, cal.frequency);
                    assert!(deviation_ppb.unsigned_abs() <= allowed_ppb);
                }
                Verdict::Disagrees {
                    deviation_ppb,
                    allowed_ppb,
                    ..
                } => {
                    assert_eq!(chosen, cal.frequency);
                    assert!(deviation_ppb.unsigned_abs() > allowed_ppb);
                }
                _ => {}
            }
            let _ = v.verdict.to_string();
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "the same streams failed differently");
            let _ = a.to_string();
        }
        _ => panic!("the same streams: {plain:?} vs {verified:?}"),
    }
});
