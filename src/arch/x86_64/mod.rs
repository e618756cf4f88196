//! x86_64: the time-stamp counter.

pub(crate) mod port;
mod tsc;

pub use tsc::{Tsc, TscUnordered};
