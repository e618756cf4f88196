//! What both benchmarks read: this CPU's counter, with the ordered read.

#[cfg(target_arch = "x86_64")]
pub fn counter() -> baretime::arch::x86_64::Tsc {
    baretime::arch::x86_64::Tsc::probe().expect("TSC")
}

#[cfg(target_arch = "aarch64")]
pub fn counter() -> baretime::arch::aarch64::GenericTimer {
    baretime::arch::aarch64::GenericTimer::new()
}
