#![doc = include_str!("../README.md")]
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

#[cfg(feature = "std")]
extern crate std;

pub mod arch;
pub mod calibrate;
pub mod clock;
pub mod counter;
pub mod delay;
pub mod diag;
pub mod discover;
pub mod frequency;
pub mod instant;
pub mod reference;
pub mod scale;
#[cfg(feature = "sim")]
pub mod sim;
mod sync;

pub use clock::{Clock, ClockError};
pub use counter::{Counter, FnCounter};
pub use delay::Delay;
pub use frequency::{Accuracy, Frequency, Source};
pub use instant::{Instant, RawInstant};
pub use scale::Scale;
