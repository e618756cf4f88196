//! aarch64 for [baretime](https://docs.rs/baretime): the generic timer's virtual counter as a
//! capability token, the read workarounds for counters that misread, what the CPU claims
//! about the counter's rate, and semihosting as a reference under QEMU.
//!
//! - **The counter**: [`GenericTimer`] reads CNTVCT_EL0 (with ISB, or CNTVCTSS_EL0 where
//!   FEAT_ECV has it); it is a [`baretime::Counter`], so it runs a `baretime::Clock`. On a CPU
//!   with a known erratum (Freescale A-008585, HiSilicon 161010101, Cortex-A73 858921,
//!   Allwinner A64) it applies the workaround Linux uses ([`Erratum`]).
//! - **Discovery**: [`from_registers`] decodes CNTFRQ_EL0, MIDR_EL1 and ID_AA64MMFR0_EL1 (a
//!   pure function, tested on any host); [`discover()`] reads them on aarch64.
//! - **A reference**: [`SemihostingElapsed`] (QEMU's `SYS_ELAPSED`) implements
//!   [`baretime::Reference`].
//! - **The time of day**: [`Pl031`], Arm's real-time clock (`virt`'s), read at its seconds
//!   edge for a [`baretime::WallClock`] ([`Pl031::read_at_edge`]), or as a slow
//!   [`baretime::Reference`] (each read waits for the next edge).
//! - **An alarm**: [`VirtualTimer`], the EL1 virtual timer (CNTV_CVAL_EL0, CNTV_CTL_EL0), is a
//!   [`baretime::Alarm`]: a `Clock`'s deadline ticks on [`GenericTimer`] arm it as they are;
//!   the interrupt controller (PPI 27) stays the caller's.
//!
//! Every module is private and each item has one path, the list below. [`Erratum`] and the
//! decoding build on every target, so they are tested anywhere; the register accesses
//! ([`GenericTimer`], [`discover()`], [`SemihostingElapsed`], [`VirtualTimer`]) only on aarch64, and the docs that
//! link to them are whole only there (docs.rs builds them for aarch64).
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::arithmetic_side_effects,
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::float_arithmetic
    )
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Off aarch64 the register reads are not compiled, so links to them cannot resolve; they are
// checked on aarch64 (`cargo doc --target aarch64-unknown-linux-gnu`, docs.rs's default).
#![cfg_attr(not(target_arch = "aarch64"), allow(rustdoc::broken_intra_doc_links))]

mod discover;
mod errata;
#[cfg(target_arch = "aarch64")]
mod generic_timer;
#[cfg(target_arch = "aarch64")]
mod pl031;
#[cfg(target_arch = "aarch64")]
mod semihosting;
#[cfg(target_arch = "aarch64")]
mod semihosting_call;
// The register sequences build (and are tested) on every host; the token only on aarch64.
#[cfg(any(target_arch = "aarch64", test))]
mod virtual_timer;

#[cfg(target_arch = "aarch64")]
pub use discover::discover;
pub use discover::{from_registers, Aarch64Discovery, Midr};
pub use errata::{Erratum, ErratumRead};
#[cfg(target_arch = "aarch64")]
pub use generic_timer::{GenericTimer, GenericTimerUnordered};
#[cfg(target_arch = "aarch64")]
pub use pl031::{Pl031, Pl031Error};
#[cfg(target_arch = "aarch64")]
pub use semihosting::{SemihostingElapsed, SemihostingError};
#[cfg(target_arch = "aarch64")]
pub use virtual_timer::VirtualTimer;

// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
