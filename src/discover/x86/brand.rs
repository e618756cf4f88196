//! The brand string's frequency: `@ 2.10GHz`, `1700MHz`, `3.0 GHz`.

use crate::discover::bytes::until_nul;

/// Parses the frequency a brand string states: the last `<number>GHz` or `<number>MHz`
/// (optionally with a space before the unit, as in `@ 2.10GHz`, `1700MHz`, `3.0 GHz`), in Hz.
///
/// Integer arithmetic only: the fraction is kept to the Hz (digits beyond are dropped).
/// `None` when there is no such figure, it is 0 or it overflows.
pub fn parse_brand_frequency(brand: &[u8]) -> Option<u64> {
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
