//! The CPU counters: the x86_64 time-stamp counter and the aarch64 generic timer.
//!
//! With [`crate::reference`]'s hardware timers, this is the only place in the crate that
//! executes `unsafe` code. Each counter is a *capability token*: a probe checks that the
//! instruction exists and hands back a value whose reads are then safe.
//!
//! Reads come in named flavours because "what time is it" and "when did *this* happen" are
//! different questions:
//!
//! | read | x86_64 | aarch64 | ordering |
//! | --- | --- | --- | --- |
//! | `read()` | `RDTSC` | `MRS CNTVCT_EL0` | none: may execute before earlier or after later instructions |
//! | `read_ordered()` | `LFENCE; RDTSC` | `ISB; MRS CNTVCT_EL0` | after every earlier instruction has completed |
//! | `read_with_aux()` / `read_self_synchronized()` | `RDTSCP` | `MRS CNTVCTSS_EL0` (FEAT_ECV) | as ordered, without a separate barrier |
//!
//! The [`crate::Counter`] implementations use the ordered read, as Linux's clocksource does;
//! `unordered()` gives a counter on the plain read for the cheapest possible timestamps.
//!
//! All reads are compiler barriers (their `asm!` blocks are not `nomem`), so the compiler never
//! moves memory accesses across them.
//!
//! [`errata`] holds the read workarounds for aarch64 counters that misread (Freescale
//! A-008585, HiSilicon 161010101, Cortex-A73 858921, Allwinner A64): pure functions over a
//! raw read, compiled on every target so they are tested anywhere; the aarch64
//! `GenericTimer` applies the one selected.

#[cfg(target_arch = "aarch64")]
pub mod aarch64;
pub mod errata;
// The OS call the threaded warp check needs: the crate's one `unsafe` that is not hardware.
#[cfg(all(feature = "std", target_os = "linux"))]
pub(crate) mod pin;
#[cfg(target_arch = "x86_64")]
pub mod x86_64;
