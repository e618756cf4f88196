//! The `timers-m4` scenario: embassy-executor's thread-mode executor, with an embassy-time
//! driver over the board's `static` [`Clock`] and a CMSDK timer as its [`Alarm`] — what a
//! firmware author gets from baretime and embassy together.
//!
//! - `CLOCK` counts the board's free-running 32-bit timer at 25 MHz. A 32-bit counter needs
//!   [`Clock::update`] at least once per [`Clock::update_interval`] (85.9 s here); the 1 kHz
//!   tick interrupt does it (and stops a run that overstays [`MAX_RUN_NS`]).
//! - `DRIVER` is baretime-embassy's [`ClockDriver`] on `CLOCK` and [`Timer0Alarm`] (CMSDK
//!   timer 0, one-shot, `board`'s implementation of [`Alarm`](baretime::Alarm)): the timer's
//!   interrupt handler acknowledges it and calls `DRIVER.on_alarm()`.
//! - [`SLEEPERS`] tasks sleep random durations from 10 µs to 100 ms — a decade (10–100 µs,
//!   0.1–1 ms, 1–10 ms, 10–100 ms) picked at random, then a uniform duration within it — with
//!   `Timer::at`, for [`RUN_NS`] of the clock's time. At each wake a task reads `CLOCK.now()`
//!   and compares it with the deadline it slept until (embassy ticks to nanoseconds, rounded
//!   up): before it is an early wake (the run fails), at or after it the lateness is recorded.
//! - A task recalibrates the clock to +100 ppm a third of the way through and to −100 ppm at
//!   two thirds (the counter's true rate is the board's 25 MHz: after each, the clock runs
//!   100 ppm slow, then fast), then pends the alarm's interrupt so the driver re-plans the
//!   armed wake on the new rate.
//!
//! The results: `wakes`, `early`, lateness p50 / p99 / max in µs (nearest rank over every
//! wake), `recalibrations`, then `done=1` when every task finished. `cargo xtask qemu`
//! judges them (`xtask/src/qemu_cortexm.rs`).

use core::cell::RefCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use baretime::{Clock, ClockError, Counter, Frequency};
use baretime_embassy::ClockDriver;
use cortex_m_rt::exception;
use critical_section::Mutex;
use embassy_executor::Spawner;
use embassy_time::{Duration, Instant, Timer};

use crate::board::{self, Main, Timer0Alarm, TimersIrq};
use crate::out::{self, Line};

// The driver re-arms after every write that can move its deadlines (the recalibrations below),
// whoever writes: `Clock::on_write`.
static CLOCK: Clock<Main> = Clock::uninit(Main).on_write(rearm);
fn rearm() {
    DRIVER.on_alarm();
}

embassy_time_driver::time_driver_impl!(
    static DRIVER: ClockDriver<Main, Timer0Alarm> = ClockDriver::new(&CLOCK, Timer0Alarm)
);

/// Sleeping tasks.
const SLEEPERS: usize = 12;
/// How long the sleepers run, by the clock.
const RUN_NS: u64 = 2_500_000_000;
/// The longest run, by the clock: past it the tick interrupt fails the run (a wake lost).
const MAX_RUN_NS: u64 = 20_000_000_000;
/// Wakes whose lateness is kept for the percentiles (more are counted, not kept).
const SAMPLES: usize = 8192;

/// Wakes, early wakes, and the lateness of each (ns), from the tasks (thread mode).
struct Stats {
    wakes: u32,
    early: u32,
    early_max_ns: u64,
    late_max_ns: u64,
    kept: usize,
    late_ns: [u32; SAMPLES],
}

static STATS: Mutex<RefCell<Stats>> = Mutex::new(RefCell::new(Stats {
    wakes: 0,
    early: 0,
    early_max_ns: 0,
    late_max_ns: 0,
    kept: 0,
    late_ns: [0; SAMPLES],
}));

/// Tasks finished (the sleepers and the recalibrator).
static FINISHED: AtomicU32 = AtomicU32::new(0);
/// Recalibrations made.
static RECALIBRATIONS: AtomicU32 = AtomicU32::new(0);
/// Alarm interrupts taken; those the timer raised (the rest were pended by hand); the
/// most ticks between a count running out and its handler's first counter read.
static ALARM_IRQS: AtomicU32 = AtomicU32::new(0);
static ALARM_FIRED: AtomicU32 = AtomicU32::new(0);
static ALARM_LATE_MAX: AtomicU32 = AtomicU32::new(0);
/// Those ticks, counted per value (the last bin: that many or more).
const ALARM_BINS: usize = 64;
static ALARM_LATE: [AtomicU32; ALARM_BINS] = [const { AtomicU32::new(0) }; ALARM_BINS];

/// The median of [`ALARM_LATE`], in ns.
fn alarm_late_p50_ns() -> u64 {
    let total: u32 = ALARM_LATE.iter().map(|n| n.load(Relaxed)).sum();
    let mut seen = 0u32;
    for (ticks, n) in ALARM_LATE.iter().enumerate() {
        seen += n.load(Relaxed);
        if seen * 2 >= total {
            return ticks as u64 * 1_000_000_000 / board::HZ;
        }
    }
    0
}
/// The last alarm handler's first counter read and the one after its `DRIVER.on_alarm()`
/// (low 32 bits), for [`split`].
static SERVICE: AtomicU32 = AtomicU32::new(0);
static SERVICE_END: AtomicU32 = AtomicU32::new(0);
/// Bins of [`Split`] (ticks; the last: that many or more).
const SPLIT_BINS: usize = 2048;
/// A wake's lateness in three parts, in counter ticks, for the wakes the last alarm handler
/// served (it started at or after the deadline): deadline to the handler's first instruction
/// (the alarm's compare, QEMU's timer, the interrupt's entry and whatever held it off), the
/// handler's `DRIVER.on_alarm()` (the driver's service: the clock read, embassy's walk of
/// its queue that wakes the task, the next arming), and the handler's end to the task's first
/// instruction after its `await` (the interrupt's exit, the executor's poll, embassy's
/// `Timer` reading `Instant::now()`).
struct Split {
    wakes: AtomicU32,
    parts: [[AtomicU32; SPLIT_BINS]; 3],
}
static SPLIT: Split = Split {
    wakes: AtomicU32::new(0),
    parts: [const { [const { AtomicU32::new(0) }; SPLIT_BINS] }; 3],
};

/// Files a wake at counter reading `woke` (low 32 bits), `late_ns` after its deadline by the
/// clock, into [`SPLIT`] if the last alarm handler served it.
fn split(woke: u32, late_ns: u64) {
    let late = u32::try_from(late_ns * board::HZ / 1_000_000_000).unwrap_or(u32::MAX);
    let deadline = woke.wrapping_sub(late);
    let (start, end) = (SERVICE.load(Relaxed), SERVICE_END.load(Relaxed));
    let parts = [
        start.wrapping_sub(deadline),
        end.wrapping_sub(start),
        woke.wrapping_sub(end),
    ];
    // The handler started at or after the deadline and ended before the wake.
    if parts.iter().any(|&p| p >= 1 << 31) {
        return;
    }
    SPLIT.wakes.fetch_add(1, Relaxed);
    for (bins, ticks) in SPLIT.parts.iter().zip(parts) {
        if let Some(n) = bins.get((ticks as usize).min(SPLIT_BINS - 1)) {
            n.fetch_add(1, Relaxed);
        }
    }
}

/// The median of each part of [`SPLIT`], in ns.
fn split_p50_ns() -> [u64; 3] {
    let total = SPLIT.wakes.load(Relaxed);
    SPLIT.parts.each_ref().map(|bins| {
        let mut seen = 0u32;
        for (ticks, n) in bins.iter().enumerate() {
            seen += n.load(Relaxed);
            if seen * 2 >= total {
                return ticks as u64 * 1_000_000_000 / board::HZ;
            }
        }
        0
    })
}

/// Tick interrupts taken, and their `update()` results.
static TICKS: AtomicU32 = AtomicU32::new(0);
/// The tick's longest entry latency (ticks): it outranks the alarm, so what holds it off is
/// interrupts off (critical sections) and the tick's own entry.
static TICK_LATE_MAX: AtomicU32 = AtomicU32::new(0);
static UPDATES: AtomicU32 = AtomicU32::new(0);
static UPDATE_ERRORS: AtomicU32 = AtomicU32::new(0);

#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    match board::timers_irq(irqn) {
        Some(TimersIrq::Alarm) => {
            let now = Main.ticks() as u32;
            // What a user's handler does: acknowledge, then the driver's service. The
            // statistics come after it, off the woken tasks' path.
            let fired = Timer0Alarm::clear();
            DRIVER.on_alarm();
            SERVICE.store(now, Relaxed);
            SERVICE_END.store(Main.ticks() as u32, Relaxed);
            if let Some(at) = fired {
                // How long after the loaded count ran out the handler started (ticks).
                let late = now.wrapping_sub(at);
                if late < 1 << 31 {
                    ALARM_LATE_MAX.fetch_max(late, Relaxed);
                    let bin = (late as usize).min(ALARM_BINS - 1);
                    if let Some(n) = ALARM_LATE.get(bin) {
                        n.fetch_add(1, Relaxed);
                    }
                }
                ALARM_FIRED.fetch_add(1, Relaxed);
            }
            ALARM_IRQS.fetch_add(1, Relaxed);
        }
        Some(TimersIrq::Tick) => tick(),
        None => fail("unexpected_interrupt"),
    }
}

/// The 1 kHz tick: keeps the 32-bit counter's clock updated, and ends a run that overstays.
fn tick() {
    TICK_LATE_MAX.fetch_max(board::tick_elapsed(), Relaxed);
    TICKS.fetch_add(1, Relaxed);
    match CLOCK.update() {
        // Busy: the recalibrator is writing, which re-bases the clock too.
        Ok(()) | Err(ClockError::Busy) => UPDATES.fetch_add(1, Relaxed),
        Err(_) => UPDATE_ERRORS.fetch_add(1, Relaxed),
    };
    if CLOCK.now().as_nanos() > MAX_RUN_NS {
        fail("timeout");
    }
}

/// Prints what was counted with `error=why`, and exits with a failure.
fn fail(why: &str) -> ! {
    crate::irq_off::stop();
    cortex_m::interrupt::disable();
    let mut line = Line::new();
    let _ = write!(line, "error={why}");
    line.send();
    report();
    out::exit(false)
}

/// A small PRNG (xorshift32).
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// 10 µs to 100 ms: a random decade, then uniform within it.
    fn sleep_us(&mut self) -> u64 {
        let decade = 10u64.pow(self.next() % 4);
        let low = 10 * decade;
        low + u64::from(self.next()) % (9 * low)
    }
}

/// The first nanosecond of embassy tick `ticks` (⌈ticks × 10⁹ / TICK_HZ⌉): the scenario's own
/// conversion, not the driver's.
fn tick_start_ns(ticks: u64) -> u64 {
    let ns = (u128::from(ticks) * 1_000_000_000).div_ceil(u128::from(embassy_time::TICK_HZ));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Records a wake from a sleep until embassy instant `until`, at `now_ns` by the clock (and
/// `woke` by the counter, just before).
fn record(until: Instant, now_ns: u64, woke: u32) {
    let deadline_ns = tick_start_ns(until.as_ticks());
    critical_section::with(|cs| {
        let mut s = STATS.borrow_ref_mut(cs);
        s.wakes += 1;
        match now_ns.checked_sub(deadline_ns) {
            None => {
                s.early += 1;
                s.early_max_ns = s.early_max_ns.max(deadline_ns - now_ns);
            }
            Some(late) => {
                split(woke, late);
                s.late_max_ns = s.late_max_ns.max(late);
                let kept = s.kept;
                if let Some(slot) = s.late_ns.get_mut(kept) {
                    *slot = u32::try_from(late).unwrap_or(u32::MAX);
                    s.kept += 1;
                }
            }
        }
    })
}

#[embassy_executor::task(pool_size = SLEEPERS)]
async fn sleeper(id: u32, end_ns: u64) {
    let mut rng = Rng(0x9e37_79b9 ^ id.wrapping_mul(0x85eb_ca6b) ^ 1);
    while CLOCK.now().as_nanos() < end_ns {
        let until = Instant::now() + Duration::from_micros(rng.sleep_us());
        Timer::at(until).await;
        let woke = Main.ticks() as u32;
        record(until, CLOCK.now().as_nanos(), woke);
    }
    FINISHED.fetch_add(1, Relaxed);
}

/// ±100 ppm around the board's rate.
fn skewed(up: bool) -> Frequency {
    let off = board::HZ / 10_000;
    let hz = if up { board::HZ + off } else { board::HZ - off };
    Frequency::exact_hz(hz).unwrap()
}

#[embassy_executor::task]
async fn recalibrator(start_ns: u64) {
    for (third, up) in [(1, true), (2, false)] {
        let at_ns = start_ns + RUN_NS * third / 3;
        Timer::after(Duration::from_nanos(
            at_ns.saturating_sub(CLOCK.now().as_nanos()),
        ))
        .await;
        // Busy only if the tick's update is mid-write, which thread mode cannot interrupt:
        // it never is here; try again a tick later if it were.
        while CLOCK.recalibrate(skewed(up)).is_err() {
            Timer::after(Duration::from_millis(1)).await;
        }
        RECALIBRATIONS.fetch_add(1, Relaxed);
        // The armed wake was planned on the old rate: let the driver plan it again.
        board::pend_alarm();
    }
    FINISHED.fetch_add(1, Relaxed);
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    cortex_m::interrupt::disable();
    let Some(mut cp) = cortex_m::Peripherals::take() else {
        fail("no_peripherals")
    };
    board::start_timers_counter();
    if CLOCK
        .start(Frequency::exact_hz(board::HZ).unwrap())
        .is_err()
    {
        fail("start");
    }
    board::start_timers_interrupts(&mut cp.NVIC);
    // The start has re-armed (`on_write`) for any timer scheduled before it: none here.
    // SAFETY: the handlers' data (the clock, the driver) is ready; no critical section is
    // open.
    unsafe { cortex_m::interrupt::enable() };

    costs();
    crate::irq_off::start();
    let start_ns = CLOCK.now().as_nanos();
    let end_ns = start_ns + RUN_NS;
    for id in 0..SLEEPERS as u32 {
        match sleeper(id, end_ns) {
            Ok(token) => spawner.spawn(token),
            Err(_) => fail("spawn"),
        }
    }
    match recalibrator(start_ns) {
        Ok(token) => spawner.spawn(token),
        Err(_) => fail("spawn"),
    }
    while FINISHED.load(Relaxed) < SLEEPERS as u32 + 1 {
        Timer::after(Duration::from_millis(10)).await;
    }
    let run_ns = CLOCK.now().as_nanos() - start_ns;
    crate::irq_off::stop();
    cortex_m::interrupt::disable();
    report();
    let mut line = Line::new();
    let _ = write!(line, "run_ms={} done=1", run_ns / 1_000_000);
    line.send();
    out::exit(true)
}

/// What the wake path's two clock calls cost on this core, in ns each (by the counter, over
/// [`COST_ROUNDS`] calls, less the loop's own cost): `CLOCK.now()`, and `CLOCK.deadline()`
/// for 1 ms ahead, which the driver computes at every arming (with [`Clock::check`] after
/// it, which costs as much). Printed as `cost_now_ns` and
/// `cost_deadline_ns`: a wake's lateness is mostly such instructions.
fn costs() {
    fn ns_per_call(mut f: impl FnMut(u64) -> u64) -> u64 {
        let t0 = Main.ticks();
        let mut acc = 0u64;
        for i in 0..COST_ROUNDS {
            acc = acc.wrapping_add(core::hint::black_box(f(i)));
        }
        core::hint::black_box(acc);
        let ticks = Main.ticks().wrapping_sub(t0) & u64::from(u32::MAX);
        ticks * 1_000_000_000 / board::HZ / COST_ROUNDS
    }
    let empty = ns_per_call(|i| i);
    let now = ns_per_call(|_| CLOCK.now().as_nanos());
    let deadline = ns_per_call(|i| {
        let at = baretime::Instant::from_nanos(CLOCK.now().as_nanos() + 1_000_000 + i);
        CLOCK.deadline(at).map_or(0, |d| d.ticks())
    });
    let mut line = Line::new();
    let _ = write!(
        line,
        "cost_now_ns={} cost_deadline_ns={}",
        now.saturating_sub(empty),
        deadline.saturating_sub(now),
    );
    line.send();
}

/// Calls per cost measurement.
const COST_ROUNDS: u64 = 200;

/// `ns` as microseconds with three decimals.
struct Us(u64);

impl core::fmt::Display for Us {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Prints the counts and the lateness percentiles (sorts the kept lateness).
fn report() {
    critical_section::with(|cs| {
        let mut s = STATS.borrow_ref_mut(cs);
        let kept = s.kept.min(SAMPLES);
        let late = &mut s.late_ns[..kept];
        late.sort_unstable();
        // Nearest rank: the least value with at least `p` % of the kept ones at or below it.
        let pct = |p: usize| {
            let rank = (kept * p).div_ceil(100).max(1);
            late.get(rank - 1).map_or(0, |&ns| u64::from(ns))
        };
        let (p50, p99) = (pct(50), pct(99));
        let mut line = Line::new();
        let _ = write!(
            line,
            "wakes={} early={} early_max_ns={} lateness_p50_us={} lateness_p99_us={} lateness_max_us={} kept={}",
            s.wakes,
            s.early,
            s.early_max_ns,
            Us(p50),
            Us(p99),
            Us(s.late_max_ns),
            kept,
        );
        line.send();
    });
    let mut line = Line::new();
    let _ = write!(
        line,
        "board={} hz={} tasks={} tasks_done={} recalibrations={} alarm=cmsdk-timer alarm_irqs={} alarm_fired={} alarm_irq_latency_p50_ns={} alarm_irq_latency_max_ns={} ticks={} updates={} update_errors={}",
        board::NAME,
        board::HZ,
        SLEEPERS + 1,
        FINISHED.load(Relaxed),
        RECALIBRATIONS.load(Relaxed),
        ALARM_IRQS.load(Relaxed),
        ALARM_FIRED.load(Relaxed),
        alarm_late_p50_ns(),
        u64::from(ALARM_LATE_MAX.load(Relaxed)) * 1_000_000_000 / board::HZ,
        TICKS.load(Relaxed),
        UPDATES.load(Relaxed),
        UPDATE_ERRORS.load(Relaxed),
    );
    line.send();
    let [to_handler, service, poll] = split_p50_ns();
    let mut line = Line::new();
    let _ = write!(
        line,
        "split_wakes={} split_to_handler_p50_ns={to_handler} split_service_p50_ns={service} split_poll_p50_ns={poll}",
        SPLIT.wakes.load(Relaxed),
    );
    line.send();
    let ns = |ticks: u32| u64::from(ticks) * 1_000_000_000 / board::HZ;
    let (sections, p50, p99, max) = crate::irq_off::summary();
    let mut line = Line::new();
    let _ = write!(
        line,
        "irq_off_sections={sections} irq_off_p50_ns={} irq_off_p99_ns={} irq_off_max_ns={} tick_latency_max_ns={}",
        ns(p50),
        ns(p99),
        ns(max),
        ns(TICK_LATE_MAX.load(Relaxed)),
    );
    line.send();
}
