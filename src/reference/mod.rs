//! Reference timers: implementations of [`crate::calibrate::Reference`].
//!
//! - `StdReference` (feature `std`): std's monotonic clock, as a 1 GHz 64-bit count.
//! - [`CounterReference`]: any [`crate::Counter`] whose frequency is known.
//! - [`WithAccuracy`]: any of them, with the rate's tolerance the caller knows (a board's
//!   crystal), which calibration then adds to its bound.

mod counter;
mod stated;
pub use counter::CounterReference;
pub use stated::WithAccuracy;

#[cfg(feature = "std")]
mod std;
#[cfg(feature = "std")]
pub use self::std::StdReference;

// Bare-metal references (x86 port I/O and MMIO, Arm semihosting).
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
