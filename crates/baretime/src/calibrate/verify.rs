//! The verification policy (documented on [`verify`]).

use core::fmt;

use super::{calibrate, Calibration, CalibrationError, Config, Reference};
use crate::frequency::{Accuracy, Frequency, Milli, SignedMilli};
use crate::Counter;

/// What verification concluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Verdict {
    /// No claim to check: the measurement is used.
    Unclaimed,
    /// The claim agrees with the measurement and is kept, being the more precise.
    /// ([`Verdict::is_confirmed`] asks whether the claim agreed, whichever was kept.)
    Confirmed {
        /// Claim minus measurement, in ppb of the measurement.
        deviation_ppb: i64,
        /// The largest deviation that counts as agreement, in ppb.
        allowed_ppb: u64,
    },
    /// The claim agrees, but the measurement is more precise and is used.
    Consistent {
        /// The claim.
        claim: Frequency,
        /// Claim minus measurement, in ppb of the measurement.
        deviation_ppb: i64,
        /// The largest deviation that counts as agreement, in ppb.
        allowed_ppb: u64,
    },
    /// The claim disagrees with the measurement, which is used instead.
    Disagrees {
        /// The rejected claim (value, source, stated accuracy).
        claim: Frequency,
        /// Claim minus measurement, in ppb of the measurement.
        deviation_ppb: i64,
        /// The largest deviation that would have counted as agreement, in ppb.
        allowed_ppb: u64,
    },
}

impl Verdict {
    /// Claim minus measurement in ppb, if there was a claim.
    pub const fn deviation_ppb(&self) -> Option<i64> {
        match *self {
            Verdict::Unclaimed => None,
            Verdict::Confirmed { deviation_ppb, .. }
            | Verdict::Consistent { deviation_ppb, .. }
            | Verdict::Disagrees { deviation_ppb, .. } => Some(deviation_ppb),
        }
    }

    /// True when there was a claim and the measurement confirms it: it agrees within the
    /// allowed deviation, whether it was kept ([`Verdict::Confirmed`]: the claim is the more
    /// precise) or the measurement was ([`Verdict::Consistent`]). [`Verified::chosen`] says
    /// which rate is used.
    ///
    pub const fn is_confirmed(&self) -> bool {
        matches!(self, Verdict::Confirmed { .. } | Verdict::Consistent { .. })
    }

    /// True when a claim was rejected: it disagrees with the measurement, which is used.
    pub const fn is_disagreement(&self) -> bool {
        matches!(self, Verdict::Disagrees { .. })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Verdict::Unclaimed => f.write_str("no claim; measured"),
            Verdict::Confirmed {
                deviation_ppb,
                allowed_ppb,
            } => write!(
                f,
                "claim confirmed ({} ppm, allowed ±{} ppm)",
                SignedMilli(deviation_ppb),
                Milli(allowed_ppb)
            ),
            Verdict::Consistent {
                claim,
                deviation_ppb,
                ..
            } => write!(
                f,
                "claim {claim} consistent ({} ppm); measured value is more precise",
                SignedMilli(deviation_ppb)
            ),
            Verdict::Disagrees {
                claim,
                deviation_ppb,
                allowed_ppb,
            } => write!(
                f,
                "claim {claim} DISAGREES by {} ppm (allowed ±{} ppm); measured value used",
                SignedMilli(deviation_ppb),
                Milli(allowed_ppb)
            ),
        }
    }
}

/// The frequency to use, why, and the calibration behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Verified {
    /// The frequency to run the clock on: the claim (with its own provenance) or the
    /// measurement ([`crate::Source::Calibrated`]).
    pub chosen: Frequency,
    /// What happened to the claim.
    pub verdict: Verdict,
    /// The calibration the verdict rests on.
    pub calibration: Calibration,
}

/// Applies the verification policy to a `claim` (from discovery, or `None`) and a
/// calibration: what a kernel does at boot with a claimed frequency and a measurement.
///
/// # Policy
///
/// - No claim: the measurement is used ([`Verdict::Unclaimed`]).
/// - A claim that agrees with the measurement within the *allowed* deviation is kept if it
///   is more precise than the measurement, that is if its [`Accuracy::bound_ppb`] (0 for
///   [`Accuracy::Exact`], the tolerance for `Nominal`, the uncertainty for `Measured`) is
///   below the calibration's uncertainty — always, for an exact claim (CPUID 0x15 with its
///   crystal, a hypervisor's timing leaf): [`Verdict::Confirmed`]. A claim that agrees but
///   is as loose as the measurement or looser (base frequency, brand string, unchecked
///   CNTFRQ, an older calibration) gives way to it, ties included: [`Verdict::Consistent`].
/// - Any claim is a valid input: [`Frequency`] cannot be 0, and a claim off by orders of
///   magnitude has its deviation saturated to `i64` and simply disagrees. A claim whose
///   stated tolerance is huge "agrees" with far-off rates, but being looser never wins: the
///   measurement is used.
/// - A claim that disagrees is reported — its value and source, the deviation in ppb, the
///   allowed deviation — and the measurement is used: [`Verdict::Disagrees`]. This is the
///   case the field keeps hitting: a cpuinfo frequency that is not the TSC's, CPUID leaves
///   a hypervisor passes through unscaled, a firmware that programs the wrong CNTFRQ.
///
/// # The allowed deviation
///
/// `allowed = U + B + max(M/2, 1 ppm)`, where `U` is the calibration's expanded uncertainty
/// (the bound of its [`Calibration::frequency`]: the measurement's own part `M`,
/// [`Calibration::measurement_ppb`], plus the reference's stated tolerance `R`) and `B` the
/// claim's own stated bound (0 for exact claims).
///
/// The reference's tolerance is in `U`, once: a measurement against a PM timer 50 ppm fast
/// is 50 ppm slow, and an exact CPUID 0x15 claim that is right deviates from it by those
/// 50 ppm. With the timer's nominal ±100 ppm in `U` the claim is confirmed and kept (Linux,
/// too, trusts 0x15 over a PIT, PM-timer or HPET calibration); with an exact reference it
/// would be called wrong, and a measurement 50 ppm off reported as good to 1 ppm.
///
/// `M` alone would reject a correct claim about 1 % of the time (it is a 99 % bound). The
/// margin, on the measurement's part only (`R` is a worst-case tolerance, not a statistical
/// bound to stretch):
/// - `M/2` moves a correct claim 4.5 standard uncertainties out (`M` is ≥ 3 of them), where
///   false rejections are below 1 in 100 000;
/// - `1 ppm` absorbs how claims are written down: a hypervisor leaf or a kernel's `tsc_khz`
///   is in whole kHz (≤ 0.5 ppm of a counter above 1 GHz), and a reference clock slewed by
///   NTP is only as steady as the ppm-level steering allows.
///
/// Neither hides a real fault: the claims that go wrong in the field are off by thousands of
/// ppm (Valkey's 0.4 %, CNTFRQ values off by whole percent, a wrong 0x15 crystal: 24 vs
/// 25 MHz is 4 %), outside the allowed deviation even against an HPET's ±500 ppm.
///
/// # When a correct claim is rejected
///
/// Only when the measurement is wrong by more than the allowed deviation, which the bound
/// does not foresee in two cases:
/// - the reference is off by more than the tolerance it states (state it honestly:
///   [`crate::WithAccuracy`]);
/// - the reference's latch point drifts inside its read during the calibration, which biases
///   the measurement by `δ/T` (a drift `δ` over a calibration of length `T`) without a
///   trace in the data ([`Reference`]'s contract). A correct exact claim is then rejected
///   once `δ/T` exceeds `allowed`: a 1 µs read whose latch moves from its start to its end
///   over 100 ms is 10 ppm, against an allowance of about 1.1 ppm
///   (`tests/hostile_references.rs`). The verdict then says `Disagrees` with a deviation the
///   size of that bias, and the measurement is used.
///
/// [`Reference`]: crate::Reference
pub fn verify(claim: Option<Frequency>, calibration: &Calibration) -> Verified {
    let measured = calibration.frequency;
    let Some(claim) = claim else {
        return Verified {
            chosen: measured,
            verdict: Verdict::Unclaimed,
            calibration: *calibration,
        };
    };
    let u = calibration.frequency.accuracy().bound_ppb();
    let claim_bound = claim.accuracy().bound_ppb();
    // The reference's tolerance is inside `u` already; the margin is on the measurement.
    let allowed_ppb = u
        .saturating_add(claim_bound)
        .saturating_add((calibration.measurement_ppb / 2).max(1_000));
    let deviation_ppb = claim.deviation_ppb_from(&measured);
    let (chosen, verdict) = if deviation_ppb.unsigned_abs() > allowed_ppb {
        (
            measured,
            Verdict::Disagrees {
                claim,
                deviation_ppb,
                allowed_ppb,
            },
        )
    } else if matches!(claim.accuracy(), Accuracy::Exact) || claim_bound < u {
        (
            claim,
            Verdict::Confirmed {
                deviation_ppb,
                allowed_ppb,
            },
        )
    } else {
        (
            measured,
            Verdict::Consistent {
                claim,
                deviation_ppb,
                allowed_ppb,
            },
        )
    };
    Verified {
        chosen,
        verdict,
        calibration: *calibration,
    }
}

/// Calibrates `counter` against `reference` and [`verify`]s `claim` against the result: the
/// one call a kernel makes at boot.
///
/// The claim is also the config's rate hint ([`Config::with_rate_hint`]) unless it has one:
/// a reference that is dead from the start is then found within about twice
/// [`Config::stuck_after`] whatever the counter's rate, instead of after `stuck_after` at the
/// highest plausible rate.
///
/// # Errors
///
/// Those of [`calibrate()`]; then no measurement exists to check the claim against, and the
/// caller decides whether to trust the claim unverified.
pub fn calibrate_and_verify<C: Counter, R: Reference>(
    counter: C,
    reference: R,
    claim: Option<Frequency>,
    config: Config,
) -> Result<Verified, CalibrationError> {
    let config = match (config.rate_hint(), claim) {
        (None, Some(hint)) => config.with_rate_hint(hint),
        _ => config,
    };
    let calibration = calibrate(counter, reference, config)?;
    Ok(verify(claim, &calibration))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frequency::Source;
    use core::time::Duration;

    fn cal(hz: u64, u_ppb: u64) -> Calibration {
        cal_against(hz, u_ppb, 0)
    }

    /// A calibration whose measurement is good to `m_ppb`, against a reference stating a
    /// tolerance of `r_ppb`.
    fn cal_against(hz: u64, m_ppb: u64, r_ppb: u64) -> Calibration {
        let u_ppb = m_ppb + r_ppb;
        Calibration {
            frequency: Frequency::from_hz(
                hz,
                Source::Calibrated,
                Accuracy::Measured {
                    uncertainty_ppb: u_ppb,
                },
            )
            .unwrap(),
            measurement_ppb: m_ppb,
            samples_used: 1000,
            samples_rejected: 0,
            duration: Duration::from_millis(10),
            met_target: true,
            reference: "test",
        }
    }

    #[test]
    fn exact_claim_within_bound_is_kept() {
        let c = cal(2_596_118_000, 2_000);
        let claim =
            Frequency::from_hz(2_596_120_000, Source::HypervisorLeaf, Accuracy::Exact).unwrap();
        let v = verify(Some(claim), &c);
        assert_eq!(v.chosen, claim);
        assert!(
            matches!(
                v.verdict,
                Verdict::Confirmed {
                    allowed_ppb: 3_000,
                    ..
                }
            ),
            "{:?}",
            v.verdict
        );
        assert_eq!(v.verdict.deviation_ppb(), Some(770));
        assert!(v.verdict.is_confirmed() && !v.verdict.is_disagreement());
    }

    #[test]
    fn disagreeing_claim_is_reported_and_measurement_used() {
        let c = cal(2_596_118_000, 2_000);
        let claim = Frequency::from_hz(
            2_600_000_000,
            Source::BrandString,
            Accuracy::Nominal {
                tolerance_ppb: 100_000,
            },
        )
        .unwrap();
        let v = verify(Some(claim), &c);
        assert_eq!(v.chosen, c.frequency);
        match v.verdict {
            Verdict::Disagrees {
                claim: got,
                deviation_ppb,
                allowed_ppb,
            } => {
                assert_eq!(got, claim);
                assert_eq!(deviation_ppb, 1_495_309);
                assert_eq!(allowed_ppb, 2_000 + 100_000 + 1_000);
            }
            other => panic!("{other:?}"),
        }
        assert!(v.verdict.is_disagreement() && !v.verdict.is_confirmed());
    }

    #[test]
    fn margin_is_half_the_bound_or_one_ppm() {
        let c = cal(1_000_000_000, 10_000);
        let at = |ppb: u64| {
            Frequency::from_hz(1_000_000_000 + ppb, Source::CpuidTscLeaf, Accuracy::Exact)
        };
        assert!(!verify(at(15_000), &c).verdict.is_disagreement());
        assert!(verify(at(15_001), &c).verdict.is_disagreement());
        let c = cal(1_000_000_000, 100);
        assert!(!verify(at(1_100), &c).verdict.is_disagreement());
        assert!(verify(at(1_101), &c).verdict.is_disagreement());
    }

    #[test]
    fn reference_tolerance_counts_once_and_gets_no_margin() {
        // Measured to 1 ppm against a ±100 ppm PM timer: U = 101 ppm, margin 1 ppm.
        let c = cal_against(2_400_000_000, 1_000, 100_000);
        let at = |ppb: u64| {
            Frequency::from_hz(
                2_400_000_000 + ppb * 12 / 5,
                Source::CpuidTscLeaf,
                Accuracy::Exact,
            )
        };
        // A claim 50 ppm off (the timer's crystal is) is kept.
        let v = verify(at(50_000), &c);
        assert!(
            matches!(
                v.verdict,
                Verdict::Confirmed {
                    deviation_ppb: 50_000,
                    allowed_ppb: 102_000
                }
            ),
            "{:?}",
            v.verdict
        );
        assert_eq!(Some(v.chosen), at(50_000));
        assert!(!verify(at(102_000), &c).verdict.is_disagreement());
        // The tolerance is not stretched by half of itself: 120 ppm is beyond it.
        assert!(verify(at(120_000), &c).verdict.is_disagreement());
        // A measured claim tighter than U (which includes the tolerance) wins.
        let tight = Frequency::from_hz(
            2_400_000_000,
            Source::Calibrated,
            Accuracy::Measured {
                uncertainty_ppb: 2_000,
            },
        )
        .unwrap();
        assert_eq!(verify(Some(tight), &c).chosen, tight);
    }

    #[test]
    fn absurd_claims_disagree_and_loose_ones_never_win() {
        let lo = cal(Frequency::MIN_HZ, 1_000);
        let hi = cal(Frequency::MAX_HZ, 1_000);
        let max = Frequency::from_hz(Frequency::MAX_HZ, Source::Cntfrq, Accuracy::Exact).unwrap();
        let min = Frequency::from_hz(Frequency::MIN_HZ, Source::Cntfrq, Accuracy::Exact).unwrap();
        let v = verify(Some(max), &lo);
        assert_eq!(
            (v.chosen, v.verdict.deviation_ppb()),
            (lo.frequency, Some(99_999_999_000_000_000))
        );
        assert!(v.verdict.is_disagreement());
        let v = verify(Some(min), &hi);
        assert_eq!(v.chosen, hi.frequency);
        assert_eq!(v.verdict.deviation_ppb(), Some(-999_999_990));
        // A claim of "±4295 %" agrees with twice the rate but is never chosen.
        let loose = Frequency::from_hz(
            Frequency::MIN_HZ * 2,
            Source::Cntfrq,
            Accuracy::Nominal {
                tolerance_ppb: u64::MAX,
            },
        )
        .unwrap();
        let v = verify(Some(loose), &lo);
        assert_eq!(v.chosen, lo.frequency);
        assert!(
            matches!(v.verdict, Verdict::Consistent { .. }),
            "{:?}",
            v.verdict
        );
        // A tie in precision goes to the measurement; a tighter measured claim wins.
        let at = |u| {
            Frequency::from_hz(
                Frequency::MIN_HZ,
                Source::Calibrated,
                Accuracy::Measured { uncertainty_ppb: u },
            )
            .unwrap()
        };
        assert!(matches!(
            verify(Some(at(1_000)), &lo).verdict,
            Verdict::Consistent { .. }
        ));
        assert!(matches!(
            verify(Some(at(999)), &lo).verdict,
            Verdict::Confirmed { .. }
        ));
    }

    #[test]
    fn looser_nominal_claim_gives_way() {
        let c = cal(24_000_000, 500);
        let claim = Frequency::from_hz(
            24_000_000,
            Source::Cntfrq,
            Accuracy::Nominal {
                tolerance_ppb: 50_000,
            },
        )
        .unwrap();
        let v = verify(Some(claim), &c);
        assert_eq!(v.chosen, c.frequency);
        assert!(matches!(v.verdict, Verdict::Consistent { .. }));
        // Confirmed all the same: the claim agreed, the measurement was the more precise.
        assert!(v.verdict.is_confirmed());
        assert_eq!(verify(None, &c).verdict, Verdict::Unclaimed);
        assert!(!Verdict::Unclaimed.is_confirmed());
    }
}
