//! x86_64: the time-stamp counter and port I/O.

pub mod port;
mod tsc;

pub use tsc::{Tsc, TscUnordered};
