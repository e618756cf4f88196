//! x86_64: the time-stamp counter, port I/O, and (ring 0) model-specific registers with the
//! TSC_ADJUST check and repair.

pub mod msr;
pub mod port;
mod tsc;
pub mod tsc_adjust;

pub use tsc::{Tsc, TscUnordered};
pub use tsc_adjust::{TscAdjust, TscAdjustTable};
