//! x86_64: the time-stamp counter, port I/O, and the paravirtual TSC rates (ring 0).

pub mod paravirt;
pub mod port;
mod tsc;

pub use tsc::{Tsc, TscUnordered};
