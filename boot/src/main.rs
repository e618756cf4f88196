//! Bare-metal kernels that wire `baretime` into early boot, as a user's kernel would.
//!
//! - x86_64 (`src/x86_64/`): a PVH ELF for `qemu-system-x86_64 -kernel`, output on COM1, exit
//!   through `isa-debug-exit`.
//! - aarch64 (`src/aarch64/`): an ELF for `qemu-system-aarch64 -M virt -kernel` at EL1, output
//!   on the PL011, exit through semihosting.
//!
//! Each prints `key=value` results, one or more per line, that `cargo xtask qemu` checks.
//! Build: `cargo build -p boot --release --target x86_64-unknown-none` (or
//! `aarch64-unknown-none`); run: see `xtask/src/qemu.rs` for the QEMU command lines.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
mod scenario;
#[cfg(target_os = "none")]
mod smp;
#[cfg(target_os = "none")]
mod wall;
#[cfg(target_os = "none")]
mod watch;

#[cfg(all(target_os = "none", target_arch = "x86_64"))]
mod x86_64;
#[cfg(all(target_os = "none", target_arch = "x86_64"))]
use x86_64 as platform;

#[cfg(all(target_os = "none", target_arch = "aarch64"))]
mod aarch64;
#[cfg(all(target_os = "none", target_arch = "aarch64"))]
use aarch64 as platform;

/// On a panic: say so on the console and end QEMU with a failure status.
#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    let _ = writeln!(platform::Serial::get(), "panic=\"{info}\"");
    platform::exit(1)
}

/// On the host there is nothing to run: the kernels only make sense on bare metal.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("boot: build with --target x86_64-unknown-none or aarch64-unknown-none; run with `cargo xtask qemu`");
    std::process::exit(2);
}
