//! `mode=watchdog` (issue 28), the same on both kernels: baretime's `Watchdog` on the CPU
//! counter read through a scaling wrapper that runs it `change1_ppm` (100) fast from 5 s and
//! `change2_ppm` (1 000: 0.1 %) fast from 10 s (both of the real counter; negative: slow),
//! checked every `period_ms` (500) by a loop on the real counter (the periodic hook) that
//! reads the clock all the while: detection, recalibration, steps back and jumps.
//! `delays=1`: no change, and one reference read in four is delayed by up to 5 ms (before or
//! after its latch).
//!
//! The truth: the counter's rate as the reference counts it (what the watchdog's
//! `bound_ppb` bounds). With `truth_counter_hz=F truth_reference_hz=G` (the two rates in one
//! time base: under `-icount` QEMU's TSC is its virtual clock's 10^9 Hz and its HPET and ACPI
//! PM timer their emulated rates of that clock) it is exact: `F` × the reference's declared
//! rate / `G`, or, with `truth_bound_ppb=B` as well, good to `B` (x86 without `-icount`:
//! xtask measures the host's TSC against its monotonic clock, which QEMU's TSC and HPET
//! then follow). Otherwise it is the rate the kernel passes in (aarch64 `virt`: exact;
//! x86: the boot calibration's, good to its own bound, `truth_bound_ppb`).
//!
//! Where the truth is known (exact or measured), a boot calibration outside its own bound
//! (a 1 % event) is told apart: `calibration_covered=false`, the reports are not judged
//! until the watchdog's first `Changed` corrects it (`corrections=1`, not a false alarm),
//! as in `mode=refine`.
//!
//! Each check prints a line `report=N t_ms=… watch=<verdict> error_ppb=… bound_ppb=…
//! judged=0|1`: the clock's rate's signed error against the truth in force and the
//! watchdog's `bound_ppb` after the check; `judged=0` between a change and its detection,
//! where the bound is documented not to hold.

use core::fmt::Write;

use baretime::{Clock, Counter, FnCounter, Frequency, Reference, Unjudged, Watch, Watchdog};

use crate::scenario::word;

/// A reference whose reads are delayed: one in four spins for up to 5 ms, before or after
/// the read (a host that stalls the emulated device).
struct Delayed<R, T> {
    inner: R,
    timer: T,
    /// Ticks of `timer` in 5 ms.
    five_ms: u64,
    rng: u64,
    delayed: u64,
}

impl<R: Reference, T: Counter> Delayed<R, T> {
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn spin(&self, ticks: u64) {
        let t0 = self.timer.ticks();
        while self.timer.ticks().wrapping_sub(t0) < ticks {
            core::hint::spin_loop();
        }
    }
}

impl<R: Reference, T: Counter> Reference for Delayed<R, T> {
    fn read(&mut self) -> u64 {
        let r = self.next();
        let stall = if r % 4 == 0 {
            (r >> 8) % self.five_ms.max(1)
        } else {
            0
        };
        if stall != 0 {
            self.delayed += 1;
        }
        let before = (r >> 40) & 1 == 0;
        if before {
            self.spin(stall);
        }
        let v = self.inner.read();
        if !before {
            self.spin(stall);
        }
        v
    }
    fn bits(&self) -> u32 {
        self.inner.bits()
    }
    fn frequency(&self) -> Frequency {
        self.inner.frequency()
    }
    fn name(&self) -> &'static str {
        "delayed"
    }
}

/// A rate change of `ppm` parts per million (negative: slow) as a 32.32 fixed-point factor:
/// the wrapper runs the counter exactly `1 + k / 2^32` times as fast (`k` rounded from
/// `ppm`, within 0.000 24 ppm of it; the truth is taken from `k`).
fn fixed(ppm: i64) -> i64 {
    let k = (i128::from(ppm) << 32) / 1_000_000;
    // Never −100 % or beyond: the counter would run back.
    k.max(1 - (1 << 32)) as i64
}

/// The counter run `k1 / 2^32` fast from `t1` ticks after `origin` and `k2 / 2^32` fast
/// (of the real counter) from `t2` (see [`fixed`]); the extra ticks floored, so never back.
/// Branch-free, with the same multiplications before and after each change: the read costs
/// the same throughout, as a real counter's does (a wrapper that only divides once a change
/// is in force widens every bracket the watchdog takes after it; under `-icount`, where a
/// bracket is its instructions, by more than the watchdog's 2·w_min + 2 rule allows).
fn scaled(raw: u64, origin: u64, t1: u64, t2: u64, k1: i64, k2: i64) -> u64 {
    let d = raw.wrapping_sub(origin);
    let e1 = d.clamp(t1, t2) - t1;
    let e2 = d.max(t2) - t2;
    let extra = (i128::from(e1) * i128::from(k1) + i128::from(e2) * i128::from(k2)) >> 32;
    raw.wrapping_add(extra as u64)
}

/// `millihz` run `k / 2^32` fast (see [`fixed`]).
fn faster(millihz: u64, k: i64) -> u64 {
    (i128::from(millihz) + ((i128::from(millihz) * i128::from(k)) >> 32)) as u64
}

/// `a` against `b`, in signed ppb of `b`.
fn ppb_off(a: u64, b: u64) -> i64 {
    ((i128::from(a) - i128::from(b)) * 1_000_000_000 / i128::from(b.max(1))) as i64
}

/// `mode=watchdog` on `timer` (a 64-bit counter whose true rate is `rate`'s, within
/// `truth_bound_ppb`, unless the command line gives the exact truth) against `reference`;
/// see the module docs.
pub fn watchdog<T: Counter + Copy, R: Reference>(
    out: &mut impl Write,
    cmdline: &str,
    timer: T,
    rate: Frequency,
    truth_bound_ppb: u64,
    reference: R,
) -> bool {
    let hz = rate.as_hz();
    let delays = word(cmdline, "delays") == Some(1);
    let period = word(cmdline, "period_ms").unwrap_or(500u64) * (hz / 1000);
    let run = word(cmdline, "run_s").unwrap_or(if delays { 10u64 } else { 14 }) * hz;
    let (t1, t2) = if delays {
        (u64::MAX, u64::MAX)
    } else {
        (5 * hz, 10 * hz)
    };
    let ppm1: i64 = word(cmdline, "change1_ppm").unwrap_or(100);
    let ppm2: i64 = word(cmdline, "change2_ppm").unwrap_or(1_000);
    let (k1, k2) = (fixed(ppm1), fixed(ppm2));
    // The counter's true rate before the changes, as the reference counts it, in mHz.
    let exact = word::<u64>(cmdline, "truth_counter_hz")
        .zip(word::<u64>(cmdline, "truth_reference_hz"))
        .filter(|&(f, g)| f > 0 && g > 0);
    let measured = word::<u64>(cmdline, "truth_bound_ppb");
    let (base, truth_bound_ppb) = match exact {
        Some((f, g)) => {
            let declared = u128::from(reference.frequency().as_millihz());
            let millihz = u128::from(f) * declared / u128::from(g);
            (
                u64::try_from(millihz).unwrap_or(u64::MAX),
                measured.unwrap_or(0),
            )
        }
        None => (rate.as_millihz(), truth_bound_ppb),
    };
    let truth = match (exact, measured) {
        (None, _) => "given",
        (Some(_), None) => "exact",
        (Some(_), Some(_)) => "measured",
    };
    let _ = writeln!(
        out,
        "truth_millihz={base} truth={truth} truth_bound_ppb={truth_bound_ppb}"
    );
    // Whether the boot calibration's bound covers the known truth (always taken as covered
    // where the truth is the calibration's own figure).
    let covered = exact.is_none()
        || ppb_off(rate.as_millihz(), base).unsigned_abs()
            <= rate.accuracy().bound_ppb().saturating_add(truth_bound_ppb);
    let mut corrections = 0u64;
    let origin = timer.ticks();
    let counter = FnCounter::new(move || scaled(timer.ticks(), origin, t1, t2, k1, k2), 64);
    let mut reference = Delayed {
        inner: reference,
        timer,
        five_ms: hz / 200,
        // xorshift stays at 0: never delays.
        rng: if delays { 0x2545_f491_4f6c_dd1d } else { 0 },
        delayed: 0,
    };
    let clock = Clock::new(&counter, rate);
    let mut wd = Watchdog::new(&mut reference, rate);

    // Promise 2's check reads ticks at the slowest rate the clock may run: the slowest of
    // the counter's, less 0.2 % (the clock's rates all lie within that of the counter's).
    let slow_millihz = u128::from(faster(hz * 1000, k1.min(k2).min(0))) * 998 / 1000;
    let (mut steps_back, mut jumps, mut max_jump_ns) = (0u64, 0u64, 0u64);
    let (mut false_alarms, mut wide) = (0u64, 0u64);
    let mut detect = [None::<(u64, u64, u64, u64)>; 2]; // (ms, checks, accepted, rate mHz)
    let mut since = [(0u64, 0u64); 2]; // checks, accepted since each change
    let mut reports = 0u64;
    let mut last_pre = counter.ticks();
    let mut last_now = clock.now();
    let mut next = timer.ticks().wrapping_add(period);
    loop {
        // The hook's wait, on the real counter, reading the clock all the while.
        while timer.ticks().wrapping_sub(next) > u64::MAX / 2 {
            // The counter read before the clock's: the two readings' times are bracketed
            // by this one and the next iteration's read after its clock read.
            let c_pre = counter.ticks();
            let now = clock.now();
            let c = counter.ticks();
            if now < last_now {
                steps_back += 1;
            }
            // Promise 2: never ahead of the counter's ticks at the slowest rate in force by
            // more than the handover margin and a granule.
            let d_ns = (now - last_now).as_nanos() as u64;
            let ticks_ns =
                (u128::from(c.wrapping_sub(last_pre)) * 1_000_000_000_000 / slow_millihz) as u64;
            let excess = d_ns.saturating_sub(ticks_ns + 25_000);
            if excess > 0 {
                jumps += 1;
                max_jump_ns = max_jump_ns.max(excess);
            }
            last_now = now;
            last_pre = c_pre;
        }
        // The next deadline a period on, but at least half a period from now: deadlines a
        // host's stall took the hook past are not run back to back with this check, as a
        // kernel's periodic hook would not be (a 1 ms interval decides nothing: the watchdog
        // carries a pending deviation across it, `crates/baretime/tests/watchdog_load.rs`).
        let now = timer.ticks();
        next = next.wrapping_add(period);
        if next.wrapping_sub(now.wrapping_add(period / 2)) > u64::MAX / 2 {
            next = now.wrapping_add(period / 2);
        }
        let verdict = wd.check(&clock);
        last_pre = counter.ticks();
        last_now = clock.now();
        let d = timer.ticks().wrapping_sub(origin);
        let accepted = !matches!(
            verdict,
            Watch::NoVerdict(
                Unjudged::WideBracket
                    | Unjudged::TooShort
                    | Unjudged::TooLong
                    | Unjudged::ReferenceStill
            )
        );
        if matches!(verdict, Watch::NoVerdict(Unjudged::WideBracket)) {
            wide += 1;
        }
        for (k, at) in [t1, t2].into_iter().enumerate() {
            if d >= at && detect[k].is_none() {
                since[k].0 += 1;
                since[k].1 += u64::from(accepted);
            }
        }
        match verdict {
            Watch::Changed { .. } if !covered && corrections == 0 && d < t1 => corrections += 1,
            Watch::Changed { rate, .. } => {
                let k = if d >= t2 { 1 } else { 0 };
                if d < t1 || detect[k].is_some() {
                    false_alarms += 1;
                } else {
                    let at = if k == 0 { t1 } else { t2 };
                    let ms = (d - at) / (hz / 1000);
                    detect[k] = Some((ms, since[k].0, since[k].1, rate.as_millihz()));
                }
            }
            Watch::CounterStopped | Watch::CounterJumped { .. } => false_alarms += 1,
            _ => {}
        }
        // The report: the clock's rate against the rate the counter runs at now.
        let k_now = if d >= t2 {
            k2
        } else if d >= t1 {
            k1
        } else {
            0
        };
        let pending = (d >= t1 && detect[0].is_none()) || (d >= t2 && detect[1].is_none());
        reports += 1;
        let _ = writeln!(
            out,
            "report={reports} t_ms={} watch={} error_ppb={} bound_ppb={} judged={}",
            d / (hz / 1000),
            match verdict {
                Watch::NoVerdict(why) => unjudged(why),
                v => v.token(),
            },
            ppb_off(clock.scale().millihz(), faster(base, k_now)),
            wd.health().bound_ppb,
            u8::from(!pending && (covered || corrections > 0)),
        );
        if d >= run {
            break;
        }
    }
    let h = wd.health();
    let _ = writeln!(
        out,
        "period_ms={} checks={} steady={} changed={} no_verdict={} wide={} delayed_reads={} \
         false_alarms={false_alarms} steps_back={steps_back} jumps={jumps} max_jump_ns={max_jump_ns} steers={} \
         calibration_covered={covered} corrections={corrections}",
        period / (hz / 1000),
        h.checks,
        h.steady,
        h.changed,
        h.no_verdict,
        wide,
        reference.delayed,
        h.steers
    );
    let mut ok = steps_back == 0 && jumps == 0 && false_alarms == 0;
    if !delays {
        for (k, ppm, factor) in [(0, ppm1, k1), (1, ppm2, k2)] {
            match detect[k] {
                Some((ms, checks, accepted, millihz)) => {
                    let truth = faster(base, factor);
                    let _ = writeln!(
                        out,
                        "change{}_ppm={ppm} detect{}_ms={ms} detect{}_checks={checks} detect{}_accepted={accepted} rate{}_error_ppb={}",
                        k + 1, k + 1, k + 1, k + 1, k + 1,
                        ppb_off(millihz, truth).unsigned_abs()
                    );
                }
                None => {
                    let _ = writeln!(out, "change{}_ppm={ppm} detect{}_ms=none", k + 1, k + 1);
                    ok = false;
                }
            }
        }
        let end = clock.scale().millihz();
        let _ = writeln!(
            out,
            "end_error_ppb={} end_bound_ppb={}",
            ppb_off(end, faster(base, k2)).unsigned_abs(),
            h.bound_ppb
        );
    }
    ok
}

/// A snake_case name for why a check gave no verdict.
fn unjudged(why: Unjudged) -> &'static str {
    match why {
        Unjudged::First => "first",
        Unjudged::WideBracket => "wide_bracket",
        Unjudged::ReferenceStill => "reference_still",
        Unjudged::ReferenceJumped => "reference_jumped",
        Unjudged::TooShort => "too_short",
        Unjudged::TooLong => "too_long",
        Unjudged::Unconfirmed => "unconfirmed",
        _ => "no_verdict",
    }
}
