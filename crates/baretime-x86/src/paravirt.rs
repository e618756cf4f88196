//! Paravirtual TSC rates that only a ring-0 kernel can read: KVM's pvclock and Hyper-V's
//! TSC-frequency MSR — the pure half.
//!
//! A guest kernel learns its TSC rate from the hypervisor through interfaces that a user
//! process cannot reach: KVM's `pvclock_vcpu_time_info` area (registered through an MSR) and
//! Hyper-V's `HV_X64_MSR_TSC_FREQUENCY`. Linux uses both at boot (`kvm_get_tsc_khz`,
//! `hv_get_tsc_khz`) and prints "tsc: Detected 2300.000 MHz" on guests whose CPUID has no
//! TSC leaf at all. This module holds everything about them that is arithmetic, so it is
//! tested on any host:
//!
//! - [`KvmFeatures::clock_msr`]: which MSR registers the area, from KVM's feature leaf;
//! - [`read_consistent`]: the area's version protocol over two reading closures;
//! - [`PvclockTimeInfo::tsc_frequency`]: `tsc_to_system_mul` and `tsc_shift` → a rate, as
//!   Linux's `pvclock_tsc_khz` does, but to the millihertz;
//! - [`decode_hyperv_tsc_frequency`]: the value of Hyper-V's MSR → a rate (whether the MSR can be
//!   read is Hyper-V's feature leaf, decoded by discovery:
//!   `X86Discovery::hyperv_tsc_frequency_msr`).
//!
//! The hardware half — `WRMSR`/`RDMSR` and the volatile reads of the shared area — is
//! `crate::paravirt_msr` (x86_64 only), `unsafe` to set up and safe to use, like
//! the hardware references. `X86Discovery::add_claim` puts what it found into the candidate
//! list at its trust position, ahead of every CPUID claim.
//!
//! # How far the pvclock figure goes
//!
//! The hypervisor encodes its figure of the guest TSC rate (KVM: the vCPU's `tsc_khz`, whole
//! kHz) as the fixed-point scale it uses to turn TSC ticks into nanoseconds:
//! `ns = ((ticks << shift) × mul) >> 32` (a right shift for negative `shift`). Inverting it,
//! `rate = 10^9 × 2^(32 − shift) / mul` Hz. Linux divides `10^6 << 32` by `mul` and shifts
//! the quotient, to whole kHz; here the whole rational is evaluated in `u128` and floored to
//! the millihertz. What limits the figure is the encoding, not the arithmetic: `mul` is a
//! 32-bit fraction, so neighbouring values of `mul` are `1/mul` apart (≤ 0.47 ppb for the
//! `mul ≥ 2^31` KVM's `kvm_get_time_scale` produces), and the hypervisor drops low bits of the
//! rate while it scales it into 32 bits (≤ 1 ppb above 1 GHz). The claim therefore carries
//! [`Accuracy::Nominal`] with `tolerance_ppb = ⌈10^9 / mul⌉ + 1`: the hypervisor's own figure,
//! to the resolution it was written in. That figure is itself a rounded number (whole kHz:
//! ≤ 0.5 ppm above 1 GHz); verification's 1 ppm margin absorbs that, as for the 0x40000010
//! leaf, and calibration confirms or rejects the claim like any other.
//!
//! [`Accuracy::Nominal`]: baretime::Accuracy::Nominal

use core::fmt;

use crate::candidates::Candidates;
use crate::saturate_u64;
use baretime::{Accuracy, Frequency, Source};

/// KVM's feature leaf EAX bit 0: the old clock MSRs (MSR_KVM_SYSTEM_TIME at 0x12).
pub(crate) const KVM_FEATURE_CLOCKSOURCE: u32 = 1 << 0;
/// KVM's feature leaf EAX bit 3: the new clock MSRs (MSR_KVM_SYSTEM_TIME_NEW at 0x4b564d01).
pub(crate) const KVM_FEATURE_CLOCKSOURCE2: u32 = 1 << 3;
/// KVM's feature leaf EAX bit 24: the pvclock stable bit may be trusted.
pub(crate) const KVM_FEATURE_CLOCKSOURCE_STABLE_BIT: u32 = 1 << 24;
/// The old system-time MSR (KVM_FEATURE_CLOCKSOURCE).
pub(crate) const MSR_KVM_SYSTEM_TIME: u32 = 0x12;
/// The new system-time MSR (KVM_FEATURE_CLOCKSOURCE2).
pub(crate) const MSR_KVM_SYSTEM_TIME_NEW: u32 = 0x4b56_4d01;
/// `flags` bit 0 of the time-info area: the TSC is stable (synchronised across vCPUs).
pub(crate) const PVCLOCK_TSC_STABLE_BIT: u8 = 1 << 0;

// Used by the MSR reads, which exist on x86_64 only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
/// `HV_X64_MSR_TSC_FREQUENCY`: the guest TSC rate in Hz.
pub(crate) const HV_X64_MSR_TSC_FREQUENCY: u32 = 0x4000_0022;

/// The largest `|tsc_shift|` accepted. KVM's `kvm_get_time_scale` produces shifts of about
/// −7 (a 100 GHz counter) to +20 (a 1 kHz one); anything past ±32 is no scale a hypervisor
/// would write, and a left shift that far could not be evaluated.
pub(crate) const MAX_TSC_SHIFT: i8 = 32;

// Used by the MSR reads, which exist on x86_64 only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
/// How many times [`read_consistent`] reads the area before it gives up by default.
pub(crate) const DEFAULT_READ_TRIES: u32 = 16;

/// Why a paravirtual rate could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ParavirtError {
    /// The hypervisor does not offer this interface (its feature bits are clear, or there is
    /// no such hypervisor).
    NotOffered,
    /// The pvclock area's physical address is not 32-byte aligned (the area would then
    /// straddle a page on some placements, and bit 0 is the enable bit).
    MisalignedArea {
        /// The physical address given.
        phys_addr: u64,
    },
    /// Every read of the area saw an update in progress (odd version) or a version that
    /// changed during the read.
    Inconsistent {
        /// How many reads were tried.
        tries: u32,
    },
    /// The version stayed 0: the hypervisor never wrote the area (registration not honoured).
    NeverWritten,
    /// `tsc_to_system_mul` is 0: no rate (the division would be by zero).
    ZeroMultiplier,
    /// `tsc_shift` is outside ±32: no scale a hypervisor would write.
    ShiftOutOfRange {
        /// The shift read.
        tsc_shift: i8,
    },
    /// The rate the hypervisor states is outside [`Frequency::MIN_HZ`]..=[`Frequency::MAX_HZ`]
    /// (0 included).
    RateOutOfRange {
        /// The rate, in millihertz (saturated at `u64::MAX`).
        millihz: u64,
    },
}

impl fmt::Display for ParavirtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ParavirtError::NotOffered => f.write_str("the hypervisor does not offer it"),
            ParavirtError::MisalignedArea { phys_addr } => {
                write!(f, "pvclock area at {phys_addr:#x} is not 32-byte aligned")
            }
            ParavirtError::Inconsistent { tries } => write!(
                f,
                "pvclock area was being updated during each of {tries} reads"
            ),
            ParavirtError::NeverWritten => f.write_str("the hypervisor never wrote the area"),
            ParavirtError::ZeroMultiplier => f.write_str("tsc_to_system_mul is 0"),
            ParavirtError::ShiftOutOfRange { tsc_shift } => {
                write!(f, "tsc_shift {tsc_shift} is outside ±{MAX_TSC_SHIFT}")
            }
            ParavirtError::RateOutOfRange { millihz } => {
                write!(f, "stated rate {millihz} mHz is outside 1 kHz..=100 GHz")
            }
        }
    }
}

impl core::error::Error for ParavirtError {}

/// The fields of KVM's `pvclock_vcpu_time_info` (32 bytes), as one consistent read under its
/// version protocol saw them ([`KvmPvclock::read`](crate::KvmPvclock::read)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PvclockTimeInfo {
    /// The version the read was consistent under (even).
    pub version: u32,
    /// TSC value at the last update.
    pub tsc_timestamp: u64,
    /// Guest system time in ns at `tsc_timestamp`.
    pub system_time: u64,
    /// Multiplier, a 32-bit binary fraction: ns = ((ticks << shift) × mul) >> 32.
    pub tsc_to_system_mul: u32,
    /// Shift applied to the ticks first (a right shift when negative).
    pub tsc_shift: i8,
    /// Flags: bit 0 is `PVCLOCK_TSC_STABLE_BIT` ([`PvclockTimeInfo::tsc_stable`]).
    pub flags: u8,
}

impl PvclockTimeInfo {
    /// Whether the hypervisor says the TSC is stable across vCPUs (flags bit 0). Meaningful
    /// only where KVM's feature leaf offers the bit ([`KvmFeatures::stable_bit`]).
    pub const fn tsc_stable(&self) -> bool {
        self.flags & PVCLOCK_TSC_STABLE_BIT != 0
    }

    /// The TSC rate the scale encodes, floored to the millihertz (see the module docs), as a
    /// [`Source::KvmPvclock`] claim of [`Accuracy::Nominal`] with the encoding's resolution.
    ///
    /// ```
    /// use baretime_x86::{PvclockTimeInfo, ParavirtError};
    /// // What KVM writes for a 2 994 372 kHz TSC (the ratio is about 1/3 ns per tick).
    /// let info = PvclockTimeInfo { tsc_to_system_mul: 0xAAFC_C8CF, tsc_shift: -1, ..Default::default() };
    /// let f = info.tsc_frequency()?;
    /// assert_eq!(f.as_hz(), 2_994_372_000);
    /// let zero = PvclockTimeInfo::default();
    /// assert_eq!(zero.tsc_frequency(), Err(ParavirtError::ZeroMultiplier));
    /// # Ok::<(), ParavirtError>(())
    /// ```
    pub fn tsc_frequency(&self) -> Result<Frequency, ParavirtError> {
        let millihz = pvclock_rate_millihz(self.tsc_to_system_mul, self.tsc_shift)?;
        let mul = u64::from(self.tsc_to_system_mul); // ≠ 0: checked above
        let tolerance_ppb = 1_000_000_000u64.div_ceil(mul).saturating_add(1);
        Frequency::from_millihz(
            millihz,
            Source::KvmPvclock,
            Accuracy::Nominal { tolerance_ppb },
        )
        .ok_or(ParavirtError::RateOutOfRange { millihz })
    }
}

/// `10^9 × 2^(32 − shift) / mul` Hz in millihertz, floored: the rate whose tick-to-ns scale is
/// `(mul, shift)`. Typed errors for a zero `mul` and a shift beyond ±[`MAX_TSC_SHIFT`].
pub(crate) fn pvclock_rate_millihz(mul: u32, shift: i8) -> Result<u64, ParavirtError> {
    if mul == 0 {
        return Err(ParavirtError::ZeroMultiplier);
    }
    if shift.unsigned_abs() > MAX_TSC_SHIFT.unsigned_abs() {
        return Err(ParavirtError::ShiftOutOfRange { tsc_shift: shift });
    }
    // 10^12 mHz per kHz·10^3 … : 10^12 < 2^40, so 10^12 << 32 < 2^72, and with a left shift
    // of at most 32 more, < 2^104: inside u128. The denominator mul << shift (shift ≥ 0) is
    // < 2^32 × 2^32 = 2^64. checked_* below can therefore not fail; they keep the lint honest.
    let numerator = 1_000_000_000_000u128 << 32;
    let magnitude = u32::from(shift.unsigned_abs());
    let (numerator, denominator) = if shift < 0 {
        (numerator.checked_shl(magnitude), Some(u128::from(mul)))
    } else {
        (Some(numerator), u128::from(mul).checked_shl(magnitude))
    };
    let millihz = match (numerator, denominator) {
        (Some(n), Some(d)) => n.checked_div(d),
        _ => None,
    };
    match millihz {
        Some(m) => Ok(saturate_u64(m)),
        None => Err(ParavirtError::ZeroMultiplier), // unreachable: mul ≠ 0, shifts bounded
    }
}

// Used by the MSR reads, which exist on x86_64 only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
/// Reads a pvclock area under its version protocol, as Linux's `pvclock_read_begin/retry`
/// does: read `version`; if it is odd the hypervisor is updating the area, so read again;
/// read the fields; read `version` again; if it is unchanged, the fields are one consistent
/// snapshot. Gives up after `tries` reads with [`ParavirtError::Inconsistent`], so a stuck
/// odd version cannot hang the caller; a version that stays 0 ends the wait early as
/// [`ParavirtError::NeverWritten`] (KVM writes the area, with an even version ≥ 2, before
/// the guest resumes after the registering WRMSR).
///
/// `read_version` and `read_fields` are the two halves of one read of the area: the hardware
/// half passes volatile reads with a compiler barrier between them (x86 does not reorder
/// loads with loads); tests pass scripted sequences. `read_fields` returns the area with any
/// `version` — the one the protocol settled on is stored in the result.
pub(crate) fn read_consistent(
    mut read_version: impl FnMut() -> u32,
    mut read_fields: impl FnMut() -> PvclockTimeInfo,
    tries: u32,
) -> Result<PvclockTimeInfo, ParavirtError> {
    let mut zero_seen = 0u32;
    for attempt in 0..tries {
        if attempt != 0 {
            // Give a hypervisor (or another vCPU) in mid-update a moment, as a spin lock does.
            core::hint::spin_loop();
        }
        let before = read_version();
        if before == 0 {
            zero_seen = zero_seen.saturating_add(1);
            continue;
        }
        if before & 1 != 0 {
            continue; // update in progress
        }
        let fields = read_fields();
        let after = read_version();
        if after == before {
            return Ok(PvclockTimeInfo {
                version: before,
                ..fields
            });
        }
    }
    if tries != 0 && zero_seen == tries {
        return Err(ParavirtError::NeverWritten);
    }
    Err(ParavirtError::Inconsistent { tries })
}

/// KVM's feature leaf (KVM_CPUID_FEATURES, its range base + 1: 0x40000001 when KVM sits at
/// 0x40000000), as discovery read it ([`X86Discovery::kvm_features`]): which pvclock MSR a
/// ring-0 guest registers its area through, and whether pvclock's stable bit may be trusted.
///
/// [`X86Discovery::kvm_features`]: crate::X86Discovery::kvm_features
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KvmFeatures {
    base: u32,
    eax: u32,
}

impl KvmFeatures {
    pub(crate) const fn decode(base: u32, eax: u32) -> KvmFeatures {
        KvmFeatures { base, eax }
    }

    /// The base leaf of the KVM range this leaf belongs to (0x40000000, or 0x40000100 behind
    /// Hyper-V's interface).
    pub const fn base(&self) -> u32 {
        self.base
    }

    /// The leaf's EAX as read: KVM's feature bits (Linux's `KVM_FEATURE_*`).
    pub const fn bits(&self) -> u32 {
        self.eax
    }

    /// The MSR that registers a pvclock area: the new MSR_KVM_SYSTEM_TIME_NEW (0x4b564d01)
    /// when KVM offers `KVM_FEATURE_CLOCKSOURCE2` (bit 3), else the old MSR_KVM_SYSTEM_TIME
    /// (0x12) with `KVM_FEATURE_CLOCKSOURCE` (bit 0), else [`ParavirtError::NotOffered`].
    /// Linux prefers the new MSR the same way (`kvmclock_init`);
    /// [`KvmPvclock::register`](crate::KvmPvclock::register) uses this one.
    pub const fn clock_msr(&self) -> Result<u32, ParavirtError> {
        if self.eax & KVM_FEATURE_CLOCKSOURCE2 != 0 {
            Ok(MSR_KVM_SYSTEM_TIME_NEW)
        } else if self.eax & KVM_FEATURE_CLOCKSOURCE != 0 {
            Ok(MSR_KVM_SYSTEM_TIME)
        } else {
            Err(ParavirtError::NotOffered)
        }
    }

    /// `KVM_FEATURE_CLOCKSOURCE_STABLE_BIT` (bit 24): pvclock's stable flag
    /// ([`PvclockTimeInfo::tsc_stable`]) may be trusted.
    pub const fn stable_bit(&self) -> bool {
        self.eax & KVM_FEATURE_CLOCKSOURCE_STABLE_BIT != 0
    }
}

// Used by the MSR reads, which exist on x86_64 only.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
/// The value of `HV_X64_MSR_TSC_FREQUENCY` (Hz) as a [`Source::HyperVTscFrequencyMsr`] claim,
/// [`baretime::Accuracy::Exact`]: the hypervisor states the rate to the hertz, as the 0x40000010
/// leaf states it to the kHz. 0 and rates outside the accepted range are typed errors.
pub(crate) fn decode_hyperv_tsc_frequency(msr_value: u64) -> Result<Frequency, ParavirtError> {
    Frequency::from_hz(msr_value, Source::HyperVTscFrequencyMsr, Accuracy::Exact).ok_or(
        ParavirtError::RateOutOfRange {
            millihz: msr_value.saturating_mul(1000),
        },
    )
}

/// Where a ring-0 claim stands among the others: lower is more trusted. The paravirtual
/// sources are the hypervisor's own figure of the guest's TSC, through the interface it keeps
/// its own guests' clocks with, so they go ahead of every CPUID claim (a 0x15/0x16 leaf a
/// hypervisor passes through may describe the host, not the guest): the Hyper-V MSR (to the
/// Hz) first, then pvclock.
const fn ring0_rank(source: Source) -> Option<u8> {
    match source {
        Source::HyperVTscFrequencyMsr => Some(0),
        Source::KvmPvclock => Some(1),
        _ => None,
    }
}

/// Puts a ring-0 claim into `list` at its trust position: after the ring-0 claims that rank
/// at or above it, before everything else (every CPUID claim). A claim from another source
/// goes at the end. When the list is full, its last (least trusted) candidate makes room;
/// that is the one returned, if any.
///
/// Internal: it takes the crate's fixed-capacity list, so users go through
/// `X86Discovery::add_claim`; the unit tests below cover the positions.
pub(crate) fn insert_claim(list: &mut Candidates, claim: Frequency) -> Option<Frequency> {
    let rank = ring0_rank(claim.source());
    let at = match rank {
        Some(r) => list
            .iter()
            .position(|f| ring0_rank(f.source()).map_or(true, |other| other > r))
            .unwrap_or(list.len()),
        None => list.len(),
    };
    let dropped = if list.is_full() { list.pop() } else { None };
    let at = at.min(list.len());
    // `at ≤ len < capacity` now: the insert cannot fail; were it to, the claim is dropped.
    let _ = list.insert(at, claim);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidates::MAX_CANDIDATES;

    /// KVM's `kvm_get_time_scale(NSEC_PER_SEC, hz)` rewritten from its description in the
    /// module docs (shift the rate into (scaled/2, scaled·2] and 32 bits, then the 32-bit
    /// fraction scaled / rate), to produce the (mul, shift) KVM writes for a given rate.
    fn kvm_scale(hz: u64) -> (u32, i8) {
        let scaled: u64 = 1_000_000_000;
        let mut tps64 = hz;
        let mut shift: i32 = 0;
        while tps64 > scaled * 2 || tps64 & 0xffff_ffff_0000_0000 != 0 {
            tps64 >>= 1;
            shift -= 1;
        }
        let mut tps32 = tps64 as u32;
        let mut scaled64 = scaled;
        while u64::from(tps32) <= scaled64 || scaled64 & 0xffff_ffff_0000_0000 != 0 {
            if scaled64 & 0xffff_ffff_0000_0000 != 0 || tps32 & 0x8000_0000 != 0 {
                scaled64 >>= 1;
            } else {
                tps32 <<= 1;
            }
            shift += 1;
        }
        let mul = ((u128::from(scaled64) << 32) / u128::from(tps32)) as u32;
        (mul, shift as i8)
    }

    fn info(mul: u32, shift: i8) -> PvclockTimeInfo {
        PvclockTimeInfo {
            tsc_to_system_mul: mul,
            tsc_shift: shift,
            ..Default::default()
        }
    }

    #[test]
    fn kvm_scales_invert_to_their_rate_within_the_stated_resolution() {
        // Rates KVM guests report (kHz figures: this machine's 2.3 GHz Xeon, an EPYC's
        // 2994.372 MHz, a 3.7 GHz desktop), the crate's extremes, and odd ones.
        for hz in [
            2_300_000_000u64,
            2_994_372_000,
            3_700_000_000,
            1_000,
            999_999,
            1_193_182,
            24_000_000,
            // 100 GHz itself floors from a mul just below the ratio, to a rate just above
            // Frequency::MAX_HZ: a typed error, tested below.
            99_000_000_000,
            1_999_999_999,
            2_000_000_001,
            4_294_967_295,
            4_294_967_296,
        ] {
            let (mul, shift) = kvm_scale(hz);
            let f = info(mul, shift).tsc_frequency().unwrap();
            let Accuracy::Nominal { tolerance_ppb } = f.accuracy() else {
                panic!("pvclock claims are nominal");
            };
            let exact = Frequency::from_hz(hz, Source::User, Accuracy::Exact).unwrap();
            let dev = f.deviation_ppb_from(&exact).unsigned_abs();
            assert!(
                dev <= tolerance_ppb,
                "{hz} Hz: mul {mul:#x} shift {shift} → {f}, {dev} ppb off, tolerance {tolerance_ppb}"
            );
            assert!(tolerance_ppb <= 2, "{hz} Hz: tolerance {tolerance_ppb} ppb");
            assert_eq!(f.source(), Source::KvmPvclock);
        }
    }

    proptest::proptest! {
        /// Every rate KVM could encode comes back within the tolerance the claim states:
        /// the stated resolution is honest, not just for the hand-picked rates above.
        #[test]
        fn any_kvm_scale_inverts_within_its_stated_tolerance(hz in 1_000u64..=99_000_000_000) {
            let (mul, shift) = kvm_scale(hz);
            let f = info(mul, shift).tsc_frequency().unwrap();
            let exact = Frequency::from_hz(hz, Source::User, Accuracy::Exact).unwrap();
            let dev = f.deviation_ppb_from(&exact).unsigned_abs();
            proptest::prop_assert!(dev <= f.accuracy().bound_ppb(), "{} Hz: {} ppb", hz, dev);
        }

        /// No (mul, shift) panics; a zero mul and shifts beyond ±32 are typed errors.
        #[test]
        fn any_scale_decodes_or_errs(mul: u32, shift: i8) {
            let r = info(mul, shift).tsc_frequency();
            if mul == 0 {
                proptest::prop_assert_eq!(r, Err(ParavirtError::ZeroMultiplier));
            } else if shift.unsigned_abs() > 32 {
                proptest::prop_assert_eq!(r, Err(ParavirtError::ShiftOutOfRange { tsc_shift: shift }));
            }
        }
    }

    #[test]
    fn documented_values_decode_like_linux_but_finer() {
        // 2.3 GHz: KVM shifts it once right (1.15 GHz ≤ 2 GHz) and writes
        // mul = floor(2^32 × 10^9 / 1.15·10^9) = 0xDE9BD37A, shift −1.
        assert_eq!(kvm_scale(2_300_000_000), (0xDE9B_D37A, -1));
        let m = pvclock_rate_millihz(0xDE9B_D37A, -1).unwrap();
        // Linux's pvclock_tsc_khz: (10^6 << 32) / mul, then << 1: whole kHz.
        let linux_khz = ((1_000_000u64 << 32) / 0xDE9B_D37A) << 1;
        assert_eq!(linux_khz, 2_300_000);
        assert_eq!(m / 1_000_000, linux_khz);
        // Finer: the mHz figure sits within 1 ppb of 2.3 GHz, above it (mul was floored).
        assert_eq!(m, 2_300_000_000_267);
    }

    #[test]
    fn zero_multiplier_is_a_typed_error_not_a_division_by_zero() {
        assert_eq!(
            pvclock_rate_millihz(0, 0),
            Err(ParavirtError::ZeroMultiplier)
        );
        for shift in [i8::MIN, -32, -1, 0, 1, 32, i8::MAX] {
            assert!(info(0, shift).tsc_frequency().is_err());
        }
    }

    #[test]
    fn extreme_shifts_are_typed_errors_or_out_of_range_never_a_panic() {
        for shift in [i8::MIN, -33, 33, i8::MAX] {
            assert_eq!(
                pvclock_rate_millihz(1, shift),
                Err(ParavirtError::ShiftOutOfRange { tsc_shift: shift })
            );
        }
        // ±32 are evaluated; the rates they give are far outside any counter.
        for mul in [1u32, 2, 0x8000_0000, u32::MAX] {
            for shift in -32i8..=32 {
                let r = pvclock_rate_millihz(mul, shift).unwrap();
                match info(mul, shift).tsc_frequency() {
                    Ok(f) => assert_eq!(f.as_millihz(), r),
                    Err(e) => assert_eq!(e, ParavirtError::RateOutOfRange { millihz: r }),
                }
            }
        }
        // The largest value: mul 1, shift −32: 10^12 × 2^64 mHz saturates.
        assert_eq!(pvclock_rate_millihz(1, -32), Ok(u64::MAX));
        // The smallest: mul u32::MAX, shift 32: 10^12 / (2^32 − 1) ≈ 232 mHz.
        assert_eq!(pvclock_rate_millihz(u32::MAX, 32), Ok(232));
    }

    #[test]
    fn stable_bit_is_flags_bit_0() {
        let mut i = info(1, 0);
        assert!(!i.tsc_stable());
        i.flags = 0x01;
        assert!(i.tsc_stable());
        i.flags = 0xFE;
        assert!(!i.tsc_stable());
    }

    /// A scripted area: each read of the version pops the next value.
    fn scripted(versions: &[u32]) -> impl FnMut() -> u32 + '_ {
        let mut i = 0;
        move || {
            let v = versions
                .get(i)
                .copied()
                .unwrap_or(*versions.last().unwrap());
            i += 1;
            v
        }
    }

    #[test]
    fn version_protocol_accepts_an_even_unchanged_version() {
        let fields = info(0xDE9B_D37A, -1);
        let got = read_consistent(scripted(&[2, 2]), || fields, 4).unwrap();
        assert_eq!(got.version, 2);
        assert_eq!(got.tsc_to_system_mul, 0xDE9B_D37A);
    }

    #[test]
    fn version_protocol_waits_out_an_update_in_progress() {
        // Odd = being written: the fields are not read until the version is even.
        let mut reads = 0;
        let got = read_consistent(
            scripted(&[3, 3, 4, 4]),
            || {
                reads += 1;
                info(7, 0)
            },
            4,
        )
        .unwrap();
        assert_eq!(got.version, 4);
        assert_eq!(reads, 1, "fields were read while the version was odd");
    }

    #[test]
    fn version_protocol_rejects_a_read_the_hypervisor_changed_under_it() {
        // 2 → (fields) → 4: torn; the next read 4 → 4 is taken, with the new fields.
        let mut n = 0;
        let got = read_consistent(
            scripted(&[2, 4, 4, 4]),
            || {
                n += 1;
                info(n, 0)
            },
            4,
        )
        .unwrap();
        assert_eq!((got.version, got.tsc_to_system_mul), (4, 2));
        // Without the second version read (accepting the first even version) the torn
        // snapshot (mul 1) would have been taken: the check is what rejects it.
    }

    #[test]
    fn version_protocol_gives_up_with_a_typed_error() {
        // Always odd (a hypervisor stuck mid-update), always changing, never written.
        assert_eq!(
            read_consistent(scripted(&[1]), || info(1, 0), 5),
            Err(ParavirtError::Inconsistent { tries: 5 })
        );
        let mut v = 0u32;
        let changing = || {
            v += 2;
            v
        };
        assert_eq!(
            read_consistent(changing, || info(1, 0), 3),
            Err(ParavirtError::Inconsistent { tries: 3 })
        );
        assert_eq!(
            read_consistent(scripted(&[0]), || info(1, 0), 3),
            Err(ParavirtError::NeverWritten)
        );
        assert_eq!(
            read_consistent(scripted(&[2]), || info(1, 0), 0),
            Err(ParavirtError::Inconsistent { tries: 0 })
        );
    }

    #[test]
    fn kvm_feature_bits_choose_the_msr() {
        // QEMU's default KVM features for -cpu host: 0x01007AFB (clocksource, clocksource2,
        // stable bit, …).
        assert_eq!(
            KvmFeatures::decode(0x4000_0000, 0x0100_7AFB).clock_msr(),
            Ok(MSR_KVM_SYSTEM_TIME_NEW)
        );
        assert_eq!(
            KvmFeatures::decode(0x4000_0000, KVM_FEATURE_CLOCKSOURCE).clock_msr(),
            Ok(MSR_KVM_SYSTEM_TIME)
        );
        assert_eq!(
            KvmFeatures::decode(0x4000_0000, 0x0100_7AF2).clock_msr(),
            Err(ParavirtError::NotOffered)
        );
        assert_eq!(
            KvmFeatures::decode(0x4000_0000, 0).clock_msr(),
            Err(ParavirtError::NotOffered)
        );
    }

    #[test]
    fn hyperv_msr_value_is_hz() {
        let f = decode_hyperv_tsc_frequency(2_994_372_000).unwrap();
        assert_eq!(f.as_hz(), 2_994_372_000);
        assert_eq!(f.source(), Source::HyperVTscFrequencyMsr);
        assert!(f.accuracy().is_exact());
        assert_eq!(
            decode_hyperv_tsc_frequency(0),
            Err(ParavirtError::RateOutOfRange { millihz: 0 })
        );
        assert!(decode_hyperv_tsc_frequency(u64::MAX).is_err());
    }

    fn f(hz: u64, source: Source) -> Frequency {
        Frequency::from_hz(hz, source, Accuracy::Exact).unwrap()
    }

    #[test]
    fn ring0_claims_go_first_in_their_own_order() {
        let mut list = Candidates::new();
        list.push(f(2_000_000_000, Source::HypervisorLeaf)).unwrap();
        list.push(f(2_100_000_000, Source::CpuidBaseFrequency))
            .unwrap();
        assert_eq!(
            insert_claim(&mut list, f(1_000_000, Source::KvmPvclock)),
            None
        );
        assert_eq!(
            insert_claim(&mut list, f(2_000_000, Source::HyperVTscFrequencyMsr)),
            None
        );
        assert_eq!(
            insert_claim(&mut list, f(3_000_000, Source::KvmPvclock)),
            None
        );
        let order: Vec<_> = list.iter().map(|c| (c.source(), c.as_hz())).collect();
        assert_eq!(
            order,
            [
                (Source::HyperVTscFrequencyMsr, 2_000_000),
                (Source::KvmPvclock, 1_000_000),
                (Source::KvmPvclock, 3_000_000),
                (Source::HypervisorLeaf, 2_000_000_000),
                (Source::CpuidBaseFrequency, 2_100_000_000),
            ]
        );
        // Another source goes last.
        insert_claim(&mut list, f(5_000, Source::User));
        assert_eq!(list.last().unwrap().source(), Source::User);
    }

    #[test]
    fn a_full_list_drops_its_least_trusted_claim() {
        let mut list = Candidates::new();
        for i in 0..MAX_CANDIDATES as u64 {
            list.push(f(1_000_000 + i, Source::BrandString)).unwrap();
        }
        let dropped = insert_claim(&mut list, f(7_000_000, Source::KvmPvclock));
        assert_eq!(dropped.map(|d| d.as_hz()), Some(1_000_007));
        assert_eq!(list.len(), MAX_CANDIDATES);
        assert_eq!(list[0].source(), Source::KvmPvclock);
    }
}
