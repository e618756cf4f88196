//! `mode=timers`: embassy tasks sleeping on the EL1 virtual timer, through baretime-embassy's
//! `ClockDriver` on the kernel's `Clock`, while the clock is recalibrated under them.
//!
//! - The alarm: [`VirtualTimer`] (CNTV_CVAL_EL0 / CNTV_CTL_EL0), its PPI (INTID 27) enabled
//!   on QEMU `virt`'s GICv2 (`gic.rs`); `irq_handler` (from the vector table in `entry.rs`)
//!   acknowledges it, calls the driver's `on_alarm()`, and ends it.
//! - The executor: embassy-executor's `raw::Executor` with this kernel's `__pender` (a flag)
//!   and loop: poll, then with IRQs masked `wfi` unless something was pended meanwhile, then
//!   unmask (the IRQ is taken there). The critical section masks IRQs (DAIF.I).
//! - The load: [`SLEEPERS`] tasks, each sleeping random durations from 10 µs to 100 ms (a
//!   decade chosen uniformly from 10–100 µs, 0.1–1 ms, 1–10 ms, 10–100 ms, then uniformly
//!   within it, µs resolution: short sleeps are as common as long ones; a fixed seed per task)
//!   until what it asked adds up to [`RUN`]; one more task recalibrates the clock to +100 ppm
//!   at a third of the run and to −100 ppm at two thirds. The seeds fix how many wakes there
//!   are (`expected_wakes`): one lost or extra shows.
//! - Each wake compares `CLOCK.now()` with the wake's deadline (embassy ticks to ns, rounded
//!   up): before it is an early wake (must not happen), after it is lateness.
//!
//! `idle=spin` on the command line polls instead of WFI (for comparing QEMU's wake-up paths).
//!
//! Prints `wakes early early_max_ns lateness_p50_us lateness_p99_us lateness_max_us
//! recalibrations expected_wakes tasks tasks_finished min_task_wakes irqs other_irqs run_ms alarm gic
//! tick_hz irq_latency_p50_us irq_latency_p99_us irq_latency_max_us`.

use core::arch::asm;
use core::cell::{RefCell, UnsafeCell};
use core::fmt::Write;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use baretime::{Alarm, Frequency};
use baretime_aarch64::{GenericTimer, VirtualTimer};
use critical_section::Mutex;
use embassy_executor::raw;
use embassy_time::{Duration, Instant as EmbassyInstant, Timer};
use embassy_time_driver::TICK_HZ;

use baretime_embassy::ClockDriver;

use super::{gic, Serial, CLOCK};

/// Embassy ticks to nanoseconds, rounded up: the first instant at which embassy's clock
/// (the driver's `now`, rounded down) reads `ticks`.
fn ticks_to_ns_ceil(ticks: u64) -> u64 {
    let ns = (u128::from(ticks) * 1_000_000_000).div_ceil(u128::from(TICK_HZ));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// How many tasks sleep.
const SLEEPERS: u32 = 8;
/// How long they keep sleeping (embassy time).
const RUN: Duration = Duration::from_secs(2);
/// Room for this many lateness samples (the run gives about 1000).
const CAPACITY: usize = 16_384;

// SAFETY: this kernel runs at EL1 and nothing else in it programs the virtual timer (only
// `mode=timers` arms it, on CPU 0, the only CPU this mode starts).
const ALARM: VirtualTimer = unsafe { VirtualTimer::new() };

embassy_time_driver::time_driver_impl!(
    static DRIVER: ClockDriver<GenericTimer, VirtualTimer> = ClockDriver::new(&CLOCK, ALARM)
);

/// The critical section of this single-CPU kernel: IRQs masked (DAIF.I), restored on release.
struct IrqMask;
critical_section::set_impl!(IrqMask);

// SAFETY: with one CPU taking interrupts (`mode=timers` starts no other), masking IRQs
// excludes every other context that could enter a critical section; nesting restores the
// state the outermost acquire found.
unsafe impl critical_section::Impl for IrqMask {
    unsafe fn acquire() -> bool {
        let daif: u64;
        // SAFETY: reading DAIF and setting its I bit only masks IRQs. Not `nomem`: a compiler
        // barrier, so no memory access moves out of the section.
        unsafe { asm!("mrs {}, daif", "msr daifset, #2", out(reg) daif, options(nostack)) };
        daif & (1 << 7) != 0
    }
    unsafe fn release(was_masked: bool) {
        if !was_masked {
            // SAFETY: unmasks IRQs, as they were before the matching acquire; a barrier too.
            unsafe { asm!("msr daifclr, #2", options(nostack)) };
        }
    }
}

/// Set by the executor's pender: poll again before sleeping.
static PENDED: AtomicBool = AtomicBool::new(false);

#[export_name = "__pender"]
fn pender(_context: *mut ()) {
    PENDED.store(true, Ordering::Release);
}

/// Virtual-timer interrupts taken, and any other (there should be none).
static IRQS: AtomicU32 = AtomicU32::new(0);
static OTHER_IRQS: AtomicU32 = AtomicU32::new(0);

/// The IRQ vector's handler (`entry.rs`), IRQs masked.
#[no_mangle]
extern "C" fn irq_handler() {
    let iar = gic::acknowledge();
    let intid = iar & 0x3ff;
    if intid == gic::SPURIOUS {
        return;
    }
    if intid == VirtualTimer::INTID {
        IRQS.fetch_add(1, Ordering::Relaxed);
        let (count, compare): (u64, u64);
        // SAFETY: reads the virtual count and the virtual timer's compare value (EL1 may);
        // no side effects.
        unsafe {
            asm!("isb", "mrs {}, cntvct_el0", "mrs {}, cntv_cval_el0", out(reg) count,
                out(reg) compare, options(nostack, nomem, preserves_flags))
        };
        critical_section::with(|cs| {
            let mut l = IRQ_LATENCY.borrow_ref_mut(cs);
            let i = l.0;
            if let Some(slot) = l.1.get_mut(i) {
                *slot = u32::try_from(count.saturating_sub(compare)).unwrap_or(u32::MAX);
                l.0 += 1;
            }
        });
        // It re-arms or disarms: the level interrupt is deasserted before the EOI.
        DRIVER.on_alarm();
    } else {
        OTHER_IRQS.fetch_add(1, Ordering::Relaxed);
    }
    gic::end(iar);
}

/// How far past its compare value the count was when the handler ran, in counter ticks: the
/// part of the lateness that is the interrupt's (QEMU's timer, the vector), not the executor's.
#[allow(clippy::type_complexity)]
static IRQ_LATENCY: Mutex<RefCell<(usize, [u32; CAPACITY])>> =
    Mutex::new(RefCell::new((0, [0; CAPACITY])));

/// What the wakes measured.
struct Samples {
    /// Every wake, early ones included.
    wakes: u32,
    early: u32,
    /// How many of `late_ns` are filled.
    late: usize,
    early_max_ns: u64,
    late_max_ns: u64,
    /// Lateness of the first `CAPACITY` wakes, in ns (saturated at u32::MAX).
    late_ns: [u32; CAPACITY],
    min_task_wakes: u32,
    finished: u32,
    recalibrations: u32,
}

static SAMPLES: Mutex<RefCell<Samples>> = Mutex::new(RefCell::new(Samples {
    wakes: 0,
    early: 0,
    late: 0,
    early_max_ns: 0,
    late_max_ns: 0,
    late_ns: [0; CAPACITY],
    min_task_wakes: u32::MAX,
    finished: 0,
    recalibrations: 0,
}));

fn record(deadline: EmbassyInstant) {
    let now = CLOCK.now().as_nanos();
    let at = ticks_to_ns_ceil(deadline.as_ticks());
    critical_section::with(|cs| {
        let mut s = SAMPLES.borrow_ref_mut(cs);
        s.wakes += 1;
        if now < at {
            s.early += 1;
            s.early_max_ns = s.early_max_ns.max(at - now);
            return;
        }
        let late = now - at;
        let i = s.late;
        if let Some(slot) = s.late_ns.get_mut(i) {
            *slot = u32::try_from(late).unwrap_or(u32::MAX);
            s.late += 1;
        }
        s.late_max_ns = s.late_max_ns.max(late);
    });
}

/// xorshift64*: enough randomness for sleep lengths.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// 10 µs to 100 ms: a decade uniformly, then uniformly within it.
    fn sleep_us(&mut self) -> u64 {
        let r = self.next();
        let base = [10, 100, 1_000, 10_000][(r >> 62) as usize];
        base + (r & 0xffff_ffff) % (9 * base)
    }
}

impl Rng {
    /// Sleeper `id`'s sequence.
    fn for_task(id: u32) -> Rng {
        Rng(0x9e37_79b9_7f4a_7c15 ^ (u64::from(id) + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9))
    }
}

/// How many sleeps sleeper `id` makes: its draws until they add up to [`RUN`].
fn planned_sleeps(id: u32) -> u32 {
    let mut rng = Rng::for_task(id);
    let (mut slept, mut n) = (0, 0);
    while slept < RUN.as_micros() {
        slept += rng.sleep_us();
        n += 1;
    }
    n
}

/// Sleeps its random durations until they add up to [`RUN`], recording each wake.
#[embassy_executor::task(pool_size = SLEEPERS as usize)]
async fn sleeper(id: u32) {
    let mut rng = Rng::for_task(id);
    let (mut slept, mut wakes) = (0, 0);
    while slept < RUN.as_micros() {
        let d = rng.sleep_us();
        slept += d;
        let at = EmbassyInstant::now() + Duration::from_micros(d);
        Timer::at(at).await;
        record(at);
        wakes += 1;
    }
    critical_section::with(|cs| {
        let mut s = SAMPLES.borrow_ref_mut(cs);
        s.min_task_wakes = s.min_task_wakes.min(wakes);
        s.finished += 1;
    });
}

#[embassy_executor::task]
async fn recalibrator(start: EmbassyInstant, rate: Frequency) {
    for (i, ppm) in [(1u32, 100i64), (2, -100)] {
        let at = start + RUN * i / 3;
        Timer::at(at).await;
        record(at);
        let millihz = i128::from(rate.as_millihz()) * i128::from(1_000_000 + ppm) / 1_000_000;
        let f = u64::try_from(millihz)
            .ok()
            .and_then(|m| Frequency::from_millihz(m, rate.source(), rate.accuracy()));
        let done = f.is_some_and(|f| CLOCK.recalibrate(f).is_ok());
        critical_section::with(|cs| SAMPLES.borrow_ref_mut(cs).recalibrations += u32::from(done));
    }
    critical_section::with(|cs| SAMPLES.borrow_ref_mut(cs).finished += 1);
}

/// The executor, in a `static` (`poll` takes `&'static self`), made once by [`run`].
struct ExecutorCell(UnsafeCell<MaybeUninit<raw::Executor>>);
// SAFETY: written once, by `run` on CPU 0, before any reference to it exists; read only there.
unsafe impl Sync for ExecutorCell {}
static EXECUTOR: ExecutorCell = ExecutorCell(UnsafeCell::new(MaybeUninit::uninit()));

/// Runs the scenario on the started `CLOCK`, whose rate is `rate`; prints the results. `true` when
/// every task finished with no early wake.
pub fn run(out: &mut Serial, rate: Frequency, spin: bool) -> bool {
    // SAFETY: `run` is called once, so this is the only reference to the cell's contents.
    let executor: &'static raw::Executor =
        unsafe { (*EXECUTOR.0.get()).write(raw::Executor::new(core::ptr::null_mut())) };
    let spawner = executor.spawner();

    gic::enable_ppi(VirtualTimer::INTID);
    let start = EmbassyInstant::now();
    let mut spawned = 0;
    // Every sleep of every sleeper, and the recalibrator's two.
    let expected: u32 = (0..SLEEPERS).map(planned_sleeps).sum::<u32>() + 2;
    for id in 0..SLEEPERS {
        match sleeper(id) {
            Ok(token) => {
                spawner.spawn(token);
                spawned += 1;
            }
            Err(_) => {
                let _ = writeln!(out, "error=spawn");
            }
        }
    }
    if let Ok(token) = recalibrator(start, rate) {
        spawner.spawn(token);
        spawned += 1;
    }
    // SAFETY: unmasks IRQs: the vector table and GIC are set up, the handler is ready.
    unsafe { asm!("msr daifclr, #2", options(nostack)) };
    loop {
        // SAFETY: polled from this one loop on this CPU only, never re-entered (the IRQ
        // handler only wakes tasks).
        unsafe { executor.poll() };
        if critical_section::with(|cs| SAMPLES.borrow_ref(cs).finished) >= spawned {
            break;
        }
        // SAFETY: masks IRQs; WFI waits for one (a pending IRQ ends WFI even while masked);
        // unmasking takes it. A pend that came during the poll skips the WFI.
        unsafe {
            asm!("msr daifset, #2", options(nostack));
            if !PENDED.swap(false, Ordering::AcqRel) && !spin {
                asm!("wfi", options(nostack));
            }
            asm!("msr daifclr, #2", options(nostack));
        }
    }
    // SAFETY: masks IRQs for good: the scenario is over.
    unsafe { asm!("msr daifset, #2", options(nostack)) };
    ALARM.disarm();
    let run_ms = (EmbassyInstant::now() - start).as_millis();

    critical_section::with(|cs| {
        let mut s = SAMPLES.borrow_ref_mut(cs);
        let n = s.late;
        let late = &mut s.late_ns[..n];
        late.sort_unstable();
        let pct = |p: usize| late.get((n * p / 100).min(n.saturating_sub(1))).copied();
        let us = |ns: u64| ns as f64 / 1000.0;
        let (p50, p99) = (pct(50).unwrap_or(0), pct(99).unwrap_or(0));
        let _ = writeln!(
            out,
            "wakes={} early={} early_max_ns={} lateness_p50_us={:.1} lateness_p99_us={:.1} lateness_max_us={:.1} recalibrations={}",
            s.wakes,
            s.early,
            s.early_max_ns,
            us(p50.into()),
            us(p99.into()),
            us(s.late_max_ns),
            s.recalibrations,
        );
        let _ = writeln!(
            out,
            "expected_wakes={} tasks={} tasks_finished={} min_task_wakes={} irqs={} other_irqs={} run_ms={} alarm=cntv gic=v2 tick_hz={}",
            expected,
            spawned,
            s.finished,
            s.min_task_wakes,
            IRQS.load(Ordering::Relaxed),
            OTHER_IRQS.load(Ordering::Relaxed),
            run_ms,
            TICK_HZ,
        );
        let mut l = IRQ_LATENCY.borrow_ref_mut(cs);
        let n = l.0;
        let lat = &mut l.1[..n];
        lat.sort_unstable();
        let tick_us = 1e6 / rate.as_hz() as f64;
        let pct = |p: usize| {
            lat.get((n * p / 100).min(n.saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        let _ = writeln!(
            out,
            "irq_latency_p50_us={:.1} irq_latency_p99_us={:.1} irq_latency_max_us={:.1}",
            f64::from(pct(50)) * tick_us,
            f64::from(pct(99)) * tick_us,
            f64::from(lat.last().copied().unwrap_or(0)) * tick_us,
        );
        s.early == 0 && s.finished == spawned && s.wakes == expected
    })
}
