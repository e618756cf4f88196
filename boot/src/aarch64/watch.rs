//! `mode=watchdog` and `mode=refine` (issue 28): baretime's `Watchdog` on the generic timer
//! against semihosting's elapsed time, both of which follow the host's monotonic clock under
//! TCG (no `-icount`), so the counter's true rate is exactly 62.5 MHz of the reference's.
//!
//! - `mode=watchdog`: the clock reads CNTVCT_EL0 through a scaling wrapper that runs it
//!   100 ppm fast from 5 s and 0.1 % fast from 10 s (of the real counter), checked every
//!   `period_ms` (500) by a loop on the real counter (the periodic hook) that reads the clock
//!   all the while: detection, recalibration, steps back and jumps. `delays=1`: no change,
//!   and one reference read in four is delayed by up to 5 ms (before or after its latch).
//! - `mode=refine`: the clock starts from a 200 ms calibration; the watchdog refines it for
//!   `refine_s` (10) seconds; the rate's bound and its actual error (against 62.5 MHz) are
//!   printed after 1, 10 and 60 s (those within the run).

use core::fmt::Write;

use baretime::{
    calibrate, Accuracy, Clock, Config, Counter, FnCounter, Frequency, Reference, Source, Unjudged,
    Watch, Watchdog,
};
use baretime_aarch64::{GenericTimer, SemihostingElapsed};
use core::time::Duration;

/// QEMU's generic timer rate on `virt`.
const HZ: u64 = 62_500_000;

/// `key=N` from the command line.
fn word(cmdline: &str, key: &str) -> Option<u64> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// A reference whose reads are delayed: one in four spins for up to 5 ms, before or after
/// the read (a host that stalls the emulated device).
struct Delayed {
    inner: SemihostingElapsed,
    timer: GenericTimer,
    rng: u64,
    delayed: u64,
}

impl Delayed {
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

impl Reference for Delayed {
    fn read(&mut self) -> u64 {
        let r = self.next();
        let stall = if r % 4 == 0 { (r >> 8) % (HZ / 200) } else { 0 };
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
        "semihosting_delayed"
    }
}

/// The counter run `ppm1` (parts per million) fast from `t1` ticks after `origin` and
/// `ppm2` fast (of the real counter) from `t2`.
fn scaled(raw: u64, origin: u64, t1: u64, t2: u64, ppm1: u64, ppm2: u64) -> u64 {
    let d = raw.wrapping_sub(origin);
    let up = |from: u64, d: u64, ppm: u64| {
        let e = d - from;
        (e as u128 * ppm as u128 / 1_000_000) as u64
    };
    let extra = if d < t1 {
        0
    } else if d < t2 {
        up(t1, d, ppm1)
    } else {
        up(t1, t2, ppm1) + up(t2, d, ppm2)
    };
    raw.wrapping_add(extra)
}

pub fn watchdog(out: &mut impl Write, cmdline: &str) -> bool {
    let timer = GenericTimer::new();
    let delays = word(cmdline, "delays") == Some(1);
    let period = word(cmdline, "period_ms").unwrap_or(500) * (HZ / 1000);
    let run = word(cmdline, "run_s").unwrap_or(if delays { 10 } else { 14 }) * HZ;
    let (t1, t2) = if delays {
        (u64::MAX, u64::MAX)
    } else {
        (5 * HZ, 10 * HZ)
    };
    let (ppm1, ppm2) = (100, 1_000);
    let origin = timer.ticks();
    let counter = FnCounter::new(
        move || scaled(timer.ticks(), origin, t1, t2, ppm1, ppm2),
        64,
    );
    // SAFETY: the kernel runs under `-semihosting` (it exits through it).
    let inner = match unsafe { SemihostingElapsed::new() } {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(out, "error=no_semihosting_clock detail=\"{e}\"");
            return false;
        }
    };
    let mut reference = Delayed {
        inner,
        timer,
        rng: 0x2545_f491_4f6c_dd1d,
        delayed: 0,
    };
    if !delays {
        reference.rng = 0; // xorshift stays at 0: never delays
    }
    let Some(rate) = Frequency::from_hz(
        HZ,
        Source::Cntfrq,
        Accuracy::Nominal {
            tolerance_ppb: 1_000,
        },
    ) else {
        return false;
    };
    let clock = Clock::new(&counter, rate);
    let mut wd = Watchdog::new(&mut reference, rate);

    let (mut steps_back, mut jumps, mut max_jump_ns) = (0u64, 0u64, 0u64);
    let (mut false_alarms, mut wide) = (0u64, 0u64);
    let mut detect = [None::<(u64, u64, u64, u64)>; 2]; // (ms, checks, accepted, rate mHz)
    let mut since = [(0u64, 0u64); 2]; // checks, accepted since each change
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
            // Promise 2: never ahead of the counter's ticks at the slower rate in force
            // (the clock's rates here are all within 0.2 % of 62.5 MHz) by more than the
            // handover margin and a granule.
            let d_ns = (now - last_now).as_nanos() as u64;
            let ticks_ns = (c.wrapping_sub(last_pre) as u128 * 1_000_000_000 * 1000
                / (HZ as u128 * 998)) as u64;
            let excess = d_ns.saturating_sub(ticks_ns + 25_000);
            if excess > 0 {
                jumps += 1;
                max_jump_ns = max_jump_ns.max(excess);
            }
            last_now = now;
            last_pre = c_pre;
        }
        next = next.wrapping_add(period);
        let verdict = wd.check(&clock);
        last_pre = counter.ticks();
        last_now = clock.now();
        let d = timer.ticks().wrapping_sub(origin);
        let accepted = !matches!(
            verdict,
            Watch::NoVerdict(Unjudged::WideBracket | Unjudged::TooShort | Unjudged::ReferenceStill)
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
            Watch::Changed { rate, .. } => {
                let k = if d >= t2 { 1 } else { 0 };
                if d < t1 || detect[k].is_some() {
                    false_alarms += 1;
                } else {
                    let at = if k == 0 { t1 } else { t2 };
                    let ms = (d - at) / (HZ / 1000);
                    detect[k] = Some((ms, since[k].0, since[k].1, rate.as_millihz()));
                }
            }
            Watch::CounterStopped | Watch::CounterJumped { .. } => false_alarms += 1,
            _ => {}
        }
        if d >= run {
            break;
        }
    }
    let h = wd.health();
    let truth_millihz = |ppm: u64| HZ * 1000 + HZ * ppm / 1000;
    let _ = writeln!(
        out,
        "period_ms={} checks={} steady={} changed={} no_verdict={} wide={} delayed_reads={} \
         false_alarms={false_alarms} steps_back={steps_back} jumps={jumps} max_jump_ns={max_jump_ns} steers={}",
        period / (HZ / 1000),
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
        for (k, ppm) in [(0, ppm1), (1, ppm2)] {
            match detect[k] {
                Some((ms, checks, accepted, millihz)) => {
                    let truth = truth_millihz(ppm);
                    let err_ppb =
                        (millihz.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64;
                    let _ = writeln!(
                        out,
                        "change{}_ppm={ppm} detect{}_ms={ms} detect{}_checks={checks} detect{}_accepted={accepted} rate{}_error_ppb={err_ppb}",
                        k + 1, k + 1, k + 1, k + 1, k + 1
                    );
                }
                None => {
                    let _ = writeln!(out, "change{}_ppm={ppm} detect{}_ms=none", k + 1, k + 1);
                    ok = false;
                }
            }
        }
        let end = clock.scale().millihz();
        let truth = truth_millihz(ppm2);
        let _ = writeln!(
            out,
            "end_error_ppb={} end_bound_ppb={}",
            (end.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64,
            h.bound_ppb
        );
    }
    ok
}

pub fn refine(out: &mut impl Write, cmdline: &str) -> bool {
    let timer = GenericTimer::new();
    let seconds = word(cmdline, "refine_s").unwrap_or(10);
    let period = word(cmdline, "period_ms").unwrap_or(500) * (HZ / 1000);
    // SAFETY: the kernel runs under `-semihosting` (it exits through it).
    let mut reference = match unsafe { SemihostingElapsed::new() } {
        Ok(r) => r,
        Err(e) => {
            let _ = writeln!(out, "error=no_semihosting_clock detail=\"{e}\"");
            return false;
        }
    };
    let config = Config::new()
        .with_target_ppb(1_000)
        .with_max_duration(Duration::from_millis(200));
    let cal = match calibrate(timer, &mut reference, config) {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(out, "error=calibration detail=\"{e}\"");
            return false;
        }
    };
    let truth = HZ * 1000;
    let err =
        |millihz: u64| (millihz.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64;
    let _ = writeln!(
        out,
        "calibrated_error_ppb={} calibrated_bound_ppb={}",
        err(cal.frequency.as_millihz()),
        cal.frequency.accuracy().bound_ppb()
    );
    let clock = Clock::new(timer, cal.frequency);
    let mut wd = Watchdog::new(&mut reference, cal.frequency);
    let start = timer.ticks();
    let mut next = start.wrapping_add(period);
    let mut ok = true;
    let mut reported = 0;
    let mut false_alarms = 0u64;
    let marks = [1u64, 10, 60];
    loop {
        while timer.ticks().wrapping_sub(next) > u64::MAX / 2 {
            core::hint::spin_loop();
        }
        next = next.wrapping_add(period);
        match wd.check(&clock) {
            Watch::Changed { .. } | Watch::CounterStopped | Watch::CounterJumped { .. } => {
                false_alarms += 1
            }
            _ => {}
        }
        let s = timer.ticks().wrapping_sub(start) / HZ;
        while reported < marks.len() && s >= marks[reported] {
            let h = wd.health();
            let e = err(clock.scale().millihz());
            let m = marks[reported];
            let _ = writeln!(
                out,
                "bound_ppb_{m}s={} error_ppb_{m}s={e} within_{m}s={}",
                h.bound_ppb,
                e <= h.bound_ppb
            );
            ok &= e <= h.bound_ppb;
            reported += 1;
        }
        if s >= seconds {
            break;
        }
    }
    let h = wd.health();
    let _ = writeln!(
        out,
        "refine_s={seconds} checks={} steady={} no_verdict={} steers={} false_alarms={false_alarms}",
        h.checks, h.steady, h.no_verdict, h.steers
    );
    ok && false_alarms == 0
}
