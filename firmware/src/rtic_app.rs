//! The `rtic-m4` scenario: RTIC 2 tasks on baretime-rtic's monotonic over the board's `static`
//! [`Clock`], with a CMSDK timer as its alarm — what a firmware author gets from baretime and
//! RTIC together. `timers.rs` is the same scenario on embassy.
//!
//! - `CLOCK` counts the board's free-running 32-bit timer at 25 MHz; the 1 kHz tick (a
//!   hardware task) keeps it updated ([`Clock::update`]) and stops a run that overstays
//!   [`MAX_RUN_NS`].
//! - `Mono` is declared by `baretime_rtic::monotonic!` on `CLOCK` and [`Timer0Alarm`] (CMSDK
//!   timer 0, one-shot, `board`'s implementation of [`Alarm`](baretime::Alarm)), in ticks of
//!   1 ns: the timer's interrupt is a hardware task that acknowledges it and calls
//!   `Mono::on_interrupt()`.
//! - [`SLEEPERS`] tasks sleep random durations from 10 µs to 100 ms — a decade picked at
//!   random, then a uniform duration within it — for [`RUN_NS`] of the clock's time, by
//!   `Mono::delay_until(now + d)` and `Mono::delay(d)` in turn. Eight run at priority 1,
//!   below the alarm's interrupt (2); four at priority 3, above it (their pends land while it
//!   runs). At each wake a task reads `CLOCK.now()` and compares it with the instant it asked
//!   for (`now + d`, a monotonic tick being a nanosecond): before it is an early wake (the run
//!   fails), at or after it the lateness is recorded; `Mono::now()` is checked too.
//! - A task recalibrates the clock to +100 ppm a third of the way through and to −100 ppm at
//!   two thirds, then calls `Mono::rearm()` so the armed wake is planned on the new rate.
//!
//! The results are `timers.rs`'s keys: `wakes`, `early`, lateness p50 / p99 / max in µs,
//! `recalibrations`, then `done=1` when every task finished. `cargo xtask qemu rtic-m4`
//! judges them (`xtask/src/qemu_cortexm.rs`).

use core::cell::RefCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};

use baretime::{Clock, ClockError, Counter, Frequency};
use cortex_m_rt::exception;
use critical_section::Mutex;

use crate::board::{self, Main, Timer0Alarm};
use crate::out::{self, Line};

static CLOCK: Clock<Main> = Clock::uninit(Main);

baretime_rtic::monotonic!(Mono, &CLOCK, Timer0Alarm);

/// Sleeping tasks: [`LOW`] at priority 1, the rest at 3.
const SLEEPERS: usize = 12;
const LOW: usize = 8;
/// How long the sleepers run, by the clock.
const RUN_NS: u64 = 2_500_000_000;
/// The longest run, by the clock: past it the tick fails the run (a wake lost).
const MAX_RUN_NS: u64 = 20_000_000_000;
/// Wakes whose lateness is kept for the percentiles (more are counted, not kept).
const SAMPLES: usize = 8192;

/// Wakes, early wakes, and the lateness of each (ns), from the tasks.
struct Stats {
    wakes: u32,
    early: u32,
    early_max_ns: u64,
    /// Wakes at which `Mono::now()` read before the instant asked for.
    mono_early: u32,
    late_max_ns: u64,
    kept: usize,
    late_ns: [u32; SAMPLES],
}

static STATS: Mutex<RefCell<Stats>> = Mutex::new(RefCell::new(Stats {
    wakes: 0,
    early: 0,
    early_max_ns: 0,
    mono_early: 0,
    late_max_ns: 0,
    kept: 0,
    late_ns: [0; SAMPLES],
}));

/// Tasks finished (the sleepers and the recalibrator).
static FINISHED: AtomicU32 = AtomicU32::new(0);
/// Recalibrations made.
static RECALIBRATIONS: AtomicU32 = AtomicU32::new(0);
/// Alarm interrupts taken; those the timer raised (the rest were pended by an arming at a
/// tick already reached); the most ticks between a count running out and its handler.
static ALARM_IRQS: AtomicU32 = AtomicU32::new(0);
static ALARM_FIRED: AtomicU32 = AtomicU32::new(0);
static ALARM_LATE_MAX: AtomicU32 = AtomicU32::new(0);
/// Those ticks, counted per value (the last bin: that many or more).
const ALARM_BINS: usize = 64;
static ALARM_LATE: [AtomicU32; ALARM_BINS] = [const { AtomicU32::new(0) }; ALARM_BINS];
/// Tick interrupts taken, and their `update()` results.
static TICKS: AtomicU32 = AtomicU32::new(0);
static UPDATES: AtomicU32 = AtomicU32::new(0);
static UPDATE_ERRORS: AtomicU32 = AtomicU32::new(0);

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

#[exception]
unsafe fn DefaultHandler(_irqn: i16) {
    fail("unexpected_interrupt");
}

/// Prints what was counted with `error=why`, and exits with a failure.
fn fail(why: &str) -> ! {
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

/// Records a wake from a sleep asked to last until `until_ns` (the monotonic's tick is a
/// nanosecond), at `now_ns` by the clock and `mono_ns` by the monotonic.
fn record(until_ns: u64, now_ns: u64, mono_ns: u64) {
    critical_section::with(|cs| {
        let mut s = STATS.borrow_ref_mut(cs);
        s.wakes += 1;
        if mono_ns < until_ns {
            s.mono_early += 1;
        }
        match now_ns.checked_sub(until_ns) {
            None => {
                s.early += 1;
                s.early_max_ns = s.early_max_ns.max(until_ns - now_ns);
            }
            Some(late) => {
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

/// One sleeper's loop: `delay_until` and `delay` in turn, each wake checked.
async fn sleep_loop(id: u32, end_ns: u64) {
    use fugit::ExtU64;
    use rtic_time::Monotonic;
    let mut rng = Rng(0x9e37_79b9 ^ id.wrapping_mul(0x85eb_ca6b) ^ 1);
    let mut until_next = true;
    while CLOCK.now().as_nanos() < end_ns {
        let d = rng.sleep_us().micros();
        let start = Mono::now();
        let until = start + d;
        if until_next {
            Mono::delay_until(until).await;
        } else {
            Mono::delay(d).await;
        }
        until_next = !until_next;
        record(until.ticks(), CLOCK.now().as_nanos(), Mono::now().ticks());
    }
    FINISHED.fetch_add(1, Relaxed);
}

/// ±100 ppm around the board's rate.
fn skewed(up: bool) -> Frequency {
    let off = board::HZ / 10_000;
    let hz = if up { board::HZ + off } else { board::HZ - off };
    Frequency::exact_hz(hz).unwrap()
}

/// What `Mono::delay`'s wake path's clock calls cost on this core, in ns each (by the counter,
/// over [`COST_ROUNDS`] calls, less the loop's own cost): `CLOCK.now()` (the monotonic's
/// `now()`, which rtic-time reads for each waiter it looks at) and `CLOCK.deadline()` for 1 ms
/// ahead (each arming). Printed as `cost_now_ns` and `cost_deadline_ns`.
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
            "wakes={} early={} early_max_ns={} mono_early={} lateness_p50_us={} lateness_p99_us={} lateness_max_us={} kept={}",
            s.wakes,
            s.early,
            s.early_max_ns,
            s.mono_early,
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
        "board={} hz={} framework=rtic2 tick_hz=1000000000 tasks={} tasks_done={} recalibrations={} alarm=cmsdk-timer alarm_irqs={} alarm_fired={} alarm_irq_latency_p50_ns={} alarm_irq_latency_max_ns={} ticks={} updates={} update_errors={}",
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
}

#[rtic::app(device = crate::pac, peripherals = false, dispatchers = [I2S, TOUCHSCREEN])]
mod app {
    use super::*;

    #[shared]
    struct Shared {}

    #[local]
    struct Local {}

    #[init]
    fn init(_cx: init::Context) -> (Shared, Local) {
        board::start_timers_counter();
        if CLOCK
            .start(Frequency::exact_hz(board::HZ).unwrap())
            .is_err()
        {
            fail("start");
        }
        board::start_tick();
        // The monotonic after the clock: its first interrupt arms for what is queued.
        Mono::start(Timer0Alarm);
        costs();
        let start_ns = CLOCK.now().as_nanos();
        let end_ns = start_ns + RUN_NS;
        let spawned = [
            s0::spawn(end_ns).is_ok(),
            s1::spawn(end_ns).is_ok(),
            s2::spawn(end_ns).is_ok(),
            s3::spawn(end_ns).is_ok(),
            s4::spawn(end_ns).is_ok(),
            s5::spawn(end_ns).is_ok(),
            s6::spawn(end_ns).is_ok(),
            s7::spawn(end_ns).is_ok(),
            h0::spawn(end_ns).is_ok(),
            h1::spawn(end_ns).is_ok(),
            h2::spawn(end_ns).is_ok(),
            h3::spawn(end_ns).is_ok(),
            recalibrator::spawn(start_ns).is_ok(),
            reporter::spawn(start_ns).is_ok(),
        ];
        if spawned.contains(&false) {
            fail("spawn");
        }
        (Shared {}, Local {})
    }

    /// The alarm: acknowledge CMSDK timer 0, then the monotonic's part.
    #[task(binds = TIMER0, priority = 2)]
    fn alarm(_cx: alarm::Context) {
        let now = Main.ticks() as u32;
        if let Some(at) = Timer0Alarm::clear() {
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
        Mono::on_interrupt();
    }

    /// The 1 kHz tick: keeps the 32-bit counter's clock updated, ends a run that overstays.
    #[task(binds = DUALTIMER, priority = 4)]
    fn tick(_cx: tick::Context) {
        board::clear_tick();
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

    // RTIC runs one instance of a task at a time: one task per sleeper, below the alarm's
    // priority (s*) and above it (h*).
    #[task(priority = 1)]
    async fn s0(_cx: s0::Context, end_ns: u64) {
        sleep_loop(0, end_ns).await
    }
    #[task(priority = 1)]
    async fn s1(_cx: s1::Context, end_ns: u64) {
        sleep_loop(1, end_ns).await
    }
    #[task(priority = 1)]
    async fn s2(_cx: s2::Context, end_ns: u64) {
        sleep_loop(2, end_ns).await
    }
    #[task(priority = 1)]
    async fn s3(_cx: s3::Context, end_ns: u64) {
        sleep_loop(3, end_ns).await
    }
    #[task(priority = 1)]
    async fn s4(_cx: s4::Context, end_ns: u64) {
        sleep_loop(4, end_ns).await
    }
    #[task(priority = 1)]
    async fn s5(_cx: s5::Context, end_ns: u64) {
        sleep_loop(5, end_ns).await
    }
    #[task(priority = 1)]
    async fn s6(_cx: s6::Context, end_ns: u64) {
        sleep_loop(6, end_ns).await
    }
    #[task(priority = 1)]
    async fn s7(_cx: s7::Context, end_ns: u64) {
        sleep_loop(7, end_ns).await
    }
    #[task(priority = 3)]
    async fn h0(_cx: h0::Context, end_ns: u64) {
        sleep_loop(LOW as u32, end_ns).await
    }
    #[task(priority = 3)]
    async fn h1(_cx: h1::Context, end_ns: u64) {
        sleep_loop(LOW as u32 + 1, end_ns).await
    }
    #[task(priority = 3)]
    async fn h2(_cx: h2::Context, end_ns: u64) {
        sleep_loop(LOW as u32 + 2, end_ns).await
    }
    #[task(priority = 3)]
    async fn h3(_cx: h3::Context, end_ns: u64) {
        sleep_loop(LOW as u32 + 3, end_ns).await
    }

    /// +100 ppm at a third of the run, −100 ppm at two thirds, each followed by
    /// `Mono::rearm()`.
    #[task(priority = 1)]
    async fn recalibrator(_cx: recalibrator::Context, start_ns: u64) {
        use rtic_time::Monotonic;
        for (third, up) in [(1, true), (2, false)] {
            let at = <Mono as Monotonic>::Instant::from_ticks(start_ns + RUN_NS * third / 3);
            Mono::delay_until(at).await;
            // Busy only if the tick's update is mid-write: try again a millisecond later.
            while CLOCK.recalibrate(skewed(up)).is_err() {
                Mono::delay(<Mono as Monotonic>::Duration::millis(1)).await;
            }
            RECALIBRATIONS.fetch_add(1, Relaxed);
            // The armed wake was planned on the old rate: plan it again.
            Mono::rearm();
        }
        FINISHED.fetch_add(1, Relaxed);
    }

    /// Waits for every task, then reports and exits.
    #[task(priority = 1)]
    async fn reporter(_cx: reporter::Context, start_ns: u64) {
        use rtic_time::Monotonic;
        while FINISHED.load(Relaxed) < SLEEPERS as u32 + 1 {
            Mono::delay(<Mono as Monotonic>::Duration::millis(10)).await;
        }
        let run_ns = CLOCK.now().as_nanos() - start_ns;
        cortex_m::interrupt::disable();
        report();
        let mut line = Line::new();
        let _ = write!(line, "run_ms={} done=1", run_ns / 1_000_000);
        line.send();
        out::exit(true)
    }
}
