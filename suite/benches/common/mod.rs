//! What both benchmarks read: this CPU's counter, with the ordered read.

#[cfg(target_arch = "x86_64")]
pub fn counter() -> baretime_x86::Tsc {
    baretime_x86::Tsc::probe().expect("TSC")
}

#[cfg(target_arch = "aarch64")]
pub fn counter() -> baretime_aarch64::GenericTimer {
    baretime_aarch64::GenericTimer::new()
}
