//! The brand string's frequency: `@ 2.10GHz`, `1700MHz`, `3.0 GHz`.

use crate::bytes::until_nul;

/// Parses the frequency a brand string states: the last `<number>GHz` or `<number>MHz`
/// (optionally with a space before the unit, as in `@ 2.10GHz`, `1700MHz`, `3.0 GHz`), in Hz.
///
/// Integer arithmetic only: the fraction is kept to the Hz (digits beyond are dropped).
/// `None` when there is no such figure, it is 0 or it overflows.
pub(crate) fn parse_brand_frequency(brand: &[u8]) -> Option<u64> {
    let brand = until_nul(brand);
    // Each unit not followed by a letter or digit, from the last one back: the first with a
    // number before it wins.
    brand.windows(3).enumerate().rev().find_map(|(at, unit)| {
        let after = brand.get(at..).and_then(|rest| rest.get(3));
        if after.is_some_and(u8::is_ascii_alphanumeric) {
            return None;
        }
        parse_number_before(brand.get(..at)?, unit_multiplier(unit)?)
    })
}

/// Hz per unit for `GHz` / `MHz` (any case).
fn unit_multiplier(unit: &[u8]) -> Option<u64> {
    let [scale, h, z] = unit else {
        return None;
    };
    if !h.eq_ignore_ascii_case(&b'h') || !z.eq_ignore_ascii_case(&b'z') {
        return None;
    }
    match scale.to_ascii_lowercase() {
        b'g' => Some(1_000_000_000),
        b'm' => Some(1_000_000),
        _ => None,
    }
}

/// The decimal number that ends `s` (after optional spaces), times `mult`.
fn parse_number_before(s: &[u8], mult: u64) -> Option<u64> {
    let s = match s.iter().rposition(|&c| c != b' ') {
        Some(last) => s.get(..=last)?,
        None => return None,
    };
    let start = s
        .iter()
        .rposition(|&c| !(c.is_ascii_digit() || c == b'.'))
        .map_or(0, |p| p.saturating_add(1));
    let (head, num) = (s.get(..start)?, s.get(start..)?);
    if head.last().is_some_and(u8::is_ascii_alphanumeric) {
        return None;
    }
    let mut parts = num.splitn(2, |&c| c == b'.');
    let int = parts.next().unwrap_or(&[]);
    let frac = parts.next().unwrap_or(&[]);
    if frac.contains(&b'.') || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let mut hz: u64 = 0;
    for &c in int {
        hz = hz.checked_mul(10)?.checked_add(digit(c)?)?;
    }
    hz = hz.checked_mul(mult)?;
    let mut scale = mult;
    for &c in frac {
        scale /= 10;
        if scale == 0 {
            break;
        }
        hz = hz.checked_add(digit(c)?.checked_mul(scale)?)?;
    }
    (hz != 0).then_some(hz)
}

fn digit(c: u8) -> Option<u64> {
    (c as char).to_digit(10).map(u64::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brand_string_parsing() {
        let cases: &[(&str, Option<u64>)] = &[
            (
                "Intel(R) Core(TM) i3-10110U CPU @ 2.10GHz",
                Some(2_100_000_000),
            ),
            ("@ 3.00GHz", Some(3_000_000_000)),
            ("Intel(R) Pentium(R) 4 CPU 1700MHz", Some(1_700_000_000)),
            (
                "              Intel(R) Pentium(R) 4 CPU 3.00GHz",
                Some(3_000_000_000),
            ),
            ("VIA C7-M Processor 1200MHz", Some(1_200_000_000)),
            (
                "Intel(R) Core(TM)2 CPU T7200 @ 2.00 GHz",
                Some(2_000_000_000),
            ),
            (
                "Genuine Intel(R) CPU 0000 @ 1.234567891234GHz",
                Some(1_234_567_891),
            ),
            ("@ 1.GHz", Some(1_000_000_000)),
            ("@ .5GHz", Some(500_000_000)),
            ("@ 3.00ghz", Some(3_000_000_000)),
            ("2.40GHz junk MHz", Some(2_400_000_000)),
            ("Intel(R) Xeon(R) Processor", None),
            ("AMD Ryzen 7 5800H with Radeon Graphics", None),
            ("AMD Athlon(tm) 64 X2 Dual Core Processor 5200+", None),
            ("", None),
            ("GHz", None),
            ("@ GHz", None),
            ("@ . GHz", None),
            ("@ 1.2.3GHz", None),
            ("@ 0.00GHz", None),
            ("@ 2.10GHzX", None),
            ("@ 2.10KHz", None),
            ("X2.10GHz", None),
            ("@ 99999999999999999999GHz", None),
            ("@ 18446744074GHz", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_brand_frequency(s.as_bytes()), *want, "{s:?}");
        }
        // Stops at NUL.
        assert_eq!(
            parse_brand_frequency(b"@ 2.00GHz\0@ 3.00GHz"),
            Some(2_000_000_000)
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// The brand parser takes any bytes.
            #[test]
            fn brand_parser_takes_any_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
                if let Some(hz) = parse_brand_frequency(&b) {
                    prop_assert!(hz > 0);
                }
            }

            /// `@ I.FFGHz` parses to I.FF × 10^9 exactly.
            #[test]
            fn brand_parser_round_trips(int in 0u64..100, frac in 0u64..100) {
                let s = std::format!("Some CPU @ {int}.{frac:02}GHz");
                let want = int * 1_000_000_000 + frac * 10_000_000;
                prop_assert_eq!(parse_brand_frequency(s.as_bytes()), (want > 0).then_some(want));
            }
        }
    }
}
