//! Reference timers (in progress).

#[cfg(target_arch = "x86_64")]
pub mod acpi_pm;
#[cfg(target_arch = "x86_64")]
pub mod hpet;
#[cfg(target_arch = "x86_64")]
pub mod pit;
#[cfg(target_arch = "aarch64")]
pub mod semihosting;
#[cfg(target_arch = "aarch64")]
pub use semihosting::{SemihostingElapsed, SemihostingError};
#[cfg(target_arch = "x86_64")]
pub use {acpi_pm::AcpiPmTimer, hpet::Hpet, hpet::HpetError, pit::Pit};
