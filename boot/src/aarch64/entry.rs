//! From QEMU's `-M virt -kernel` entry to Rust, at EL1.
//!
//! QEMU loads the ELF at its link address (0x4008_0000, in RAM) and starts the first CPU at
//! `_start` at EL1 with the MMU off. This code
//!
//! 1. sets up a 64 KiB stack and zeroes `.bss`,
//! 2. enables FP/SIMD (CPACR_EL1.FPEN = 0b11): code for `aarch64-unknown-none` uses the SIMD
//!    registers, and without this the first such instruction traps,
//! 3. turns the MMU on with a two-entry identity map (level 1, 1 GiB blocks): the first GiB
//!    (flash, GIC, PL011 at 0x0900_0000) as device memory, the second (RAM) as normal
//!    write-back memory. With the MMU off every access is Device-nGnRnE, so unaligned accesses
//!    fault and exclusive loads/stores (atomics) are not guaranteed to work,
//! 4. installs an exception vector table that reports any exception (ESR, ELR, FAR) on the
//!    console and ends QEMU with status 3 — without it an exception would jump to address 0
//!    and QEMU would hang silently — except an IRQ at EL1, which goes to `irq_handler`
//!    (`timers.rs`; only `mode=timers` unmasks IRQs),
//! 5. calls `kernel_main`.

use core::arch::global_asm;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering};

/// Where every exception vector goes: print what happened, end QEMU with status 3.
#[no_mangle]
extern "C" fn unexpected_exception(esr: u64, elr: u64, far: u64) -> ! {
    // Only once: should exiting itself fault (no semihosting host), stop here.
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if REPORTED.swap(true, Ordering::Relaxed) {
        loop {
            core::hint::spin_loop();
        }
    }
    let _ = writeln!(
        super::Serial::get(),
        "error=exception esr={esr:#x} elr={elr:#x} far={far:#x}"
    );
    super::exit(3)
}

global_asm!(
    r#"
    .section .text.boot, "ax"
    .global _start
_start:
    # 1. Stack, .bss.
    adrp x0, stack_top
    add x0, x0, :lo12:stack_top
    mov sp, x0
    adrp x0, __bss_start
    add x0, x0, :lo12:__bss_start
    adrp x1, __bss_end
    add x1, x1, :lo12:__bss_end
1:  cmp x0, x1
    b.hs 2f
    str xzr, [x0], #8
    b 1b
2:
    # 2. FP/SIMD on at EL1 and EL0.
    mov x0, #(3 << 20)
    msr cpacr_el1, x0
    isb

    # 3. Identity map: level-1 table of 1 GiB blocks, 39-bit addresses (T0SZ = 25).
    adrp x0, level1
    add x0, x0, :lo12:level1
    # Block 0: 0..1 GiB, device (MAIR index 0), access flag, never executable.
    movz x1, #0x0401
    movk x1, #0x0060, lsl #48
    str x1, [x0]
    # Block 1: 1..2 GiB, RAM: normal memory (MAIR index 1), inner shareable, access flag.
    movz x1, #0x0705
    movk x1, #0x4000, lsl #16
    str x1, [x0, #8]
    msr ttbr0_el1, x0
    # MAIR: attribute 0 = Device-nGnRnE (0x00), attribute 1 = Normal write-back (0xFF).
    mov x1, #0xFF00
    msr mair_el1, x1
    # TCR: T0SZ = 25, inner/outer write-back walks, inner shareable, 4 KiB granule,
    # no TTBR1 walks (EPD1), 36-bit physical addresses (IPS = 1).
    movz x1, #(25 | (1 << 8) | (1 << 10) | (3 << 12))
    movk x1, #(1 << (23 - 16)), lsl #16
    movk x1, #1, lsl #32
    msr tcr_el1, x1
    isb
    tlbi vmalle1
    dsb nsh
    isb
    # SCTLR: MMU (M), data cache (C), instruction cache (I) on.
    mrs x1, sctlr_el1
    mov x2, #((1 << 0) | (1 << 2))
    orr x1, x1, x2
    orr x1, x1, #(1 << 12)
    msr sctlr_el1, x1
    isb

    # 4. Exception vectors.
    adrp x0, vectors
    add x0, x0, :lo12:vectors
    msr vbar_el1, x0
    isb

    # 5. Rust.
    bl kernel_main
3:  wfe
    b 3b

    # Sixteen entries of 128 bytes (synchronous, IRQ, FIQ, SError for four origins). Only
    # an IRQ taken at EL1 on SP_EL1 (entry 5, `mode=timers`) is expected; every other entry
    # reports and stops.
    .balign 2048
vectors:
    .rept 5
    .balign 128
    mrs x0, esr_el1
    mrs x1, elr_el1
    mrs x2, far_el1
    b unexpected_exception
    .endr
    .balign 128
    b irq_entry
    .rept 10
    .balign 128
    mrs x0, esr_el1
    mrs x1, elr_el1
    mrs x2, far_el1
    b unexpected_exception
    .endr

    # An IRQ at EL1: save what a Rust call may clobber (x0-x18, x29, x30, every SIMD/FP
    # register and FPCR/FPSR: the kernel's code uses them), and ELR/SPSR, call `irq_handler`
    # (IRQs stay masked: no nesting), restore, return. 720 bytes of SP_EL1.
irq_entry:
    sub sp, sp, #720
    stp x0, x1, [sp, #0]
    stp x2, x3, [sp, #16]
    stp x4, x5, [sp, #32]
    stp x6, x7, [sp, #48]
    stp x8, x9, [sp, #64]
    stp x10, x11, [sp, #80]
    stp x12, x13, [sp, #96]
    stp x14, x15, [sp, #112]
    stp x16, x17, [sp, #128]
    stp x18, x29, [sp, #144]
    mrs x0, elr_el1
    mrs x1, spsr_el1
    mrs x2, fpcr
    mrs x3, fpsr
    stp x30, x0, [sp, #160]
    stp x1, x2, [sp, #176]
    str x3, [sp, #704]
    add x0, sp, #192
    stp q0, q1, [x0, #0]
    stp q2, q3, [x0, #32]
    stp q4, q5, [x0, #64]
    stp q6, q7, [x0, #96]
    stp q8, q9, [x0, #128]
    stp q10, q11, [x0, #160]
    stp q12, q13, [x0, #192]
    stp q14, q15, [x0, #224]
    stp q16, q17, [x0, #256]
    stp q18, q19, [x0, #288]
    stp q20, q21, [x0, #320]
    stp q22, q23, [x0, #352]
    stp q24, q25, [x0, #384]
    stp q26, q27, [x0, #416]
    stp q28, q29, [x0, #448]
    stp q30, q31, [x0, #480]
    bl irq_handler
    add x0, sp, #192
    ldp q0, q1, [x0, #0]
    ldp q2, q3, [x0, #32]
    ldp q4, q5, [x0, #64]
    ldp q6, q7, [x0, #96]
    ldp q8, q9, [x0, #128]
    ldp q10, q11, [x0, #160]
    ldp q12, q13, [x0, #192]
    ldp q14, q15, [x0, #224]
    ldp q16, q17, [x0, #256]
    ldp q18, q19, [x0, #288]
    ldp q20, q21, [x0, #320]
    ldp q22, q23, [x0, #352]
    ldp q24, q25, [x0, #384]
    ldp q26, q27, [x0, #416]
    ldp q28, q29, [x0, #448]
    ldp q30, q31, [x0, #480]
    ldp x30, x0, [sp, #160]
    ldp x1, x2, [sp, #176]
    ldr x3, [sp, #704]
    msr elr_el1, x0
    msr spsr_el1, x1
    msr fpcr, x2
    msr fpsr, x3
    ldp x0, x1, [sp, #0]
    ldp x2, x3, [sp, #16]
    ldp x4, x5, [sp, #32]
    ldp x6, x7, [sp, #48]
    ldp x8, x9, [sp, #64]
    ldp x10, x11, [sp, #80]
    ldp x12, x13, [sp, #96]
    ldp x14, x15, [sp, #112]
    ldp x16, x17, [sp, #128]
    ldp x18, x29, [sp, #144]
    add sp, sp, #720
    eret

    .section .bss.boot, "aw", @nobits
    .balign 4096
level1:
    .skip 4096
    .balign 16
stack:
    .skip 64 * 1024
stack_top:
    "#
);
