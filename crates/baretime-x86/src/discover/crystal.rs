//! The nominal core crystal of Intel models whose leaf 0x15 leaves ECX at 0.
//!
//! The table follows the Intel SDM ("nominal core crystal clock frequency") and Linux's
//! `native_calibrate_tsc`: 24 MHz for the Skylake-derived client parts (Skylake,
//! Kaby/Coffee/Whiskey/Amber Lake, Comet Lake), 19.2 MHz for Atom Goldmont, 25 MHz for Atom
//! Goldmont-D (Denverton). Skylake-X ([`SKYLAKE_X`]) ships with both 24 and 25 MHz crystals,
//! so it is not in the table: its crystal is derived from leaf 0x16 instead.
//!
//! The model constants carry Linux's `INTEL_FAM6_*` names (arch/x86/include/asm/intel-family.h)
//! without the prefix; all are family 6.

/// Family 6 model 0x4E (Linux `INTEL_FAM6_SKYLAKE_L`).
pub(super) const SKYLAKE_L: u32 = 0x4E;
/// Family 6 model 0x5E (Linux `INTEL_FAM6_SKYLAKE`).
pub(super) const SKYLAKE: u32 = 0x5E;
/// Family 6 model 0x55 (Linux `INTEL_FAM6_SKYLAKE_X`): 24 or 25 MHz crystal, not in the table.
pub(super) const SKYLAKE_X: u32 = 0x55;
/// Family 6 model 0x8E (Linux `INTEL_FAM6_KABYLAKE_L`; also Amber/Whiskey/Coffee Lake U).
pub(super) const KABYLAKE_L: u32 = 0x8E;
/// Family 6 model 0x9E (Linux `INTEL_FAM6_KABYLAKE`; also Coffee Lake S/H, Kaby Lake-X).
pub(super) const KABYLAKE: u32 = 0x9E;
/// Family 6 model 0xA5 (Linux `INTEL_FAM6_COMETLAKE`).
pub(super) const COMETLAKE: u32 = 0xA5;
/// Family 6 model 0xA6 (Linux `INTEL_FAM6_COMETLAKE_L`).
pub(super) const COMETLAKE_L: u32 = 0xA6;
/// Family 6 model 0x5C (Linux `INTEL_FAM6_ATOM_GOLDMONT`: Apollo Lake, Broxton).
pub(super) const ATOM_GOLDMONT: u32 = 0x5C;
/// Family 6 model 0x5F (Linux `INTEL_FAM6_ATOM_GOLDMONT_D`: Denverton).
pub(super) const ATOM_GOLDMONT_D: u32 = 0x5F;

/// The nominal core crystal of Intel family-6 models that leave leaf 0x15 ECX at 0, in Hz.
pub(crate) fn known_crystal_hz(family: u32, model: u32) -> Option<u32> {
    if family != 6 {
        return None;
    }
    match model {
        SKYLAKE_L | SKYLAKE | KABYLAKE_L | KABYLAKE | COMETLAKE | COMETLAKE_L => Some(24_000_000),
        ATOM_GOLDMONT => Some(19_200_000),
        ATOM_GOLDMONT_D => Some(25_000_000),
        // Both 24 and 25 MHz crystals ship: leaf 0x16 derives it instead.
        SKYLAKE_X => None,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        assert_eq!(known_crystal_hz(6, KABYLAKE), Some(24_000_000));
        assert_eq!(known_crystal_hz(6, COMETLAKE_L), Some(24_000_000));
        assert_eq!(known_crystal_hz(6, ATOM_GOLDMONT), Some(19_200_000));
        assert_eq!(known_crystal_hz(6, ATOM_GOLDMONT_D), Some(25_000_000));
        assert_eq!(known_crystal_hz(6, SKYLAKE_X), None);
        assert_eq!(known_crystal_hz(0xF, KABYLAKE), None);
    }
}
