//! The local APIC timer as a [`baretime::Alarm`]: TSC-deadline mode where the CPU offers it,
//! else one-shot mode with its rate calibrated against the TSC.
//!
//! Intel SDM vol. 3A, 11.5.4 ("APIC Timer") and 11.5.4.1 ("TSC-Deadline Mode"); AMD APM
//! vol. 2, 16.4.1. The registers, as xAPIC MMIO offsets (x2APIC: MSR `0x800 + offset / 16`):
//! LVT timer 0x320, initial count 0x380, current count 0x390, divide configuration 0x3E0, EOI
//! 0x0B0.

use core::ptr;
use core::time::Duration;

use baretime::{calibrate, Alarm, CalibrationError, Config, Counter, CounterReference, Frequency};

use crate::cpuid::{CpuidSource, NativeCpuid};
use crate::msr::{rdmsr, wrmsr};
use crate::Tsc;

/// `IA32_TSC_DEADLINE`: the TSC value at which the timer fires in TSC-deadline mode; 0 disarms.
const IA32_TSC_DEADLINE: u32 = 0x6E0;
/// The x2APIC MSRs start here; register `offset` (xAPIC) is MSR `X2APIC_BASE + offset / 16`.
const X2APIC_BASE: u32 = 0x800;

const REG_EOI: u32 = 0x0B0;
const REG_LVT_TIMER: u32 = 0x320;
const REG_INITIAL_COUNT: u32 = 0x380;
const REG_CURRENT_COUNT: u32 = 0x390;
const REG_DIVIDE: u32 = 0x3E0;

/// LVT timer: masked.
const LVT_MASKED: u32 = 1 << 16;
/// LVT timer mode, bits 18:17: 00 one-shot, 01 periodic, 10 TSC-deadline.
const LVT_PERIODIC: u32 = 0b01 << 17;
const LVT_TSC_DEADLINE: u32 = 0b10 << 17;

/// Fractional bits of [`Mode::OneShot`]'s rate: APIC counts per TSC tick × 2^32.
const RATE_SHIFT: u32 = 32;
/// The divider is chosen so that the longest countdown (2^32 − 1 counts) lasts at least this
/// many ns: a one-shot armed further ahead fires early, at the clamp, and re-arms.
const MIN_RANGE_NS: u64 = 1_000_000_000;
/// How long the one-shot calibration measures, at most (TSC time); it stops at 1 ppm, in a
/// few ms where an APIC read is fast. Under nested virtualisation a read can take 0.5 ms.
const CALIBRATION_MS: u64 = 100;

/// A local APIC, as this CPU reaches it: the xAPIC's MMIO page or the x2APIC's MSRs.
///
/// A value names a way of access, not a CPU: every CPU's local APIC sits at the same address
/// (and the same MSRs), and each access reaches the APIC of the CPU it runs on. It is `Copy`:
/// give one to [`ApicTimer::new`] and keep one for [`LocalApic::eoi`] in the interrupt handler.
///
/// Enabling the APIC (the spurious-interrupt vector register's bit 8, and in x2APIC mode
/// `IA32_APIC_BASE`'s EXTD bit), routing and masking the other LVT entries, and the IDT stay
/// the kernel's; the timer raises nothing while the APIC is software-disabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LocalApic {
    /// The xAPIC's register page; `None` for x2APIC MSR access.
    base: Option<usize>,
}

impl LocalApic {
    /// The local APIC in xAPIC mode, through its 4 KiB register page at `base` (the address in
    /// `IA32_APIC_BASE`, 0xFEE0_0000 unless firmware moved it).
    ///
    /// # Safety
    ///
    /// - `base` is where this code reaches the local APIC's register page (identity-mapped or
    ///   wherever the kernel mapped it), mapped uncached (device memory), readable and
    ///   writable on every CPU that uses the value, for as long as any copy of it is used;
    ///   the APIC is in xAPIC mode there (in x2APIC mode the page does not answer).
    /// - The code that uses it runs at CPL 0 ([`ApicTimer`] in TSC-deadline mode writes an
    ///   MSR).
    /// - The APIC timer (its LVT entry, initial count, divide configuration and
    ///   `IA32_TSC_DEADLINE`) belongs to the [`ApicTimer`] made from it: nothing else writes
    ///   them while it is used.
    pub const unsafe fn xapic(base: usize) -> LocalApic {
        LocalApic { base: Some(base) }
    }

    /// The local APIC in x2APIC mode, through its MSRs (0x800 and up).
    ///
    /// # Safety
    ///
    /// - x2APIC mode is enabled (`IA32_APIC_BASE` bits 11 and 10) on every CPU that uses the
    ///   value, for as long as any copy of it is used: otherwise the MSRs raise #GP.
    /// - The code that uses it runs at CPL 0.
    /// - The APIC timer belongs to the [`ApicTimer`] made from it, as for
    ///   [`LocalApic::xapic`].
    pub const unsafe fn x2apic() -> LocalApic {
        LocalApic { base: None }
    }

    /// Signals the end of the interrupt being handled (writes 0 to the EOI register): the
    /// last thing an APIC interrupt handler does before it returns, the timer's included.
    #[inline]
    pub fn eoi(&self) {
        self.write(REG_EOI, 0);
    }

    /// Reads the 32-bit register at xAPIC `offset`.
    fn read(&self, offset: u32) -> u32 {
        match self.base {
            // SAFETY: `xapic`'s contract: the page is mapped uncached and readable; `offset`
            // is one of this module's register offsets, 16-byte aligned within the page.
            Some(base) => unsafe {
                ptr::read_volatile(base.wrapping_add(offset as usize) as *const u32)
            },
            // SAFETY: `x2apic`'s contract: x2APIC mode is on and this runs at CPL 0, so the
            // MSR of each register this module names exists and reads without side effects.
            None => unsafe { rdmsr(X2APIC_BASE.wrapping_add(offset >> 4)) as u32 },
        }
    }

    /// Writes the 32-bit register at xAPIC `offset`.
    fn write(&self, offset: u32, value: u32) {
        match self.base {
            // SAFETY: `xapic`'s contract: the page is mapped uncached and writable, and the
            // timer's registers (and EOI) are this token's to write.
            Some(base) => unsafe {
                ptr::write_volatile(base.wrapping_add(offset as usize) as *mut u32, value)
            },
            // SAFETY: `x2apic`'s contract: x2APIC mode, CPL 0. Every value this module writes
            // has the register's reserved bits clear (EOI takes 0; LVT timer, counts and
            // divide take what `ApicTimer` computes), so WRMSR does not fault.
            None => unsafe { wrmsr(X2APIC_BASE.wrapping_add(offset >> 4), u64::from(value)) },
        }
    }
}

/// Why [`ApicTimer::new`] or [`ApicTimer::one_shot`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ApicTimerError {
    /// The vector is below 16: the APIC refuses to deliver vectors 0–15 (an illegal-vector
    /// error instead of an interrupt). Kernels use 32–255.
    BadVector(u8),
    /// One-shot mode: measuring the APIC timer's rate against the TSC failed.
    Calibration(CalibrationError),
}

impl core::fmt::Display for ApicTimerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ApicTimerError::BadVector(v) => write!(f, "APIC timer vector {v} is below 16"),
            ApicTimerError::Calibration(e) => write!(f, "APIC timer calibration: {e}"),
        }
    }
}

impl core::error::Error for ApicTimerError {}

/// How the timer is armed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Mode {
    /// `IA32_TSC_DEADLINE` takes the TSC value itself.
    TscDeadline,
    /// A countdown: `rate` is APIC counts (after the divider) per TSC tick × 2^32.
    OneShot { rate: u64 },
}

/// The local APIC timer of the CPU it runs on, set up to interrupt at a TSC value: a
/// [`baretime::Alarm`] for a [`baretime::Clock`] on the [`Tsc`], so that
/// [`Clock::deadline`](baretime::Clock::deadline)'s ticks can be armed on it as they are.
///
/// - **TSC-deadline mode** where CPUID.01H:ECX\[24\] says the CPU has it (KVM with its
///   in-kernel APIC, on Intel and AMD hosts alike; most Intel CPUs since Sandy Bridge; not
///   AMD's own CPUs up to Zen 4, nor QEMU's TCG):
///   [`Alarm::arm`]`(t)` writes `t` to `IA32_TSC_DEADLINE`, and the timer fires when the TSC
///   reaches `t`, at once if it has. Exact: nothing is converted.
/// - **One-shot mode** otherwise: the APIC timer counts down at its own rate (the bus or
///   crystal clock through a divider), which [`ApicTimer::new`] measures against the TSC with
///   [`baretime::calibrate`] (until 1 ppm, 100 ms at most), choosing the divider that lets one
///   countdown last at least 1 s. [`Alarm::arm`]`(t)` reads the TSC and starts a countdown of
///   the distance to `t` in APIC counts, rounded up; a `t` already passed counts 1, at once;
///   a distance beyond 2^32 − 1 counts is clamped and fires early (the contract allows it:
///   [`Clock::check`](baretime::Clock::check) re-arms). The wake can be late by what the
///   conversion cannot know: one APIC count, the time between the TSC read and the count's
///   write (a VM exit under virtualisation), and the measured rate's error times the distance
///   (1 ppm of a 100 ms sleep is 100 ns).
///
/// The LVT timer entry is written once, by the constructor, with the caller's vector and
/// unmasked. The interrupt handler is the kernel's: it calls [`LocalApic::eoi`] and runs
/// [`Clock::check`](baretime::Clock::check) (or an embassy driver's `on_alarm`). Arm it from
/// the CPU whose APIC it set up: on another CPU it arms that CPU's timer, whose mode was not
/// set (the values are the same for every CPU, but the setup is per CPU: make one per CPU).
///
/// ```no_run
/// # #[cfg(target_arch = "x86_64")] {
/// use baretime::{Alarm, Clock, Frequency, Wake};
/// use core::time::Duration;
/// use baretime_x86::{ApicTimer, LocalApic, Tsc};
///
/// // SAFETY: CLOCK reads the TSC only once started, after `Tsc::probe` succeeded.
/// static CLOCK: Clock<Tsc> = Clock::uninit(unsafe { Tsc::new_unchecked() });
/// const TIMER_VECTOR: u8 = 0x40;
///
/// fn boot(tsc_hz: Frequency) -> Result<(), baretime_x86::ApicTimerError> {
///     let tsc = Tsc::probe().expect("a TSC");
///     CLOCK.start(tsc_hz).unwrap();
///     // SAFETY: ring 0; the APIC is in xAPIC mode at its default address, identity-mapped
///     // uncached and enabled (SVR bit 8); the IDT routes TIMER_VECTOR to `on_timer`; the timer
///     // is this kernel's alone.
///     let apic = unsafe { LocalApic::xapic(0xFEE0_0000) };
///     let timer = ApicTimer::new(apic, tsc, tsc_hz, TIMER_VECTOR)?;
///
///     // Sleep until 1 ms from now: arm, wait for the interrupt, check, re-arm if early.
///     let mut deadline = CLOCK.deadline(CLOCK.now().saturating_add(Duration::from_millis(1))).unwrap();
///     timer.arm(deadline.ticks());
///     loop {
///         wait_for_timer_interrupt(); // `sti; hlt`, or the scheduler's idle loop
///         match CLOCK.check(deadline) {
///             Wake::Fired => break, // CLOCK.now() is at or past the instant: never early
///             Wake::Rearm(next) => {
///                 deadline = next;
///                 timer.arm(deadline.ticks());
///             }
///         }
///     }
///     Ok(())
/// }
///
/// // The timer's interrupt handler (vector TIMER_VECTOR): acknowledge, and wake the sleeper.
/// fn on_timer() {
///     // SAFETY: as in `boot`.
///     unsafe { LocalApic::xapic(0xFEE0_0000) }.eoi();
/// }
/// # fn wait_for_timer_interrupt() {}
/// # let _ = boot(Frequency::exact_hz(2_000_000_000).unwrap());
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ApicTimer {
    apic: LocalApic,
    tsc: Tsc,
    mode: Mode,
}

impl ApicTimer {
    /// Sets up this CPU's APIC timer to interrupt on `vector` at TSC values: in TSC-deadline
    /// mode where CPUID offers it, else in one-shot mode calibrated against the TSC (up to
    /// 100 ms; `tsc_hz` is the TSC's rate as the caller knows it, which only scales the
    /// measurement: the countdown is computed in TSC ticks, so a later recalibration of the
    /// clock does not touch it). The timer is left disarmed.
    ///
    /// [`ApicTimerError::BadVector`] for a vector below 16; [`ApicTimerError::Calibration`]
    /// if one-shot calibration fails (an APIC timer that does not count).
    pub fn new(
        apic: LocalApic,
        tsc: Tsc,
        tsc_hz: Frequency,
        vector: u8,
    ) -> Result<ApicTimer, ApicTimerError> {
        if offers_tsc_deadline(&NativeCpuid) {
            ApicTimer::deadline_mode(apic, tsc, vector)
        } else {
            ApicTimer::one_shot(apic, tsc, tsc_hz, vector)
        }
    }

    /// As [`ApicTimer::new`], in one-shot mode whatever CPUID says: for a CPU whose
    /// TSC-deadline mode is known to be broken (Linux keeps a list of microcode errata), or
    /// to test one-shot mode where both exist.
    pub fn one_shot(
        apic: LocalApic,
        tsc: Tsc,
        tsc_hz: Frequency,
        vector: u8,
    ) -> Result<ApicTimer, ApicTimerError> {
        check_vector(vector)?;
        // Count down from 2^32 − 1, periodic and masked: a 32-bit up-counter to measure.
        apic.write(REG_LVT_TIMER, LVT_MASKED | LVT_PERIODIC | u32::from(vector));
        apic.write(REG_DIVIDE, divide_config(0));
        apic.write(REG_INITIAL_COUNT, u32::MAX);
        let config = Config::new()
            .with_target_ppb(1_000)
            .with_max_duration(Duration::from_millis(CALIBRATION_MS))
            .with_min_samples(16);
        let measured = calibrate(
            ApicCount { apic },
            CounterReference::new(tsc, tsc_hz).with_name("tsc"),
            config,
        );
        apic.write(REG_INITIAL_COUNT, 0);
        let cal = measured.map_err(ApicTimerError::Calibration)?;
        let (shift, rate) = one_shot_rate(cal.frequency.as_millihz(), tsc_hz.as_millihz());
        apic.write(REG_DIVIDE, divide_config(shift));
        apic.write(REG_LVT_TIMER, u32::from(vector));
        Ok(ApicTimer {
            apic,
            tsc,
            mode: Mode::OneShot { rate },
        })
    }

    fn deadline_mode(apic: LocalApic, tsc: Tsc, vector: u8) -> Result<ApicTimer, ApicTimerError> {
        check_vector(vector)?;
        apic.write(REG_INITIAL_COUNT, 0);
        apic.write(REG_LVT_TIMER, LVT_TSC_DEADLINE | u32::from(vector));
        // SDM 11.5.4.1: in xAPIC mode the LVT write (to memory) must be ordered before the
        // first WRMSR to IA32_TSC_DEADLINE, or that write may be ignored.
        // SAFETY: MFENCE exists on every x86_64 CPU (SSE2) and only orders memory.
        unsafe { core::arch::asm!("mfence", options(nostack, preserves_flags)) };
        let timer = ApicTimer {
            apic,
            tsc,
            mode: Mode::TscDeadline,
        };
        timer.disarm();
        Ok(timer)
    }

    /// Whether the timer runs in TSC-deadline mode (`false`: one-shot, calibrated).
    pub const fn is_tsc_deadline(&self) -> bool {
        matches!(self.mode, Mode::TscDeadline)
    }

    fn write_deadline(&self, value: u64) {
        // Linux's `weak_wrmsr_fence`: WRMSR to IA32_TSC_DEADLINE is not serialising, so
        // earlier stores could otherwise pass it.
        // SAFETY: `LocalApic`'s contract: CPL 0. IA32_TSC_DEADLINE exists (TSC-deadline mode
        // was chosen from CPUID.01H:ECX[24]) and takes any 64-bit value. MFENCE and LFENCE
        // exist on every x86_64 CPU and only order.
        unsafe {
            core::arch::asm!("mfence", "lfence", options(nostack, preserves_flags));
            wrmsr(IA32_TSC_DEADLINE, value);
        }
    }
}

impl Alarm for ApicTimer {
    /// Arms for TSC value `ticks`: see [`ApicTimer`] for each mode.
    fn arm(&self, ticks: u64) {
        match self.mode {
            // 0 would disarm: a deadline of 1 is as passed as 0.
            Mode::TscDeadline => self.write_deadline(ticks.max(1)),
            Mode::OneShot { rate } => {
                let now = self.tsc.read_ordered();
                self.apic
                    .write(REG_INITIAL_COUNT, countdown(ticks.wrapping_sub(now), rate));
            }
        }
    }

    fn disarm(&self) {
        match self.mode {
            Mode::TscDeadline => self.write_deadline(0),
            Mode::OneShot { .. } => self.apic.write(REG_INITIAL_COUNT, 0),
        }
    }
}

/// The APIC timer's current count in periodic mode from 2^32 − 1, turned into a 32-bit
/// up-counter: what one-shot calibration measures.
struct ApicCount {
    apic: LocalApic,
}

impl Counter for ApicCount {
    fn ticks(&self) -> u64 {
        u64::from(!self.apic.read(REG_CURRENT_COUNT))
    }
    fn bits(&self) -> u32 {
        32
    }
}

/// Whether CPUID.01H:ECX\[24\] (TSC-deadline timer) is set, leaf 1 existing.
fn offers_tsc_deadline<S: CpuidSource + ?Sized>(cpuid: &S) -> bool {
    cpuid.cpuid(0, 0).eax >= 1 && cpuid.cpuid(1, 0).ecx & (1 << 24) != 0
}

fn check_vector(vector: u8) -> Result<(), ApicTimerError> {
    if vector < 16 {
        Err(ApicTimerError::BadVector(vector))
    } else {
        Ok(())
    }
}

/// The divide configuration register's value for a divider of 2^`shift` (`shift` 0..=7):
/// bits 3, 1:0 = 1011b for ÷1, else `shift − 1` in them.
const fn divide_config(shift: u32) -> u32 {
    if shift == 0 {
        0b1011
    } else {
        let v = shift.wrapping_sub(1) & 0b111;
        (v & 0b11) | ((v & 0b100) << 1)
    }
}

/// For an APIC timer counting at `apic_millihz` (undivided) and a TSC at `tsc_millihz`:
/// the divider's shift (the least, up to ÷128, with which 2^32 − 1 counts last
/// [`MIN_RANGE_NS`]) and the rate after it, APIC counts per TSC tick × 2^32, rounded to
/// nearest (at least 1).
fn one_shot_rate(apic_millihz: u64, tsc_millihz: u64) -> (u32, u64) {
    // Counts in MIN_RANGE_NS at the undivided rate: apic_millihz × 10^9 ns / (10^3 × 10^9).
    // (u64 × u64 fits in u128.)
    let per_range =
        (u128::from(apic_millihz) / 1_000).saturating_mul(u128::from(MIN_RANGE_NS)) / 1_000_000_000;
    let mut shift = 0u32;
    while shift < 7 && per_range >> shift > u128::from(u32::MAX) {
        shift = shift.saturating_add(1);
    }
    let tsc = u128::from(tsc_millihz.max(1));
    let scaled = u128::from(apic_millihz) << RATE_SHIFT >> shift;
    let rate = scaled.saturating_add(tsc / 2).checked_div(tsc).unwrap_or(0);
    (shift, crate::saturate_u64(rate).max(1))
}

/// The initial count for a countdown of `distance` TSC ticks at `rate` (APIC counts per TSC
/// tick × 2^32): rounded up, clamped to 2^32 − 1 (early, allowed), and 1 — at once — for a
/// distance of 0 or one that has passed (2^63 or more: negative as a signed distance).
fn countdown(distance: u64, rate: u64) -> u32 {
    if distance == 0 || distance > i64::MAX as u64 {
        return 1;
    }
    // A u64 × u64 product fits in u128: saturation never happens.
    let counts = u128::from(distance)
        .saturating_mul(u128::from(rate))
        .div_ceil(1 << RATE_SHIFT);
    if counts > u128::from(u32::MAX) {
        u32::MAX
    } else {
        (counts as u32).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuidRegs;
    use proptest::prelude::*;

    /// A CPUID whose leaf 1 ECX is `ecx`, top basic leaf `max`.
    fn cpuid(max: u32, ecx: u32) -> impl Fn(u32, u32) -> CpuidRegs {
        move |leaf: u32, _sub: u32| match leaf {
            0 => CpuidRegs {
                eax: max,
                ..CpuidRegs::default()
            },
            1 => CpuidRegs {
                ecx,
                ..CpuidRegs::default()
            },
            _ => CpuidRegs::default(),
        }
    }

    #[test]
    fn mode_follows_cpuid_leaf_1_ecx_24() {
        assert!(offers_tsc_deadline(&cpuid(0xd, 1 << 24)));
        assert!(offers_tsc_deadline(&cpuid(1, u32::MAX)));
        assert!(!offers_tsc_deadline(&cpuid(0xd, !(1 << 24))));
        // No leaf 1: whatever it would say is not read.
        assert!(!offers_tsc_deadline(&cpuid(0, 1 << 24)));
    }

    /// Leaf 1 of recorded CPUs (tests/data, libcpuid's corpus; skipped where the corpus is
    /// not shipped): an Intel Skylake and a KVM guest on a Xeon have TSC-deadline, AMD's Zen 3
    /// and Zen 4 on bare metal do not.
    #[cfg(feature = "dump")]
    #[test]
    fn mode_from_recorded_cpuid_dumps() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        if !data.is_dir() {
            eprintln!("tests/data absent: skipped");
            return;
        }
        for (file, want) in [
            ("intel/x86-64/skylake/intel-core-i3-8350k-cpu.test", true),
            ("kvm-guest-xeon-2300mhz.cpuid-r.txt", true),
            (
                "amd/zen3/amd-ryzen-7-5800h-with-radeon-graphics.test",
                false,
            ),
            ("amd/zen4/amd-ryzen-7-7700x-8-core-processor.test", false),
        ] {
            let text = std::fs::read(data.join(file)).unwrap();
            let dump = crate::Dump::parse(&text).unwrap();
            assert_eq!(offers_tsc_deadline(&dump), want, "{file}");
        }
    }

    #[test]
    fn vectors_below_16_are_refused() {
        assert_eq!(check_vector(15), Err(ApicTimerError::BadVector(15)));
        assert_eq!(check_vector(0), Err(ApicTimerError::BadVector(0)));
        assert_eq!(check_vector(16), Ok(()));
        assert_eq!(check_vector(255), Ok(()));
    }

    #[test]
    fn divide_configuration_encoding() {
        // SDM table: ÷1 1011b, ÷2 0000b, ÷4 0001b, ÷8 0010b, ÷16 0011b, ÷32 1000b,
        // ÷64 1001b, ÷128 1010b.
        let want = [
            0b1011, 0b0000, 0b0001, 0b0010, 0b0011, 0b1000, 0b1001, 0b1010,
        ];
        for (shift, want) in want.into_iter().enumerate() {
            assert_eq!(divide_config(shift as u32), want, "shift {shift}");
        }
    }

    #[test]
    fn rate_and_divider() {
        // QEMU: APIC at 1 GHz, TSC at 2.5 GHz: ÷1, 0.4 counts per tick.
        let (shift, rate) = one_shot_rate(1_000_000_000_000, 2_500_000_000_000);
        assert_eq!(shift, 0);
        assert_eq!(rate, 1_717_986_918); // 0.4 × 2^32 = 1717986918.4, rounded
                                         // A 25 MHz crystal (Intel since Skylake) against a 3 GHz TSC: ÷1.
        let (shift, rate) = one_shot_rate(25_000_000_000, 3_000_000_000_000);
        assert_eq!((shift, rate), (0, 35_791_394)); // 2^32 / 120 = 35791394.13
                                                    // An APIC faster than 2^32 counts per second: divided until one countdown lasts 1 s.
        let (shift, _) = one_shot_rate(5_000_000_000_000, 1_000_000_000_000);
        assert_eq!(shift, 1);
        let (shift, rate) = one_shot_rate(u64::MAX, 1);
        assert_eq!(shift, 7);
        assert_eq!(rate, u64::MAX);
        // Never 0, even for a TSC vastly faster than the APIC, or a zero rate.
        assert_eq!(one_shot_rate(1, u64::MAX).1, 1);
        assert_eq!(one_shot_rate(1_000, 0).0, 0);
    }

    #[test]
    fn countdown_edges() {
        let rate = 1u64 << 32; // one count per tick
        assert_eq!(countdown(0, rate), 1);
        assert_eq!(countdown(u64::MAX, rate), 1); // one tick passed
        assert_eq!(countdown(1 << 63, rate), 1); // as far back as can be told
        assert_eq!(countdown(i64::MAX as u64, rate), u32::MAX); // as far ahead: clamped
        assert_eq!(countdown(1000, rate), 1000);
        assert_eq!(countdown(u64::from(u32::MAX), rate), u32::MAX);
        assert_eq!(countdown(u64::from(u32::MAX) + 1, rate), u32::MAX);
        // 0.4 counts per tick: 1000 ticks are 400 counts; 1001 ticks 400.4, rounded up.
        let (_, rate) = one_shot_rate(1_000_000_000_000, 2_500_000_000_000);
        assert_eq!(countdown(1000, rate), 400);
        assert_eq!(countdown(1001, rate), 401);
        assert_eq!(countdown(1, rate), 1);
        // The smallest rate: a tiny distance still counts at least 1.
        assert_eq!(countdown(5, 1), 1);
    }

    proptest! {
        /// No overflow or panic for any distance and rate; the count is never below the
        /// exact quotient (not early by rounding) unless clamped, and within one count of it.
        #[test]
        fn countdown_rounds_up_and_clamps(distance in any::<u64>(), rate in any::<u64>()) {
            let c = countdown(distance, rate);
            prop_assert!(c >= 1);
            if distance == 0 || distance > i64::MAX as u64 {
                prop_assert_eq!(c, 1);
            } else {
                let exact = u128::from(distance) * u128::from(rate);
                let counts = u128::from(c) << RATE_SHIFT;
                if c < u32::MAX {
                    prop_assert!(counts >= exact, "early: {} < {}", counts, exact);
                    prop_assert!(counts < exact + (2u128 << RATE_SHIFT));
                } else {
                    prop_assert!(exact > (u128::from(u32::MAX) - 1) << RATE_SHIFT);
                }
            }
        }

        /// The rate for any pair of frequencies: the divider keeps 1 s within 2^32 counts
        /// (up to ÷128), and the rate is the divided ratio to within rounding.
        #[test]
        fn rate_is_the_divided_ratio(apic in 1u64.., tsc in 1u64..) {
            let (shift, rate) = one_shot_rate(apic, tsc);
            prop_assert!(shift <= 7);
            let per_second = (u128::from(apic) / 1_000) >> shift;
            prop_assert!(shift == 7 || per_second <= u128::from(u32::MAX));
            let exact = (u128::from(apic) << RATE_SHIFT >> shift) / u128::from(tsc);
            if exact < u128::from(u64::MAX) {
                prop_assert!(u128::from(rate).abs_diff(exact.max(1)) <= 1);
            }
        }
    }

    /// xAPIC access on a fake register page in memory: EOI writes 0 at 0xB0; a one-shot set
    /// up on an APIC timer that does not count fails calibration (typed, no hang) and leaves
    /// the timer stopped.
    #[test]
    fn xapic_registers_on_a_fake_page() {
        #[repr(C, align(4096))]
        struct Page([u32; 1024]);
        let mut page = Page([0xdead_beef; 1024]);
        let base = page.0.as_mut_ptr() as usize;
        // SAFETY: `base` is a live, writable 4 KiB block standing in for the APIC page;
        // nothing here reaches an MSR (xAPIC one-shot only).
        let apic = unsafe { LocalApic::xapic(base) };
        apic.eoi();
        let tsc = Tsc::probe().unwrap();
        let hz = Frequency::exact_hz(2_000_000_000).unwrap();
        assert_eq!(
            ApicTimer::one_shot(apic, tsc, hz, 3),
            Err(ApicTimerError::BadVector(3))
        );
        let r = ApicTimer::one_shot(apic, tsc, hz, 0x40);
        assert!(matches!(r, Err(ApicTimerError::Calibration(_))), "{r:?}");
        assert_eq!(page.0[0xB0 / 4], 0);
        assert_eq!(page.0[0x380 / 4], 0); // stopped
        assert_eq!(page.0[0x3E0 / 4], 0b1011); // ÷1 while measuring
        assert_eq!(page.0[0x320 / 4], LVT_MASKED | LVT_PERIODIC | 0x40);
    }

    /// One-shot arming on the fake page, with a rate set by hand: the initial count written
    /// is the distance converted, 1 for a passed deadline, 0 to disarm.
    #[test]
    fn one_shot_arm_writes_the_countdown() {
        #[repr(C, align(4096))]
        struct Page([u32; 1024]);
        let mut page = Page([0; 1024]);
        let base = page.0.as_mut_ptr() as usize;
        // SAFETY: as above.
        let apic = unsafe { LocalApic::xapic(base) };
        let tsc = Tsc::probe().unwrap();
        let timer = ApicTimer {
            apic,
            tsc,
            mode: Mode::OneShot { rate: 1 << 32 },
        };
        assert!(!timer.is_tsc_deadline());
        timer.arm(tsc.read_ordered().wrapping_sub(1000));
        assert_eq!(page.0[0x380 / 4], 1);
        timer.arm(tsc.read_ordered().wrapping_add(1 << 40));
        assert_eq!(page.0[0x380 / 4], u32::MAX);
        let before = tsc.read_ordered();
        timer.arm(before.wrapping_add(1_000_000));
        let c = page.0[0x380 / 4];
        assert!(c <= 1_000_000 && c > 0, "{c}");
        timer.disarm();
        assert_eq!(page.0[0x380 / 4], 0);
    }
}
