//! Arm semihosting calls (in progress).
