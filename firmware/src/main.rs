//! Cortex-M firmware that uses `baretime` the way a new user's firmware would: `static`
//! clocks started at boot, read in thread mode and in interrupt handlers at several
//! priorities, updated from periodic interrupts, recalibrated from thread mode.
//!
//! | board (QEMU `-M`) | target | core | counters |
//! | --- | --- | --- | --- |
//! | `mps2-an386` | thumbv7em-none-eabihf | Cortex-M4 | CMSDK dual timer 2, free-running 32-bit at 25 MHz; SysTick (16-bit reload) extended |
//! | `mps2-an385` | thumbv7m-none-eabi | Cortex-M3 | the same |
//! | `microbit` | thumbv6m-none-eabi | Cortex-M0 | nRF51 TIMER0, 32-bit at 16 MHz (read by capture); TIMER1 (16-bit) extended |
//!
//! Each is built once per atomic choice the README offers for its target (the crate's
//! features `portable-atomic`, `portable-atomic-critical-section`, or none; this crate's
//! `single-core`: portable-atomic's `unsafe-assume-single-core`). What runs: see
//! `src/run.rs`. Results are `key=value` lines on the semihosting console, then a
//! semihosting exit; `cargo xtask qemu` builds, boots and judges them
//! (`xtask/src/qemu_cortexm.rs`).
//!
//! With the `timers` feature (MPS2 only) it runs the `timers-m4` scenario instead: tasks on
//! embassy-executor sleeping through an embassy-time driver over the same `static` clock,
//! woken by a CMSDK timer as the alarm (`src/timers.rs`). With the `rtic` feature it runs
//! `rtic-m4`: RTIC 2 tasks sleeping through baretime-rtic's monotonic on the same clock and
//! alarm (`src/rtic_app.rs`, with the few device-crate lines RTIC needs in `src/pac.rs`).
//!
//! With the `cost` feature it runs the `cost-m4` / `cost-m0` scenario instead: what each clock
//! call costs, timed by a second hardware timer (`src/cost.rs`).
#![cfg_attr(target_os = "none", no_std, no_main)]

// The board follows the core: thumbv7m / thumbv7em (32-bit compare-and-swap) run on MPS2,
// thumbv6m (none) on the micro:bit.
#[cfg(all(target_os = "none", target_has_atomic = "32"))]
#[path = "mps2.rs"]
mod board;
#[cfg(all(target_os = "none", not(target_has_atomic = "32")))]
#[path = "microbit.rs"]
mod board;
#[cfg(all(target_os = "none", feature = "timers"))]
mod irq_off;
#[cfg(target_os = "none")]
mod mmio;
#[cfg(target_os = "none")]
mod out;
#[cfg(all(target_os = "none", feature = "rtic"))]
mod pac;
#[cfg(all(target_os = "none", feature = "rtic"))]
mod rtic_app;
#[cfg(all(
    target_os = "none",
    not(any(feature = "timers", feature = "rtic", feature = "cost"))
))]
mod run;
#[cfg(all(target_os = "none", feature = "timers"))]
mod timers;
#[cfg(all(target_os = "none", feature = "timers", not(target_has_atomic = "32")))]
compile_error!("the `timers` scenario runs on MPS2 (thumbv7m / thumbv7em) only");
#[cfg(all(target_os = "none", feature = "rtic", not(target_has_atomic = "32")))]
compile_error!("the `rtic` scenario runs on MPS2 (thumbv7m / thumbv7em) only");
#[cfg(all(feature = "timers", feature = "rtic"))]
compile_error!("the `timers` and `rtic` scenarios are separate builds: enable one");
#[cfg(all(target_os = "none", feature = "cost"))]
mod cost;
#[cfg(all(
    feature = "cost",
    any(
        feature = "timers",
        feature = "rtic",
        feature = "portable-atomic-critical-section"
    )
))]
compile_error!("`cost` has its own critical-section implementation: build it without `timers`, `rtic` and `portable-atomic-critical-section`");

/// On the host there is nothing to run: the firmware only makes sense on a Cortex-M.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("firmware: build with --target thumbv7em-none-eabihf, thumbv7m-none-eabi or thumbv6m-none-eabi; run with `cargo xtask qemu cortex-m`");
    std::process::exit(2);
}
