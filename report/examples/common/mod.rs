//! Host-side helpers shared by the examples (not an example itself: cargo only discovers
//! `examples/*.rs` and `examples/*/main.rs`).

/// The kernel's own TSC figure in Hz, and where it came from (see [`kernel_tsc_millihz`]).
#[allow(dead_code)] // not every example uses it on every architecture
pub fn kernel_tsc_hz() -> Option<(f64, &'static str)> {
    kernel_tsc_millihz().map(|(mhz, src)| (mhz as f64 / 1e3, src))
}

/// The kernel's own TSC figure in millihertz, exactly as the kernel states it (no floating
/// point), and where it came from: sysfs `tsc_freq_khz` where the kernel exports it, else the
/// last "tsc: Refined TSC clocksource calibration" or the "tsc: Detected … MHz" line of
/// `dmesg`.
#[allow(dead_code)] // not every example uses it on every architecture
pub fn kernel_tsc_millihz() -> Option<(u64, &'static str)> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/tsc_freq_khz") {
        // kHz → mHz: six decimal places.
        if let Some(m) = parse_scaled(s.trim(), 6) {
            return Some((m, "sysfs tsc_freq_khz"));
        }
    }
    let out = std::process::Command::new("dmesg").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut best = None;
    for line in text.lines() {
        for marker in [
            "tsc: Refined TSC clocksource calibration: ",
            "tsc: Detected ",
        ] {
            let Some(rest) = line.split(marker).nth(1) else {
                continue;
            };
            // MHz → mHz: nine decimal places.
            let Some(m) = rest
                .split_whitespace()
                .next()
                .and_then(|v| parse_scaled(v, 9))
            else {
                continue;
            };
            let refined = marker.contains("Refined");
            if refined || best.is_none() {
                best = Some((
                    m,
                    if refined {
                        "dmesg refined"
                    } else {
                        "dmesg detected"
                    },
                ));
            }
        }
    }
    best
}

/// A non-negative decimal such as `2592.001` times 10^`shift`, exactly (digits past `shift`
/// decimals are dropped); `None` for anything else or on overflow.
fn parse_scaled(s: &str, shift: u32) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut v = int
        .parse::<u64>()
        .ok()?
        .checked_mul(10u64.checked_pow(shift)?)?;
    let mut place = 10u64.pow(shift);
    for b in frac.bytes().take(shift as usize) {
        place /= 10;
        v = v.checked_add(u64::from(b - b'0') * place)?;
    }
    Some(v)
}
