//! Calibration: measure a [`crate::Counter`] against a [`Reference`] (in progress).

mod reference;
pub use reference::Reference;
