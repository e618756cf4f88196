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
//! The line after the path comes from [`baretime_x86::write_replay_line`], which
//! the tests check.

use std::io::{Read, Write};
use std::process::ExitCode;

use baretime_x86::write_replay_line;

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
                all_usable &= write_replay_line(&bytes, &mut line).unwrap_or(false);
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
