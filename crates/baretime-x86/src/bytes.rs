//! Byte helpers shared by the CPUID decoders and the dump parser. Trimming is core's
//! [`<[u8]>::trim_ascii`](slice::trim_ascii); what core lacks is here.

use core::fmt;

/// The bytes before the first NUL (all of them without one).
pub(crate) fn until_nul(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}

/// Three registers as their 12 little-endian bytes, in the order given (a CPUID vendor or
/// hypervisor signature).
pub(crate) fn regs_to_bytes(regs: [u32; 3]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for (bytes, r) in out.chunks_exact_mut(4).zip(regs) {
        bytes.copy_from_slice(&r.to_le_bytes());
    }
    out
}

/// Writes bytes as text: printable ASCII as is, anything else (spaces included) as `_`, so a
/// vendor like `"  Shanghai  "` stays one whitespace-free token of the same length.
pub(crate) struct Token<'a>(pub &'a [u8]);

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        for &c in self.0 {
            f.write_char(if c.is_ascii_graphic() { c as char } else { '_' })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_replaces_non_graphic_bytes() {
        assert_eq!(std::format!("{}", Token(b"  Shanghai  ")), "__Shanghai__");
        assert_eq!(std::format!("{}", Token(b"Genu\0\xffe")), "Genu__e");
    }

    #[test]
    fn until_nul_and_regs() {
        assert_eq!(until_nul(b"ab\0cd"), b"ab");
        assert_eq!(until_nul(b"abc"), b"abc");
        assert_eq!(until_nul(b""), b"");
        assert_eq!(
            &regs_to_bytes([0x756E_6547, 0x4965_6E69, 0x6C65_746E]),
            b"GenuineIntel"
        );
    }
}
