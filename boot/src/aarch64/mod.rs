//! The aarch64 kernel: `virt` entry, PL011 output, semihosting exit, the scenarios.

mod entry;
mod errata;
mod gic;
mod semihosting;
mod smp;
mod timers;
mod watch;

use core::fmt::{self, Write};

use baretime::{Clock, WallClock};
use baretime_aarch64::SemihostingElapsed;
use baretime_aarch64::{GenericTimer, Pl031};
use core::arch::asm;

use crate::scenario::{self, Args};
use semihosting::{call, ADP_STOPPED_APPLICATION_EXIT, SYS_EXIT_EXTENDED, SYS_GET_CMDLINE};

/// The PL011 UART of QEMU's `virt` machine. (QEMU needs no set-up; real hardware would want
/// the baud rate and UARTEN programmed first.)
pub struct Serial(());

const PL011: usize = 0x0900_0000;
/// Flag register; bit 5: transmit FIFO full.
const PL011_FR: usize = PL011 + 0x18;

impl Serial {
    /// The console.
    pub fn get() -> Serial {
        Serial(())
    }

    fn put(&mut self, byte: u8) {
        // SAFETY: the PL011's data and flag registers are mapped as device memory by the entry
        // code, and this kernel is their only user.
        unsafe {
            while core::ptr::read_volatile(PL011_FR as *const u32) & (1 << 5) != 0 {
                core::hint::spin_loop();
            }
            core::ptr::write_volatile(PL011 as *mut u32, u32::from(byte));
        }
    }
}

impl Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crate::scenario::write_crlf(s, |b| self.put(b));
        Ok(())
    }
}

/// Ends QEMU with exit status `code` (semihosting `SYS_EXIT_EXTENDED`).
pub fn exit(code: u8) -> ! {
    let block = [ADP_STOPPED_APPLICATION_EXIT, usize::from(code)];
    // SAFETY: the kernel runs under `-semihosting`; `block` is the two-field parameter block
    // SYS_EXIT_EXTENDED reads, alive for the call.
    unsafe { call(SYS_EXIT_EXTENDED, block.as_ptr() as usize) };
    loop {
        core::hint::spin_loop();
    }
}

/// The semihosting command line (QEMU: `-kernel` path and `-append` text), or "".
fn command_line(buf: &mut [u8; 256]) -> &str {
    let mut block = [buf.as_mut_ptr() as usize, buf.len()];
    // SAFETY: under `-semihosting`; the block names a writable buffer of the given length
    // that outlives the call, and the host writes at most that many bytes.
    let ret = unsafe { call(SYS_GET_CMDLINE, block.as_mut_ptr() as usize) };
    if ret != 0 {
        return "";
    }
    let len = block[1].min(buf.len());
    core::str::from_utf8(&buf[..len]).unwrap_or("")
}

fn current_el() -> u64 {
    let el: u64;
    // SAFETY: reading CurrentEL has no side effects.
    unsafe { core::arch::asm!("mrs {}, CurrentEL", out(reg) el, options(nomem, nostack)) };
    (el >> 2) & 3
}

/// The kernel's clock on the generic timer: `const`, so a plain `static` (no `unsafe`, no
/// lazy cell), started once the rate is verified. Without 858921's workaround, which
/// `any_core` selects: the QEMU CPU model the scenarios run (`-cpu cortex-a72`) is no
/// Cortex-A73, so every core reads this clock with one `ISB; MRS`.
static CLOCK: Clock<GenericTimer> = Clock::uninit(GenericTimer::any_core().without_erratum());

/// The kernel's wall clock on its `Clock`: `const`, beside it.
static WALL: WallClock<'static, GenericTimer> = WallClock::new(&CLOCK);

/// `virt`'s PL031 (in the first GiB, mapped as device memory by the entry code).
const PL031_BASE: usize = 0x0901_0000;

/// `mode=wall` (see `crate::wall`): the PL031's seconds edge sets `WALL`; QEMU's virtual
/// time is CNTVCT_EL0 × 16 ns, which the PL031 counts from its base too.
fn wall(out: &mut Serial, cmdline: &str) -> bool {
    let Some(rate) = baretime_aarch64::discover().best() else {
        let _ = writeln!(out, "error=no_cntfrq");
        return false;
    };
    if let Err(e) = CLOCK.start(rate) {
        let _ = writeln!(out, "error=clock_start detail=\"{e}\"");
        return false;
    }
    let _ = writeln!(out, "rtc=pl031 rate_hz={}", rate.as_hz());
    // SAFETY: `virt` has a PL031 at this address, mapped as device memory; nothing else in
    // this kernel uses it.
    let mut rtc = unsafe { Pl031::new(PL031_BASE) };
    let ns_per_tick = u128::from(1_000_000_000 / rate.as_hz().max(1));
    crate::wall::run(
        out,
        cmdline,
        &WALL,
        || rtc.read_at_edge(&CLOCK),
        |ticks| u128::from(ticks) * ns_per_tick,
    )
}

/// Called by the entry code with the MMU on.
#[no_mangle]
extern "C" fn kernel_main() -> ! {
    let mut out = Serial::get();
    let mut buf = [0u8; 256];
    let cmdline = command_line(&mut buf);
    let args = Args::parse(cmdline);
    let _ = writeln!(out, "arch=aarch64 el={} mode={}", current_el(), args.mode);

    // Buggy firmware: program a wrong CNTFRQ_EL0. The counter's real rate does not change.
    if let Some(hz) = args.cntfrq {
        // SAFETY: under QEMU's `virt` without EL2/EL3, EL1 is the highest exception level
        // and may write CNTFRQ_EL0; nothing else in this kernel has read it yet.
        unsafe { write_cntfrq_el0(hz) };
        let _ = writeln!(out, "cntfrq_written={hz}");
    }

    // The counter errata's workarounds against faulty-read models of the real counter.
    if args.mode == "errata" {
        let timer = GenericTimer::new();
        let erratum = timer.erratum().map_or("none", |e| e.token());
        let _ = writeln!(out, "midr_erratum={erratum}");
        let ok = errata::run(&mut out, timer);
        let _ = writeln!(out, "done=1");
        exit(if ok { 0 } else { 1 });
    }

    // Embassy tasks sleeping on the virtual timer, on a clock at CNTFRQ_EL0's rate (the
    // rate QEMU's counter really runs at: `aarch64-virt` confirms it).
    if args.mode == "timers" {
        let Some(rate) = baretime_aarch64::discover().best() else {
            let _ = writeln!(out, "error=no_cntfrq");
            exit(1)
        };
        if let Err(e) = CLOCK.start(rate) {
            let _ = writeln!(out, "error=clock_start detail=\"{e}\"");
            exit(1);
        }
        let _ = writeln!(out, "rate_hz={}", rate.as_hz());
        let ok = timers::run(&mut out, rate, cmdline.contains("idle=spin"));
        let _ = writeln!(out, "done=1");
        exit(if ok { 0 } else { 1 });
    }

    // The time of day: the PL031 at its seconds edge on a clock at CNTFRQ_EL0's rate (the
    // rate QEMU's counter really runs at), then a slew.
    if args.mode == "wall" {
        let ok = wall(&mut out, cmdline);
        let _ = writeln!(out, "done=1");
        exit(if ok { 0 } else { 1 });
    }

    // The watchdog and refinement (issue 28).
    if args.mode == "watchdog" || args.mode == "refine" {
        let ok = if args.mode == "watchdog" {
            watch::watchdog(&mut out, cmdline)
        } else {
            watch::refine(&mut out, cmdline)
        };
        let _ = writeln!(out, "done=1");
        exit(if ok { 0 } else { 1 });
    }

    // 1. The counter, and what CNTFRQ_EL0 claims about it.
    let timer = GenericTimer::new();
    let claim = baretime_aarch64::discover().best();
    scenario::print_claim(&mut out, claim);

    // 2. The reference: the semihosting host's elapsed time.
    // SAFETY: the kernel runs under `-semihosting` (it also exits through it).
    let ok = match unsafe { SemihostingElapsed::new() } {
        Err(e) => {
            let _ = writeln!(out, "error=no_semihosting_clock detail=\"{e}\"");
            false
        }
        Ok(mut reference) => match scenario::calibrate(
            &mut out,
            timer,
            &mut reference,
            claim,
            scenario::config(args.max_ms),
        ) {
            None => false,
            Some(verified) => match CLOCK.start(verified.chosen) {
                Err(e) => {
                    let _ = writeln!(out, "error=clock_start detail=\"{e}\"");
                    false
                }
                Ok(()) => {
                    if args.mode == "smp" {
                        smp::main(&mut out, &CLOCK, verified.chosen, cmdline);
                    }
                    if args.mode == "delay" {
                        scenario::time_delays(
                            &mut out,
                            &CLOCK,
                            reference,
                            &verified,
                            args.delay_ns,
                            5,
                        );
                    }
                    true
                }
            },
        },
    };
    let _ = writeln!(out, "done=1");
    exit(if ok { 0 } else { 1 });
}

/// Writes CNTFRQ_EL0, as firmware does at boot: the `cntfrq=` scenarios play misprogrammed
/// firmware with it (the counter's real rate does not change).
///
/// # Safety
///
/// The caller runs at the highest implemented exception level that may write the register
/// (EL1 without EL2/EL3 in QEMU's `virt`; EL3 on real hardware), else the write traps; and it
/// accepts that every other reader of CNTFRQ_EL0 on this CPU (an OS's timekeeping) will see
/// the new value.
unsafe fn write_cntfrq_el0(hz: u64) {
    // (aarch64-cpu models CNTFRQ_EL0 as read-only, as it is below the highest EL.)
    // SAFETY: the caller guarantees the write is permitted at this EL (see # Safety). MSR
    // writes only the system register; ISB makes later reads see it. No stack, no flags.
    unsafe {
        asm!("msr cntfrq_el0, {v}", "isb", v = in(reg) hz, options(nostack, preserves_flags))
    };
}
