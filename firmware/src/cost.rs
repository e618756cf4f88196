//! The `cost-m4` / `cost-m0` scenarios: what each clock call costs on a Cortex-M, in
//! nanoseconds of QEMU's virtual time — instructions, under `-icount shift=0`.
//!
//! A stopwatch — a second hardware timer at the board's clock (`board::stopwatch`: 40 ns a
//! tick on MPS2, 62.5 ns on the micro:bit) — times every figure, two ways:
//!
//! - **In a loop** ([`looped`]): [`CALLS`] calls, the stopwatch read before and after, less
//!   the same loop calling nothing (`empty_loop`). One tick over 20 000 calls: ±0.003 ns.
//!   `raw` (the 32-bit counter `Main` reads), `floor` ([`Floor`]: the least a correct
//!   lock-free read needs), `now` (`Clock::now` on `Main`), `now_ext` and `ext_ticks`
//!   (`Clock::now` on the board's 16-bit timer extended by `ExtendedTimer`, and the extended
//!   count: the wrap interrupt runs meanwhile, as it must, and its cost is in the figure),
//!   `coarse` (`CoarseClock::now`), `driver_now` (the embassy driver's `now`), `wall_now`
//!   (`WallClock::unix_ns` on the clock, set, no slew) and `wall_now_slewing` (the same while
//!   a slew runs: its correction's division).
//! - **One call at a time** ([`per_call`]): the stopwatch read just before and after each
//!   call, its setup outside, less the same pair around nothing. `update` (`Clock::update`,
//!   100 µs after the last write) and `deadline` (`Clock::deadline` 5 ms ahead). A sample is
//!   whole ticks; [`spin`] first runs 3·k instructions, k = 1, 2, 3, … in turn, so the
//!   calls start evenly over the tick's phases and the mean of the samples is the mean cost
//!   (without it the wait before each call would start them at one phase, off by up to a tick).
//!
//! `calib_nop1000` checks the stopwatch: calls of a function of 1 000 `nop`s in a loop, less
//! calls of the same function without them, which under `shift=0` must measure 1 000 ns.
//!
//! `irq_off_max` / `irq_off_mean`: the firmware's own critical-section implementation
//! ([`TimedCs`], interrupts off as cortex-m's single-core one) reads the stopwatch after it
//! turns interrupts off and before it turns them back on, for the outermost sections taken
//! inside the embassy driver's `schedule_wake` and `on_alarm`. [`SLEEPERS`] embassy tasks sleep
//! different durations ([`SLEEPS`] each), so each `schedule_wake` lands before, after or
//! between the others' ticks; the main task plays the alarm's interrupt: it waits for the
//! tick the driver armed ([`PlayedAlarm`]) and calls `on_alarm`. The queue is
//! embassy-executor's integrated one (the driver's default, as in the `timers` scenario).
//! Resolution: one stopwatch tick.
//!
//! `cargo xtask qemu cost` builds, boots and judges it (`xtask/src/qemu_cortexm.rs`).

use core::fmt::{self, Write};
use core::future::Future;
use core::hint::black_box;
use core::pin::Pin;
use core::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering::*};
use core::task::{Context, Poll, Waker};

use baretime::{Alarm, Clock, CoarseClock, Counter, ExtendedTimer, Frequency, Instant, WallClock};
use baretime_embassy::ClockDriver;
use cortex_m::register::primask;
use cortex_m_rt::exception;
use embassy_executor::Spawner;
use embassy_time::{Duration, Timer};
use embassy_time_driver::Driver;

use crate::board::{self, Main, Narrow};
use crate::out::{self, Line};

static CLOCK: Clock<Main> = Clock::uninit(Main);
static NARROW: ExtendedTimer<Narrow> = ExtendedTimer::new(Narrow);
static EXT_CLOCK: Clock<&ExtendedTimer<Narrow>> = Clock::uninit(&NARROW);
static COARSE: CoarseClock = CoarseClock::new();
static FLOOR: Floor = Floor::new();
static WALL: WallClock<'static, Main> = WallClock::new(&CLOCK);
static DRIVER: ClockDriver<Main, PlayedAlarm> = ClockDriver::new(&CLOCK, PlayedAlarm);

embassy_time_driver::time_driver_impl!(static TIMED: TimedDriver = TimedDriver);

/// Calls per loop figure.
const CALLS: u32 = 20_000;
/// Calls per one-at-a-time figure (`update`: half as many, each after a 100 µs wait).
const ROUNDS: u32 = 1_000;
/// Calls per `calib_nop1000` loop.
const CALIB_CALLS: u32 = 2_000;
/// How long `update` waits between calls: the time since the last write it handles.
const UPDATE_EVERY_NS: u64 = 100_000;
/// How far ahead `deadline` aims.
const DEADLINE_AHEAD_NS: u64 = 5_000_000;
/// Tasks sleeping through the driver, and sleeps each.
const SLEEPERS: usize = 4;
const SLEEPS: u32 = 200;

/// A stopwatch span in ns of virtual time (the board's clock ticks).
fn ticks_to_ns10(ticks: i64, calls: u32) -> Ns10 {
    Ns10(ticks * 10_000_000_000 / board::HZ as i64 / i64::from(calls))
}

/// Tenths of a nanosecond, printed with one decimal.
#[derive(Clone, Copy)]
struct Ns10(i64);

impl core::ops::Sub for Ns10 {
    type Output = Ns10;
    fn sub(self, other: Ns10) -> Ns10 {
        Ns10(self.0 - other.0)
    }
}

impl fmt::Display for Ns10 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let a = self.0.unsigned_abs();
        write!(f, "{sign}{}.{}", a / 10, a % 10)
    }
}

/// Mean ns per call of `f` over `calls` calls in a loop (the loop's own cost included).
#[inline(always)]
fn looped(calls: u32, mut f: impl FnMut(u32) -> u64) -> Ns10 {
    let t0 = board::stopwatch();
    for i in 0..calls {
        black_box(f(black_box(i)));
    }
    let t1 = board::stopwatch();
    ticks_to_ns10(i64::from(t1.wrapping_sub(t0)), calls)
}

/// Mean ns per call of `f`, timed one call at a time over `rounds` calls, `prepare`'s work
/// (the argument of each call) untimed; the two stopwatch reads included.
#[inline(always)]
fn per_call<T>(
    rounds: u32,
    mut prepare: impl FnMut(u32) -> T,
    mut f: impl FnMut(T) -> u64,
) -> Ns10 {
    let mut ticks = 0i64;
    for i in 0..rounds {
        let arg = prepare(i);
        spin(1 + i % 1000);
        let t0 = board::stopwatch();
        black_box(f(black_box(arg)));
        let t1 = board::stopwatch();
        ticks += i64::from(t1.wrapping_sub(t0));
    }
    ticks_to_ns10(ticks, rounds)
}

/// Runs `n` (≥ 1) iterations of a 3-instruction loop: a phase shift of 3·n instructions,
/// which takes every residue modulo 40 (MPS2's tick) and 125 (two micro:bit ticks) as n runs
/// through 1000 values.
#[inline(always)]
fn spin(n: u32) {
    // SAFETY: a register-only loop (`n` ≥ 1, so it ends); no memory, no stack.
    unsafe {
        core::arch::asm!(
            "1:", "nop", "subs {n}, #1", "bne 1b",
            n = inout(reg) n => _,
            options(nomem, nostack),
        );
    }
}

/// 1 000 `nop`s. Not inlined (nor is [`nop0`], its twin without them): the assembler's `.rept`
/// hides the block's size from the compiler, whose branches around it could then not reach
/// (thumbv6m's are short).
#[inline(never)]
fn nop1000() {
    // SAFETY: `nop`s only.
    unsafe {
        core::arch::asm!(
            ".rept 1000",
            "nop",
            ".endr",
            options(nomem, nostack, preserves_flags)
        )
    }
}

/// [`nop1000`] without the `nop`s.
#[inline(never)]
fn nop0() {
    // SAFETY: nothing.
    unsafe { core::arch::asm!("", options(nomem, nostack, preserves_flags)) }
}

/// The stopwatch's count `ns` from now.
fn wait_ns(ns: u64) {
    let end = board::stopwatch().wrapping_add((ns * board::HZ / 1_000_000_000) as u32);
    while end.wrapping_sub(board::stopwatch()) < 1 << 31 {}
}

/// The least a correct lock-free clock read needs: a generation-checked pair of slots (the
/// writer fills the one readers are not reading, then publishes it), each the base ticks, the
/// base ns and a 32-bit multiplier, converted with one 32×32→64 multiply and an add.
///
/// `seq` is `2k` while slot `k mod 2` is published, `2k + 1` while the writer fills slot
/// `k + 1 mod 2`. A reader loads `seq` (acquire), reads the counter and the published slot,
/// fences (acquire) and accepts if `seq` is unchanged: a writer that began to fill the slot it
/// read has changed `seq` before it (its release fence), so its data shows with its `seq`. A
/// reader that interrupted the writer reads the other slot, and never waits for it.
struct Floor {
    seq: AtomicU32,
    slots: [Slot; 2],
}

struct Slot {
    base_ticks: AtomicU32,
    base_ns_lo: AtomicU32,
    base_ns_hi: AtomicU32,
    mult: AtomicU32,
}

/// ns per tick × 2^26 fits 32 bits for clocks from 15.7 MHz up (both boards).
const FLOOR_SHIFT: u32 = 26;

impl Floor {
    const fn new() -> Floor {
        const fn slot() -> Slot {
            Slot {
                base_ticks: AtomicU32::new(0),
                base_ns_lo: AtomicU32::new(0),
                base_ns_hi: AtomicU32::new(0),
                mult: AtomicU32::new(0),
            }
        }
        Floor {
            seq: AtomicU32::new(0),
            slots: [slot(), slot()],
        }
    }

    /// Publishes a new base (one writer at a time).
    fn publish(&self, ticks: u32, ns: u64, hz: u64) {
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq.wrapping_add(1), Relaxed);
        fence(Release);
        let slot = &self.slots[((seq >> 1) as usize + 1) & 1];
        slot.base_ticks.store(ticks, Relaxed);
        slot.base_ns_lo.store(ns as u32, Relaxed);
        slot.base_ns_hi.store((ns >> 32) as u32, Relaxed);
        let mult = (1_000_000_000u64 << FLOOR_SHIFT) / hz;
        slot.mult.store(mult as u32, Relaxed);
        self.seq.store(seq.wrapping_add(2), Release);
    }

    #[inline]
    fn now(&self) -> u64 {
        loop {
            let seq = self.seq.load(Acquire);
            let slot = &self.slots[(seq >> 1) as usize & 1];
            let ticks = Main.ticks() as u32;
            let base = slot.base_ticks.load(Relaxed);
            let ns = u64::from(slot.base_ns_lo.load(Relaxed))
                | u64::from(slot.base_ns_hi.load(Relaxed)) << 32;
            let mult = slot.mult.load(Relaxed);
            fence(Acquire);
            if self.seq.load(Relaxed) == seq {
                let delta = u64::from(ticks.wrapping_sub(base)) * u64::from(mult);
                return ns + (delta >> FLOOR_SHIFT);
            }
        }
    }
}

/// The driver's alarm with no hardware: it keeps the tick it is armed for (the low 32 bits,
/// as a compare register would), and the main task plays its interrupt.
struct PlayedAlarm;

static ARMED: AtomicBool = AtomicBool::new(false);
static ARMED_AT: AtomicU32 = AtomicU32::new(0);

impl Alarm for PlayedAlarm {
    fn arm(&self, ticks: u64) {
        ARMED_AT.store(ticks as u32, Relaxed);
        ARMED.store(true, Relaxed);
    }
    fn disarm(&self) {
        ARMED.store(false, Relaxed);
    }
}

/// embassy-time's driver: [`DRIVER`], with its `schedule_wake` measured.
struct TimedDriver;

impl Driver for TimedDriver {
    fn now(&self) -> u64 {
        DRIVER.now()
    }
    fn schedule_wake(&self, at: u64, waker: &Waker) {
        measured(SCHEDULE_WAKE, || DRIVER.schedule_wake(at, waker));
    }
}

/// Which driver call's critical sections are measured now ([`SCHEDULE_WAKE`], [`ON_ALARM`];
/// none: [`NONE`]); when the outermost began; the longest per call, their total and count
/// (stopwatch ticks). Written with interrupts off (thread mode: thumbv6m has no
/// read-modify-write atomics).
static MEASURING: AtomicU32 = AtomicU32::new(NONE);
const NONE: u32 = 2;
const SCHEDULE_WAKE: u32 = 0;
const ON_ALARM: u32 = 1;
static OFF_SINCE: AtomicU32 = AtomicU32::new(0);
static OFF_MAX: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
static OFF_SUM: AtomicU32 = AtomicU32::new(0);
static OFF_COUNT: AtomicU32 = AtomicU32::new(0);

/// Runs `f` (the driver's `call`) with its critical sections measured.
fn measured<R>(call: u32, f: impl FnOnce() -> R) -> R {
    MEASURING.store(call, Relaxed);
    let r = f();
    MEASURING.store(NONE, Relaxed);
    r
}

/// The critical-section implementation: interrupts off on this one core, as cortex-m's
/// `critical-section-single-core`, timing the outermost sections while [`MEASURING`].
struct TimedCs;
critical_section::set_impl!(TimedCs);

// SAFETY: on a single core with interrupts off (PRIMASK set) nothing else runs; `release`
// restores PRIMASK as `acquire` found it, so nested sections keep interrupts off until the
// outermost ends.
unsafe impl critical_section::Impl for TimedCs {
    unsafe fn acquire() -> u32 {
        let was = primask::read_raw();
        cortex_m::interrupt::disable();
        if was & 1 == 0 && MEASURING.load(Relaxed) != NONE {
            OFF_SINCE.store(board::stopwatch(), Relaxed);
        }
        was
    }

    unsafe fn release(was: u32) {
        if was & 1 == 0 {
            if let Some(max) = OFF_MAX.get(MEASURING.load(Relaxed) as usize) {
                let off = board::stopwatch().wrapping_sub(OFF_SINCE.load(Relaxed));
                max.store(max.load(Relaxed).max(off), Relaxed);
                OFF_SUM.store(OFF_SUM.load(Relaxed).wrapping_add(off), Relaxed);
                OFF_COUNT.store(OFF_COUNT.load(Relaxed) + 1, Relaxed);
            }
            // SAFETY: interrupts were on when the outermost section began.
            unsafe { primask::write_raw(was) };
        }
    }
}

/// The narrow timer's wrap: counted, and the extended clock updated (as run.rs does).
fn wrap() {
    NARROW.on_wrap();
    // A failed update shows in the figures, not here: nothing else reads the clock.
    let _ = EXT_CLOCK.update();
}

#[exception]
fn SysTick() {
    wrap();
}

#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if board::WRAP_IRQ == Some(irqn) {
        wrap();
    } else {
        fail("unexpected_interrupt");
    }
}

fn fail(why: &str) -> ! {
    cortex_m::interrupt::disable();
    let mut line = Line::new();
    let _ = write!(line, "error={why}");
    line.send();
    out::exit(false)
}

/// Lets the other tasks run once.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Sleepers finished (written by the tasks, in thread mode).
static FINISHED: AtomicU32 = AtomicU32::new(0);

#[embassy_executor::task(pool_size = SLEEPERS)]
async fn sleeper(id: u32) {
    for round in 0..SLEEPS {
        Timer::after(Duration::from_micros(u64::from(10 + 7 * id + round % 13))).await;
    }
    FINISHED.store(FINISHED.load(Relaxed) + 1, Relaxed);
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    cortex_m::interrupt::disable();
    let Some(mut cp) = cortex_m::Peripherals::take() else {
        fail("no_peripherals")
    };
    board::start_counters(&mut cp.SYST);
    board::start_stopwatch();
    let hz = Frequency::exact_hz(board::HZ).unwrap();
    if CLOCK.start(hz).is_err() || EXT_CLOCK.start(hz).is_err() {
        fail("start");
    }
    FLOOR.publish(Main.ticks() as u32, CLOCK.now().as_nanos(), board::HZ);
    COARSE.refresh(&CLOCK);
    // The narrow timer's wrap interrupt (on MPS2 already on: SysTick's).
    board::wrap_interrupt(&mut cp.SYST, true);
    // SAFETY: the clocks the wrap handler updates are started; no critical section is open.
    unsafe { cortex_m::interrupt::enable() };

    let empty = looped(CALLS, u64::from);
    let now_ext = looped(CALLS, |_| EXT_CLOCK.now().as_nanos()) - empty;
    let ext_ticks = looped(CALLS, |_| NARROW.ticks()) - empty;
    // The extended clock is done with: no wrap interrupt in the other figures.
    board::wrap_interrupt(&mut cp.SYST, false);
    let calib = looped(CALIB_CALLS, |i| {
        nop1000();
        u64::from(i)
    }) - looped(CALIB_CALLS, |i| {
        nop0();
        u64::from(i)
    });
    let raw = looped(CALLS, |_| Main.ticks()) - empty;
    let floor = looped(CALLS, |_| FLOOR.now()) - empty;
    let now = looped(CALLS, |_| CLOCK.now().as_nanos()) - empty;
    let coarse = looped(CALLS, |_| COARSE.now().as_nanos()) - empty;
    let driver_now = looped(CALLS, |_| DRIVER.now()) - empty;

    let mut errors = 0u32;
    // The time of day on the same clock: set (2026-12-03), read past the handover; then
    // slewing (1 s at 1 ppm: it runs throughout).
    if WALL.set(1_796_300_000_000_000_000, CLOCK.now()).is_err() {
        errors += 1;
    }
    wait_ns(200_000);
    let wall_now = looped(CALLS, |_| WALL.unix_ns().unwrap_or(0)) - empty;
    if WALL.slew(1_000_000_000, 1).is_err() {
        errors += 1;
    }
    wait_ns(200_000);
    let wall_now_slewing = looped(CALLS, |_| WALL.unix_ns().unwrap_or(0)) - empty;
    let pair = per_call(ROUNDS, u64::from, |i| i);
    let update = per_call(
        ROUNDS / 2,
        |_| wait_ns(UPDATE_EVERY_NS),
        |()| match CLOCK.update() {
            Ok(()) => 0,
            Err(_) => {
                errors += 1;
                1
            }
        },
    ) - pair;
    let deadline = per_call(
        ROUNDS,
        |i| Instant::from_nanos(CLOCK.now().as_nanos() + DEADLINE_AHEAD_NS + u64::from(i)),
        |at| match CLOCK.deadline(at) {
            Ok(d) => d.ticks(),
            Err(_) => {
                errors += 1;
                0
            }
        },
    ) - pair;

    // The driver: sleepers scheduling wakes, this task playing the alarm's interrupt.
    for id in 0..SLEEPERS as u32 {
        match sleeper(id) {
            Ok(token) => spawner.spawn(token),
            Err(_) => fail("spawn"),
        }
    }
    while FINISHED.load(Relaxed) < SLEEPERS as u32 {
        if ARMED.load(Relaxed) {
            let at = ARMED_AT.load(Relaxed);
            while (Main.ticks() as u32).wrapping_sub(at) >= 1 << 31 {}
            measured(ON_ALARM, || DRIVER.on_alarm());
        }
        YieldNow(false).await;
    }
    cortex_m::interrupt::disable();
    let count = OFF_COUNT.load(Relaxed).max(1);
    let [schedule_max, alarm_max] = OFF_MAX.each_ref().map(|m| m.load(Relaxed));
    let off_max = ticks_to_ns10(i64::from(schedule_max.max(alarm_max)), 1);
    let schedule_max = ticks_to_ns10(i64::from(schedule_max), 1);
    let alarm_max = ticks_to_ns10(i64::from(alarm_max), 1);
    let off_mean = ticks_to_ns10(i64::from(OFF_SUM.load(Relaxed)), count);

    let mut line = Line::new();
    let _ = write!(
        line,
        "board={} hz={} unit=ns stopwatch_tick_ns={} calls={CALLS} rounds={ROUNDS} calib_nop1000={calib} empty_loop={empty} empty_pair={pair}",
        board::NAME,
        board::HZ,
        ticks_to_ns10(1, 1),
    );
    line.send();
    let mut line = Line::new();
    let _ = write!(
        line,
        "raw={raw} floor={floor} now={now} now_ext={now_ext} ext_ticks={ext_ticks} coarse={coarse} driver_now={driver_now} wall_now={wall_now} wall_now_slewing={wall_now_slewing} update={update} deadline={deadline} errors={errors}",
    );
    line.send();
    let mut line = Line::new();
    let _ = write!(
        line,
        "irq_off_max={off_max} irq_off_mean={off_mean} irq_off_max_schedule_wake={schedule_max} irq_off_max_on_alarm={alarm_max} irq_off_count={} wakes_scheduled={} done=1",
        OFF_COUNT.load(Relaxed),
        SLEEPERS as u32 * SLEEPS,
    );
    line.send();
    out::exit(true)
}
