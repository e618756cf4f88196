//! What the firmware runs, the same on every board.
//!
//! Two `static` clocks, started at boot with interrupts still off:
//!
//! - `CLOCK` on the board's free-running 32-bit timer: `update()` from the *mid* reader's
//!   periodic interrupt, `recalibrate()` (±100 ppm, alternating) from thread mode;
//! - `EXT_CLOCK` on the board's 16-bit timer extended by [`ExtendedTimer`] (issue 14's case
//!   10 pattern): the timer's own wrap interrupt counts the wrap and calls `update()`.
//!
//! Readers: thread mode, and the handlers of the *high* reader, the *mid* reader and the
//! wrap, at three priorities (the board's docs give them). Each reading — `CLOCK.now()`,
//! `EXT_CLOCK.now()`, the extended count — is checked against a shared floor: the largest
//! reading any context had *finished* before this one began (the floor is loaded before the
//! read and raised after it, in critical sections; a handler that preempts a read raises the
//! floor only for later reads). A reading below it is a step back, classed by who published
//! the floor: within thread reads, within interrupt reads, or between them.
//!
//! Delays: thread mode waits N µs with `CLOCK.delay()` (`wait_ns` and
//! `embedded_hal::delay::DelayNs::delay_us`) and with `EXT_CLOCK.delay()`, and the wrap
//! handler with `EXT_CLOCK.delay()`; each wait is measured on the clock it came from and
//! must last N µs, less 1 ns of rounding per `update()` that re-based the clock meanwhile
//! (a new timeline starts from the old one's value, rounded down). Those clocks' writers are
//! the measuring context itself or handlers that finish before it goes on, so no stalled
//! writer makes their time stand still.
//!
//! The time of day: `WALL`, a [`WallClock`] on `CLOCK`, set at boot from the host's time
//! (semihosting `SYS_TIME`, standing in for an RTC), read by every context beside the clocks
//! (checked against a floor of its own: `wall_back`), and slewed +0.5 s at
//! [`MAX_SLEW_PPM`] by thread mode at the start. The run lasts until the slew is over (1 s of
//! clock time after its handover); then the wall time must be exactly the setting plus the
//! clock's time since plus 0.5 s (`wall_end_error_ns`, bracketed by two clock reads), and a
//! step back to the unslewed time must report exactly −0.5 s.
//!
//! The watchdog, a 1 kHz interrupt above everything else that reads no clock, fails the run
//! when a handler or thread mode has not finished anything for 200 of its checks (a reader
//! spinning on a lock the code it interrupted holds, say). The run ends after
//! [`TARGET_INTERRUPTS`] interrupts, or 30 s by the clock.

use core::cell::UnsafeCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use baretime::{Clock, ClockError, Counter, ExtendedTimer, Frequency, WallClock, MAX_SLEW_PPM};
use cortex_m_rt::{entry, exception};
use embedded_hal::delay::DelayNs;

use crate::board::{self, Main, Narrow};
use crate::out::{self, Line};

static CLOCK: Clock<Main> = Clock::uninit(Main);
static NARROW: ExtendedTimer<Narrow> = ExtendedTimer::new(Narrow);
static EXT_CLOCK: Clock<&ExtendedTimer<Narrow>> = Clock::uninit(&NARROW);
static WALL: WallClock<'static, Main> = WallClock::new(&CLOCK);

/// The slew thread mode asks for at the start: +0.5 s at the largest rate (1 s long).
const WALL_SLEW_NS: i64 = 500_000_000;
/// The handover: a write takes over this long after its clock reading (baretime's wall.rs).
const WALL_HANDOVER_NS: u64 = 100_000;
/// Interrupts (all handlers) after which the run ends.
const TARGET_INTERRUPTS: u32 = 120_000;
/// The longest run, by the clock.
const MAX_RUN_NS: u64 = 30_000_000_000;
/// Watchdog checks (1 ms each) without progress that fail the run.
const WATCHDOG_LIMIT: u32 = 200;
/// The wrap handler measures a delay every this many wraps.
const WRAP_DELAY_EVERY: u32 = 8;
const WRAP_DELAY_NS: u64 = 20_000;

/// What a handler does (the board maps its interrupts to these).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Checks that everything else makes progress; reads no clock.
    Watchdog = 0,
    /// Reads.
    High = 1,
    /// `CLOCK.update()`, then reads.
    Mid = 2,
    /// The narrow timer's wrap: `on_wrap`, `EXT_CLOCK.update()`, reads, a delay now and then.
    Wrap = 3,
}

/// Contexts: the four roles and thread mode.
const THREAD: usize = 4;
const CONTEXTS: usize = 5;
const NAMES: [&str; CONTEXTS] = ["watchdog", "high", "mid", "wrap", "thread"];

/// Counters of one context, written only by that context (a load and a store: thumbv6m has
/// no read-modify-write atomics), read by anyone.
struct Counts {
    /// Handler runs finished (thread mode: loop iterations).
    done: AtomicU32,
    reads: AtomicU32,
    updates: AtomicU32,
    late: AtomicU32,
    busy: AtomicU32,
    errors: AtomicU32,
    delays: AtomicU32,
    short_delays: AtomicU32,
    wall_reads: AtomicU32,
}

impl Counts {
    const fn new() -> Counts {
        Counts {
            done: AtomicU32::new(0),
            reads: AtomicU32::new(0),
            updates: AtomicU32::new(0),
            late: AtomicU32::new(0),
            busy: AtomicU32::new(0),
            errors: AtomicU32::new(0),
            delays: AtomicU32::new(0),
            short_delays: AtomicU32::new(0),
            wall_reads: AtomicU32::new(0),
        }
    }
}

#[allow(clippy::declare_interior_mutable_const)]
const NO_COUNTS: Counts = Counts::new();
static COUNTS: [Counts; CONTEXTS] = [NO_COUNTS; CONTEXTS];

/// Adds `n` to a counter only its own context writes.
fn add(counter: &AtomicU32, n: u32) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// The largest reading finished so far, and the context that published it.
struct Floor(UnsafeCell<(u64, usize)>);

// SAFETY: the cell is only accessed inside critical sections (single core).
unsafe impl Sync for Floor {}

impl Floor {
    const fn new() -> Floor {
        Floor(UnsafeCell::new((0, THREAD)))
    }
    fn get(&self) -> (u64, usize) {
        // SAFETY: inside a critical section nothing else accesses the cell.
        cortex_m::interrupt::free(|_| unsafe { *self.0.get() })
    }
    fn raise(&self, value: u64, by: usize) {
        cortex_m::interrupt::free(|_| {
            // SAFETY: inside a critical section nothing else accesses the cell.
            let floor = unsafe { &mut *self.0.get() };
            if value > floor.0 {
                *floor = (value, by);
            }
        })
    }
}

static FLOOR_CLOCK: Floor = Floor::new();
static FLOOR_EXT_CLOCK: Floor = Floor::new();
static FLOOR_EXT_TICKS: Floor = Floor::new();

/// Steps back: within thread reads, within interrupt reads, between them; the largest.
/// Written from every context, inside critical sections.
static BACK_THREAD: AtomicU32 = AtomicU32::new(0);
static BACK_IRQ: AtomicU32 = AtomicU32::new(0);
static BACK_CROSS: AtomicU32 = AtomicU32::new(0);
static BACK_MAX: Floor = Floor::new();
static FLOOR_WALL: Floor = Floor::new();
/// Wall readings below the wall floor, and wall readings `None` (not set: never, it is set
/// before interrupts are on). Written from every context, inside critical sections.
static WALL_BACK: AtomicU32 = AtomicU32::new(0);
static WALL_NONE: AtomicU32 = AtomicU32::new(0);
static WALL_BACK_MAX: Floor = Floor::new();

/// One wall reading by `who`, checked against the wall floor.
fn read_wall(who: usize) {
    let (before, _) = FLOOR_WALL.get();
    let Some(value) = WALL.unix_ns() else {
        cortex_m::interrupt::free(|_| add(&WALL_NONE, 1));
        return;
    };
    if value < before {
        cortex_m::interrupt::free(|_| add(&WALL_BACK, 1));
        WALL_BACK_MAX.raise(before - value, who);
    }
    FLOOR_WALL.raise(value, who);
    add(&COUNTS[who].wall_reads, 1);
}

/// Reads with `read`, checked against `floor`.
fn checked(floor: &Floor, who: usize, read: impl FnOnce() -> u64) {
    let (before, owner) = floor.get();
    let value = read();
    if value < before {
        let kind = match (who == THREAD, owner == THREAD) {
            (true, true) => &BACK_THREAD,
            (false, false) => &BACK_IRQ,
            _ => &BACK_CROSS,
        };
        cortex_m::interrupt::free(|_| add(kind, 1));
        BACK_MAX.raise(before - value, who);
    }
    floor.raise(value, who);
}

/// One round of reads by `who`: both clocks and the extended count.
fn read_all(who: usize) {
    checked(&FLOOR_CLOCK, who, || CLOCK.now().as_nanos());
    checked(&FLOOR_EXT_CLOCK, who, || EXT_CLOCK.now().as_nanos());
    checked(&FLOOR_EXT_TICKS, who, || NARROW.ticks());
    add(&COUNTS[who].reads, 3);
    read_wall(who);
}

/// Counts a writer's result in `who`'s counters.
fn count_write(who: usize, result: Result<(), ClockError>) {
    let c = &COUNTS[who];
    match result {
        Ok(()) => add(&c.updates, 1),
        Err(ClockError::Late) => add(&c.late, 1),
        Err(ClockError::Busy) => add(&c.busy, 1),
        Err(_) => add(&c.errors, 1),
    }
}

/// Writes `who` made to a clock (every result).
fn writes(who: usize) -> u32 {
    let c = &COUNTS[who];
    [&c.updates, &c.late, &c.busy, &c.errors]
        .iter()
        .fold(0u32, |n, a| n.wrapping_add(a.load(Relaxed)))
}

/// Judges one wait of `ns` that measured `measured` ns on a clock re-based `rebases` times
/// meanwhile.
fn judge_delay(who: usize, ns: u64, measured: u64, rebases: u32) {
    add(&COUNTS[who].delays, 1);
    if measured + u64::from(rebases) + 1 < ns {
        add(&COUNTS[who].short_delays, 1);
    }
}

#[exception]
fn SysTick() {
    handle(board::SYSTICK_ROLE);
}

#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    match board::take_irq(irqn) {
        Some(role) => handle(role),
        None => fail("unexpected_interrupt", irqn as usize),
    }
}

fn handle(role: Role) {
    let who = role as usize;
    match role {
        Role::Watchdog => watchdog(),
        Role::High => read_all(who),
        Role::Mid => {
            count_write(who, CLOCK.update());
            read_all(who);
        }
        Role::Wrap => {
            NARROW.on_wrap();
            count_write(who, EXT_CLOCK.update());
            read_all(who);
            if COUNTS[who]
                .done
                .load(Relaxed)
                .is_multiple_of(WRAP_DELAY_EVERY)
            {
                let delay = EXT_CLOCK.delay();
                let t0 = EXT_CLOCK.now();
                delay.wait_ns(WRAP_DELAY_NS);
                let measured = (EXT_CLOCK.now() - t0).as_nanos() as u64;
                judge_delay(who, WRAP_DELAY_NS, measured, 0);
            }
        }
    }
    add(&COUNTS[who].done, 1);
}

static WATCHDOG_LAST: [AtomicU32; CONTEXTS] = [const { AtomicU32::new(0) }; CONTEXTS];
static WATCHDOG_STALLED: [AtomicU32; CONTEXTS] = [const { AtomicU32::new(0) }; CONTEXTS];

/// Fails the run when a handler or thread mode has finished nothing for
/// [`WATCHDOG_LIMIT`] checks.
fn watchdog() {
    for who in [
        Role::High as usize,
        Role::Mid as usize,
        Role::Wrap as usize,
        THREAD,
    ] {
        let done = COUNTS[who].done.load(Relaxed);
        if done != WATCHDOG_LAST[who].load(Relaxed) {
            WATCHDOG_LAST[who].store(done, Relaxed);
            WATCHDOG_STALLED[who].store(0, Relaxed);
        } else {
            let stalled = WATCHDOG_STALLED[who].load(Relaxed) + 1;
            WATCHDOG_STALLED[who].store(stalled, Relaxed);
            if stalled >= WATCHDOG_LIMIT {
                fail("watchdog", who);
            }
        }
    }
}

/// Prints what was counted, with `error=why` and the context, and exits with a failure.
fn fail(why: &str, who: usize) -> ! {
    cortex_m::interrupt::disable();
    let mut line = Line::new();
    let name = NAMES.get(who).copied().unwrap_or("irq");
    let _ = write!(line, "error={why} stuck={name} id={who}");
    line.send();
    report(None);
    out::exit(false)
}

fn sum(f: impl Fn(&Counts) -> &AtomicU32, contexts: &[usize]) -> u32 {
    contexts
        .iter()
        .fold(0u32, |n, &c| n.wrapping_add(f(&COUNTS[c]).load(Relaxed)))
}

const HANDLERS: [usize; 4] = [0, 1, 2, 3];
const READERS: [usize; 3] = [1, 2, 3];
const ALL: [usize; 5] = [0, 1, 2, 3, 4];

fn interrupts() -> u32 {
    sum(|c| &c.done, &HANDLERS)
}

/// The clock's counter when the clocks started.
static START_TICKS: AtomicU32 = AtomicU32::new(0);

/// Prints the counts, with the extended count's drift against the clock's counter (ticks)
/// at the end of a run. Without it (the watchdog's report) it reads no clock: the code it
/// interrupted may hold whatever a clock read would wait for.
fn report(ext_vs_main_ticks: Option<i64>) {
    let back = [&BACK_THREAD, &BACK_IRQ, &BACK_CROSS].map(|a| a.load(Relaxed));
    let mut line = Line::new();
    let _ = write!(
        line,
        "board={} hz={} reads={} irq_reads={} interrupts={} steps_back={} back_thread={} back_irq={} back_cross={} back_max={}",
        board::NAME,
        board::HZ,
        COUNTS[THREAD].reads.load(Relaxed),
        sum(|c| &c.reads, &READERS),
        interrupts(),
        back.iter().sum::<u32>(),
        back[0],
        back[1],
        back[2],
        BACK_MAX.get().0,
    );
    line.send();
    let mut line = Line::new();
    let _ = write!(
        line,
        "updates={} late={} busy={} clock_errors={} recalibrations={} delays={} short_delays={} health_late={}",
        sum(|c| &c.updates, &[Role::Mid as usize, Role::Wrap as usize]),
        sum(|c| &c.late, &ALL),
        sum(|c| &c.busy, &ALL),
        sum(|c| &c.errors, &ALL),
        COUNTS[THREAD].updates.load(Relaxed),
        sum(|c| &c.delays, &ALL),
        sum(|c| &c.short_delays, &ALL),
        match ext_vs_main_ticks {
            Some(_) => CLOCK.health().late_updates + EXT_CLOCK.health().late_updates,
            None => 0,
        },
    );
    line.send();
    let mut line = Line::new();
    let _ = write!(
        line,
        "high_irqs={} mid_irqs={} wrap_irqs={} watchdog_irqs={} thread_loops={} ext_wraps={} ext_bits={} run_ms={}",
        COUNTS[Role::High as usize].done.load(Relaxed),
        COUNTS[Role::Mid as usize].done.load(Relaxed),
        COUNTS[Role::Wrap as usize].done.load(Relaxed),
        COUNTS[Role::Watchdog as usize].done.load(Relaxed),
        COUNTS[THREAD].done.load(Relaxed),
        NARROW.wraps(),
        NARROW.bits(),
        u64::from((Main.ticks() as u32).wrapping_sub(START_TICKS.load(Relaxed))) * 1000
            / board::HZ,
    );
    line.send();
    if let Some(drift) = ext_vs_main_ticks {
        let mut line = Line::new();
        let _ = write!(line, "ext_vs_main_ticks={drift}");
        line.send();
    }
}

/// ±100 ppm around the board's rate.
fn skewed(up: bool) -> Frequency {
    let off = board::HZ / 10_000;
    let hz = if up { board::HZ + off } else { board::HZ - off };
    Frequency::exact_hz(hz).unwrap()
}

/// Thread mode's delays: `ns` with `CLOCK.delay()` (its `wait_ns`, then `DelayNs`) and with
/// `EXT_CLOCK.delay()`, each measured on its clock.
fn thread_delays(ns: u64) {
    let mid = Role::Mid as usize;
    let wrap = Role::Wrap as usize;

    let w0 = writes(mid);
    let delay = CLOCK.delay();
    let t0 = CLOCK.now();
    delay.wait_ns(ns);
    let measured = (CLOCK.now() - t0).as_nanos() as u64;
    judge_delay(THREAD, ns, measured, writes(mid).wrapping_sub(w0));

    let w0 = writes(mid);
    let mut delay = CLOCK.delay();
    let t0 = CLOCK.now();
    delay.delay_us((ns / 1000) as u32);
    let measured = (CLOCK.now() - t0).as_nanos() as u64;
    judge_delay(THREAD, ns, measured, writes(mid).wrapping_sub(w0));

    let w0 = writes(wrap);
    let delay = EXT_CLOCK.delay();
    let t0 = EXT_CLOCK.now();
    delay.wait_ns(ns);
    let measured = (EXT_CLOCK.now() - t0).as_nanos() as u64;
    judge_delay(THREAD, ns, measured, writes(wrap).wrapping_sub(w0));
}

#[entry]
fn main() -> ! {
    cortex_m::interrupt::disable();
    let Some(mut cp) = cortex_m::Peripherals::take() else {
        fail("no_peripherals", THREAD)
    };
    board::start_counters(&mut cp.SYST);
    let hz = Frequency::exact_hz(board::HZ).unwrap();
    if CLOCK.start(hz).is_err() || EXT_CLOCK.start(hz).is_err() {
        fail("start", THREAD);
    }
    board::start_interrupts(&mut cp.SYST, &mut cp.SCB, &mut cp.NVIC);
    let main0 = Main.ticks() as u32;
    START_TICKS.store(main0, Relaxed);
    let ext0 = NARROW.ticks();
    // The time of day, as a firmware sets it from its RTC: the host's Unix seconds now.
    let boot_s = out::unix_seconds();
    let set_at = CLOCK.now();
    let set_ns = u64::from(boot_s) * 1_000_000_000;
    if WALL.set(set_ns, set_at) != Ok(None) {
        fail("wall_set", THREAD);
    }
    // SAFETY: every handler's data is ready; no critical section is open.
    unsafe { cortex_m::interrupt::enable() };
    let slew_at = CLOCK.now();
    if WALL.slew(WALL_SLEW_NS, MAX_SLEW_PPM) != Ok(0) {
        fail("wall_slew", THREAD);
    }
    let slew_call_ns = (CLOCK.now() - slew_at).as_nanos() as u64;

    let me = &COUNTS[THREAD];
    let mut loops = 0u32;
    // When thread mode first saw the slew over (clock time since the call).
    let mut slew_ns = None;
    let mut slew_over = || {
        if slew_ns.is_none() && WALL.slew_remaining_ns() == 0 {
            slew_ns = Some((CLOCK.now() - slew_at).as_nanos() as u64);
        }
        slew_ns.is_some()
    };
    loop {
        loops += 1;
        for _ in 0..4 {
            read_all(THREAD);
        }
        slew_over();
        if loops.is_multiple_of(16) {
            // recalibrate: counted in the thread's own `updates` (reported as
            // recalibrations), `late`, `busy`, `errors`.
            count_write(THREAD, CLOCK.recalibrate(skewed(loops.is_multiple_of(32))));
        }
        if loops.is_multiple_of(64) {
            const WAITS_NS: [u64; 4] = [1_000, 7_000, 30_000, 120_000];
            thread_delays(WAITS_NS[(loops / 64 % 4) as usize]);
        }
        me.done.store(loops, Relaxed);
        if loops.is_multiple_of(64)
            && (interrupts() >= TARGET_INTERRUPTS || CLOCK.now().as_nanos() >= MAX_RUN_NS)
        {
            break;
        }
    }
    // A run shorter than the slew goes on reading until it is over.
    while !slew_over() {
        read_all(THREAD);
        loops += 1;
        me.done.store(loops, Relaxed);
        if CLOCK.now().as_nanos() >= 2 * MAX_RUN_NS {
            fail("wall_slew_never_ends", THREAD);
        }
    }
    let slew_ns = slew_ns.unwrap_or(0);
    // Exactly the setting, plus the clock's time since, plus the slew: between two readings.
    let c1 = CLOCK.now().as_nanos();
    let wall = WALL.unix_ns().unwrap_or(0);
    let c2 = CLOCK.now().as_nanos();
    let line_at = |c: u64| set_ns + (c - set_at.as_nanos()) + WALL_SLEW_NS as u64;
    let end_error = if wall < line_at(c1) {
        wall as i64 - line_at(c1) as i64
    } else if wall > line_at(c2) {
        wall as i64 - line_at(c2) as i64
    } else {
        0
    };

    cortex_m::interrupt::disable();
    // A step back to the unslewed time, reported as exactly −0.5 s: with interrupts off, as
    // a step goes back and the readers' floor would count it.
    let step = WALL.set(set_ns, set_at);
    let health = WALL.health();
    let main_ticks = (Main.ticks() as u32).wrapping_sub(main0);
    let ext_ticks = NARROW.ticks().wrapping_sub(ext0);
    report(Some(ext_ticks as i64 - i64::from(main_ticks)));
    let mut line = Line::new();
    let _ = write!(
        line,
        "wall_boot_s={boot_s} wall_reads={} wall_irq_reads={} wall_back={} wall_back_max={} wall_none={} clock_back={} wall_slew_ns={slew_ns} wall_slew_expected_ns={} wall_slew_call_ns={slew_call_ns} wall_slew_left={} wall_end_error_ns={end_error} wall_step_ns={} wall_steps={} wall_slews={}",
        COUNTS[THREAD].wall_reads.load(Relaxed),
        sum(|c| &c.wall_reads, &READERS),
        WALL_BACK.load(Relaxed),
        WALL_BACK_MAX.get().0,
        WALL_NONE.load(Relaxed),
        [&BACK_THREAD, &BACK_IRQ, &BACK_CROSS].iter().map(|a| a.load(Relaxed)).sum::<u32>(),
        WALL_HANDOVER_NS + WALL_SLEW_NS as u64 * 1_000_000 / u64::from(MAX_SLEW_PPM),
        WALL.slew_remaining_ns(),
        match step {
            Ok(Some(s)) => s as i64,
            _ => i64::MIN,
        },
        health.steps,
        health.slews,
    );
    line.send();
    let mut line = Line::new();
    let _ = write!(line, "done=1");
    line.send();
    out::exit(true)
}
