//! CPUID dumps: recorded register values that replay through [`crate::discover::discover_with`].
//!
//! [`Dump::parse`] reads the three common text formats and keeps the first logical CPU:
//!
//! | format | record | subleaf |
//! | --- | --- | --- |
//! | [`DumpFormat::CpuidTool`] (`cpuid -r`) | `   0x00000015 0x00: eax=0x00000002 ebx=0x000000b8 ecx=0x00000000 edx=0x00000000` | always given |
//! | [`DumpFormat::Aida64`] (AIDA64, InstLatx64) | `CPUID 00000015: 00000002-000000B8-00000000-00000000 [92.00x / 0]` | `[SL 01]` when given |
//! | [`DumpFormat::Libcpuid`] | `basic_cpuid[21]=00000002 000000b8 00000000 00000000`, `ext_cpuid[n]=` (0x80000000 + n), `intel_fn4[n]=`, `intel_fn11[n]=`, `intel_fn12h[n]=`, `intel_fn14h[n]=`, `amd_fn8000001dh[n]=` | from the key |
//!
//! The first CPU ends at a second CPU header (`CPU 1:`, `Logical CPU #1`, `CPU#001 AffMask`,
//! `CPUID Registers (CPU #2)`), at a second record for leaf 0, or at a line of dashes (after
//! which libcpuid's `.test` files hold their expected values). Other lines are ignored; a
//! line that starts like a record but does not parse is an error.
//!
//! A dump holds whatever the tool recorded, including leaves above the maximum leaf (libcpuid
//! records 32 basic and 32 extended leaves whatever the CPU has): [`crate::discover`] ignores
//! those, as it must on real hardware.
//!
//! No allocation: records go to a fixed table of 256 entries.

use core::fmt;

use crate::cpuid::{CpuidRegs, CpuidSource};
use crate::discover::{discover_with, X86Discovery};

/// Most CPUID records one logical CPU of a dump may hold.
pub(crate) const DUMP_CAPACITY: usize = 256;

/// The text format a dump was recorded in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DumpFormat {
    /// `cpuid -r` (Todd Allen's cpuid tool).
    CpuidTool,
    /// `CPUID 00000015: EAX-EBX-ECX-EDX`, as AIDA64 and InstLatx64 write it.
    Aida64,
    /// libcpuid's raw format: `basic_cpuid[n]=`, `ext_cpuid[n]=`, ….
    Libcpuid,
}

/// Why a dump cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DumpError {
    /// Nothing but whitespace.
    Empty,
    /// No CPUID record in any of the known formats (an aarch64 ID-register dump, other text,
    /// binary data).
    NotCpuid,
    /// The first CPU has more than 256 records (the fixed table a dump is parsed into).
    TooManyLeaves,
    /// A line that starts like a CPUID record but does not parse.
    Malformed {
        /// 1-based line number.
        line: u32,
    },
    /// CPUID records, but none for leaf 0 (maximum basic leaf and vendor): nothing in the
    /// dump can be interpreted.
    NoVendorLeaf,
}

impl DumpError {
    /// A short stable token (`empty`, `not_cpuid`, `too_many_leaves`, `malformed`,
    /// `no_leaf_0`) for `key=value` output.
    pub const fn token(&self) -> &'static str {
        match self {
            DumpError::Empty => "empty",
            DumpError::NotCpuid => "not_cpuid",
            DumpError::TooManyLeaves => "too_many_leaves",
            DumpError::Malformed { .. } => "malformed",
            DumpError::NoVendorLeaf => "no_leaf_0",
        }
    }
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DumpError::Empty => f.write_str("the dump is empty"),
            DumpError::NotCpuid => f.write_str("no CPUID record in any known dump format"),
            DumpError::TooManyLeaves => {
                write!(f, "more than {DUMP_CAPACITY} CPUID records for one CPU")
            }
            DumpError::Malformed { line } => write!(f, "malformed CPUID record on line {line}"),
            DumpError::NoVendorLeaf => f.write_str("the dump has no record for CPUID leaf 0"),
        }
    }
}

impl core::error::Error for DumpError {}

/// One CPUID record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DumpEntry {
    /// EAX input (leaf).
    pub leaf: u32,
    /// ECX input (subleaf); for a record without one, 0 or its position among the records of
    /// the same leaf.
    pub subleaf: u32,
    /// Whether the dump stated the subleaf.
    pub subleaf_given: bool,
    /// EAX, EBX, ECX, EDX.
    pub regs: [u32; 4],
}

/// The CPUID records of the first logical CPU of a dump. A `Dump` is a [`CpuidSource`], so
/// discovery runs on it exactly as on the live CPU, on any host:
///
/// ```
/// use baretime_x86::{Dump, DumpFormat};
/// use baretime_x86::discover_with;
/// use baretime::Source;
///
/// // `cpuid -r` of an Intel part whose leaf 0x15 states all three fields.
/// let text = b"CPU 0:
///    0x00000000 0x00: eax=0x00000016 ebx=0x756e6547 ecx=0x6c65746e edx=0x49656e69
///    0x00000001 0x00: eax=0x000906ea ebx=0x00100800 ecx=0x7ffafbff edx=0xbfebfbff
///    0x00000015 0x00: eax=0x00000002 ebx=0x0000012c ecx=0x016e3600 edx=0x00000000";
/// let dump = Dump::parse(text)?;
/// assert_eq!(dump.format(), DumpFormat::CpuidTool);
/// assert_eq!(dump.get(0x15, 0), Some([2, 300, 24_000_000, 0]));
///
/// let d = discover_with(&dump);
/// let best = d.best().expect("leaf 0x15 is complete");
/// assert_eq!(best.as_hz(), 3_600_000_000); // 24 MHz crystal × 300 / 2
/// assert_eq!(best.source(), Source::CpuidTscLeaf);
/// assert!(best.accuracy().is_exact());
/// assert!(!d.invariant_tsc()); // no leaf 0x80000007 in this dump
/// # Ok::<(), baretime_x86::DumpError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dump {
    format: DumpFormat,
    entries: heapless::Vec<DumpEntry, DUMP_CAPACITY>,
}

impl Dump {
    /// Parses a dump (any bytes: non-UTF-8 lines are simply not records).
    pub fn parse(text: &[u8]) -> Result<Dump, DumpError> {
        let mut dump = Dump {
            format: DumpFormat::CpuidTool,
            entries: heapless::Vec::new(),
        };
        let mut format = None;
        let mut line_no: u32 = 0;
        for raw in text.split(|&c| c == b'\n') {
            line_no = line_no.saturating_add(1);
            let line = raw.trim_ascii();
            if line.is_empty() {
                continue;
            }
            let record = match parse_record(line) {
                Some(Ok(r)) => r,
                Some(Err(())) => return Err(DumpError::Malformed { line: line_no }),
                None => {
                    if !dump.entries.is_empty() && (is_dashes(line) || is_cpu_header(line)) {
                        break;
                    }
                    continue;
                }
            };
            let (fmt, leaf, subleaf) = record.0;
            if leaf == 0 && dump.entries.iter().any(|e| e.leaf == 0) {
                break; // leaf 0 again: the next CPU begins
            }
            format.get_or_insert(fmt);
            let (subleaf, subleaf_given) = match subleaf {
                Some(s) => (s, true),
                None => {
                    let n = dump.entries.iter().filter(|e| e.leaf == leaf).count();
                    (u32::try_from(n).unwrap_or(u32::MAX), false)
                }
            };
            let entry = DumpEntry {
                leaf,
                subleaf,
                subleaf_given,
                regs: record.1,
            };
            if dump.entries.push(entry).is_err() {
                return Err(DumpError::TooManyLeaves);
            }
        }
        match format {
            Some(f) => dump.format = f,
            None if text.trim_ascii().is_empty() => return Err(DumpError::Empty),
            None => return Err(DumpError::NotCpuid),
        }
        if !dump.entries.iter().any(|e| e.leaf == 0) {
            return Err(DumpError::NoVendorLeaf);
        }
        Ok(dump)
    }

    /// The format the first record was in.
    pub fn format(&self) -> DumpFormat {
        self.format
    }

    /// Every record of the first CPU, in dump order.
    pub fn entries(&self) -> &[DumpEntry] {
        &self.entries
    }

    /// The registers for `leaf`/`subleaf`: the record with that subleaf; else, when the dump
    /// states no subleaf for this leaf at all, its first record (the CPU ignores ECX for
    /// such leaves); else `None`.
    pub fn get(&self, leaf: u32, subleaf: u32) -> Option<[u32; 4]> {
        let mut records = self.entries.iter().filter(|e| e.leaf == leaf);
        if let Some(e) = records.clone().find(|e| e.subleaf == subleaf) {
            return Some(e.regs);
        }
        if records.clone().any(|e| e.subleaf_given) {
            return None;
        }
        records.next().map(|e| e.regs)
    }
}

impl CpuidSource for Dump {
    /// The recorded registers; zeros for a leaf the dump does not hold.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> CpuidRegs {
        let r = self.get(leaf, subleaf).unwrap_or([0; 4]);
        CpuidRegs {
            eax: r[0],
            ebx: r[1],
            ecx: r[2],
            edx: r[3],
        }
    }
}

/// Parses a dump and runs x86 discovery on its first CPU: [`Dump::parse`], then
/// [`discover_with`].
///
/// ```
/// use baretime_x86::{replay, DumpError, X86Features};
/// // Kaby Lake-X as AIDA64 records it: leaf 0x15 = 342/2 with no crystal, 0x16 base 4300 MHz.
/// let d = replay(b"CPUID 00000000: 00000016-756E6547-6C65746E-49656E69\n\
///                  CPUID 00000001: 000906E9-00100800-7FFAFBBF-BFEBFBFF\n\
///                  CPUID 00000015: 00000002-00000156-00000000-00000000\n\
///                  CPUID 00000016: 000010CC-00001194-00000064-00000000\n")?;
/// assert_eq!(d.vendor(), b"GenuineIntel");
/// assert!(!d.features().contains(X86Features::HYPERVISOR));
/// assert_eq!(d.best().unwrap().as_hz(), 4_104_000_000); // 24 MHz (model table) × 342 / 2
/// assert_eq!(replay(b"not a dump"), Err(DumpError::NotCpuid));
/// # Ok::<(), DumpError>(())
/// ```
pub fn replay(text: &[u8]) -> Result<X86Discovery, DumpError> {
    let dump = Dump::parse(text)?;
    Ok(discover_with(&dump))
}

type Record = ((DumpFormat, u32, Option<u32>), [u32; 4]);

/// `None`: not a record. `Some(Err)`: starts like a record but does not parse.
fn parse_record(line: &[u8]) -> Option<Result<Record, ()>> {
    if let Some(rest) = line.strip_prefix(b"CPUID ") {
        return parse_aida(rest);
    }
    if looks_like_cpuid_tool(line) {
        return Some(parse_cpuid_tool(line).ok_or(()));
    }
    parse_libcpuid(line)
}

/// After `CPUID `: `00000015: 00000002-000000B8-00000000-00000000 [SL 01] ...`
/// (or with spaces/tab instead of the colon).
fn parse_aida(rest: &[u8]) -> Option<Result<Record, ()>> {
    let (leaf_tok, rest) = split_token(rest);
    let leaf_tok = leaf_tok.strip_suffix(b":").unwrap_or(leaf_tok);
    // `CPUID Registers (CPU #1):` is a header, not a record.
    let leaf = parse_hex(leaf_tok)?;
    let parse = || -> Option<Record> {
        let (regs_tok, rest) = split_token(rest);
        let mut regs = [0u32; 4];
        let mut parts = regs_tok.split(|&c| c == b'-');
        for r in regs.iter_mut() {
            *r = parse_hex(parts.next()?)?;
        }
        if parts.next().is_some() {
            return None;
        }
        let subleaf = match find(rest, b"[SL ") {
            Some(at) => {
                let tail = rest.get(at..)?.strip_prefix(b"[SL ")?;
                let end = tail.iter().position(|&c| c == b']')?;
                Some(parse_hex(tail.get(..end)?)?)
            }
            None => None,
        };
        Some(((DumpFormat::Aida64, leaf, subleaf), regs))
    };
    Some(parse().ok_or(()))
}

/// `0x<hex> 0x<hex>:` starts a `cpuid -r` record; prose that merely starts with `0x` does not.
fn looks_like_cpuid_tool(line: &[u8]) -> bool {
    let (leaf_tok, rest) = split_token(line);
    let (sub_tok, _) = split_token(rest);
    let hex_after_0x = |t: &[u8]| t.strip_prefix(b"0x").and_then(parse_hex).is_some();
    hex_after_0x(leaf_tok) && sub_tok.strip_suffix(b":").is_some_and(hex_after_0x)
}

/// `0x00000015 0x00: eax=0x00000002 ebx=0x000000b8 ecx=0x00000000 edx=0x00000000`
fn parse_cpuid_tool(line: &[u8]) -> Option<Record> {
    let (leaf_tok, rest) = split_token(line);
    let leaf = parse_hex(leaf_tok.strip_prefix(b"0x")?)?;
    let (sub_tok, mut rest) = split_token(rest);
    let sub_tok = sub_tok.strip_suffix(b":")?;
    let subleaf = parse_hex(sub_tok.strip_prefix(b"0x")?)?;
    let mut regs = [0u32; 4];
    for (r, name) in regs.iter_mut().zip([b"eax=", b"ebx=", b"ecx=", b"edx="]) {
        let (tok, next) = split_token(rest);
        let value = tok.strip_prefix(name)?.strip_prefix(b"0x")?;
        *r = parse_hex(value)?;
        rest = next;
    }
    if !rest.trim_ascii().is_empty() {
        return None;
    }
    Some(((DumpFormat::CpuidTool, leaf, Some(subleaf)), regs))
}

/// `basic_cpuid[21]=00000002 000000b8 00000000 00000000` and the other libcpuid keys.
fn parse_libcpuid(line: &[u8]) -> Option<Result<Record, ()>> {
    let open = line.iter().position(|&c| c == b'[')?;
    let (key, bracketed) = line.split_at_checked(open)?;
    if key.is_empty() || !key.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_') {
        return None;
    }
    let known: Option<(u32, bool)> = match key {
        b"basic_cpuid" => Some((0, false)),
        b"ext_cpuid" => Some((0x8000_0000, false)),
        b"intel_fn4" => Some((4, true)),
        b"intel_fn11" => Some((0xB, true)),
        _ => {
            // intel_fn12h, intel_fn14h, amd_fn8000001dh, …: leaf in hex, subleaf in brackets.
            let hex = key
                .strip_prefix(b"intel_fn")
                .or_else(|| key.strip_prefix(b"amd_fn"))
                .and_then(|k| k.strip_suffix(b"h"));
            match hex {
                Some(h) => Some((parse_hex(h)?, true)),
                None => None,
            }
        }
    };
    let (base, indexed_subleaf) = known?;
    let parse = || -> Option<Record> {
        let rest = bracketed.strip_prefix(b"[")?;
        let close = rest.iter().position(|&c| c == b']')?;
        let (index, after) = rest.split_at_checked(close)?;
        let index = parse_dec(index)?;
        let mut values = after.strip_prefix(b"]=")?;
        let mut regs = [0u32; 4];
        for r in regs.iter_mut() {
            let (tok, next) = split_token(values);
            *r = parse_hex(tok)?;
            values = next;
        }
        if !values.trim_ascii().is_empty() {
            return None;
        }
        let (leaf, subleaf) = if indexed_subleaf {
            (base, Some(index))
        } else {
            (base.checked_add(index)?, None)
        };
        Some(((DumpFormat::Libcpuid, leaf, subleaf), regs))
    };
    Some(parse().ok_or(()))
}

/// `CPU 1:`, `CPU:`, `...Logical CPU #1...`, `CPU#001 AffMask: ...`, `CPUID Registers (CPU #2):`.
fn is_cpu_header(line: &[u8]) -> bool {
    if find(line, b"CPU #").is_some() || find(line, b"CPU#").is_some() {
        return true;
    }
    match line.strip_prefix(b"CPU").and_then(|r| r.strip_suffix(b":")) {
        Some(mid) => mid.trim_ascii().iter().all(u8::is_ascii_digit),
        None => false,
    }
}

fn is_dashes(line: &[u8]) -> bool {
    line.len() >= 10 && line.iter().all(|&c| c == b'-')
}

fn split_token(s: &[u8]) -> (&[u8], &[u8]) {
    let s = s.trim_ascii_start();
    match s.iter().position(|c| c.is_ascii_whitespace()) {
        Some(end) => s.split_at_checked(end).unwrap_or((s, &[])),
        None => (s, &[]),
    }
}

fn parse_hex(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 8 {
        return None;
    }
    let mut v: u32 = 0;
    for &c in s {
        let d = (c as char).to_digit(16)?;
        v = (v << 4) | d;
    }
    Some(v)
}

fn parse_dec(s: &[u8]) -> Option<u32> {
    if s.is_empty() {
        return None;
    }
    let mut v: u32 = 0;
    for &c in s {
        v = v.checked_mul(10)?.checked_add((c as char).to_digit(10)?)?;
    }
    Some(v)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baretime::Source;
    use std::format;
    use std::string::String;

    const CPUID_R: &str = "\
CPU 0:
   0x00000000 0x00: eax=0x00000016 ebx=0x756e6547 ecx=0x6c65746e edx=0x49656e69
   0x00000001 0x00: eax=0x000906ea ebx=0x00100800 ecx=0x7ffafbbf edx=0xbfebfbff
   0x00000004 0x00: eax=0x1c004121 ebx=0x01c0003f ecx=0x0000003f edx=0x00000000
   0x00000004 0x01: eax=0x1c004122 ebx=0x01c0003f ecx=0x0000003f edx=0x00000000
   0x00000015 0x00: eax=0x00000002 ebx=0x000000b8 ecx=0x00000000 edx=0x00000000
   0x00000016 0x00: eax=0x00000898 ebx=0x00001004 ecx=0x00000064 edx=0x00000000
   0x80000000 0x00: eax=0x80000008 ebx=0x00000000 ecx=0x00000000 edx=0x00000000
   0x80000007 0x00: eax=0x00000000 ebx=0x00000000 ecx=0x00000000 edx=0x00000100
CPU 1:
   0x00000000 0x00: eax=0x00000016 ebx=0x756e6547 ecx=0x6c65746e edx=0x49656e69
   0x00000015 0x00: eax=0x00000002 ebx=0x000000b8 ecx=0x016e3600 edx=0x00000000
";

    #[test]
    fn cpuid_tool_format_first_cpu_only() {
        let d = Dump::parse(CPUID_R.as_bytes()).unwrap();
        assert_eq!(d.format(), DumpFormat::CpuidTool);
        assert_eq!(d.entries().len(), 8);
        assert_eq!(d.get(0x15, 0), Some([2, 0xb8, 0, 0]));
        assert_eq!(d.get(4, 1).unwrap()[0], 0x1c004122);
        // Subleaves were stated: an unrecorded one reads as absent.
        assert_eq!(d.get(4, 2), None);
        assert_eq!(d.get(0x15, 1), None);
        let x = discover_with(&d);
        assert!(x.invariant_tsc());
        assert_eq!(x.best().unwrap().source(), Source::CpuidTscLeafKnownCrystal);
    }

    #[test]
    fn aida_format_with_subleaves_annotations_and_next_cpu() {
        let text = "\
------[ Logical CPU #0 ]------
CPUID 00000000: 00000016-756E6547-6C65746E-49656E69 [GenuineIntel]
CPUID 00000004: 1C004121-01C0003F-0000003F-00000000 [SL 00]
CPUID 00000004: 1C004122-01C0003F-0000003F-00000000 [SL 01]
CPUID 0000000D: 00000040-000003C0-00000000-00000000 [SL 0B] [MPX BNDREGS]
CPUID 00000015: 00000002-000000A6-0249F000-00000000 [83.00x / 38400000]
------[ Logical CPU #1 ]------
CPUID 00000000: 00000016-756E6547-6C65746E-49656E69 [GenuineIntel]
CPUID 00000015: 00000002-000000A6-00000000-00000000
--------------------------------------------------------------------------------
x86
";
        let d = Dump::parse(text.as_bytes()).unwrap();
        assert_eq!(d.format(), DumpFormat::Aida64);
        assert_eq!(d.entries().len(), 5);
        assert_eq!(d.get(0xD, 0xB).unwrap()[1], 0x3C0);
        assert_eq!(d.get(0x15, 0), Some([2, 0xA6, 38_400_000, 0]));
        // No subleaf stated for 0x15: any ECX reads it.
        assert_eq!(d.get(0x15, 3), Some([2, 0xA6, 38_400_000, 0]));
        assert_eq!(
            discover_with(&d).best().unwrap().as_millihz(),
            3_187_200_000_000
        );
    }

    #[test]
    fn aida_variants_tab_separated_and_other_headers() {
        let text = "CPUID Registers (CPU #1):\r\n\
CPUID 00000000  \t00000005-756E6547-6C65746E-49656E69\r\n\
CPUID 00000004  \t00004121-01C0003F-0000001F-00000000\r\n\
CPUID 00000004  \t00004143-01C0103F-000003FF-00000000\r\n\
CPUID Registers (CPU #2 Virtual):\r\n\
CPUID 00000000  \t00000005-756E6547-6C65746E-49656E69\r\n";
        let d = Dump::parse(text.as_bytes()).unwrap();
        assert_eq!(d.entries().len(), 3);
        // Repeated leaf without [SL]: taken as subleaves in order.
        assert_eq!(d.get(4, 0).unwrap()[0], 0x4121);
        assert_eq!(d.get(4, 1).unwrap()[0], 0x4143);
        assert_eq!(d.get(4, 7).unwrap()[0], 0x4121);

        let text = "CPU#000 AffMask: 0x1\nCPUID 00000000: 00000001-756E6547-6C65746E-49656E69\n\
CPU#001 AffMask: 0x2\nCPUID 00000001: 00000001-00000000-00000000-00000000\n";
        assert_eq!(Dump::parse(text.as_bytes()).unwrap().entries().len(), 1);
    }

    #[test]
    fn libcpuid_format() {
        let text = "\
basic_cpuid[0]=00000016 756e6547 6c65746e 49656e69
basic_cpuid[1]=000806ec 05100800 7ffafbbf bfebfbff
basic_cpuid[21]=00000002 00000096 00000000 00000000
basic_cpuid[22]=00000708 00000f3c 00000064 00000000
ext_cpuid[0]=80000008 00000000 00000000 00000000
ext_cpuid[7]=00000000 00000000 00000000 00000100
intel_fn4[1]=1c004122 01c0003f 0000003f 00000000
intel_fn12h[1]=00000001 00000002 00000003 00000004
amd_fn8000001dh[2]=00004143 01c0003f 000003ff 00000002
--------------------------------------------------------------------------------
x86
";
        let d = Dump::parse(text.as_bytes()).unwrap();
        assert_eq!(d.format(), DumpFormat::Libcpuid);
        assert_eq!(d.entries().len(), 9);
        assert_eq!(d.get(0x8000_0007, 0).unwrap()[3], 0x100);
        assert_eq!(d.get(4, 1).unwrap()[0], 0x1c004122);
        // Only intel_fn4[1] is recorded, and it states its subleaf: 0 and 5 are unknown.
        assert_eq!(d.get(4, 0), None);
        assert_eq!(d.get(4, 5), None);
        assert_eq!(d.get(0x12, 1).unwrap()[3], 4);
        assert_eq!(d.get(0x8000_001D, 2).unwrap()[3], 2);
        let x = discover_with(&d);
        assert_eq!((x.family(), x.model()), (6, 0x8E));
        // 24 MHz × 150 / 2 = 1800 MHz.
        assert_eq!(x.best().unwrap().as_hz(), 1_800_000_000);
    }

    #[test]
    fn errors() {
        assert_eq!(Dump::parse(b""), Err(DumpError::Empty));
        assert_eq!(Dump::parse(b" \n\t\r\n"), Err(DumpError::Empty));
        assert_eq!(
            Dump::parse(b"arm_midr=00000000410fd493\narm_id_aa64mmfr0=00000111ff000000\n"),
            Err(DumpError::NotCpuid)
        );
        assert_eq!(
            Dump::parse(b"\x00\xff\xfe garbage\x80\n"),
            Err(DumpError::NotCpuid)
        );
        assert_eq!(
            Dump::parse(b"CPU 0:\n   0x00000000 0x00: eax=0x1 ebx=zz ecx=0x0 edx=0x0\n"),
            Err(DumpError::Malformed { line: 2 })
        );
        // Prose that starts with 0x is no record.
        assert_eq!(
            Dump::parse(b"0x40000000 EAX) does not exist\n"),
            Err(DumpError::NotCpuid)
        );
        assert_eq!(
            Dump::parse(b"CPUID 00000000: 00000016-756E6547-6C65746E\n"),
            Err(DumpError::Malformed { line: 1 })
        );
        assert_eq!(
            Dump::parse(b"basic_cpuid[x]=0 0 0 0\n"),
            Err(DumpError::Malformed { line: 1 })
        );
        assert_eq!(
            Dump::parse(b"basic_cpuid[1]=0 0 0 0\n"),
            Err(DumpError::NoVendorLeaf)
        );
        let mut big = String::from("basic_cpuid[0]=00000001 0 0 0\n");
        for i in 1..=DUMP_CAPACITY {
            big.push_str(&format!("intel_fn4[{i}]=0 0 0 0\n"));
        }
        assert_eq!(Dump::parse(big.as_bytes()), Err(DumpError::TooManyLeaves));
    }

    #[test]
    fn replay_gives_discovery_or_a_typed_error() {
        let d = replay(CPUID_R.as_bytes()).unwrap();
        assert_eq!(d.vendor(), b"GenuineIntel");
        assert!(d.invariant_tsc());
        let best = d.best().unwrap();
        assert_eq!(best.as_hz(), 2_208_000_000);
        assert_eq!(best.source(), Source::CpuidTscLeafKnownCrystal);
        assert!(d.hypervisors().is_empty());
        assert_eq!(replay(b"hello"), Err(DumpError::NotCpuid));
        assert_eq!(
            replay(b"CPUID 00000000: 1-2-3\n"),
            Err(DumpError::Malformed { line: 1 })
        );
        // Every list at once: an unknown hypervisor with a Hyper-V interface behind it (walk
        // order), a disagreement and two implausible claims.
        let text = "\
CPUID 00000000: 00000016-756E6547-6C65746E-49656E69
CPUID 00000001: 000906E9-00100800-FFFAFBBF-BFEBFBFF
CPUID 00000015: 00000002-00000156-00000000-00000000
CPUID 00000016: 0000FFFF-00001194-00000064-00000000
CPUID 40000000: 40000001-786F4256-786F4256-786F4256
CPUID 40000100: 40000103-7263694D-666F736F-76482074
CPUID 40000103: 00000800-00000000-00000000-00000100
CPUID 80000000: 80000004-00000000-00000000-00000000
CPUID 80000002: 20555043-2E392040-48473030-0000007A
";
        let d = replay(text.as_bytes()).unwrap();
        let kinds: std::vec::Vec<_> = d.hypervisors().iter().map(|h| (h.kind, h.base)).collect();
        assert_eq!(
            kinds,
            [
                (crate::HypervisorKind::Unknown, 0x4000_0000),
                (crate::HypervisorKind::HyperV, 0x4000_0100)
            ]
        );
        assert_eq!(&d.hypervisors()[0].signature, b"VBoxVBoxVBox");
        assert!(d.hyperv_tsc_frequency_msr());
        let x: std::vec::Vec<_> = d.disagreements().map(|x| (x.a, x.b, x.apart_ppb)).collect();
        assert_eq!(
            x,
            [(
                Source::CpuidTscLeafKnownCrystal,
                Source::BrandString,
                1_192_982_456
            )]
        );
        let dropped: std::vec::Vec<_> = d.implausible().iter().map(|i| (i.source, i.hz)).collect();
        assert_eq!(
            dropped,
            [
                (Source::CpuidTscLeafDerivedCrystal, 65_534_999_994),
                (Source::CpuidBaseFrequency, 65_535_000_000)
            ]
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;
        use std::vec::Vec;

        const FRAGMENTS: &[&str] = &[
            "CPU 0:",
            "CPU 1:",
            "   0x00000000 0x00: eax=0x00000016 ebx=0x756e6547 ecx=0x6c65746e edx=0x49656e69",
            "   0x00000015 0x00: eax=0x00000002 ebx=0x000000b8 ecx=0x016e3600 edx=0x00000000",
            "   0x80000000 0x00: eax=0x80000008 ebx=0x00000000 ecx=0x00000000 edx=0x00000000",
            "   0x00000001 0x00: eax=0x000906ea ebx=0x00100800 ecx=0xfffafbbf edx=0xbfebfbff",
            "   0x40000000 0x00: eax=0x40000010 ebx=0x4b4d564b ecx=0x564b4d56 edx=0x0000004d",
            "   0x40000010 0x00: eax=0x00231860 ebx=0x000f4240 ecx=0x00000000 edx=0x00000000",
            "------[ Logical CPU #0 ]------",
            "CPUID 00000000: 00000016-756E6547-6C65746E-49656E69 [GenuineIntel]",
            "CPUID 00000016: 00000898-00001004-00000064-00000000 [2200 / 4100 / 100]",
            "CPUID 00000004: 1C004121-01C0003F-0000003F-00000000 [SL 00]",
            "CPUID 80000007: 00000000-00000000-00000000-00000100",
            "basic_cpuid[0]=0000000d 756e6547 6c65746e 49656e69",
            "basic_cpuid[21]=00000002 00000096 00000000 00000000",
            "ext_cpuid[0]=80000008 00000000 00000000 00000000",
            "intel_fn4[1]=1c004122 01c0003f 0000003f 00000000",
            "--------------------------------------------------------------------------------",
            "x86",
            "CPUID ",
            "0x",
            "basic_cpuid[",
            "[SL ",
            "=",
            "-",
            "",
        ];

        fn text() -> impl Strategy<Value = Vec<u8>> {
            let piece = prop_oneof![
                4 => proptest::sample::select(FRAGMENTS).prop_map(|s| s.as_bytes().to_vec()),
                1 => proptest::collection::vec(any::<u8>(), 0..12),
            ];
            let sep = prop_oneof![
                Just(b"\n".to_vec()),
                Just(b"\r\n".to_vec()),
                Just(Vec::new())
            ];
            proptest::collection::vec((piece, sep), 0..40).prop_map(|v| {
                v.into_iter()
                    .flat_map(|(p, s)| p.into_iter().chain(s))
                    .collect()
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Any bytes: a dump or a typed error, never a panic.
            #[test]
            fn any_bytes(b in proptest::collection::vec(any::<u8>(), 0..2048)) {
                if let Ok(d) = replay(&b) {
                    prop_assert_eq!(d.best(), d.candidates().first().copied());
                }
            }

            /// Dump-like text spliced together: parsed dumps respect their own invariants.
            #[test]
            fn spliced_dumps(b in text()) {
                match Dump::parse(&b) {
                    Ok(d) => {
                        prop_assert!(d.entries().iter().any(|e| e.leaf == 0));
                        prop_assert!(d.entries().len() <= DUMP_CAPACITY);
                        // Exactly one leaf-0 record: the first CPU ends before a second.
                        prop_assert_eq!(d.entries().iter().filter(|e| e.leaf == 0).count(), 1);
                        for e in d.entries() {
                            prop_assert!(d.get(e.leaf, e.subleaf).is_some());
                        }
                        let x = discover_with(&d);
                        for f in x.candidates() {
                            prop_assert_eq!(
                                f.accuracy().is_exact(),
                                matches!(
                                    f.source(),
                                    baretime::Source::CpuidTscLeaf | baretime::Source::HypervisorLeaf
                                )
                            );
                        }
                    }
                    Err(DumpError::Malformed { line }) => {
                        prop_assert!(line >= 1);
                    }
                    Err(_) => {}
                }
            }
        }
    }
}
