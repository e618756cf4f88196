//! Frequency discovery (in progress).
