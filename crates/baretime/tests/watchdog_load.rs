//! `Watchdog` on a loaded host (issue 28's load-dependent QEMU failure:
//! `x86_64-watchdog-acpipm` on a loaded host, 12 of 28 checks rejected, the +0.1 % change
//! never reported, the clock 899 ppm off under a `bound_ppb` of 390).
//!
//! A check rejects its bracket when it is wider than `2·w_min + 2` counter ticks, `w_min`
//! the narrowest *ever* seen. A read path that becomes slower and stays so (a hypervisor that
//! starts trapping RDTSC after a live migration to a host without TSC scaling, an emulated
//! timer whose host is now loaded, a wrapper whose cost grew) makes every later bracket wide:
//! every check is `NoVerdict(WideBracket)` from then on, a rate change at the same time (the
//! migration) is never reported, and `bound_ppb` keeps the figure it had. The docs'
//! detection time ("every disturbed check in between stretches an interval by one period")
//! assumes disturbed checks end; these never do. (Fixed since: after four consecutive wide
//! checks the narrowest of their brackets is the floor; the tests below pass.)
//!
//! Each world is deterministic: true time in ps, a 1 GHz counter and a 24-bit ACPI PM
//! timer, each read taking its cost of true time and latching half-way, the hook every
//! 0.5 s. A test marked `#[ignore = "finding: ..."]` is a promise found broken, with its
//! minimal input; `cargo test -p baretime --test watchdog_load -- --ignored` shows it.

use std::cell::Cell;
use std::rc::Rc;

use baretime::{Clock, FnCounter, Frequency, Reference, Watch, Watchdog};

const PS_PER_S: u128 = 1_000_000_000_000;

/// The world: true time, the counter's rate and each read's cost, changeable mid-run.
#[derive(Default)]
struct World {
    t_ps: Cell<u128>,
    /// The counter's ticks at `since_ps`, ×10^12 (ps·Hz), and its rate from then, mHz.
    c_acc: Cell<u128>,
    since_ps: Cell<u128>,
    c_mhz: Cell<u128>,
    c_cost_ps: Cell<u128>,
    r_cost_ps: Cell<u128>,
}

/// The ACPI PM timer's rate, declared exact: the truth is the counter's rate as it counts.
const PM_HZ: u128 = 3_579_545;

impl World {
    fn new(c_mhz: u128, c_cost_ns: u128, r_cost_ns: u128) -> Rc<World> {
        let w = World::default();
        w.c_mhz.set(c_mhz);
        w.c_cost_ps.set(c_cost_ns * 1000);
        w.r_cost_ps.set(r_cost_ns * 1000);
        Rc::new(w)
    }
    fn advance(&self, ps: u128) {
        self.t_ps.set(self.t_ps.get() + ps);
    }
    /// The counter's rate becomes `mhz` from now.
    fn set_rate(&self, mhz: u128) {
        self.c_acc.set(self.counter_acc());
        self.since_ps.set(self.t_ps.get());
        self.c_mhz.set(mhz);
    }
    fn counter_acc(&self) -> u128 {
        self.c_acc.get() + (self.t_ps.get() - self.since_ps.get()) * self.c_mhz.get() / 1000
    }
    fn read_counter(&self) -> u64 {
        let half = self.c_cost_ps.get() / 2;
        self.advance(half);
        let v = (self.counter_acc() / PS_PER_S) as u64;
        self.advance(self.c_cost_ps.get() - half);
        v
    }
    fn read_pm(&self) -> u64 {
        let half = self.r_cost_ps.get() / 2;
        self.advance(half);
        let v = (self.t_ps.get() * PM_HZ / PS_PER_S) as u64 & 0xff_ffff;
        self.advance(self.r_cost_ps.get() - half);
        v
    }
}

struct Pm(Rc<World>);

impl Reference for Pm {
    fn read(&mut self) -> u64 {
        self.0.read_pm()
    }
    fn bits(&self) -> u32 {
        24
    }
    fn frequency(&self) -> Frequency {
        Frequency::exact_hz(PM_HZ as u64).unwrap()
    }
    fn name(&self) -> &'static str {
        "pm"
    }
}

/// What a run saw: the verdicts in order, and at the end the clock's true rate error and
/// `bound_ppb` (ppb); `misses`: the checks whose error exceeded `bound_ppb`, outside the
/// time from a change of the counter's rate to its report (where the docs say the bound
/// does not hold).
struct Run {
    verdicts: Vec<Watch>,
    end_error_ppb: u64,
    end_bound_ppb: u64,
    misses: Vec<(usize, u64, u64)>,
}

/// What happens to the world just before check `.0` (at `.0` × 0.5 s): a rate change, a
/// cost change, or both.
type Change<'a> = (usize, &'a dyn Fn(&World));

/// 28 checks every 0.5 s of a clock started at the counter's exact rate (1 GHz, bound
/// 390 ppb), with `changes` on the way.
fn run(world: &Rc<World>, changes: &[Change<'_>]) -> Run {
    run_n(world, changes, 28)
}

/// As [`run`], for `checks` checks.
fn run_n(world: &Rc<World>, changes: &[Change<'_>], checks: usize) -> Run {
    let w = Rc::clone(world);
    let counter = FnCounter::new(move || w.read_counter(), 64);
    let rate = Frequency::from_millihz(
        1_000_000_000_000,
        baretime::Source::Calibrated,
        baretime::Accuracy::Measured {
            uncertainty_ppb: 390,
        },
    )
    .unwrap();
    let clock = Clock::new(&counter, rate);
    let mut wd = Watchdog::new(Pm(Rc::clone(world)), rate);
    let mut verdicts = Vec::new();
    let mut misses = Vec::new();
    let mut reported = true;
    let error = || {
        let truth = world.c_mhz.get() as u64;
        let now = clock.scale().millihz();
        (now.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64
    };
    for i in 0..checks {
        let before = world.c_mhz.get();
        for (at, change) in changes {
            if *at == i {
                change(world);
            }
        }
        reported &= world.c_mhz.get() == before;
        world.advance(PS_PER_S / 2);
        let v = wd.check(&clock);
        reported |= matches!(v, Watch::Changed { .. });
        verdicts.push(v);
        let (e, b) = (error(), wd.health().bound_ppb);
        if reported && e > b {
            misses.push((i, e, b));
        }
    }
    Run {
        verdicts,
        end_error_ppb: error(),
        end_bound_ppb: wd.health().bound_ppb,
        misses,
    }
}

fn changed(r: &Run) -> usize {
    r.verdicts
        .iter()
        .filter(|v| matches!(v, Watch::Changed { .. }))
        .count()
}

/// The control: the same +0.1 % change at 10 s with the reads' costs unchanged is reported
/// within three periods and leaves the clock within its bound.
#[test]
fn a_change_with_the_same_read_costs_is_seen() {
    let world = World::new(1_000_000_000_000, 20, 700);
    let r = run(&world, &[(20, &|w| w.set_rate(1_001_000_000_000))]);
    let first = r
        .verdicts
        .iter()
        .position(|v| matches!(v, Watch::Changed { .. }));
    assert!(first.is_some_and(|i| i <= 22), "verdicts: {:?}", r.verdicts);
    assert!(
        r.end_error_ppb <= r.end_bound_ppb,
        "error {} ppb, bound {} ppb",
        r.end_error_ppb,
        r.end_bound_ppb
    );
}

/// A reference read that costs more for good (an emulated PM timer on a host that became
/// loaded: 0.7 µs, then 2.1 µs from 8 s), then the +0.1 % change at 10 s.
///
/// Found (fixed since: after four consecutive wide checks the narrowest of them is the floor
/// brackets are judged against): the 12 checks from 8 s all `WideBracket`, never `Changed`;
/// the clock ended 999 ppm off under a `bound_ppb` of 193.
#[test]
fn a_slower_reference_read_hides_a_change() {
    let world = World::new(1_000_000_000_000, 20, 700);
    let r = run(
        &world,
        &[
            (16, &|w| w.r_cost_ps.set(2_100_000)),
            (20, &|w| w.set_rate(1_001_000_000_000)),
        ],
    );
    assert!(
        changed(&r) >= 1,
        "never reported: {:?}; the clock {} ppb off, bound_ppb {}",
        &r.verdicts[16..],
        r.end_error_ppb,
        r.end_bound_ppb
    );
    assert!(
        r.end_error_ppb <= r.end_bound_ppb,
        "error {} ppb, bound {} ppb",
        r.end_error_ppb,
        r.end_bound_ppb
    );
}

/// A migration: the counter runs +0.1 % and its reads cost 1 µs instead of 20 ns from the
/// same moment (RDTSC now trapped and emulated).
///
/// Found (fixed since, as above): the 8 checks from 10 s all `WideBracket`, never `Changed`;
/// the clock ended 999 ppm off under a `bound_ppb` of 145.
#[test]
fn a_slower_counter_read_hides_its_own_change() {
    let world = World::new(1_000_000_000_000, 20, 700);
    let r = run(
        &world,
        &[(20, &|w| {
            w.set_rate(1_001_000_000_000);
            w.c_cost_ps.set(1_000_000);
        })],
    );
    assert!(
        changed(&r) >= 1,
        "never reported: {:?}; the clock {} ppb off, bound_ppb {}",
        &r.verdicts[20..],
        r.end_error_ppb,
        r.end_bound_ppb
    );
    assert!(
        r.end_error_ppb <= r.end_bound_ppb,
        "error {} ppb, bound {} ppb",
        r.end_error_ppb,
        r.end_bound_ppb
    );
}

/// A hook that catches up after a stall: each regular check is followed by a second one
/// 1 ms later (a periodic hook whose missed deadlines run back to back; the boot kernel's
/// did, and a loaded host made it). The 1 ms interval's own bound (1.3 ‰: one PM tick in
/// 3 580) is wider than the +100 ppm change, so it is `Steady` and drops the pending
/// deviation as a one-off; the next regular interval is then steady too, against the clock's
/// rate and the `bound_ppb` that the unconfirmed interval widened. Measured: +100 ppm at 5 s,
/// never `Changed` in 14 s; only refinement follows, at its 1 ppm slew limit a step: the
/// clock still 66 ppm off at 14 s (`bound_ppb` 66.2 ppm: it holds). The docs ask a steady
/// hook period of the cadence rule, not of the detection time; the detection time's
/// "every disturbed check stretches an interval by one period" does not cover a judged
/// interval too short to confirm or refute the deviation.
///
/// Found (fixed since). At the merge before issue 28's last round this already passed: the
/// window judged against the clock after the steady 1 ms interval reported the change at the
/// next regular check, with the rate's bound 208 ppm (`Changed` 1.0 s after the change). Now
/// the 1 ms interval, agreeing both with the baseline and with the pending deviation, is
/// extended to the next check instead of dropping the deviation as a one-off, and the two
/// intervals confirm the change at the same check with a bound of 2.6 ppm.
#[test]
fn bunched_checks_hide_a_change() {
    let world = World::new(1_000_000_000_000, 20, 700);
    let w = Rc::clone(&world);
    let counter = FnCounter::new(move || w.read_counter(), 64);
    let rate = Frequency::from_millihz(
        1_000_000_000_000,
        baretime::Source::Calibrated,
        baretime::Accuracy::Measured {
            uncertainty_ppb: 390,
        },
    )
    .unwrap();
    let clock = Clock::new(&counter, rate);
    let mut wd = Watchdog::new(Pm(Rc::clone(&world)), rate);
    let mut verdicts = Vec::new();
    for i in 0..28 {
        if i == 10 {
            world.set_rate(1_000_100_000_000);
        }
        world.advance(PS_PER_S / 2 - PS_PER_S / 1000);
        verdicts.push(wd.check(&clock));
        world.advance(PS_PER_S / 1000);
        verdicts.push(wd.check(&clock));
    }
    let truth = world.c_mhz.get() as u64;
    let now = clock.scale().millihz();
    let error = (now.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64;
    let bound = wd.health().bound_ppb;
    println!(
        "clock {error} ppb off, bound_ppb {bound}; verdicts from 5 s: {:?}",
        &verdicts[20..]
    );
    assert!(
        verdicts.iter().any(|v| matches!(v, Watch::Changed { .. })),
        "never reported; the clock {error} ppb off, bound_ppb {bound}"
    );
    assert!(error <= bound, "error {error} ppb, bound {bound} ppb");
}

/// The read path slows for good (the reference's or the counter's read, 1.5 µs to 50 µs)
/// at any check from 4 s to 10 s, and the counter's rate changes (±100 ppm, ±0.1 %) at the
/// same check or up to three seconds later: every change is reported, and the clock is within
/// `bound_ppb` of the truth at every check but those from the change to its report.
///
/// Found (fixed since: a change seen by the window's split reports a bound that also covers
/// the way to the last interval's rate): with 50 µs brackets, ±100 ppm is under an interval's
/// threshold and the split saw it at the first check after it, set the clock 14 ppm of the
/// way and claimed 22 ppm (12 of the 640 cases, one check each).
#[test]
fn slower_reads_then_changes_sweep() {
    let mut found = Vec::new();
    for slow_counter in [false, true] {
        for cost_ns in [1_500u128, 2_100, 5_000, 50_000] {
            for at in (8..=20).step_by(3) {
                for later in [0usize, 1, 3, 6] {
                    for ppb in [100_000i128, -100_000, 1_000_000, -1_000_000] {
                        let world = World::new(1_000_000_000_000, 20, 700);
                        let mhz = (1_000_000_000_000i128 + ppb * 1000) as u128;
                        let slow = move |w: &World| {
                            if slow_counter {
                                w.c_cost_ps.set(cost_ns * 1000);
                            } else {
                                w.r_cost_ps.set(cost_ns * 1000);
                            }
                        };
                        let change = move |w: &World| w.set_rate(mhz);
                        let r = run_n(&world, &[(at, &slow), (at + later, &change)], 72);
                        if changed(&r) == 0
                            || r.end_error_ppb > r.end_bound_ppb
                            || !r.misses.is_empty()
                        {
                            found.push(format!(
                                "counter {slow_counter} cost {cost_ns} ns at {at} change {ppb} ppb at {}: changed {}, error {} bound {}; misses (check, error, bound) {:?}",
                                at + later,
                                changed(&r),
                                r.end_error_ppb,
                                r.end_bound_ppb,
                                r.misses
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Bunched checks (a second check 1, 10 or 100 ms after each regular one) with no change, and
/// with changes of ±10 ppm, ±100 ppm and ±0.1 % at any of five checks: no `Changed` without a
/// change, every change reported within the docs' three periods (the bunched checks merged
/// into the next interval), and the clock within `bound_ppb` at the end (20 s after).
/// Slower reads with no change: no `Changed`, the clock within `bound_ppb` throughout.
#[test]
fn bunched_checks_and_slower_reads_sweep() {
    let mut found = Vec::new();
    for gap_ms in [1u128, 10, 100] {
        for ppb in [
            0i128, 10_000, -10_000, 100_000, -100_000, 1_000_000, -1_000_000,
        ] {
            for at in 10..15 {
                let world = World::new(1_000_000_000_000, 20, 700);
                let w = Rc::clone(&world);
                let counter = FnCounter::new(move || w.read_counter(), 64);
                let rate = Frequency::from_millihz(
                    1_000_000_000_000,
                    baretime::Source::Calibrated,
                    baretime::Accuracy::Measured {
                        uncertainty_ppb: 390,
                    },
                )
                .unwrap();
                let clock = Clock::new(&counter, rate);
                let mut wd = Watchdog::new(Pm(Rc::clone(&world)), rate);
                let mut changes = 0;
                let mut first = None;
                for i in 0..(at + 40) {
                    if i == at && ppb != 0 {
                        world.set_rate((1_000_000_000_000i128 + ppb * 1000) as u128);
                    }
                    world.advance(PS_PER_S / 2 - gap_ms * PS_PER_S / 1000);
                    for bunched in [false, true] {
                        if bunched {
                            world.advance(gap_ms * PS_PER_S / 1000);
                        }
                        if matches!(wd.check(&clock), Watch::Changed { .. }) {
                            changes += 1;
                            first = first.or(Some(i));
                        }
                    }
                }
                let truth = world.c_mhz.get() as u64;
                let now = clock.scale().millihz();
                let error = (now.abs_diff(truth) as u128 * 1_000_000_000 / truth as u128) as u64;
                let bound = wd.health().bound_ppb;
                let late = ppb != 0 && first.is_none_or(|f| f > at + 3);
                if (ppb == 0) != (changes == 0) || late || error > bound {
                    found.push(format!(
                        "gap {gap_ms} ms, {ppb} ppb at {at}: {changes} Changed (first at {first:?}), error {error} bound {bound}"
                    ));
                }
            }
        }
    }
    for slow_counter in [false, true] {
        for cost_ns in [1_500u128, 5_000, 50_000, 500_000] {
            let world = World::new(1_000_000_000_000, 20, 700);
            let slow = move |w: &World| {
                if slow_counter {
                    w.c_cost_ps.set(cost_ns * 1000);
                } else {
                    w.r_cost_ps.set(cost_ns * 1000);
                }
            };
            let r = run_n(&world, &[(10, &slow)], 72);
            if changed(&r) != 0 || r.end_error_ppb > r.end_bound_ppb || !r.misses.is_empty() {
                found.push(format!(
                    "counter {slow_counter} cost {cost_ns} ns, no change: {:?}, error {} bound {}",
                    r.verdicts, r.end_error_ppb, r.end_bound_ppb
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} cases:\n{}",
        found.len(),
        found.join("\n")
    );
}
