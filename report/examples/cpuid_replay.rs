//! Replays recorded CPUID dumps through baretime's x86 discovery, on any host.
//!
//! ```text
//! cargo run --release --example cpuid_replay -- FILE...
//! ```
//!
//! One line per file: the path exactly as given, then
//! `vendor=<12 chars> invariant_tsc=<bool> hypervisor=<bool> tsc_hz=<integer|none> exact=<bool> source=<token>`
//! `hypervisors=<kind@0xBASE,...|none> hyperv_tsc_msr=<bool> disagreements=<a/b:Nppb,...|none> implausible=<source:hz,...|none>`,
//! or `error=<reason>` for a file that cannot be used (unreadable, empty, not CPUID,
//! malformed, or larger than [`MAX_DUMP_BYTES`]: a dump is kilobytes, and a path like
//! `/dev/zero` must not eat the machine's memory). Exit status 0 when every file was usable,
//! 1 otherwise (also without files).
//! The line after the path is [`replay_line`]'s, built from discovery's public accessors
//! ([`baretime_x86::replay`]); the tests below check it.

use std::fmt::{self, Write as _};
use std::io::{Read, Write};
use std::process::ExitCode;

use baretime_x86::{replay, DumpError, HypervisorKind, X86Discovery, X86Features};

/// Writes the replay line for the dump `text` (DESIGN contract 3), returning whether the dump
/// was usable:
///
/// `vendor=<12 chars> invariant_tsc=<bool> hypervisor=<bool> tsc_hz=<integer|none> exact=<bool> source=<token|none>`
/// followed by the keys added since, in this order:
///
/// - `hypervisors=<kind>@0x<base>[,…]|none`: the hypervisor ranges walked, each as its
///   [`HypervisorKind::token`] and base leaf; an unknown signature as
///   `unknown:<signature>@0x<base>` (the signature written like the vendor).
/// - `hyperv_tsc_msr=<bool>`: Hyper-V's feature leaf says HV_X64_MSR_TSC_FREQUENCY can be
///   read (by a ring-0 kernel: the dump cannot hold its value).
/// - `disagreements=<a>/<b>:<ppb>ppb[,…]|none`: candidate pairs further apart than their
///   accuracies allow, the more trusted source first.
/// - `implausible=<source>:<hz>[,…]|none`: claims dropped for a rate no TSC has.
///
/// or `error=<token>` (with ` line=<n>` for a malformed record). Bytes of the vendor that are
/// not printable ASCII (spaces included, as in `"  Shanghai  "`) print as `_`, so the value
/// stays one 12-character token. `tsc_hz` is the best candidate rounded to the Hz.
fn replay_line(text: &[u8], out: &mut impl fmt::Write) -> Result<bool, fmt::Error> {
    match replay(text) {
        Ok(d) => {
            write_discovery(&d, out)?;
            Ok(true)
        }
        Err(e @ DumpError::Malformed { line }) => {
            write!(out, "error={} line={line}", e.token())?;
            Ok(false)
        }
        Err(e) => {
            write!(out, "error={}", e.token())?;
            Ok(false)
        }
    }
}

/// Bytes as one token: printable ASCII as is, anything else (spaces included) as `_`.
struct Token<'a>(&'a [u8]);

impl fmt::Display for Token<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for &c in self.0 {
            f.write_char(if c.is_ascii_graphic() { c as char } else { '_' })?;
        }
        Ok(())
    }
}

/// Writes `items` comma-separated with `each`, or `none` when there are none.
fn write_list<T, W: fmt::Write>(
    out: &mut W,
    items: impl Iterator<Item = T>,
    mut each: impl FnMut(&mut W, T) -> fmt::Result,
) -> fmt::Result {
    let mut first = true;
    for item in items {
        if !first {
            out.write_str(",")?;
        }
        first = false;
        each(out, item)?;
    }
    if first {
        out.write_str("none")?;
    }
    Ok(())
}

fn write_discovery<W: fmt::Write>(d: &X86Discovery, out: &mut W) -> fmt::Result {
    write!(
        out,
        "vendor={} invariant_tsc={} hypervisor={} ",
        Token(d.vendor()),
        d.invariant_tsc(),
        d.features().contains(X86Features::HYPERVISOR)
    )?;
    match d.best() {
        Some(b) => write!(
            out,
            "tsc_hz={} exact={} source={}",
            b.as_hz(),
            b.accuracy().is_exact(),
            b.source().token()
        ),
        None => out.write_str("tsc_hz=none exact=false source=none"),
    }?;
    out.write_str(" hypervisors=")?;
    write_list(out, d.hypervisors().iter(), |out, r| {
        out.write_str(r.kind.token())?;
        if r.kind == HypervisorKind::Unknown {
            write!(out, ":{}", Token(&r.signature))?;
        }
        write!(out, "@{:#010x}", r.base)
    })?;
    write!(out, " hyperv_tsc_msr={}", d.hyperv_tsc_frequency_msr())?;
    out.write_str(" disagreements=")?;
    write_list(out, d.disagreements(), |out, x| {
        write!(out, "{}/{}:{}ppb", x.a.token(), x.b.token(), x.apart_ppb)
    })?;
    out.write_str(" implausible=")?;
    write_list(out, d.implausible().iter(), |out, i| {
        write!(out, "{}:{}", i.source.token(), i.hz)
    })
}

/// Largest file read: a CPUID dump of a whole many-core machine is well under 1 MiB.
const MAX_DUMP_BYTES: u64 = 64 << 20;

/// The file's bytes, or the `error=` text for it.
fn read_dump(path: &std::ffi::OsStr) -> Result<Vec<u8>, String> {
    let unreadable = |e: std::io::Error| format!("error=unreadable kind={:?}", e.kind());
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut bytes = Vec::new();
    file.take(MAX_DUMP_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_DUMP_BYTES {
        return Err(format!("error=too_large max_bytes={MAX_DUMP_BYTES}"));
    }
    Ok(bytes)
}

fn main() -> ExitCode {
    let paths: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: cpuid_replay FILE...");
        return ExitCode::FAILURE;
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut all_usable = true;
    for path in &paths {
        let rest = match read_dump(path) {
            Ok(bytes) => {
                let mut line = String::new();
                // Writing to a String cannot fail.
                all_usable &= replay_line(&bytes, &mut line).unwrap_or(false);
                line
            }
            Err(error) => {
                all_usable = false;
                error
            }
        };
        // The path as given, byte for byte where the platform allows.
        let written = write_path(&mut out, path)
            .and_then(|()| writeln!(out, " {rest}"))
            .and_then(|()| out.flush());
        if written.is_err() {
            // stdout closed (e.g. piped into `head`): nothing more to say.
            return ExitCode::FAILURE;
        }
    }
    if all_usable {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(unix)]
fn write_path(out: &mut impl Write, path: &std::ffi::OsStr) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    out.write_all(path.as_bytes())
}

#[cfg(not(unix))]
fn write_path(out: &mut impl Write, path: &std::ffi::OsStr) -> std::io::Result<()> {
    write!(out, "{}", path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::replay_line;

    fn line(text: &[u8]) -> (bool, String) {
        let mut s = String::new();
        let usable = replay_line(text, &mut s).unwrap();
        (usable, s)
    }

    #[test]
    fn the_contract_line() {
        let dump = b"CPUID 00000000: 00000016-756E6547-6C65746E-49656E69
CPUID 00000001: 000906EA-00100800-7FFAFBFF-BFEBFBFF
CPUID 00000015: 00000002-0000012C-00000000-00000000";
        assert_eq!(
            line(dump),
            (
                true,
                "vendor=GenuineIntel invariant_tsc=false hypervisor=false \
                 tsc_hz=3600000000 exact=false source=cpuid_15h_known_crystal \
                 hypervisors=none hyperv_tsc_msr=false disagreements=none implausible=none"
                    .to_string()
            )
        );
        assert_eq!(line(b"not a dump"), (false, "error=not_cpuid".to_string()));
        assert_eq!(
            line(b"CPUID 00000000: 1-2-3\n"),
            (false, "error=malformed line=1".to_string())
        );
        assert_eq!(
            line(b"basic_cpuid[0]=00000000 20202020 20202020 20202020").1,
            "vendor=____________ invariant_tsc=false hypervisor=false tsc_hz=none exact=false \
             source=none hypervisors=none hyperv_tsc_msr=false disagreements=none implausible=none"
        );
    }

    /// Every list key at once: an unknown hypervisor with a Hyper-V interface behind it (walk
    /// order), a disagreement and two implausible claims.
    #[test]
    fn every_list_key() {
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
        assert_eq!(
            line(text.as_bytes()).1,
            "vendor=GenuineIntel invariant_tsc=false hypervisor=true tsc_hz=4104000000 \
exact=false source=cpuid_15h_known_crystal hypervisors=unknown:VBoxVBoxVBox@0x40000000,\
hyperv@0x40000100 hyperv_tsc_msr=true \
disagreements=cpuid_15h_known_crystal/brand_string:1192982456ppb \
implausible=cpuid_15h_derived_crystal:65534999994,cpuid_16h:65535000000"
        );
    }

    /// The corpus's lines all have the contract's keys, in its order.
    #[test]
    fn corpus_lines_have_the_contract_shape() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../crates/baretime-x86/tests/data/intel/x86-64/skylake");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            eprintln!("skipped: no corpus at {}", dir.display());
            return;
        };
        let mut n = 0;
        for e in entries {
            let text = std::fs::read(e.unwrap().path()).unwrap();
            let (usable, l) = line(&text);
            assert!(usable, "{l}");
            let keys: Vec<&str> = l
                .split(' ')
                .map(|kv| kv.split_once('=').unwrap().0)
                .collect();
            assert_eq!(
                keys,
                [
                    "vendor",
                    "invariant_tsc",
                    "hypervisor",
                    "tsc_hz",
                    "exact",
                    "source",
                    "hypervisors",
                    "hyperv_tsc_msr",
                    "disagreements",
                    "implausible"
                ]
            );
            n += 1;
        }
        assert!(n >= 5, "{n} dumps");
    }
}
