//! `mode=wall`, the same on both: the time of day from the RTC's seconds edge, then a slew.
//!
//! QEMU runs with `-rtc base=<B>,clock=vm`, and the command line says `rtc_base=<B>` (Unix
//! seconds): the RTC shows `B` plus QEMU's virtual time, and the counter follows that
//! virtual time exactly (aarch64 `virt`: CNTVCT_EL0 is the virtual clock in 16 ns ticks;
//! x86 under `-icount`: the TSC is the virtual clock in ns), so the truth at a counter
//! reading is `B` s plus the reading's time. The kernel
//!
//! 1. reads the RTC at its seconds edge and sets a `WallClock` on the kernel's `Clock` at the
//!    edge's midpoint; `boot_error_ns` is the wall time's error against the truth just after
//!    (`boot_error_bound_ns`: half the edge's bracket plus half the truth read's);
//! 2. slews the wall time by `slew_ns` (default +0.5 s) at `slew_ppm` (default 250 000: 2 s)
//!    and reads clock and wall time in a loop until the slew is over, counting on every read
//!    a wall time that went back (`wall_back`) or moved more than the slew allows
//!    (`wall_jumps`), a clock that went back (`clock_back`) or moved more than the counter
//!    did (`clock_jumps`);
//! 3. reports what the slew absorbed, measured against the clock (`slew_absorbed_lo_ns`,
//!    `slew_absorbed_hi_ns`: each wall read lies between two clock reads), and the wall
//!    time's error against the truth after it, less the slew (`final_error_ns`).

use core::fmt::{Display, Write};

use baretime::{Clock, Counter, SecondsEdge, WallClock};

use crate::scenario::word;

/// The widest edge bracket taken as it is: a wider one (the vCPU preempted by the host
/// during the poll, an interrupt on real hardware) is read again at the next edge.
const EDGE_WIDTH_MAX_NS: u64 = 100_000;
/// How many edges to try for one that narrow (each costs a second).
const EDGE_TRIES: u32 = 3;

/// The RTC's seconds edge from `read`, read again (up to [`EDGE_TRIES`] edges) while its
/// bracket is wider than [`EDGE_WIDTH_MAX_NS`]; the narrowest if none is. Prints
/// `edge_tries`.
fn tight_edge<E>(
    out: &mut impl Write,
    mut read: impl FnMut() -> Result<SecondsEdge, E>,
) -> Result<SecondsEdge, E> {
    let mut best = read()?;
    let mut tries = 1;
    while best.width_ns() > EDGE_WIDTH_MAX_NS && tries < EDGE_TRIES {
        let edge = read()?;
        tries += 1;
        if edge.width_ns() < best.width_ns() {
            best = edge;
        }
    }
    let _ = writeln!(out, "edge_tries={tries}");
    Ok(best)
}

/// One reading: the counter before, the clock, the wall time, the clock and counter after.
#[derive(Clone, Copy)]
struct Reading {
    ticks_before: u64,
    clock_before: u64,
    wall: u64,
    clock_after: u64,
    ticks_after: u64,
}

/// The tightest of `n` readings (the fewest counter ticks around it): the first runs of
/// freshly translated code under TCG take far longer than the rest.
fn best_of<C: Counter>(wall: &WallClock<'_, C>, n: u32) -> Option<Reading> {
    (0..n)
        .filter_map(|_| read(wall))
        .min_by_key(|r| r.ticks_after.wrapping_sub(r.ticks_before))
}

fn read<C: Counter>(wall: &WallClock<'_, C>) -> Option<Reading> {
    let clock = wall.clock();
    let ticks_before = clock.counter().ticks();
    let clock_before = clock.now().as_nanos();
    let w = wall.unix_ns()?;
    let clock_after = clock.now().as_nanos();
    let ticks_after = clock.counter().ticks();
    Some(Reading {
        ticks_before,
        clock_before,
        wall: w,
        clock_after,
        ticks_after,
    })
}

/// Runs the scenario: `read_edge` reads the RTC's seconds edge on `wall`'s clock (see
/// [`tight_edge`]), `virtual_ns` is QEMU's virtual time (ns) at a counter reading, so that the
/// true Unix time there is `rtc_base=` seconds plus it. Prints the figures; `false` only when
/// it could not run (the judging is xtask's).
pub fn run<C: Counter, E: Display>(
    out: &mut impl Write,
    cmdline: &str,
    wall: &WallClock<'_, C>,
    read_edge: impl FnMut() -> Result<SecondsEdge, E>,
    virtual_ns: impl Fn(u64) -> u128,
) -> bool {
    let clock: &Clock<C> = wall.clock();
    let edge = match tight_edge(out, read_edge) {
        Ok(edge) => edge,
        Err(e) => {
            let _ = writeln!(out, "error=rtc_edge detail=\"{e}\"");
            return false;
        }
    };
    let slew_ns: i64 = word(cmdline, "slew_ns").unwrap_or(500_000_000);
    let slew_ppm: u32 = word(cmdline, "slew_ppm").unwrap_or(250_000);
    let base: u64 = word(cmdline, "rtc_base").unwrap_or(0);
    let truth_ns = |ticks: u64| u128::from(base) * 1_000_000_000 + virtual_ns(ticks);
    let _ = writeln!(
        out,
        "rtc_base={base} edge_unix_seconds={} edge_width_ns={}",
        edge.unix_seconds,
        edge.width_ns()
    );
    if let Err(e) = wall.set_at_edge(&edge) {
        let _ = writeln!(out, "error=wall_set detail=\"{e}\"");
        return false;
    }

    // 1. The boot's error against the truth.
    let Some(r) = best_of(wall, 16) else {
        let _ = writeln!(out, "error=wall_not_set");
        return false;
    };
    let (t0, t1) = (truth_ns(r.ticks_before), truth_ns(r.ticks_after));
    let truth = t0 + (t1 - t0) / 2;
    let boot_error = i128::from(r.wall) - truth as i128;
    let bound = u128::from(edge.width_ns() / 2) + (t1 - t0) / 2;
    let _ = writeln!(
        out,
        "boot_error_ns={boot_error} boot_error_bound_ns={bound}"
    );

    // 2. The slew, every read checked, from a reading just before it.
    let scale = clock.scale();
    let Some(start) = best_of(wall, 16) else {
        return false;
    };
    if let Err(e) = wall.slew(slew_ns, slew_ppm) {
        let _ = writeln!(out, "error=wall_slew detail=\"{e}\"");
        return false;
    }
    let planned_ns = slew_ns.unsigned_abs() * 1_000_000 / u64::from(slew_ppm);
    let limit_ns = planned_ns + 1_000_000_000;
    let (mut prev, mut reads) = (start, 0u64);
    let (mut wall_back, mut wall_jumps, mut clock_back, mut clock_jumps) = (0u64, 0u64, 0u64, 0u64);
    let mut done_at: Option<u64> = None;
    loop {
        let Some(r) = read(wall) else {
            let _ = writeln!(out, "error=wall_unset_during_slew");
            return false;
        };
        reads += 1;
        if r.wall < prev.wall {
            wall_back += 1;
        }
        if r.clock_before < prev.clock_after {
            clock_back += 1;
        }
        // The clock moved no more than the counter did between the two readings' outer
        // counter reads (at the clock's own scale), plus a nanosecond of rounding each.
        let counter_ns = scale.ticks_to_ns(r.ticks_after.wrapping_sub(prev.ticks_before));
        if r.clock_after.saturating_sub(prev.clock_before) > counter_ns + 2 {
            clock_jumps += 1;
        }
        // The wall time moved no more than the clock between the outer clock reads, at the
        // slew's rate, plus a nanosecond each.
        let clock_ns = r.clock_after.saturating_sub(prev.clock_before);
        let allowed = clock_ns + clock_ns * u64::from(slew_ppm) / 1_000_000 + 2;
        if r.wall.saturating_sub(prev.wall) > allowed {
            wall_jumps += 1;
        }
        prev = r;
        // When the slew was seen over: the clock after the look, from before the call (a
        // vCPU preempted between a reading and the look makes any earlier figure too small).
        if done_at.is_none() && wall.slew_remaining_ns() == 0 {
            done_at = Some(clock.now().as_nanos().saturating_sub(start.clock_before));
        }
        let elapsed = r.clock_before.saturating_sub(start.clock_after);
        // Read on for 10 ms past the end, to see it end without a jump.
        if done_at.is_some_and(|d| elapsed > d + 10_000_000) || elapsed > limit_ns {
            break;
        }
    }
    let Some(end) = best_of(wall, 16) else {
        return false;
    };

    // 3. What the slew absorbed (each wall read lies between its two clock reads), and the
    // error against the truth after it.
    let wall_moved = i128::from(end.wall) - i128::from(start.wall);
    let lo = wall_moved - (i128::from(end.clock_after) - i128::from(start.clock_before));
    let hi = wall_moved - (i128::from(end.clock_before) - i128::from(start.clock_after));
    let (t0, t1) = (truth_ns(end.ticks_before), truth_ns(end.ticks_after));
    let truth = t0 + (t1 - t0) / 2;
    let final_error = i128::from(end.wall) - truth as i128 - i128::from(slew_ns);
    let health = wall.health();
    let _ = writeln!(
        out,
        "slew_ns={slew_ns} slew_ppm={slew_ppm} slew_planned_ms={} slew_done_ms={} \
         slew_remaining_ns={} slew_reads={reads}",
        planned_ns / 1_000_000,
        done_at.map_or(-1, |d| d as i64 / 1_000_000),
        wall.slew_remaining_ns(),
    );
    let _ = writeln!(
        out,
        "wall_back={wall_back} wall_jumps={wall_jumps} clock_back={clock_back} \
         clock_jumps={clock_jumps} slew_absorbed_lo_ns={lo} slew_absorbed_hi_ns={hi} \
         final_error_ns={final_error} steps={} slews={}",
        health.steps, health.slews
    );
    true
}
