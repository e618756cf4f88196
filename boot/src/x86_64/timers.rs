//! `mode=timers`: embassy tasks that sleep on the local APIC timer, through the kernel's
//! `Clock` (`baretime_x86::ApicTimer` as the alarm of an embassy-time driver).
//!
//! An IDT (CPU exceptions report and exit; the timer's vector; a spurious vector), the 8259
//! PICs masked, the local APIC enabled (xAPIC, or x2APIC with `apic=x2apic` where CPUID has
//! it), an `ApicTimer` (TSC-deadline where CPUID offers it, else one-shot calibrated against
//! the TSC; `alarm=oneshot` forces one-shot), then interrupts on and a `raw::Executor` whose
//! idle loop halts until the next interrupt.
//!
//! [`SLEEPERS`] tasks each sleep random durations (10 µs – 100 ms, log-uniform by decade,
//! from a seeded xorshift) until they have slept [`SLEEP_TOTAL_NS`] in all; one more task
//! recalibrates the clock by +100 ppm and then by −100 ppm while they run. At each wake a
//! task compares `CLOCK.now()` with its deadline's instant (embassy ticks → ns, rounded up):
//! before it is an early wake; after it, the lateness is recorded.

use core::arch::{asm, global_asm};
use core::fmt::Write;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use baretime::{Alarm, Frequency};
use baretime_embassy::ClockDriver;
use baretime_x86::{ApicTimer, LocalApic, Tsc};
use embassy_executor::raw::Executor;
use embassy_executor::Spawner;
use embassy_time::{Duration, Instant, Timer};

use super::msr::{rdmsr, wrmsr};
use super::port::outb;
use super::{exit, Serial, CLOCK};

/// The sleeping tasks.
const SLEEPERS: usize = 8;
/// How long each sleeps in all, in ns.
const SLEEP_TOTAL_NS: u64 = 2_000_000_000;
/// When the recalibrating task changes the rate (ms after the tasks start).
const RECALIBRATE_AT_MS: [u64; 2] = [700, 1400];
/// The timer's vector, and the APIC's spurious vector.
const TIMER_VECTOR: u8 = 0x40;
const SPURIOUS_VECTOR: u8 = 0xFF;
/// The xAPIC's register page (identity-mapped uncached by the entry code).
const XAPIC_BASE: usize = 0xFEE0_0000;
const IA32_APIC_BASE: u32 = 0x1B;
/// Room for every wake's lateness (ns); more wakes are counted but not kept.
const MAX_SAMPLES: usize = 16_384;

// --- The alarm: an `ApicTimer` set up at run time (`ClockDriver::set_alarm`), measured.

/// Arms made, and the TSC ticks they took in all (the cost of the MSR or MMIO write, a VM
/// exit under virtualisation).
static ARMS: AtomicU64 = AtomicU64::new(0);
static ARM_TICKS: AtomicU64 = AtomicU64::new(0);

/// The driver's alarm: the `ApicTimer`, with what each arm costs counted.
struct MeasuredAlarm(ApicTimer);

impl Alarm for MeasuredAlarm {
    fn arm(&self, ticks: u64) {
        let tsc = CLOCK.counter();
        let before = tsc.read_ordered();
        self.0.arm(ticks);
        let took = tsc.read_ordered().wrapping_sub(before);
        ARMS.fetch_add(1, Ordering::Relaxed);
        ARM_TICKS.fetch_add(took, Ordering::Relaxed);
    }
    fn disarm(&self) {
        self.0.disarm();
    }
}

embassy_time_driver::time_driver_impl!(
    static DRIVER: ClockDriver<Tsc, MeasuredAlarm> = ClockDriver::without_alarm(&CLOCK)
);

// --- Interrupts: IDT, stubs, handlers.

global_asm!(
    r#"
    .section .text
    .global timer_isr
timer_isr:
    push rax
    push rcx
    push rdx
    push rsi
    push rdi
    push r8
    push r9
    push r10
    push r11
    cld
    call timer_interrupt
    pop r11
    pop r10
    pop r9
    pop r8
    pop rdi
    pop rsi
    pop rdx
    pop rcx
    pop rax
    iretq

    .global spurious_isr
spurious_isr:
    iretq

    .altmacro
    .macro exc_stub n
exc_stub_\n:
    mov edi, \n
    jmp exc_common
    .endm
    .set i, 0
    .rept 32
    exc_stub %i
    .set i, i + 1
    .endr

exc_common:
    and rsp, -16
    call cpu_exception
2:  hlt
    jmp 2b

    .macro exc_addr n
    .quad exc_stub_\n
    .endm
    .section .rodata
    .balign 8
    .global exc_stubs
exc_stubs:
    .set i, 0
    .rept 32
    exc_addr %i
    .set i, i + 1
    .endr
    .noaltmacro
    .section .text
    "#
);

extern "C" {
    fn timer_isr();
    fn spurious_isr();
    static exc_stubs: [u64; 32];
}

/// Interrupts taken on the timer's vector.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);
/// How the APIC is reached (for EOI in the handler).
static X2APIC: AtomicBool = AtomicBool::new(false);

fn local_apic() -> LocalApic {
    if X2APIC.load(Ordering::Relaxed) {
        // SAFETY: `main` enabled x2APIC mode before storing the flag; ring 0; the timer is
        // the `ApicTimer`'s alone.
        unsafe { LocalApic::x2apic() }
    } else {
        // SAFETY: the xAPIC page at its default address, identity-mapped uncached by the
        // entry code; ring 0; the timer is the `ApicTimer`'s alone.
        unsafe { LocalApic::xapic(XAPIC_BASE) }
    }
}

/// The timer interrupt, called by `timer_isr` with interrupts off.
#[no_mangle]
extern "C" fn timer_interrupt() {
    INTERRUPTS.fetch_add(1, Ordering::Relaxed);
    DRIVER.on_alarm();
    local_apic().eoi();
}

/// A CPU exception: say which and stop.
#[no_mangle]
extern "C" fn cpu_exception(vector: u64) -> ! {
    let cr2: u64;
    // SAFETY: ring 0; reading CR2 has no side effect.
    unsafe { asm!("mov {}, cr2", out(reg) cr2, options(nomem, nostack)) };
    let _ = writeln!(
        Serial::get(),
        "error=cpu_exception vector={vector} cr2={cr2:#x}"
    );
    exit(1)
}

#[repr(C, align(16))]
struct Idt([u64; 512]);

static mut IDT: Idt = Idt([0; 512]);

/// An interrupt gate to `handler` in the kernel's 64-bit code segment (0x08), DPL 0.
fn gate(handler: u64) -> (u64, u64) {
    let lo = (handler & 0xFFFF) | (0x08 << 16) | (0x8E << 40) | ((handler >> 16) & 0xFFFF) << 48;
    (lo, handler >> 32)
}

fn load_idt() {
    // SAFETY: only `main` touches the IDT, once, before interrupts are enabled; the table is
    // a `static`, so it outlives the LIDT that points at it.
    unsafe {
        let idt = &mut *core::ptr::addr_of_mut!(IDT);
        let mut set = |vector: usize, handler: u64| {
            let (lo, hi) = gate(handler);
            idt.0[vector * 2] = lo;
            idt.0[vector * 2 + 1] = hi;
        };
        let stubs = &*core::ptr::addr_of!(exc_stubs);
        for (vector, &stub) in stubs.iter().enumerate() {
            set(vector, stub);
        }
        set(usize::from(TIMER_VECTOR), timer_isr as *const () as u64);
        set(
            usize::from(SPURIOUS_VECTOR),
            spurious_isr as *const () as u64,
        );
        #[repr(C, packed)]
        struct Pointer {
            limit: u16,
            base: u64,
        }
        let pointer = Pointer {
            limit: (core::mem::size_of::<Idt>() - 1) as u16,
            base: (&raw const IDT) as u64,
        };
        asm!("lidt [{}]", in(reg) &pointer, options(readonly, nostack, preserves_flags));
    }
}

/// Masks both 8259 PICs (SeaBIOS leaves the PIT's IRQ 0 on), enables the local APIC with the
/// spurious vector, masks LINT0/LINT1; x2APIC mode first where asked and offered.
fn enable_apic(want_x2apic: bool) -> bool {
    // SAFETY: ring 0; the PICs' data ports; masking every IRQ line affects only this kernel.
    unsafe {
        outb(0x21, 0xFF);
        outb(0xA1, 0xFF);
    }
    let x2 = want_x2apic && core::arch::x86_64::__cpuid(1).ecx & (1 << 21) != 0;
    if x2 {
        // SAFETY: ring 0; CPUID says x2APIC exists; the APIC is enabled (bit 11) in xAPIC
        // mode after reset, and setting EXTD (bit 10) then is the architected transition.
        unsafe {
            let base = rdmsr(IA32_APIC_BASE);
            wrmsr(IA32_APIC_BASE, base | (1 << 11) | (1 << 10));
            wrmsr(0x80F, 0x100 | u64::from(SPURIOUS_VECTOR)); // SVR
            wrmsr(0x835, 1 << 16); // LVT LINT0 masked
            wrmsr(0x836, 1 << 16); // LVT LINT1 masked
            wrmsr(0x808, 0); // TPR
        }
    } else {
        let reg = |offset: usize| (XAPIC_BASE + offset) as *mut u32;
        // SAFETY: the xAPIC page, mapped uncached by the entry code; ring 0.
        unsafe {
            core::ptr::write_volatile(reg(0xF0), 0x100 | u32::from(SPURIOUS_VECTOR));
            core::ptr::write_volatile(reg(0x350), 1 << 16);
            core::ptr::write_volatile(reg(0x360), 1 << 16);
            core::ptr::write_volatile(reg(0x80), 0);
        }
    }
    X2APIC.store(x2, Ordering::Relaxed);
    x2
}

// --- The executor.

static PENDED: AtomicBool = AtomicBool::new(false);

#[export_name = "__pender"]
fn pender(_context: *mut ()) {
    PENDED.store(true, Ordering::Release);
}

/// A single-CPU critical section: interrupts off, restored as they were.
struct CriticalSection;
critical_section::set_impl!(CriticalSection);

// SAFETY: one CPU; with IF clear no interrupt handler can run, so nothing else enters.
unsafe impl critical_section::Impl for CriticalSection {
    unsafe fn acquire() -> bool {
        let flags: u64;
        // SAFETY: reads RFLAGS and clears IF: ring 0.
        unsafe { asm!("pushfq", "pop {}", "cli", out(reg) flags, options(nomem)) };
        flags & (1 << 9) != 0
    }
    unsafe fn release(was_enabled: bool) {
        if was_enabled {
            // SAFETY: restores IF as `acquire` found it.
            unsafe { asm!("sti", options(nomem, nostack)) };
        }
    }
}

static mut EXECUTOR: MaybeUninit<Executor> = MaybeUninit::uninit();

// --- The tasks and what they measure.

static WAKES: AtomicU64 = AtomicU64::new(0);
static EARLY: AtomicU64 = AtomicU64::new(0);
static DONE: AtomicUsize = AtomicUsize::new(0);
static RECALIBRATIONS: AtomicU32 = AtomicU32::new(0);
static RECAL_DONE: AtomicBool = AtomicBool::new(false);
static SAMPLES: [AtomicU32; MAX_SAMPLES] = [const { AtomicU32::new(0) }; MAX_SAMPLES];
static EXPECTED_WAKES: AtomicU64 = AtomicU64::new(0);

/// xorshift64*.
fn next(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// A duration from 10 µs to 100 ms in µs: a decade (10–100 µs … 10–100 ms) at random, then a
/// value uniform in it.
fn duration_us(state: &mut u64) -> u64 {
    let decade = next(state) % 4;
    let low = 10u64 * 10u64.pow(decade as u32);
    low + next(state) % (9 * low + 1)
}

/// The sleeps a task with `seed` makes: how many (for the expected total).
fn sleeps_of(seed: u64) -> u64 {
    let mut state = seed;
    let (mut total, mut n) = (0u64, 0u64);
    while total < SLEEP_TOTAL_NS {
        total += duration_us(&mut state) * 1000;
        n += 1;
    }
    n
}

fn seed_of(task: usize) -> u64 {
    0x9E37_79B9_7F4A_7C15u64.wrapping_mul(task as u64 + 1) | 1
}

#[embassy_executor::task(pool_size = SLEEPERS)]
async fn sleeper(task: usize) {
    let mut state = seed_of(task);
    let mut total = 0u64;
    while total < SLEEP_TOTAL_NS {
        let us = duration_us(&mut state);
        total += us * 1000;
        let at = Instant::now() + Duration::from_micros(us);
        Timer::at(at).await;
        let now = CLOCK.now().as_nanos();
        let due = ticks_to_ns(at.as_ticks());
        let i = WAKES.fetch_add(1, Ordering::Relaxed) as usize;
        if now < due {
            EARLY.fetch_add(1, Ordering::Relaxed);
        } else if let Some(slot) = SAMPLES.get(i) {
            slot.store(
                u32::try_from(now - due).unwrap_or(u32::MAX),
                Ordering::Relaxed,
            );
        }
    }
    DONE.fetch_add(1, Ordering::Release);
}

#[embassy_executor::task]
async fn recalibrator(base: Frequency) {
    let start = Instant::now();
    for (k, at_ms) in RECALIBRATE_AT_MS.into_iter().enumerate() {
        Timer::at(start + Duration::from_millis(at_ms)).await;
        let millihz = base.as_millihz();
        let step = millihz / 10_000; // 100 ppm
        let new = if k == 0 {
            millihz + step
        } else {
            millihz - step
        };
        let f = Frequency::from_millihz(new, base.source(), base.accuracy()).unwrap();
        CLOCK.recalibrate(f).unwrap();
        // A recalibration can make the armed tick late: check it now (the clock's docs).
        DRIVER.on_alarm();
        RECALIBRATIONS.fetch_add(1, Ordering::Relaxed);
    }
    RECAL_DONE.store(true, Ordering::Release);
}

/// The first nanosecond of embassy tick `ticks` (`TICK_HZ`), rounded up: the instant a timer
/// for that tick stands for.
fn ticks_to_ns(ticks: u64) -> u64 {
    let hz = u128::from(embassy_time_driver::TICK_HZ);
    u64::try_from((u128::from(ticks) * 1_000_000_000).div_ceil(hz)).unwrap_or(u64::MAX)
}

fn finished() -> bool {
    DONE.load(Ordering::Acquire) == SLEEPERS && RECAL_DONE.load(Ordering::Acquire)
}

/// Runs the scenario on the started `CLOCK`; prints its keys; returns whether it ran.
pub fn main(out: &mut Serial, cmdline: &str, tsc: Tsc, tsc_hz: Frequency) -> bool {
    let word = |key: &str| {
        cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
    };
    let force_oneshot = word("alarm") == Some("oneshot");
    let want_x2 = word("apic") == Some("x2apic");
    let spin = word("idle") == Some("spin");

    load_idt();
    let x2 = enable_apic(want_x2);
    let apic = local_apic();
    let timer = if force_oneshot {
        ApicTimer::one_shot(apic, tsc, tsc_hz, TIMER_VECTOR)
    } else {
        ApicTimer::new(apic, tsc, tsc_hz, TIMER_VECTOR)
    };
    let timer = match timer {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(out, "error=apic_timer detail=\"{e}\"");
            return false;
        }
    };
    let alarm = if timer.is_tsc_deadline() {
        "apic-tsc-deadline"
    } else {
        "apic-oneshot"
    };
    let tsc_deadline_offered = core::arch::x86_64::__cpuid(1).ecx & (1 << 24) != 0;
    let _ = writeln!(
        out,
        "timers_alarm={alarm} timers_apic={} tsc_deadline_offered={tsc_deadline_offered}",
        if x2 { "x2apic" } else { "xapic" }
    );
    DRIVER.set_alarm(MeasuredAlarm(timer));
    EXPECTED_WAKES.store(
        (0..SLEEPERS).map(seed_of).map(sleeps_of).sum(),
        Ordering::Relaxed,
    );

    // SAFETY: the only executor, made once here and never moved; `poll` is called only from
    // this loop, never from the pender.
    let executor: &'static Executor = unsafe {
        let slot = &mut *core::ptr::addr_of_mut!(EXECUTOR);
        slot.write(Executor::new(core::ptr::null_mut()))
    };
    let spawner: Spawner = executor.spawner();
    for task in 0..SLEEPERS {
        spawner.spawn(sleeper(task).unwrap());
    }
    spawner.spawn(recalibrator(tsc_hz).unwrap());

    let start = CLOCK.now();
    // SAFETY: the IDT is loaded and every enabled vector has a handler.
    unsafe { asm!("sti", options(nomem, nostack)) };
    loop {
        // SAFETY: not reentrant: only this loop polls.
        unsafe { executor.poll() };
        if finished() {
            break;
        }
        // Halt until the next interrupt unless the pender ran since the poll. `sti; hlt`:
        // an interrupt that arrives after the check is taken only after HLT has begun (STI's
        // one-instruction shadow), so it wakes this loop rather than being missed.
        // SAFETY: ring 0; IF is restored by `sti`.
        unsafe {
            asm!("cli", options(nomem, nostack));
            if PENDED.swap(false, Ordering::Acquire) || spin {
                asm!("sti", options(nomem, nostack));
            } else {
                asm!("sti; hlt", options(nomem, nostack));
            }
        }
    }
    // SAFETY: ring 0.
    unsafe { asm!("cli", options(nomem, nostack)) };
    DRIVER.on_alarm(); // every task has finished: no timer left, so this disarms
    let elapsed_ms = CLOCK.now().as_nanos().saturating_sub(start.as_nanos()) / 1_000_000;
    report(out, elapsed_ms, tsc_hz);
    true
}

static mut SORTED: [u32; MAX_SAMPLES] = [0; MAX_SAMPLES];

fn report(out: &mut Serial, elapsed_ms: u64, tsc_hz: Frequency) {
    let wakes = WAKES.load(Ordering::Relaxed);
    let early = EARLY.load(Ordering::Relaxed);
    let kept = (wakes.saturating_sub(early) as usize).min(MAX_SAMPLES);
    // Samples of early wakes are not stored; the slots they would have used stay 0. With
    // no early wake (what must hold) the first `kept` slots are exactly the samples.
    // SAFETY: only `report` uses it, once, after the tasks have finished (not on the stack:
    // 64 KiB would be the whole of it).
    let sorted = unsafe { &mut *core::ptr::addr_of_mut!(SORTED) };
    for (dst, src) in sorted.iter_mut().zip(SAMPLES.iter()).take(kept) {
        *dst = src.load(Ordering::Relaxed);
    }
    let sorted = &mut sorted[..kept];
    sorted.sort_unstable();
    let pct = |p: usize| -> u32 {
        if sorted.is_empty() {
            0
        } else {
            sorted[((sorted.len() - 1) * p).div_ceil(100)]
        }
    };
    let _ = writeln!(
        out,
        "timers_wakes={wakes} timers_expected_wakes={} timers_early={early} timers_tasks_done={} \
         timers_recalibrations={} timers_interrupts={} timers_elapsed_ms={elapsed_ms}",
        EXPECTED_WAKES.load(Ordering::Relaxed),
        DONE.load(Ordering::Relaxed),
        RECALIBRATIONS.load(Ordering::Relaxed),
        INTERRUPTS.load(Ordering::Relaxed),
    );
    let arms = ARMS.load(Ordering::Relaxed);
    let arm_ns = (u128::from(ARM_TICKS.load(Ordering::Relaxed)) * 1_000_000_000_000
        / u128::from(tsc_hz.as_millihz().max(1)))
        / u128::from(arms.max(1));
    let _ = writeln!(out, "timers_arms={arms} timers_arm_mean_ns={arm_ns}");
    let _ = writeln!(
        out,
        "lateness_p50_ns={} lateness_p99_ns={} lateness_max_ns={} lateness_min_ns={}",
        pct(50),
        pct(99),
        pct(100),
        pct(0)
    );
}
