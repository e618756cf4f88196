//! x86_64 for [baretime](https://docs.rs/baretime): the time-stamp counter as a capability
//! token, what the CPU and the hypervisor claim about its rate, and the platform timers to
//! calibrate it against.
//!
//! - **The counter**: [`Tsc::probe`] checks CPUID once and hands back a [`Tsc`], whose reads
//!   (`RDTSC`, `LFENCE; RDTSC`, `RDTSCP`) are then safe; it is a [`baretime::Counter`], so it
//!   runs a [`baretime::Clock`].
//! - **Discovery** never measures: [`discover`] collects every rate the CPU states (CPUID
//!   leaves 0x15 and 0x16, a known crystal, the brand string) and, in a guest, the
//!   hypervisor's (leaf 0x40000010, Xen's time leaf, Hyper-V's, KVM pvclock), each a
//!   [`baretime::Frequency`] with its [`baretime::Source`] and [`baretime::Accuracy`], plus
//!   the flags that say whether the counter can be trusted at all (invariant TSC). The
//!   same decoding runs on a recorded dump ([`Dump`], feature `dump`) on any host.
//! - **References**: the [`Pit`], the [`AcpiPmTimer`] and the [`Hpet`] implement
//!   [`baretime::Reference`] for [`baretime::calibrate`].
//! - **Multi-socket repair**: [`TscAdjust`] and [`TscAdjustTable`] find and undo a firmware
//!   that left the CPUs' `IA32_TSC_ADJUST` apart.
//!
//! Every module is private and each item has one path, the list below.
//!
//! Discovery is integer arithmetic, allocates nothing and does not panic on any input: a
//! CPUID source may return anything, and a dump may be any bytes.
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

/// A [`baretime::Frequency`] known when the crate is compiled, for `const` items only: a
/// rate outside the range fails the build, never a run.
#[allow(unused_macros)]
macro_rules! const_frequency {
    (millihz: $millihz:expr, $source:expr, $accuracy:expr) => {
        match baretime::Frequency::from_millihz($millihz, $source, $accuracy) {
            Some(f) => f,
            None => panic!("a compile-time rate outside Frequency's range"),
        }
    };
}

mod bytes;
mod candidates;
#[cfg(feature = "defmt")]
mod defmt;
mod discover;
#[cfg(feature = "dump")]
mod dump;
mod paravirt;
mod unavailable;

// Hardware: port I/O, MMIO and MSRs, on x86_64 only.
#[cfg(target_arch = "x86_64")]
mod acpi_pm;
#[cfg(target_arch = "x86_64")]
mod hpet;
#[cfg(target_arch = "x86_64")]
mod msr;
#[cfg(target_arch = "x86_64")]
mod paravirt_msr;
#[cfg(target_arch = "x86_64")]
mod pit;
#[cfg(target_arch = "x86_64")]
mod port;
#[cfg(target_arch = "x86_64")]
mod tolerance;
#[cfg(target_arch = "x86_64")]
mod tsc;
#[cfg(target_arch = "x86_64")]
mod tsc_adjust;

pub use candidates::{Disagreement, Implausible};
pub use discover::*;
#[cfg(feature = "dump")]
pub use dump::*;
pub use paravirt::*;
pub use unavailable::CounterUnavailable;

#[cfg(target_arch = "x86_64")]
pub use acpi_pm::*;
#[cfg(target_arch = "x86_64")]
pub use hpet::*;
#[cfg(target_arch = "x86_64")]
pub use paravirt_msr::*;
#[cfg(target_arch = "x86_64")]
pub use pit::*;
#[cfg(target_arch = "x86_64")]
pub use tsc::*;
#[cfg(target_arch = "x86_64")]
pub use tsc_adjust::*;

/// `v` as a `u64`, saturating at `u64::MAX`.
pub(crate) const fn saturate_u64(v: u128) -> u64 {
    if v > u64::MAX as u128 {
        u64::MAX
    } else {
        v as u64
    }
}
