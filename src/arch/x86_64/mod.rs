//! x86_64: the time-stamp counter and (ring 0) model-specific registers: the paravirtual TSC
//! rates, and the TSC_ADJUST check and repair.

pub mod msr;
pub mod paravirt;
pub(crate) mod port;
mod tsc;
pub mod tsc_adjust;

pub use tsc::{Tsc, TscUnordered};
pub use tsc_adjust::{TscAdjust, TscAdjustTable};
