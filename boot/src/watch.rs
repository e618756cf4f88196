//! `mode=watchdog` (issue 28), the same on both kernels: baretime's `Watchdog` on the CPU
//! counter read through a scaling wrapper that runs it 100 ppm fast from 5 s and 0.1 % fast
//! from 10 s (of the real counter), checked every `period_ms` (500) by a loop on the real
//! counter (the periodic hook) that reads the clock all the while: detection,
//! recalibration, steps back and jumps. `delays=1`: no change, and one reference read in
//! four is delayed by up to 5 ms (before or after its latch).

use core::fmt::Write;

use baretime::{Clock, Counter, FnCounter, Frequency, Reference, Unjudged, Watch, Watchdog};

/// `key=N` from the command line.
pub fn word(cmdline: &str, key: &str) -> Option<u64> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

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

/// `mode=watchdog` on `timer` (a 64-bit counter whose true rate is `rate`'s, within
/// `truth_bound_ppb`) against `reference`; see the module docs.
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
    let period = word(cmdline, "period_ms").unwrap_or(500) * (hz / 1000);
    let run = word(cmdline, "run_s").unwrap_or(if delays { 10 } else { 14 }) * hz;
    let (t1, t2) = if delays {
        (u64::MAX, u64::MAX)
    } else {
        (5 * hz, 10 * hz)
    };
    let (ppm1, ppm2) = (100, 1_000);
    let origin = timer.ticks();
    let counter = FnCounter::new(
        move || scaled(timer.ticks(), origin, t1, t2, ppm1, ppm2),
        64,
    );
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
                / (hz as u128 * 998)) as u64;
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
                    let ms = (d - at) / (hz / 1000);
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
    let base = rate.as_millihz();
    let truth_millihz = |ppm: u64| base + (base as u128 * ppm as u128 / 1_000_000) as u64;
    let _ = writeln!(
        out,
        "period_ms={} checks={} steady={} changed={} no_verdict={} wide={} delayed_reads={} \
         false_alarms={false_alarms} steps_back={steps_back} jumps={jumps} max_jump_ns={max_jump_ns} steers={}",
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
            "end_error_ppb={} end_bound_ppb={} truth_bound_ppb={truth_bound_ppb}",
            (end.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64,
            h.bound_ppb
        );
    }
    ok
}
