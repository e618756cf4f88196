//! What both kernels do with the crate, whatever the architecture: calibrate the CPU counter
//! against a reference, verify what discovery claimed, build a [`Clock`], and time a
//! [`baretime::Delay`] with the reference. Results go out as `key=value` text.

use core::fmt::{self, Write};
use core::time::Duration;

use baretime::{calibrate_and_verify, Config, Reference, Verdict, Verified};
use baretime::{Clock, Counter, Frequency};

/// The kernel command line: `mode=calibrate|delay reference=… lie_hz=… cntfrq=… delay_ns=…`.
#[derive(Clone, Copy, Debug)]
pub struct Args<'a> {
    /// `calibrate` (the default) or `delay`.
    pub mode: &'a str,
    /// x86: `pit`, `hpet` (the default) or `acpipm`.
    pub reference: &'a str,
    /// x86: make leaf 0x15 claim this frequency (the lying-CPUID scenario).
    pub lie_hz: Option<u64>,
    /// aarch64: write this to CNTFRQ_EL0 first (the bad-firmware scenario).
    pub cntfrq: Option<u64>,
    /// How long the delay scenario waits each time.
    pub delay_ns: u64,
    /// Longest calibration, in milliseconds of reference time.
    pub max_ms: u64,
    /// x86 under `-icount` (`cargo xtask coverage x86_64`): each reference read is preceded
    /// by a spin of 0 to 63 loop turns drawn from this seed ([`Spun`]), so that boots of a
    /// deterministic machine differ.
    pub seed: Option<u64>,
}

impl<'a> Args<'a> {
    /// Reads `key=value` words; unknown words (QEMU puts the kernel path first) are ignored.
    pub fn parse(cmdline: &'a str) -> Args<'a> {
        let mut args = Args {
            mode: "calibrate",
            reference: "hpet",
            lie_hz: None,
            cntfrq: None,
            delay_ns: 10_000_000,
            max_ms: 200,
            seed: None,
        };
        for (key, value) in cmdline.split_whitespace().filter_map(|w| w.split_once('=')) {
            match key {
                "mode" => args.mode = value,
                "reference" => args.reference = value,
                "lie_hz" => args.lie_hz = value.parse().ok(),
                "cntfrq" => args.cntfrq = value.parse().ok(),
                "delay_ns" => args.delay_ns = value.parse().unwrap_or(args.delay_ns),
                "max_ms" => args.max_ms = value.parse().unwrap_or(args.max_ms),
                "seed" => args.seed = value.parse().ok(),
                _ => {}
            }
        }
        args
    }
}

/// The command line's `key=value` for `key`, parsed (`None` if absent or unparsable): the
/// words each mode reads beyond [`Args`].
pub fn word<T: core::str::FromStr>(cmdline: &str, key: &str) -> Option<T> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
}

/// How long to calibrate: until the measurement is good to 1 ppm, or for at most `max_ms`
/// of reference time (200 ms unless the command line says otherwise), whichever comes first.
/// Under QEMU each reference read is emulated and the host is noisy; the result carries its
/// honest bound either way.
pub fn config(max_ms: u64) -> Config {
    Config::new()
        .with_target_ppb(1_000)
        .with_max_duration(Duration::from_millis(max_ms))
}

/// A reference whose every read is preceded by a spin of 0 to 63 loop turns, drawn from a
/// seed (xorshift64): under `-icount` a machine is deterministic, and the spins make each
/// seed's boot a different sampling cadence and a different start phase against the
/// reference's ticks, as the jitter of a real machine does. Without a seed it reads straight
/// through. (x86 only: the aarch64 kernel's reference, semihosting, is the host's clock.)
#[cfg(target_arch = "x86_64")]
pub struct Spun<R> {
    inner: R,
    state: u64,
}

#[cfg(target_arch = "x86_64")]
impl<R> Spun<R> {
    /// Wraps `inner`; the seed 0 is taken as 1 (xorshift's fixed point), none spins never.
    pub fn new(inner: R, seed: Option<u64>) -> Self {
        Spun {
            inner,
            state: seed.map_or(0, |s| s.max(1)),
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl<R: Reference> Reference for Spun<R> {
    fn read(&mut self) -> u64 {
        if self.state == 0 {
            return self.inner.read();
        }
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        for _ in 0..(x >> 58) {
            core::hint::spin_loop();
        }
        self.inner.read()
    }
    fn bits(&self) -> u32 {
        self.inner.bits()
    }
    fn frequency(&self) -> Frequency {
        self.inner.frequency()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

/// Sends `s` to a serial port's byte writer `put`, with `\n` as `\r\n` as terminals expect.
pub fn write_crlf(s: &str, mut put: impl FnMut(u8)) {
    for b in s.bytes() {
        if b == b'\n' {
            put(b'\r');
        }
        put(b);
    }
}

/// How many calibrations to try before giving up.
const ATTEMPTS: u32 = 3;

/// A rate in millihertz as `hz.mmm`.
pub struct Hz(pub u64);

impl fmt::Display for Hz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Parts per billion as `±ppm.mmm`.
pub struct Ppm(pub i64);

impl fmt::Display for Ppm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let a = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}", a / 1000, a % 1000)
    }
}

/// Prints what discovery claims: `discovered_hz=… discovered_source=…` (or `none`).
pub fn print_claim(out: &mut impl Write, claim: Option<Frequency>) {
    let _ = match claim {
        Some(f) => writeln!(
            out,
            "discovered_hz={} discovered_source={}",
            f.as_hz(),
            f.source()
        ),
        None => writeln!(out, "discovered_hz=none discovered_source=none"),
    };
}

/// Calibrates `counter` against `reference`, verifies `claim`, and prints the outcome.
/// `None` (after printing `error=…`) if calibration failed.
pub fn calibrate<C: Counter, R: Reference>(
    out: &mut impl Write,
    counter: C,
    mut reference: R,
    claim: Option<Frequency>,
    config: Config,
) -> Option<Verified> {
    let name = reference.name();
    let _ = writeln!(
        out,
        "reference={name} reference_hz={}",
        Hz(reference.frequency().as_millihz())
    );
    // A calibration error says this window could not be trusted (a reference glitch, a
    // stall): a kernel tries again a few times before it gives up, and says so.
    let mut attempt = 1;
    let verified = loop {
        match calibrate_and_verify(&counter, &mut reference, claim, config) {
            Ok(v) => break v,
            Err(e) => {
                let _ = writeln!(out, "calibration_error_{attempt}=\"{e}\"");
                if attempt == ATTEMPTS {
                    let _ = writeln!(out, "error=calibration_failed attempts={attempt}");
                    return None;
                }
                attempt += 1;
            }
        }
    };
    let _ = writeln!(out, "attempts={attempt}");
    let c = &verified.calibration;
    let _ = writeln!(
        out,
        "calibrated_hz={} uncertainty_ppm={} measurement_ppm={} samples={} rejected={} calibration_ms={}.{:03} met_target={}",
        Hz(c.frequency.as_millihz()),
        Ppm(c.frequency.accuracy().bound_ppb() as i64),
        Ppm(c.measurement_ppb as i64),
        c.samples_used,
        c.samples_rejected,
        c.duration.as_millis(),
        c.duration.as_micros() % 1000,
        c.met_target,
    );
    let (verdict, allowed) = match verified.verdict {
        Verdict::Unclaimed => ("unclaimed", None),
        Verdict::Confirmed { allowed_ppb, .. } => ("confirmed", Some(allowed_ppb)),
        Verdict::Consistent { allowed_ppb, .. } => ("consistent", Some(allowed_ppb)),
        Verdict::Disagrees { allowed_ppb, .. } => ("disagrees", Some(allowed_ppb)),
        _ => ("other", None),
    };
    let _ = write!(out, "verdict={verdict}");
    match (verified.verdict.deviation_ppb(), allowed) {
        (Some(d), Some(a)) => {
            let _ = write!(
                out,
                " deviation_ppm={} allowed_ppm={}",
                Ppm(d),
                Ppm(a as i64)
            );
        }
        _ => {
            let _ = write!(out, " deviation_ppm=none");
        }
    }
    let _ = writeln!(
        out,
        " chosen_hz={} chosen_source={}",
        Hz(verified.chosen.as_millihz()),
        verified.chosen.source()
    );
    let _ = writeln!(out, "# {}", verified.verdict);
    Some(verified)
}

/// Times `runs` delays of `ns` nanoseconds on `clock` (started at `verified.chosen`), each
/// measured by `reference` (read just before and just after, so the measured span contains
/// the whole delay). Prints `delay_measured_ns=a,b,…` and the allowance a fair check grants:
/// one reference tick of resolution plus the delay's share of the calibration's uncertainty.
pub fn time_delays<C: Counter, R: Reference>(
    out: &mut impl Write,
    clock: &Clock<C>,
    mut reference: R,
    verified: &Verified,
    ns: u64,
    runs: u32,
) {
    let delay = clock.delay();
    let ref_mhz = u128::from(reference.frequency().as_millihz().max(1));
    let width = baretime::Width::new(reference.bits());
    let _ = write!(out, "delay_ns={ns} delay_measured_ns=");
    for i in 0..runs {
        let start = reference.read();
        delay.wait_ns(ns);
        let end = reference.read();
        let ticks = u128::from(width.delta(start, end));
        // ticks / (mHz / 1000) seconds = ticks × 10^12 / mHz nanoseconds.
        let measured = ticks * 1_000_000_000_000 / ref_mhz;
        let _ = write!(out, "{}{measured}", if i == 0 { "" } else { "," });
    }
    let tick_ns = 1_000_000_000_000u128.div_ceil(ref_mhz);
    let share = u128::from(ns) * u128::from(verified.calibration.frequency.accuracy().bound_ppb())
        / 1_000_000_000;
    let _ = writeln!(out, " delay_allowance_ns={}", tick_ns + share + 1);
}
