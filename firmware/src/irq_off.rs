//! The `timers` build's critical-section implementation: cortex-m's single-core one
//! (`critical-section-single-core`: PRIMASK set, and restored by the outermost section), plus
//! a measure of how long each outermost section keeps interrupts off, by the clock's counter.
//!
//! Every critical section of the program goes through it: the driver's (`schedule_wake`,
//! `on_alarm`: the queue and the arming), the scenario's own statistics (`record`), and
//! embassy-executor's (once, at its start; on thumbv7em its run queue is atomic). A user's
//! firmware takes cortex-m's own instead (README, "A Cortex-M application"): the same
//! instructions less the two counter reads and the bookkeeping.
//!
//! The span runs from the counter read just after `cpsid` to the one just before `cpsie`:
//! what interrupts wait for, less the `cpsid` / `cpsie` themselves. Counter ticks are 40 ns
//! (25 MHz); under `-icount shift=5` an instruction is 32 ns.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};

use baretime::Counter;
use critical_section::RawRestoreState;

use crate::board::Main;

struct Metered;
critical_section::set_impl!(Metered);

/// Measuring (from [`start`] to [`stop`]).
static ON: AtomicBool = AtomicBool::new(false);
/// The counter (low 32 bits) when the outermost section began.
static BEGAN: AtomicU32 = AtomicU32::new(0);
/// Sections measured, and the longest (ticks).
static SECTIONS: AtomicU32 = AtomicU32::new(0);
static LONGEST: AtomicU32 = AtomicU32::new(0);
/// Sections by length: bin `i` counts those of `i` ticks (the last: that many or more).
const BINS: usize = 2048;
static BIN: [AtomicU32; BINS] = [const { AtomicU32::new(0) }; BINS];

// SAFETY: single core; a section sets PRIMASK and only the outermost one (which found it
// clear) clears it again, as cortex-m's `critical-section-single-core` does. The statistics
// are written with interrupts off, by one core.
unsafe impl critical_section::Impl for Metered {
    unsafe fn acquire() -> RawRestoreState {
        let was_on = cortex_m::register::primask::read().is_active();
        cortex_m::interrupt::disable();
        if was_on {
            BEGAN.store(Main.ticks() as u32, Relaxed);
        }
        was_on
    }

    unsafe fn release(was_on: RawRestoreState) {
        if was_on {
            let ticks = (Main.ticks() as u32).wrapping_sub(BEGAN.load(Relaxed));
            if ON.load(Relaxed) {
                SECTIONS.store(SECTIONS.load(Relaxed).wrapping_add(1), Relaxed);
                LONGEST.store(LONGEST.load(Relaxed).max(ticks), Relaxed);
                if let Some(n) = BIN.get((ticks as usize).min(BINS - 1)) {
                    n.store(n.load(Relaxed).wrapping_add(1), Relaxed);
                }
            }
            // SAFETY: interrupts were on when the outermost section began.
            unsafe { cortex_m::interrupt::enable() };
        }
    }
}

/// Starts measuring.
pub fn start() {
    ON.store(true, Relaxed);
}

/// Stops measuring (before the report, whose sort runs in a section).
pub fn stop() {
    ON.store(false, Relaxed);
}

/// Sections measured; the median, 99th percentile and longest, in counter ticks.
pub fn summary() -> (u32, u32, u32, u32) {
    let total = SECTIONS.load(Relaxed);
    let pct = |p: u32| {
        let rank = (u64::from(total) * u64::from(p)).div_ceil(100).max(1);
        let mut seen = 0u64;
        for (ticks, n) in BIN.iter().enumerate() {
            seen += u64::from(n.load(Relaxed));
            if seen >= rank {
                return ticks as u32;
            }
        }
        0
    };
    (total, pct(50), pct(99), LONGEST.load(Relaxed))
}
