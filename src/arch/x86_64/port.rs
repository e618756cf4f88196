//! x86 port I/O (in progress).
