//! The x86_64 kernel: PVH entry, COM1 output, ACPI lookup of the timers, the scenarios.

mod acpi;
mod calfault;
mod entry;
mod msr;
mod paravirt;
mod port;
mod serial;
mod smp;
mod timers;

use core::fmt::Write;

use baretime::Reference;
use baretime::WithAccuracy;
use baretime::{Accuracy, Clock, Frequency, WallClock};

use baretime_x86::Tsc;
use baretime_x86::{AcpiPmTimer, AcpiPmWidth, CmosRtc, Hpet, Pit};
use baretime_x86::{CpuidRegs, CpuidSource, NativeCpuid, X86Features};

use crate::scenario::{self, Args};
use port::outb;
pub use serial::Serial;

/// Ends QEMU through `-device isa-debug-exit,iobase=0xf4,iosize=4`: QEMU exits with status
/// `(code << 1) | 1`. Without that device, halts.
pub fn exit(code: u8) -> ! {
    // SAFETY: ring 0; port 0xF4 is QEMU's debug-exit device (or unused on a PC).
    unsafe { outb(0xF4, code) };
    loop {
        // SAFETY: HLT with interrupts off stops this CPU for good, which is the intent.
        unsafe { core::arch::asm!("cli; hlt", options(nomem, nostack)) };
    }
}

/// The command line QEMU passed with `-append` (empty if none).
fn command_line(info: &entry::StartInfo) -> &'static str {
    if info.cmdline_paddr == 0 {
        return "";
    }
    let start = info.cmdline_paddr as *const u8;
    let mut len = 0;
    // SAFETY: the PVH protocol gives a NUL-terminated string at cmdline_paddr, which the
    // identity map covers; the kernel never writes there. 4 KiB caps a runaway scan.
    let bytes = unsafe {
        while len < 4096 && *start.add(len) != 0 {
            len += 1;
        }
        core::slice::from_raw_parts(start, len)
    };
    core::str::from_utf8(bytes).unwrap_or("")
}

/// Called by the entry code in long mode with the physical address of `hvm_start_info`.
#[no_mangle]
extern "C" fn kernel_main(start_info: u64) -> ! {
    let mut out = Serial::init();
    // SAFETY: the entry code passes the address the PVH loader put in EBX; it is identity
    // mapped and the loader does not touch it afterwards.
    let info = unsafe { &*(start_info as *const entry::StartInfo) };
    if info.magic != entry::START_INFO_MAGIC {
        let _ = writeln!(out, "error=bad_start_info_magic magic={:#x}", info.magic);
        exit(1);
    }
    let args = Args::parse(command_line(info));
    let _ = writeln!(
        out,
        "arch=x86_64 mode={} reference={}",
        args.mode, args.reference
    );

    // 1. The counter, and what CPUID claims about it.
    let tsc = match Tsc::probe() {
        Ok(tsc) => tsc,
        Err(why) => {
            let _ = writeln!(out, "error={}", why.token());
            exit(1);
        }
    };
    let mut discovery = match args.lie_hz {
        None => baretime_x86::discover(),
        Some(hz) => baretime_x86::discover_with(&lying_cpuid(hz)),
    };
    let _ = writeln!(
        out,
        "invariant_tsc={} hypervisor={}",
        discovery.invariant_tsc(),
        discovery.features().contains(X86Features::HYPERVISOR)
    );
    let claim = match args.mode {
        "paravirt" => paravirt::claim(&mut out, &mut discovery),
        _ => discovery.best(),
    };
    scenario::print_claim(&mut out, claim);
    if args.mode == "smp" {
        smp::main(&mut out, info, tsc, claim, command_line(info));
    }
    if args.mode == "calfault" {
        calfault::main(&mut out, info, tsc, claim, command_line(info));
    }

    // 2. The reference timer, found through ACPI.
    let timers = acpi::find_timers(info.rsdp_paddr);
    let ok = match args.reference {
        "pit" => {
            // SAFETY: ring 0 with interrupts off; nothing else in this kernel uses the PIT.
            let pit = unsafe { Pit::new() };
            run(&mut out, &args, command_line(info), tsc, pit, claim)
        }
        "acpipm" => match timers.pm_timer {
            Some((port, extended)) => {
                // SAFETY: ring 0; the port and width come from this machine's FADT.
                let width = if extended {
                    AcpiPmWidth::Bits32
                } else {
                    AcpiPmWidth::Bits24
                };
                // SAFETY: as above.
                let pm = unsafe { AcpiPmTimer::new(port, width) };
                run(&mut out, &args, command_line(info), tsc, pm, claim)
            }
            None => {
                let _ = writeln!(out, "error=no_pm_timer_in_fadt");
                false
            }
        },
        _ => {
            let base = timers.hpet.unwrap_or(0xFED0_0000);
            // SAFETY: the base comes from the ACPI HPET table (or is the PC's standard
            // address); the entry code maps it uncached; this kernel is its only user.
            match unsafe { Hpet::new(base as usize) } {
                Ok(hpet) => run(&mut out, &args, command_line(info), tsc, hpet, claim),
                Err(e) => {
                    let _ = writeln!(out, "error=no_hpet detail=\"{e}\"");
                    false
                }
            }
        }
    };
    // The time of day: the CMOS RTC at its seconds edge, then a slew (`mode=wall`).
    let ok = ok && (args.mode != "wall" || wall(&mut out, command_line(info), timers.rtc_century));
    let _ = writeln!(out, "done=1");
    exit(if ok { 0 } else { 1 });
}

/// The kernel's wall clock on its `Clock`: `const`, beside it.
static WALL: WallClock<'static, Tsc> = WallClock::new(&CLOCK);

/// `mode=wall` (see `crate::wall`): the CMOS RTC's seconds edge sets `WALL`; QEMU's virtual
/// time is the TSC's count in ns, as it is under `-icount` (TCG's TSC then counts virtual
/// nanoseconds from 0, as the RTC does from its base).
fn wall(out: &mut Serial, cmdline: &str, century: Option<u8>) -> bool {
    let _ = writeln!(
        out,
        "rtc=cmos rtc_century_register={}",
        century.unwrap_or(0)
    );
    // SAFETY: ring 0 with interrupts off; nothing else in this kernel touches the CMOS.
    let mut rtc = unsafe { CmosRtc::new(century) };
    crate::wall::run(out, cmdline, &WALL, || rtc.read_at_edge(&CLOCK), u128::from)
}

/// Calibrates (and for `mode=delay` times delays) with one reference.
fn run<R: Reference>(
    out: &mut Serial,
    args: &Args,
    cmdline: &str,
    tsc: Tsc,
    reference: R,
    claim: Option<Frequency>,
) -> bool {
    // On real boards these timers' crystals are tens of ppm off, and the references say so
    // (their default tolerance goes into the bound). Under QEMU, which these kernels are
    // for, they are computed from the host's monotonic clock: as exact as the host's own
    // measurement that `cargo xtask qemu` compares the result with.
    let mut reference =
        WithAccuracy::new(scenario::Spun::new(reference, args.seed), Accuracy::Exact);
    let Some(verified) = scenario::calibrate(
        out,
        tsc,
        &mut reference,
        claim,
        scenario::config(args.max_ms),
    ) else {
        return false;
    };
    // The kernel's clock: a `static`, started once the rate is verified, read lock-free
    // from anywhere afterwards.
    if let Err(e) = CLOCK.start(verified.chosen) {
        let _ = writeln!(out, "error=clock_start detail=\"{e}\"");
        return false;
    }
    if args.mode == "timers" {
        return timers::main(out, cmdline, tsc, verified.chosen);
    }
    if args.mode == "watchdog" {
        // The TSC's true rate is the calibration's, within its bound.
        let truth_bound = verified.chosen.accuracy().bound_ppb();
        return crate::watch::watchdog(out, cmdline, tsc, verified.chosen, truth_bound, reference);
    }
    if args.mode == "delay" {
        scenario::time_delays(out, &CLOCK, reference, &verified, args.delay_ns, 5);
    }
    true
}

/// The kernel's clock on the TSC: `const`, so a plain `static` (no lazy cell).
// SAFETY: the clock reads the TSC only once started, and `main` starts it only after
// `Tsc::probe` succeeded (it exits otherwise).
static CLOCK: Clock<Tsc> = Clock::uninit(unsafe { Tsc::new_unchecked() });

/// A CPUID reader that passes every leaf through except leaf 0x15, which claims `hz`
/// (crystal 25 MHz × `hz / 1000` / 25 000, exact to the kHz) — as a CPU whose microcode or
/// hypervisor reports the wrong crystal would. Leaf 0's maximum is raised to reach 0x15, and
/// its vendor is Intel's: leaf 0x15 is read on Intel only, and the host may be an AMD.
fn lying_cpuid(hz: u64) -> impl Fn(u32, u32) -> CpuidRegs {
    move |leaf, subleaf| {
        let real = NativeCpuid.cpuid(leaf, subleaf);
        match leaf {
            // "GenuineIntel" in EBX, EDX, ECX.
            0 => CpuidRegs {
                eax: real.eax.max(0x15),
                ebx: u32::from_le_bytes(*b"Genu"),
                edx: u32::from_le_bytes(*b"ineI"),
                ecx: u32::from_le_bytes(*b"ntel"),
            },
            0x15 => CpuidRegs {
                eax: 25_000,
                ebx: u32::try_from(hz / 1000).unwrap_or(u32::MAX),
                ecx: 25_000_000,
                edx: 0,
            },
            _ => real,
        }
    }
}
