//! `mode=smp` on the PC: application processors started with INIT-SIPI-SIPI through the
//! local APIC, a real-mode trampoline that takes them to long mode on CPU 0's page tables,
//! then the shared workload of `crate::smp`.
//!
//! # Bring-up
//!
//! 1. CPU 0 copies the trampoline (below) to [`TRAMPOLINE`] (0x8000, below 1 MiB and
//!    page-aligned: a start-up IPI's vector is the page number, and the AP starts in real
//!    mode at `vector << 12`), and fills its parameter block at [`PARAMS`]: CR3, the AP's
//!    stack top, its CPU number and the 64-bit entry point.
//! 2. For each AP in turn: INIT (level assert), 10 ms, SIPI, 200 µs, a second SIPI only if
//!    the AP has not come online (an AP already running ignores it anyway), then up to 1 s
//!    for it to arrive. The parameter block is rewritten only once the AP has arrived, when
//!    it no longer reads it. Delays run on the calibrated TSC (`Clock::delay`).
//! 3. The trampoline: 16-bit code loads a GDT of its own (32-bit code, data, 64-bit code)
//!    and turns protection on; 32-bit code turns on PAE, loads CR3, sets EFER.LME and turns
//!    on paging (which activates long mode); 64-bit code loads the stack and calls the entry
//!    with the CPU number. Interrupts stay off (CLI first), as on CPU 0.
//!
//! The local APIC is used in xAPIC mode at its reset address 0xFEE0_0000, which the entry
//! code maps uncached. APIC IDs are taken to be the CPU numbers 0..N-1, which is what QEMU
//! gives `-smp N` (a real kernel reads them from the ACPI MADT).

use core::arch::{asm, global_asm};
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use baretime::WithAccuracy;
use baretime::{Accuracy, Clock, Counter, Frequency, MonotonicClock};
use baretime_x86::Hpet;
use baretime_x86::Tsc;

/// The TSC for the scenario's own reads (warp check, skew), on every CPU.
// SAFETY: the boot CPU probed the TSC (`Tsc::probe`) before this mode runs, and every CPU of
// the machine answers CPUID alike; the kernel runs at CPL 0.
const TSC: Tsc = unsafe { Tsc::new_unchecked() };

use super::{acpi, entry, Serial};
use crate::scenario;
use crate::smp::{self, at, Params, MAX_CPUS};

/// Where the trampoline runs (physical; identity-mapped). SIPI vector = `TRAMPOLINE >> 12`.
pub const TRAMPOLINE: usize = 0x8000;
/// The parameter block, in the trampoline's page: CR3, stack top, entry, CPU number (u64 each).
pub const PARAMS: usize = TRAMPOLINE + 0xF00;

/// Each application processor's stack.
const STACK_BYTES: usize = 32 * 1024;

#[repr(C, align(16))]
struct Stacks([[u8; STACK_BYTES]; MAX_CPUS]);

/// Only addresses inside it are used (each AP's stack top).
static mut STACKS: Stacks = Stacks([[0; STACK_BYTES]; MAX_CPUS]);

global_asm!(
    r#"
    .section .rodata.smp_trampoline, "a"
    .global smp_trampoline_start
    .global smp_trampoline_end
    .balign 16
    .code16
smp_trampoline_start:
    cli
    cld
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl ({base} + tr_gdt_ptr - smp_trampoline_start)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, ${base} + tr_pm32 - smp_trampoline_start

    .code32
tr_pm32:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl %cr4, %eax
    orl $(1 << 5), %eax
    movl %eax, %cr4
    movl ({params}), %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx
    rdmsr
    orl $(1 << 8), %eax
    wrmsr
    movl %cr0, %eax
    orl $(1 << 31), %eax
    movl %eax, %cr0
    ljmpl $0x18, ${base} + tr_lm64 - smp_trampoline_start

    .code64
tr_lm64:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movq ({params} + 8), %rsp
    movq ({params} + 24), %rdi
    movq ({params} + 16), %rax
    callq *%rax
1:  cli
    hlt
    jmp 1b

    .balign 8
tr_gdt:
    .quad 0
    .quad 0x00CF9A000000FFFF        # 0x08: 32-bit code
    .quad 0x00CF92000000FFFF        # 0x10: data
    .quad 0x00AF9A000000FFFF        # 0x18: 64-bit code
tr_gdt_ptr:
    .word tr_gdt_ptr - tr_gdt - 1
    .long {base} + tr_gdt - smp_trampoline_start
smp_trampoline_end:
    "#,
    base = const TRAMPOLINE,
    params = const PARAMS,
    options(att_syntax)
);

extern "C" {
    static smp_trampoline_start: u8;
    static smp_trampoline_end: u8;
}

/// The local APIC (xAPIC MMIO).
const LAPIC: usize = 0xFEE0_0000;
const LAPIC_ID: usize = 0x20;
const LAPIC_SVR: usize = 0xF0;
const LAPIC_ICR_LO: usize = 0x300;
const LAPIC_ICR_HI: usize = 0x310;
/// ICR: INIT, level assert; start-up; delivery status (send pending).
const ICR_INIT: u32 = 0x0000_4500;
const ICR_STARTUP: u32 = 0x0000_4600;
const ICR_PENDING: u32 = 1 << 12;

fn lapic_read(reg: usize) -> u32 {
    // SAFETY: the local APIC's registers, mapped uncached by the entry code; reads of ID, SVR
    // and ICR have no side effects.
    unsafe { core::ptr::read_volatile((LAPIC + reg) as *const u32) }
}

fn lapic_write(reg: usize, value: u32) {
    // SAFETY: as `lapic_read`; only CPU 0 writes the SVR and the ICR, one IPI at a time.
    unsafe { core::ptr::write_volatile((LAPIC + reg) as *mut u32, value) }
}

/// Sends an IPI and waits until the APIC has delivered it.
fn send_ipi(apic_id: u32, icr: u32) {
    lapic_write(LAPIC_ICR_HI, apic_id << 24);
    lapic_write(LAPIC_ICR_LO, icr);
    while lapic_read(LAPIC_ICR_LO) & ICR_PENDING != 0 {
        core::hint::spin_loop();
    }
}

fn cr3() -> u64 {
    let v: u64;
    // SAFETY: reading CR3 at ring 0 has no side effect.
    unsafe { asm!("mov {}, cr3", out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

fn write_param(index: usize, value: u64) {
    // SAFETY: the parameter block lies in the trampoline's page below 1 MiB, which the
    // kernel owns (identity-mapped RAM, not used by the loader's data: see `main`); no AP
    // reads it while CPU 0 writes (one AP at a time, rewritten only after it arrived).
    unsafe { core::ptr::write_volatile((PARAMS + 8 * index) as *mut u64, value) }
}

/// Copies the trampoline to [`TRAMPOLINE`]. `Err(len)` if it would overrun the parameters.
fn install_trampoline() -> Result<usize, usize> {
    // The two symbols bound the trampoline's bytes in .rodata (only their addresses are taken).
    let (start, end) = (
        core::ptr::addr_of!(smp_trampoline_start),
        core::ptr::addr_of!(smp_trampoline_end),
    );
    let len = end as usize - start as usize;
    if TRAMPOLINE + len > PARAMS {
        return Err(len);
    }
    // SAFETY: the destination is RAM below 1 MiB that nothing else uses (see `main`), and
    // does not overlap the kernel image (loaded at 1 MiB).
    unsafe { core::ptr::copy_nonoverlapping(start, TRAMPOLINE as *mut u8, len) };
    Ok(len)
}

/// An application processor in long mode, on its own stack.
#[no_mangle]
extern "C" fn smp_ap_main(cpu: u64) -> ! {
    let p = Params::shared();
    let cpu = cpu as u32;
    percpu::init(cpu);
    if cpu == p.skew_cpu && p.skew_us != 0 {
        let ticks = SKEW_TICKS.load(Ordering::SeqCst);
        match SKEW_HOW.load(Ordering::SeqCst) {
            SKEW_SIMULATED => percpu::set_offset(ticks),
            how => skew::apply(ticks, how == SKEW_TSC_WRITE),
        }
    }
    skew::record(cpu);
    smp::arrive(at::ONLINE);
    if simulated() {
        ap_work(cpu, &SIM_CLOCK, &SIM_GUARD, &p)
    } else {
        ap_work(cpu, &super::CLOCK, &GUARD, &p)
    }
}

/// What an AP does once online, on the clock the scenario uses.
fn ap_work<C: Counter>(cpu: u32, clock: &Clock<C>, guard: &MonotonicClock<'_, C>, p: &Params) -> ! {
    smp::rendezvous(at::START);
    smp::ap_reads(cpu, &|| read_ns(clock, guard, p));
    smp::rendezvous(at::READ_DONE);
    smp::warp(0, cpu, clock.counter(), &TSC);
    smp::rendezvous(at::WARP1_DONE);
    if p.skew_us != 0 {
        smp::rendezvous(at::REPAIR);
        repair(cpu);
        skew::record(cpu);
        smp::rendezvous(at::REPAIRED);
        smp::warp(1, cpu, clock.counter(), &TSC);
        smp::rendezvous(at::WARP2_DONE);
    }
    park()
}

/// The repair on this CPU: TSC_ADJUST back to its package reference's value (CPU 0's in CPU 0's
/// package; a simulated skew: offset 0).
fn repair(cpu: u32) {
    if simulated() {
        percpu::set_offset(0);
    } else {
        skew::repair(cpu);
    }
}

/// One read of the shared clock: plain, or through its monotonic guard (`guard=1`), which
/// every CPU shares like the clock itself.
fn read_ns<C: Counter>(clock: &Clock<C>, guard: &MonotonicClock<'_, C>, p: &Params) -> u64 {
    if p.guard {
        guard.now().as_nanos()
    } else {
        clock.now().as_nanos()
    }
}

/// The guards over the two clocks (`guard=1`).
static GUARD: MonotonicClock<'static, Tsc> = MonotonicClock::new(&super::CLOCK);
static SIM_GUARD: MonotonicClock<'static, SkewedTsc> = MonotonicClock::new(&SIM_CLOCK);

/// How the skew scenario moves a TSC: IA32_TSC_ADJUST where CPUID has it (else IA32_TSC),
/// IA32_TSC (`skew_method=tsc_write`), or in software (`skew_method=simulated`: the clock
/// runs on [`SkewedTsc`], which adds a per-CPU offset; for machines whose TSC cannot be
/// moved, such as QEMU's TCG).
static SKEW_HOW: AtomicU32 = AtomicU32::new(SKEW_MSR);
const SKEW_MSR: u32 = 0;
const SKEW_TSC_WRITE: u32 = 1;
const SKEW_SIMULATED: u32 = 2;

fn simulated() -> bool {
    SKEW_HOW.load(Ordering::SeqCst) == SKEW_SIMULATED
}

/// The TSC plus this CPU's software offset (from the per-CPU area): a TSC that is off on one
/// CPU, as far as everything above the counter can tell.
pub struct SkewedTsc;

impl Counter for SkewedTsc {
    #[inline(always)]
    fn ticks(&self) -> u64 {
        // The offset load comes before LFENCE;RDTSC, which orders the read after it.
        let offset = percpu::offset();
        TSC.ticks().wrapping_add(offset)
    }
    fn bits(&self) -> u32 {
        64
    }
}

/// The clock of `skew_method=simulated`.
static SIM_CLOCK: Clock<SkewedTsc> = Clock::uninit(SkewedTsc);

/// A per-CPU area reached through GS (IA32_GS_BASE), as kernels keep theirs: one load finds
/// this CPU's simulated TSC offset without knowing which CPU this is.
mod percpu {
    use core::arch::asm;
    use core::sync::atomic::AtomicU64;

    use crate::smp::MAX_CPUS;

    #[repr(C, align(64))]
    struct Area {
        offset: AtomicU64,
    }

    static AREAS: [Area; MAX_CPUS] = [const {
        Area {
            offset: AtomicU64::new(0),
        }
    }; MAX_CPUS];

    const IA32_GS_BASE: u32 = 0xC000_0101;

    /// Points this CPU's GS base at its area.
    pub fn init(cpu: u32) {
        let Some(area) = AREAS.get(cpu as usize) else {
            return;
        };
        let base = area as *const Area as u64;
        // SAFETY: ring 0; IA32_GS_BASE exists in long mode; nothing else in this kernel uses GS.
        unsafe {
            asm!("wrmsr", in("ecx") IA32_GS_BASE, in("eax") base as u32, in("edx") (base >> 32) as u32, options(nostack, preserves_flags))
        };
    }

    /// This CPU's offset (`init` must have run on this CPU).
    #[inline(always)]
    pub fn offset() -> u64 {
        let v: u64;
        // SAFETY: GS points at this CPU's `Area` (`init` ran on every CPU before any clock
        // read through `SkewedTsc`); its first field is the AtomicU64 offset, read as one
        // aligned 8-byte load, which is atomic.
        unsafe { asm!("mov {}, gs:[0]", out(reg) v, options(nostack, preserves_flags, readonly)) };
        v
    }

    /// Sets this CPU's offset.
    pub fn set_offset(ticks: u64) {
        // SAFETY: as `offset`: one aligned 8-byte store to this CPU's own area.
        unsafe { asm!("mov gs:[0], {}", in(reg) ticks, options(nostack, preserves_flags)) };
    }
}

fn park() -> ! {
    loop {
        // SAFETY: interrupts are off: HLT stops this CPU for good, which is the intent.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) };
    }
}

fn fail(out: &mut Serial, what: core::fmt::Arguments) -> ! {
    let _ = writeln!(out, "error={what}");
    let _ = writeln!(out, "done=1");
    super::exit(1)
}

/// Starts `cpus - 1` application processors; returns how many milliseconds it took.
fn start_aps(out: &mut Serial, clock: &Clock<Tsc>, cpus: u32) -> u64 {
    let len = match install_trampoline() {
        Ok(len) => len,
        Err(len) => fail(out, format_args!("trampoline_too_long len={len}")),
    };
    let bsp = lapic_read(LAPIC_ID) >> 24;
    // Software-enable the local APIC (spurious vector 0xFF).
    lapic_write(LAPIC_SVR, lapic_read(LAPIC_SVR) | 0x1FF);
    let _ = writeln!(
        out,
        "smp_cpus={cpus} bsp_apic_id={bsp} trampoline={TRAMPOLINE:#x} trampoline_bytes={len}"
    );
    let delay = clock.delay();
    let t0 = clock.now();
    let stacks = core::ptr::addr_of!(STACKS) as u64;
    write_param(0, cr3());
    write_param(2, smp_ap_main as *const () as u64);
    let mut apic_id = 0;
    for cpu in 1..cpus {
        if apic_id == bsp {
            apic_id += 1;
        }
        write_param(1, stacks + (u64::from(cpu) + 1) * STACK_BYTES as u64);
        write_param(3, u64::from(cpu));
        let before = smp::arrived(at::ONLINE);
        send_ipi(apic_id, ICR_INIT);
        delay.wait_ns(10_000_000);
        send_ipi(apic_id, ICR_STARTUP | (TRAMPOLINE >> 12) as u32);
        delay.wait_ns(200_000);
        if smp::arrived(at::ONLINE) == before {
            send_ipi(apic_id, ICR_STARTUP | (TRAMPOLINE >> 12) as u32);
        }
        let waited = clock.now();
        while smp::arrived(at::ONLINE) == before {
            if clock.elapsed(waited).as_millis() > 1000 {
                fail(
                    out,
                    format_args!("ap_not_online cpu={cpu} apic_id={apic_id}"),
                );
            }
            core::hint::spin_loop();
        }
        apic_id += 1;
    }
    clock.elapsed(t0).as_millis() as u64
}

/// The cross-CPU parameters the workload needs besides `Params`: skew in ticks.
static SKEW_TICKS: AtomicU64 = AtomicU64::new(0);

/// `mode=smp`: calibrates the TSC against the HPET, starts the clock, brings up the APs,
/// runs the workload and the warp check, prints the figures, ends QEMU.
pub fn main(
    out: &mut Serial,
    info: &entry::StartInfo,
    tsc: Tsc,
    claim: Option<Frequency>,
    cmdline: &str,
) -> ! {
    let p = Params::parse(cmdline);
    p.share();
    smp::init_warps(&p);
    let how = if cmdline.contains("skew_method=simulated") {
        SKEW_SIMULATED
    } else if cmdline.contains("skew_method=tsc_write") {
        SKEW_TSC_WRITE
    } else {
        SKEW_MSR
    };
    SKEW_HOW.store(how, Ordering::SeqCst);
    percpu::init(0);
    let timers = acpi::find_timers(info.rsdp_paddr);
    let base = timers.hpet.unwrap_or(0xFED0_0000);
    // SAFETY: the HPET's base from ACPI (or the PC default), mapped uncached; only user.
    let hpet = match unsafe { Hpet::new(base as usize) } {
        Ok(h) => h,
        Err(e) => fail(out, format_args!("no_hpet detail=\"{e}\"")),
    };
    let mut reference = WithAccuracy::new(hpet, Accuracy::Exact);
    let Some(verified) = scenario::calibrate(
        out,
        tsc,
        &mut reference,
        claim,
        scenario::config(scenario::Args::parse(cmdline).max_ms),
    ) else {
        fail(out, format_args!("calibration_failed"))
    };
    let rate = verified.chosen;
    smp::set_patience(rate.as_hz());
    for started in [super::CLOCK.start(rate), SIM_CLOCK.start(rate)] {
        if let Err(e) = started {
            fail(out, format_args!("clock_start detail=\"{e}\""));
        }
    }
    SKEW_TICKS.store(
        (u128::from(p.skew_us) * u128::from(rate.as_hz()) / 1_000_000) as u64,
        Ordering::SeqCst,
    );
    // The trampoline's page must not hold what the loader passed: the start info and the
    // command line (read above and still borrowed by `cmdline`).
    let page = TRAMPOLINE as u64..TRAMPOLINE as u64 + 4096;
    if page.contains(&(info as *const entry::StartInfo as u64))
        || page.contains(&info.cmdline_paddr)
    {
        fail(out, format_args!("trampoline_page_in_use"));
    }
    // CPU 0 first: the reference of its package, before any AP records its own value.
    skew::record(0);
    smp::arrive(at::ONLINE);
    let online_ms = start_aps(out, &super::CLOCK, p.cpus);
    let _ = writeln!(
        out,
        "cpus_online={} online_ms={online_ms}",
        smp::arrived(at::ONLINE)
    );
    if p.skew_us != 0 {
        let method = match how {
            SKEW_SIMULATED => "simulated",
            _ => skew::method(),
        };
        let _ = writeln!(
            out,
            "skew_cpu={} skew_us={} skew_ticks={} skew_method={method} skew_observed_ticks={}",
            p.skew_cpu,
            p.skew_us,
            SKEW_TICKS.load(Ordering::SeqCst),
            skew::observed()
        );
    }
    skew::record(0);
    if simulated() {
        bsp_work(out, &SIM_CLOCK, &SIM_GUARD, rate, &p)
    } else {
        bsp_work(out, &super::CLOCK, &GUARD, rate, &p)
    }
}

/// CPU 0's part once every CPU is online, on the clock the scenario uses. Ends QEMU.
fn bsp_work<C: Counter>(
    out: &mut Serial,
    clock: &Clock<C>,
    guard: &MonotonicClock<'_, C>,
    rate: Frequency,
    p: &Params,
) -> ! {
    smp::rendezvous(at::START);
    let t_read = clock.now();
    let writes = smp::bsp_reads(clock, rate, p, 60_000_000_000, &|| read_ns(clock, guard, p));
    smp::rendezvous(at::READ_DONE);
    let totals = smp::totals(out, p.cpus);
    smp::print_reads(out, p.cpus, &writes, &totals, "");
    let _ = writeln!(out, "guard={}", u8::from(p.guard));
    skew::print(out, p.cpus, "");
    smp::bsp_warp(out, clock, &TSC, t_read, &rate);
    if p.skew_us != 0 {
        // The repair: every CPU writes its package reference's TSC_ADJUST (CPU 0's, in
        // CPU 0's package) into its own where it differs, as Linux's
        // tsc_store_and_check_tsc_adjust does; then the warp check runs again.
        smp::rendezvous(at::REPAIR);
        repair(0);
        skew::record(0);
        smp::rendezvous(at::REPAIRED);
        skew::print(out, p.cpus, "repaired_");
        smp::warp(1, 0, clock.counter(), &TSC);
        smp::rendezvous(at::WARP2_DONE);
        smp::print_warp(out, 1, "repaired_", &rate);
    }
    let _ = writeln!(out, "done=1");
    super::exit(0)
}

/// The fault of `x86_64-smp-tsc-skew`: one AP moves its own TSC, and the repair, on the
/// crate's `TscAdjust` / `TscAdjustTable` (what a kernel would use), per package as CPUID
/// reports the packages (QEMU's `-smp N`: one package).
mod skew {
    use core::fmt::Write;
    use core::sync::atomic::{AtomicI64, AtomicU32, Ordering};

    use crate::x86_64::msr::{rdmsr, wrmsr, IA32_TSC};
    use baretime_x86::{package_in_cpuid, BootCpuValue, PackageId};
    use baretime_x86::{NativeCpuid, TscAdjust, TscAdjustTable};

    use crate::smp::MAX_CPUS;

    /// Each CPU's IA32_TSC_ADJUST as it last recorded it; CPU 0 is its package's reference.
    /// Its value is kept, not reset to 0: the clock already runs on CPU 0's TSC.
    static TABLE: TscAdjustTable<MAX_CPUS> = TscAdjustTable::new(0, BootCpuValue::Keep);
    /// How the skew was applied: 0 none, 1 TSC_ADJUST, 2 a write to IA32_TSC.
    static METHOD: AtomicU32 = AtomicU32::new(0);
    /// How far the skewed CPU's TSC moved across the write (skew + the write's own time).
    static OBSERVED: AtomicI64 = AtomicI64::new(0);
    /// Repairs whose read-back was not the reference (a hypervisor that ignores the write).
    static UNFIXED: AtomicU32 = AtomicU32::new(0);

    fn tsc_adjust() -> Option<TscAdjust> {
        // SAFETY: the kernel runs at ring 0 on every CPU, and so does every user of the token.
        unsafe { TscAdjust::probe() }
    }

    /// Moves this CPU's TSC forward by `ticks`: through IA32_TSC_ADJUST where CPUID has it
    /// (unless `tsc_write`), else by writing IA32_TSC.
    pub fn apply(ticks: u64, tsc_write: bool) {
        let before = super::TSC.read_ordered();
        match tsc_adjust() {
            Some(adjust) if !tsc_write => {
                adjust.write(adjust.read().wrapping_add(ticks as i64));
                METHOD.store(1, Ordering::SeqCst);
            }
            _ => {
                // SAFETY: ring 0; IA32_TSC exists on every x86_64 CPU; moving this CPU's TSC
                // is the scenario's fault.
                unsafe { wrmsr(IA32_TSC, rdmsr(IA32_TSC).wrapping_add(ticks)) };
                METHOD.store(2, Ordering::SeqCst);
            }
        }
        let after = super::TSC.read_ordered();
        OBSERVED.store(after.wrapping_sub(before) as i64, Ordering::SeqCst);
    }

    /// How far the skewed CPU's TSC moved across `apply`.
    pub fn observed() -> i64 {
        OBSERVED.load(Ordering::SeqCst)
    }

    /// How `apply` moved the TSC (`tsc_adjust`, `tsc_write`).
    pub fn method() -> &'static str {
        match METHOD.load(Ordering::SeqCst) {
            1 => "tsc_adjust",
            2 => "tsc_write",
            _ if tsc_adjust().is_some() => "tsc_adjust",
            _ => "tsc_write",
        }
    }

    /// This CPU's package, from its APIC ID (CPUID leaf 0x1F, 0xB or 1).
    fn package() -> PackageId {
        package_in_cpuid(&NativeCpuid).unwrap_or(PackageId(0))
    }

    /// Records this CPU's TSC_ADJUST (where it exists).
    pub fn record(cpu: u32) {
        if let Some(adjust) = tsc_adjust() {
            let _ = TABLE.record(cpu as usize, package(), adjust.read());
        }
    }

    /// Linux's repair on this CPU: its package reference's recorded value written back
    /// where this CPU's differs (`TscAdjustTable::check_and_restore`); counts a write that
    /// did not take.
    pub fn repair(cpu: u32) {
        if let Some(adjust) = tsc_adjust() {
            match TABLE.check_and_restore(&adjust, cpu as usize, package()) {
                Ok(check) if check.is_fixed() => {}
                _ => {
                    UNFIXED.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    /// Prints `tsc_adjust_msr=0|1 tsc_adjust=a,b,… tsc_adjust_nonzero=N
    /// tsc_adjust_unequal=0|1 tsc_adjust_worst_cpu=N` (and `tsc_adjust_unfixed=N`,
    /// `tsc_adjust_packages=N tsc_adjust_package_pairs_unequal=N`): unequal within a package;
    /// packages are compared and reported, not repaired.
    pub fn print(out: &mut impl Write, cpus: u32, label: &str) {
        let _ = write!(
            out,
            "{label}tsc_adjust_msr={} {label}tsc_adjust=",
            u8::from(tsc_adjust().is_some())
        );
        for cpu in 0..cpus as usize {
            let v = TABLE.value(cpu).unwrap_or(0);
            let _ = write!(out, "{}{v}", if cpu == 0 { "" } else { "," });
        }
        let s = TABLE.summary();
        let _ = writeln!(
            out,
            " {label}tsc_adjust_nonzero={} {label}tsc_adjust_unequal={} {label}tsc_adjust_worst_cpu={} {label}tsc_adjust_unfixed={} {label}tsc_adjust_packages={} {label}tsc_adjust_package_pairs_unequal={}",
            s.nonzero,
            u8::from(s.differing != 0),
            s.worst.map_or(-1, |(cpu, _)| cpu as i64),
            UNFIXED.load(Ordering::SeqCst),
            s.packages,
            s.package_pairs_differing,
        );
    }
}
