//! Byte helpers shared by the CPUID decoders and the dump parser. Trimming is core's
//! [`<[u8]>::trim_ascii`](slice::trim_ascii); what core lacks is here.

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

#[cfg(test)]
mod tests {
    use super::*;

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
