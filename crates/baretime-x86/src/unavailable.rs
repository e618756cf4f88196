//! What `Tsc::probe` returns where there is no counter to use.

/// Why there is no usable CPU counter: what `Tsc::probe` returns instead of a `Tsc`.
///
/// # What a kernel does then
///
/// It keeps time on a slower clock it already has:
///
/// - **the reference timer itself**: a 64-bit HPET main counter, or the 24/32-bit ACPI PM
///   timer, read through [`baretime::FnCounter`] at the reference's own
///   [`baretime::Reference::frequency`], makes a [`baretime::Clock`] (a read costs about
///   a microsecond of port or MMIO access instead of a few nanoseconds, and a narrow timer
///   needs [`baretime::Clock::update`] in time, like any narrow counter);
/// - or **a periodic interrupt tick** (PIT, local APIC timer) that counts jiffies, as kernels
///   did before invariant TSCs: a resolution of one tick period.
///
/// Only a missing counter is refused. A TSC that exists but is not *invariant* (its rate
/// follows P-states, or it stops in deep C-states: CPUID leaf 0x8000_0007 EDX bit 8 clear) is
/// still a counter: `probe` returns it, and discovery reports the flag
/// (`X86Discovery::invariant_tsc`) for the kernel to weigh. Refusing it would also refuse
/// the many virtual machines whose hypervisor hides the flag over a stable TSC; calibration,
/// its verification and `baretime-diag`'s checks measure what the counter actually does.
///
/// ```
/// use baretime_x86::CounterUnavailable;
///
/// fn keep_the_platform_timer(why: CounterUnavailable) {
///     // Log `why`, then time with the HPET / PM timer / periodic tick instead.
///     assert_eq!(why.token(), "no_tsc");
/// }
///
/// #[cfg(target_arch = "x86_64")]
/// fn boot() {
///     match baretime_x86::Tsc::probe() {
///         Ok(_tsc) => { /* discover, calibrate, run a Clock on it */ }
///         Err(why) => keep_the_platform_timer(why),
///     }
/// }
/// # #[cfg(target_arch = "x86_64")]
/// # boot();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CounterUnavailable {
    /// x86_64: CPUID says there is no time-stamp counter (leaf 1 EDX bit 4 clear, or no
    /// leaf 1 at all). No x86_64 CPU ships without one; a hypervisor can hide it.
    NoTsc,
}

impl CounterUnavailable {
    /// A short stable token for reports and logs (`no_tsc`).
    pub const fn token(&self) -> &'static str {
        match self {
            CounterUnavailable::NoTsc => "no_tsc",
        }
    }
}

impl core::fmt::Display for CounterUnavailable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CounterUnavailable::NoTsc => f.write_str("CPUID reports no time-stamp counter"),
        }
    }
}

impl core::error::Error for CounterUnavailable {}
