//! Host-side helpers shared by the examples (not an example itself: cargo only discovers
//! `examples/*.rs` and `examples/*/main.rs`).

/// The kernel's own TSC figure in Hz, and where it came from: sysfs `tsc_freq_khz` where the
/// kernel exports it, else the last "tsc: Refined TSC clocksource calibration" or the
/// "tsc: Detected … MHz" line of `dmesg`.
#[allow(dead_code)] // not every example uses it on every architecture
pub fn kernel_tsc_hz() -> Option<(f64, &'static str)> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/tsc_freq_khz") {
        if let Ok(khz) = s.trim().parse::<f64>() {
            return Some((khz * 1e3, "sysfs tsc_freq_khz"));
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
            let Some(mhz) = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
            else {
                continue;
            };
            let refined = marker.contains("Refined");
            if refined || best.is_none() {
                best = Some((
                    mhz * 1e6,
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
