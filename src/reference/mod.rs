//! Reference timers (in progress).
