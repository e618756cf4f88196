//! `mode=calfault`: calibration against a reference that fails mid-way must end in its typed
//! error (`CalibrationError`), within the configured time, not hang or return a rate.
//!
//! The kernel first calibrates the TSC against the HPET and starts its clock (to time what
//! follows), then calibrates again against PIT channel 2 wrapped in [`Faulty`], which passes
//! the first `after` reads through and then
//!
//! - `stuck`: returns the last value for ever (a gate that closed, a latch that sticks);
//! - `backwards`: returns values `step` ticks behind the real count from then on (a counter
//!   reloaded under the calibrator's feet: one step back, then it runs on).
//!
//! For each it prints `fault_<kind>_error=<variant> fault_<kind>_elapsed_ms=…` and the
//! configured bound `max_ms`, `stuck_ms`.

use core::fmt::Write;
use core::time::Duration;

use baretime::WithAccuracy;
use baretime::{calibrate, CalibrationError, Config, Reference};
use baretime::{Accuracy, Frequency};
use baretime_x86::Tsc;
use baretime_x86::{Hpet, Pit};

use super::{acpi, entry, Serial};
use crate::scenario;

/// A reference that goes wrong after `after` reads.
struct Faulty<R: Reference> {
    inner: R,
    reads: u64,
    after: u64,
    /// `None`: stuck; `Some(step)`: `step` ticks behind from then on.
    back_by: Option<u64>,
    last: u64,
}

impl<R: Reference> Reference for Faulty<R> {
    fn read(&mut self) -> u64 {
        self.reads += 1;
        if self.reads <= self.after {
            self.last = self.inner.read();
            return self.last;
        }
        match self.back_by {
            None => self.last,
            Some(step) => {
                let mask = u64::MAX >> (64 - self.inner.bits());
                self.inner.read().wrapping_sub(step) & mask
            }
        }
    }
    fn bits(&self) -> u32 {
        self.inner.bits()
    }
    fn frequency(&self) -> Frequency {
        self.inner.frequency()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

/// Reads the fault's reads-before-failing from `fault_after=N` (default 2000).
fn fault_after(cmdline: &str) -> u64 {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == "fault_after")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(2000)
}

/// `mode=calfault`: see the module docs. Ends QEMU.
pub fn main(
    out: &mut Serial,
    info: &entry::StartInfo,
    tsc: Tsc,
    claim: Option<Frequency>,
    cmdline: &str,
) -> ! {
    let args = scenario::Args::parse(cmdline);
    let timers = acpi::find_timers(info.rsdp_paddr);
    let base = timers.hpet.unwrap_or(0xFED0_0000);
    // SAFETY: the HPET's base from ACPI (or the PC default), mapped uncached; only user.
    let ok = match unsafe { Hpet::new(base as usize) } {
        Err(e) => {
            let _ = writeln!(out, "error=no_hpet detail=\"{e}\"");
            false
        }
        Ok(hpet) => {
            let mut reference = WithAccuracy::new(hpet, Accuracy::Exact);
            match scenario::calibrate(out, tsc, &mut reference, claim, scenario::config(200)) {
                None => false,
                Some(v) => match super::CLOCK.start(v.chosen) {
                    Err(e) => {
                        let _ = writeln!(out, "error=clock_start detail=\"{e}\"");
                        false
                    }
                    Ok(()) => {
                        faults(out, tsc, &args, fault_after(cmdline));
                        true
                    }
                },
            }
        }
    };
    let _ = writeln!(out, "done=1");
    super::exit(if ok { 0 } else { 1 })
}

fn faults(out: &mut Serial, tsc: Tsc, args: &scenario::Args, after: u64) {
    let config: Config = scenario::config(args.max_ms);
    let _ = writeln!(
        out,
        "max_ms={} stuck_ms={} fault_after_reads={after}",
        config.max_duration().as_millis(),
        config.stuck_after().as_millis()
    );
    // 2000 PIT ticks: 1.7 ms, well inside the 16-bit wrap (55 ms) and far beyond any glitch.
    for (name, back_by) in [("stuck", None), ("backwards", Some(2000))] {
        // SAFETY: ring 0 with interrupts off; nothing else in this kernel uses the PIT.
        let pit = unsafe { Pit::new() };
        let mut faulty = Faulty {
            inner: WithAccuracy::new(pit, Accuracy::Exact),
            reads: 0,
            after,
            back_by,
            last: 0,
        };
        let start = super::CLOCK.now();
        let result = calibrate(tsc, &mut faulty, config);
        let elapsed: Duration = super::CLOCK.elapsed(start);
        let (error, detail) = match result {
            Ok(c) => ("none", c.frequency.as_hz()),
            Err(e) => (
                e.token(),
                match e {
                    CalibrationError::ReferenceBackwards { by_ticks } => by_ticks,
                    _ => 0,
                },
            ),
        };
        let _ = writeln!(
            out,
            "fault_{name}_error={error} fault_{name}_detail={detail} fault_{name}_elapsed_ms={}.{:03} fault_{name}_reads={}",
            elapsed.as_millis(),
            elapsed.as_micros() % 1000,
            faulty.reads
        );
        if let Err(e) = result {
            let _ = writeln!(out, "# {name}: {e}");
        }
    }
}
