//! `mode=smp` on `virt`: secondary CPUs started with PSCI `CPU_ON`, then the shared workload
//! of `crate::smp`.
//!
//! QEMU's `virt` without EL2/EL3 (`-kernel` at EL1) implements PSCI itself and calls for the
//! HVC conduit (its device tree says `method = "hvc"`). `CPU_ON` (function 0xC400_0003,
//! SMC64) takes the target's MPIDR affinity (on `virt`: Aff0 = CPU index modulo 8, Aff1 =
//! index / 8), the physical entry address and a context value, which the new CPU finds in
//! X0. It starts at EL1 with the MMU and caches off, like CPU 0 did.
//!
//! The entry code below gives each secondary CPU what `entry.rs` gave CPU 0: its own stack,
//! FP/SIMD on, and the MMU and caches on with CPU 0's own translation tables and attributes
//! (copied from CPU 0's system registers into [`BOOT`], so nothing of `entry.rs` has to be
//! shared), and the same exception vectors.

use core::arch::{asm, global_asm};
use core::fmt::Write;
use core::sync::atomic::{AtomicU64, Ordering};

use baretime::{Clock, Frequency};
use baretime_aarch64::GenericTimer;

use super::Serial;
use crate::smp::{self, at, Params, MAX_CPUS};

/// Each secondary CPU's stack.
const STACK_BYTES: usize = 32 * 1024;

#[repr(C, align(16))]
struct Stacks([[u8; STACK_BYTES]; MAX_CPUS]);

/// Only its address is used (by the entry code, to set each CPU's SP).
static mut STACKS: Stacks = Stacks([[0; STACK_BYTES]; MAX_CPUS]);

/// What a secondary CPU's entry code loads before it turns its MMU on (read with the MMU off,
/// so CPU 0 cleans it to the point of coherency after writing it).
#[repr(C, align(64))]
pub struct BootBlock {
    stacks: AtomicU64,
    stack_bytes: AtomicU64,
    mair: AtomicU64,
    tcr: AtomicU64,
    ttbr0: AtomicU64,
    sctlr: AtomicU64,
    vbar: AtomicU64,
}

#[no_mangle]
static SMP_BOOT: BootBlock = BootBlock {
    stacks: AtomicU64::new(0),
    stack_bytes: AtomicU64::new(0),
    mair: AtomicU64::new(0),
    tcr: AtomicU64::new(0),
    ttbr0: AtomicU64::new(0),
    sctlr: AtomicU64::new(0),
    vbar: AtomicU64::new(0),
};

global_asm!(
    r#"
    .section .text.smp_secondary, "ax"
    .global smp_secondary_start
    .balign 8
smp_secondary_start:
    # X0 = CPU index (PSCI context). X1 = the boot block.
    adrp x1, SMP_BOOT
    add x1, x1, :lo12:SMP_BOOT
    # SP = stacks + (index + 1) * stack_bytes.
    ldr x2, [x1, #0]
    ldr x3, [x1, #8]
    add x4, x0, #1
    madd x2, x3, x4, x2
    mov sp, x2
    # FP/SIMD on.
    mov x5, #(3 << 20)
    msr cpacr_el1, x5
    isb
    # CPU 0's translation regime, then its SCTLR (MMU and caches on).
    ldr x5, [x1, #16]
    msr mair_el1, x5
    ldr x5, [x1, #24]
    msr tcr_el1, x5
    ldr x5, [x1, #32]
    msr ttbr0_el1, x5
    isb
    tlbi vmalle1
    dsb nsh
    isb
    ldr x5, [x1, #40]
    msr sctlr_el1, x5
    isb
    ldr x5, [x1, #48]
    msr vbar_el1, x5
    isb
    bl smp_secondary_main
1:  wfe
    b 1b
    "#
);

extern "C" {
    fn smp_secondary_start();
}

macro_rules! sysreg {
    ($name:literal) => {{
        let v: u64;
        // SAFETY: reading an EL1 system register has no side effect.
        unsafe { asm!(concat!("mrs {}, ", $name), out(reg) v, options(nomem, nostack)) };
        v
    }};
}

/// PSCI `CPU_ON` through HVC: 0 on success, else a PSCI error code (negative).
fn psci_cpu_on(mpidr: u64, entry: u64, context: u64) -> i64 {
    let ret: i64;
    // SAFETY: an SMCCC call to the hypervisor's PSCI; it starts another CPU at `entry` and
    // touches none of this CPU's memory. Registers the SMCCC lets it clobber are declared.
    unsafe {
        asm!(
            "hvc #0",
            inout("x0") 0xC400_0003u64 => ret,
            inout("x1") mpidr => _,
            inout("x2") entry => _,
            inout("x3") context => _,
            clobber_abi("C"),
            options(nostack)
        );
    }
    ret
}

/// A secondary CPU, with its stack and MMU on.
#[no_mangle]
extern "C" fn smp_secondary_main(cpu: u64) -> ! {
    let clock = &super::CLOCK;
    let cpu = cpu as u32;
    smp::arrive(at::ONLINE);
    smp::rendezvous(at::START);
    smp::ap_reads(cpu, &|| clock.now().as_nanos());
    smp::rendezvous(at::READ_DONE);
    smp::warp(0, cpu, clock.counter(), clock.counter());
    smp::rendezvous(at::WARP1_DONE);
    loop {
        // SAFETY: WFE only waits for an event; this CPU has nothing more to do.
        unsafe { asm!("wfe", options(nomem, nostack)) };
    }
}

fn now_ns(clock: &Clock<GenericTimer>) -> u64 {
    clock.now().as_nanos()
}

/// `mode=smp`, on CPU 0 once `clock` runs at the verified `rate`: starts the other CPUs,
/// runs the workload and the warp check, prints the figures, ends QEMU.
pub fn main(out: &mut Serial, clock: &Clock<GenericTimer>, rate: Frequency, cmdline: &str) -> ! {
    let p = Params::parse(cmdline);
    p.share();
    smp::init_warps(&p);
    smp::set_patience(rate.as_hz());
    let b = &SMP_BOOT;
    b.stacks
        .store(core::ptr::addr_of!(STACKS) as u64, Ordering::SeqCst);
    b.stack_bytes.store(STACK_BYTES as u64, Ordering::SeqCst);
    b.mair.store(sysreg!("mair_el1"), Ordering::SeqCst);
    b.tcr.store(sysreg!("tcr_el1"), Ordering::SeqCst);
    b.ttbr0.store(sysreg!("ttbr0_el1"), Ordering::SeqCst);
    b.sctlr.store(sysreg!("sctlr_el1"), Ordering::SeqCst);
    b.vbar.store(sysreg!("vbar_el1"), Ordering::SeqCst);
    // The new CPUs read the block with their caches off: clean it to the point of coherency.
    // SAFETY: cache maintenance by address on memory this kernel owns; no data changes.
    unsafe {
        asm!("dc cvac, {}", "dsb sy", in(reg) b as *const BootBlock as u64, options(nostack));
    }
    let mpidr0 = sysreg!("mpidr_el1") & 0xFF_00FF_FFFF;
    let _ = writeln!(
        out,
        "smp_cpus={} mpidr0={mpidr0:#x} psci_conduit=hvc",
        p.cpus
    );
    smp::arrive(at::ONLINE);
    for cpu in 1..u64::from(p.cpus) {
        let mpidr = ((cpu / 8) << 8) | (cpu % 8);
        let ret = psci_cpu_on(mpidr, smp_secondary_start as *const () as u64, cpu);
        if ret != 0 {
            let _ = writeln!(out, "error=psci_cpu_on cpu={cpu} psci_ret={ret}");
            let _ = writeln!(out, "done=1");
            super::exit(1);
        }
    }
    // Every CPU must come online within 5 s of clock time.
    let t0 = now_ns(clock);
    while smp::arrived(at::ONLINE) < p.cpus {
        if now_ns(clock) - t0 > 5_000_000_000 {
            let _ = writeln!(
                out,
                "error=cpus_not_online online={}",
                smp::arrived(at::ONLINE)
            );
            let _ = writeln!(out, "done=1");
            super::exit(1);
        }
        core::hint::spin_loop();
    }
    let _ = writeln!(
        out,
        "cpus_online={} online_ms={}",
        smp::arrived(at::ONLINE),
        (now_ns(clock) - t0) / 1_000_000
    );
    smp::rendezvous(at::START);
    let t_read = clock.now();
    let writes = smp::bsp_reads(clock, rate, &p, 60_000_000_000, &|| now_ns(clock));
    smp::rendezvous(at::READ_DONE);
    let totals = smp::totals(out, p.cpus);
    smp::print_reads(out, p.cpus, &writes, &totals, "");
    smp::bsp_warp(out, clock, clock.counter(), t_read, &rate);
    let _ = writeln!(out, "done=1");
    super::exit(0)
}
