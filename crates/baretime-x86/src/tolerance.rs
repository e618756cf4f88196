//! The rate tolerances the x86 platform timers state through `Reference::frequency()`'s
//! `Accuracy` (read them there; these constants are private).

/// The PIT's tolerance, in ppb (100 ppm).
///
/// The 8254's input is the PC's 14.31818 MHz clock divided by 12; neither the 8254 data
/// sheet nor the PC platform gives that clock a tolerance, and a board derives it from its
/// own crystal or clock generator. 100 ppm is a common tolerance grade of commodity
/// crystals (tighter parts are 50, 30 or 20 ppm); a board known to be better or worse says
/// so with `baretime::WithAccuracy`.
pub(crate) const PIT_TOLERANCE_PPB: u64 = 100_000;

/// The ACPI PM timer's tolerance, in ppb (100 ppm).
///
/// The ACPI specification defines the timer's rate, 3.579545 MHz (the PC's 14.31818 MHz
/// clock divided by 4), but no tolerance: like the PIT's, it is the board's crystal, so the
/// same grade applies.
pub(crate) const ACPI_PM_TOLERANCE_PPB: u64 = PIT_TOLERANCE_PPB;

/// The HPET's tolerance, in ppb (500 ppm).
///
/// The IA-PC HPET specification (1.0a) requires the main counter to be accurate to
/// ±0.05 %, 500 ppm, over any interval of 1 ms or more, whatever period its capabilities
/// register states. (500 ppm is also NTP's frequency limit, which Linux's clocksource
/// watchdog takes as the skew it tolerates between two clocks.)
pub(crate) const HPET_TOLERANCE_PPB: u64 = 500_000;

/// The real-time clocks' tolerance, in ppb (100 ppm).
///
/// A CMOS RTC or a PL031 counts a 32.768 kHz watch crystal, commonly ±20 ppm at 25 °C and
/// worse over temperature and age; a board with no trimming is worse still. 100 ppm, the
/// same grade as the PIT's, covers them.
pub(crate) const RTC_TOLERANCE_PPB: u64 = 100_000;
