//! x86_64 for [baretime](https://docs.rs/baretime): the time-stamp counter as a capability
//! token, what the CPU and the hypervisor claim about its rate, and the platform timers to
//! calibrate it against.
//!
//! - **The counter**: [`Tsc::probe`] checks CPUID once and hands back a [`Tsc`], whose reads
//!   (`RDTSC`, `LFENCE; RDTSC`, `RDTSCP`) are then safe; it is a [`baretime::Counter`], so it
//!   runs a [`baretime::Clock`].
//! - **Discovery** never measures: [`discover`] collects every rate the CPU states (CPUID
//!   leaves 0x15 and 0x16, a known crystal, the brand string) and, in a guest, the
//!   hypervisor's (leaf 0x40000010, Xen's time leaf), each a [`baretime::Frequency`] with its
//!   [`baretime::Source`] and [`baretime::Accuracy`], plus the flags that say whether the
//!   counter can be trusted at all (invariant TSC): an [`X86Discovery`]. The same decoding
//!   runs on any [`CpuidSource`]: a recorded `Dump` (feature `dump`), a function.
//! - **Paravirtual rates**, for a ring-0 guest: [`KvmPvclock`] and
//!   [`read_hyperv_tsc_frequency`], added with [`X86Discovery::add_claim`].
//! - **References**: the [`Pit`], the [`AcpiPmTimer`] and the [`Hpet`] implement
//!   [`baretime::Reference`] for [`baretime::calibrate_and_verify`].
//! - **The time of day**: [`CmosRtc`], the PC's CMOS real-time clock read by the
//!   update-in-progress rule, at its seconds edge for a [`baretime::WallClock`]
//!   ([`CmosRtc::read_at_edge`]), or as a slow [`baretime::Reference`] (each read waits for the next edge).
//! - **Alarms**: [`ApicTimer`], the local APIC timer in TSC-deadline mode or one-shot mode
//!   calibrated against the TSC, is a [`baretime::Alarm`] armed with TSC values (the ticks of
//!   [`baretime::Clock::deadline`] on a [`Tsc`]); the APIC is a [`LocalApic`] (xAPIC MMIO or
//!   x2APIC MSRs).
//! - **Multi-socket repair**: [`TscAdjust`] and [`TscAdjustTable`] find and undo a firmware
//!   that left the CPUs' `IA32_TSC_ADJUST` apart.
//!
//! The counter, [`NativeCpuid`], the ring-0 reads and the platform timers exist on x86_64
//! only; discovery and replay build on every host. Every module is private and each item has
//! one path, the list below. The crate's README has a whole kernel's boot sequence.
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
// The docs link to the x86_64-only items (`Tsc`, the platform timers, the MSR reads), which
// do not exist when the crate is documented for another architecture (its pure decoding
// builds everywhere); docs.rs documents it for x86_64.
#![cfg_attr(
    not(target_arch = "x86_64"),
    allow(rustdoc::broken_intra_doc_links, rustdoc::private_intra_doc_links)
)]

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
// The CMOS RTC's decoding is pure (tested on any host); only the x86_64 reader uses it.
#[cfg(any(target_arch = "x86_64", test))]
mod cmos;
mod cpuid;
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
mod apic;
#[cfg(target_arch = "x86_64")]
mod cmos_rtc;
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

// The public API, one path per item. On every host: CPUID sources, discovery and its
// findings, dump replay, the pure paravirtual decoding.
pub use candidates::{Disagreement, Implausible};
pub use cpuid::{CpuidRegs, CpuidSource};
pub use discover::{
    discover_with, Crystal, CrystalSource, HypervisorKind, HypervisorRange, X86Discovery,
    X86Features, MAX_PLAUSIBLE_TSC_HZ, MIN_PLAUSIBLE_TSC_HZ,
};
#[cfg(feature = "dump")]
pub use dump::{replay, Dump, DumpEntry, DumpError, DumpFormat};
pub use paravirt::{KvmFeatures, ParavirtError, PvclockTimeInfo};
pub use unavailable::CounterUnavailable;

// On x86_64 only: the counter, the CPU's own CPUID, the ring-0 reads, the platform timers.
#[cfg(target_arch = "x86_64")]
pub use acpi_pm::{AcpiPmTimer, AcpiPmWidth};
#[cfg(target_arch = "x86_64")]
pub use apic::{ApicTimer, ApicTimerError, LocalApic};
#[cfg(target_arch = "x86_64")]
pub use cmos::CmosError;
#[cfg(target_arch = "x86_64")]
pub use cmos_rtc::CmosRtc;
#[cfg(target_arch = "x86_64")]
pub use cpuid::NativeCpuid;
#[cfg(target_arch = "x86_64")]
pub use discover::discover;
#[cfg(target_arch = "x86_64")]
pub use hpet::{Hpet, HpetError};
#[cfg(target_arch = "x86_64")]
pub use paravirt_msr::{read_hyperv_tsc_frequency, KvmPvclock, PvclockArea};
#[cfg(target_arch = "x86_64")]
pub use pit::Pit;
#[cfg(target_arch = "x86_64")]
pub use tsc::{Tsc, TscUnordered};
#[cfg(target_arch = "x86_64")]
pub use tsc_adjust::{
    package_in_cpuid, BootCpuValue, PackageDifference, PackageId, PackageReference, TscAdjust,
    TscAdjustCheck, TscAdjustError, TscAdjustFinding, TscAdjustMsr, TscAdjustRepair, TscAdjustRole,
    TscAdjustSummary, TscAdjustTable,
};

/// The README's examples, compiled and run as doc tests (not part of the API).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// `v` as a `u64`, saturating at `u64::MAX`.
pub(crate) const fn saturate_u64(v: u128) -> u64 {
    if v > u64::MAX as u128 {
        u64::MAX
    } else {
        v as u64
    }
}
