//! Frequency discovery: what the hardware *claims* about its counter.
//!
//! Discovery never measures anything. It collects every figure the CPU (or the hypervisor,
//! or firmware) states about the counter's rate, each as a [`Frequency`] that carries its
//! [`Source`] and [`Accuracy`], plus the feature flags that say whether the counter can be
//! trusted at all (invariant TSC, hypervisor, ECV). Calibration then checks the best claim
//! against a reference timer.
//!
//! - [`x86`]: CPUID, decoded through an injectable [`raw_cpuid::CpuIdReader`], so the same
//!   code runs on the live CPU and on a recorded dump ([`dump`]) on any host.
//! - [`aarch64`]: CNTFRQ_EL0, MIDR_EL1 and ID_AA64MMFR0_EL1, decoded by a pure function of the
//!   register values.
//! - [`paravirt`]: the TSC rate a hypervisor tells a ring-0 guest kernel (KVM pvclock,
//!   Hyper-V's frequency MSR) — decoding, the version protocol and trust placement; the
//!   MSR and memory access is `crate::arch::x86_64::paravirt`.
//! - [`dump`]: parses CPUID dumps in the three common text formats (`cpuid -r`, AIDA64 /
//!   InstLatx64, libcpuid) into a fixed-capacity table that is itself a CPUID reader.
//!
//! Everything here is integer arithmetic, allocates nothing and does not panic on any input:
//! a CPUID reader may return anything, and a dump may be any bytes. The lints below hold the
//! code to that outside tests (no unchecked arithmetic, indexing, `unwrap` or `panic!`).
//!
//! [`Frequency`]: crate::Frequency
//! [`Source`]: crate::Source
//! [`Accuracy`]: crate::Accuracy

pub mod aarch64;
pub mod dump;
pub mod paravirt;
pub mod x86;

/// Tolerance of a CPUID 0x15 figure whose crystal comes from the table of known models:
/// the crystal's own tolerance (about ±100 ppm) with a margin for a table entry that is right
/// for the model but off for a board.
pub const KNOWN_CRYSTAL_TOLERANCE_PPB: u64 = 500_000;

/// Tolerance of the CPUID 0x16 base frequency and of a 0x15 figure whose crystal was derived
/// from it. The base frequency is a whole number of MHz that the TSC usually matches to a few
/// tenths of a percent (i7-8750H: base 2200 MHz, TSC 2208 MHz); some parts miss it by far
/// more (i3-10110U: base 2100 MHz, TSC 2592 MHz), which verification then catches.
pub const BASE_FREQUENCY_TOLERANCE_PPB: u64 = 10_000_000;

/// Tolerance of the brand string's `@ x.xxGHz`: a marketing figure, 20 % and more off the
/// TSC rate on some parts (i3-10110U: "2.10GHz", TSC 2.592 GHz).
pub const BRAND_STRING_TOLERANCE_PPB: u64 = 250_000_000;

/// Tolerance of CNTFRQ_EL0: when firmware programs it right it is the crystal's rate (about
/// ±100 ppm); when it programs it wrong, no tolerance helps and calibration must catch it.
pub const CNTFRQ_TOLERANCE_PPB: u64 = 1_000_000;

/// Most frequency candidates one discovery can list.
pub const MAX_CANDIDATES: usize = 8;

/// A fixed-capacity list of frequency candidates, most trusted first.
pub type Candidates = heapless::Vec<crate::Frequency, MAX_CANDIDATES>;
