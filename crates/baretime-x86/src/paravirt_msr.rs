//! The ring-0 half of the paravirtual TSC rates: KVM's pvclock area and Hyper-V's
//! TSC-frequency MSR. The decoding is [`crate::paravirt`]'s (pure, host-tested);
//! here are the `WRMSR`/`RDMSR` and the volatile reads of memory the hypervisor writes.
//!
//! Both need CPL 0: `RDMSR`/`WRMSR` raise #GP in a user process, which is why a user-space
//! program (the `report` example) can say these sources exist but not read them.
//!
//! The MSR instructions are the crate's one pair, `msr`.

use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{compiler_fence, Ordering};

use crate::paravirt::{
    self, KvmFeatures, ParavirtError, PvclockTimeInfo, DEFAULT_READ_TRIES, HV_X64_MSR_TSC_FREQUENCY,
};
use baretime::Frequency;

use crate::msr::{rdmsr, wrmsr};

/// The 32 bytes of KVM's `struct pvclock_vcpu_time_info`, laid out as the hypervisor writes
/// them, 32-byte aligned so it never straddles a page. Put one in memory the guest owns (a
/// `static`) and hand its address to [`KvmPvclock::register`].
#[repr(C, align(32))]
pub struct PvclockArea {
    cell: UnsafeCell<RawArea>,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawArea {
    version: u32,
    pad0: u32,
    tsc_timestamp: u64,
    system_time: u64,
    tsc_to_system_mul: u32,
    tsc_shift: i8,
    flags: u8,
    pad: [u8; 2],
}

// SAFETY: the area is only ever read through volatile reads (by `KvmPvclock`) and written by
// the hypervisor; nothing in the crate hands out references to its contents.
unsafe impl Sync for PvclockArea {}

impl PvclockArea {
    /// A zeroed area, for a `static`.
    pub const fn new() -> Self {
        PvclockArea {
            cell: UnsafeCell::new(RawArea {
                version: 0,
                pad0: 0,
                tsc_timestamp: 0,
                system_time: 0,
                tsc_to_system_mul: 0,
                tsc_shift: 0,
                flags: 0,
                pad: [0; 2],
            }),
        }
    }
}

impl Default for PvclockArea {
    fn default() -> Self {
        Self::new()
    }
}

/// A registered KVM pvclock area: the hypervisor keeps it up to date, and reads of it are
/// safe. Holding one proves the area was registered through `msr` (see
/// [`KvmPvclock::register`]'s contract).
#[derive(Debug)]
pub struct KvmPvclock<'a> {
    area: &'a PvclockArea,
    msr: u32,
}

impl core::fmt::Debug for PvclockArea {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PvclockArea")
    }
}

impl<'a> KvmPvclock<'a> {
    /// Registers `area` with KVM: writes `phys_addr | 1` (enable) to the MSR KVM's feature
    /// leaf offers ([`KvmFeatures::clock_msr`]: MSR_KVM_SYSTEM_TIME_NEW, 0x4b564d01, or the
    /// old MSR_KVM_SYSTEM_TIME, 0x12), `features` being what discovery read
    /// ([`X86Discovery::kvm_features`](crate::X86Discovery::kvm_features)). KVM fills the area
    /// before the guest runs on after the WRMSR (the write exits to KVM, which updates the
    /// clock on the way back in), and updates it whenever its scale changes.
    ///
    /// [`ParavirtError::NotOffered`] when the feature leaf offers neither MSR, and
    /// [`ParavirtError::MisalignedArea`] for a `phys_addr` that is not 32-byte aligned, both
    /// before anything is written.
    ///
    /// ```no_run
    /// # #[cfg(target_arch = "x86_64")] {
    /// use baretime_x86::{discover, KvmPvclock, PvclockArea};
    ///
    /// static AREA: PvclockArea = PvclockArea::new();
    ///
    /// let mut d = discover();
    /// if let Some(kvm) = d.kvm_features() {
    ///     let phys = core::ptr::addr_of!(AREA) as u64; // an identity-mapped kernel
    ///     // SAFETY: ring 0 under KVM; AREA is 'static and registered by nothing else.
    ///     if let Ok(pv) = unsafe { KvmPvclock::register(&AREA, phys, kvm) } {
    ///         if let Ok(rate) = pv.tsc_frequency() {
    ///             d.add_claim(rate); // ahead of every CPUID claim
    ///         }
    ///         pv.disable();
    ///     }
    /// }
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// - The code runs at CPL 0 under KVM, and `features` is what this CPU's CPUID says
    ///   (otherwise the WRMSR may raise #GP).
    /// - `phys_addr` is the guest-physical address of `area` (identity-mapped kernels: its
    ///   address), in guest RAM. A wrong address makes the hypervisor write 32 bytes over
    ///   whatever lives there.
    /// - The caller owns the MSR for this vCPU: no other code registers another area through
    ///   it while this one is in use (a second registration moves the hypervisor's writes
    ///   elsewhere; a stale `KvmPvclock` would then read a frozen area). The area is per vCPU:
    ///   read it on the CPU that registered it.
    /// - Before `area`'s memory is reused for anything else, the registration is ended with
    ///   [`KvmPvclock::disable`] (or the caller re-registers elsewhere): KVM keeps writing
    ///   a registered area, also after this value is dropped. A `'static` area, as in a
    ///   kernel's `static`, meets this trivially.
    pub unsafe fn register(
        area: &'a PvclockArea,
        phys_addr: u64,
        features: KvmFeatures,
    ) -> Result<Self, ParavirtError> {
        let msr = features.clock_msr()?;
        if phys_addr % 32 != 0 {
            return Err(ParavirtError::MisalignedArea { phys_addr });
        }
        // The caller owns the registration of `area`, at guest-physical `phys_addr` (# Safety).
        // SAFETY: CPL 0 under KVM, whose feature leaf offers `msr`: the write makes KVM write
        // `area` only.
        unsafe { wrmsr(msr, phys_addr | 1) };
        compiler_fence(Ordering::SeqCst);
        Ok(KvmPvclock { area, msr })
    }

    /// The MSR the area was registered through.
    pub const fn msr(&self) -> u32 {
        self.msr
    }

    /// Reads the area under its version protocol, as Linux's `pvclock_read_begin/retry`
    /// does: a read is kept only when the version was even and unchanged across it. Gives up
    /// after 16 reads with [`ParavirtError::Inconsistent`] (a stuck odd version cannot hang
    /// the caller), or with [`ParavirtError::NeverWritten`] when the version stays 0.
    pub fn read(&self) -> Result<PvclockTimeInfo, ParavirtError> {
        let raw = self.area.cell.get();
        let read_version = || {
            // The fence keeps the compiler from moving the field reads across this one (x86
            // itself does not reorder loads with loads); the hypervisor writes concurrently.
            // SAFETY: `raw` points to the registered area, valid for 'a: a volatile aligned read.
            let v = unsafe { ptr::addr_of!((*raw).version).read_volatile() };
            compiler_fence(Ordering::Acquire);
            v
        };
        let read_fields = || {
            // SAFETY: as above: aligned volatile reads of the registered area.
            let info = unsafe {
                PvclockTimeInfo {
                    version: 0,
                    tsc_timestamp: ptr::addr_of!((*raw).tsc_timestamp).read_volatile(),
                    system_time: ptr::addr_of!((*raw).system_time).read_volatile(),
                    tsc_to_system_mul: ptr::addr_of!((*raw).tsc_to_system_mul).read_volatile(),
                    tsc_shift: ptr::addr_of!((*raw).tsc_shift).read_volatile(),
                    flags: ptr::addr_of!((*raw).flags).read_volatile(),
                }
            };
            compiler_fence(Ordering::Acquire);
            info
        };
        paravirt::read_consistent(read_version, read_fields, DEFAULT_READ_TRIES)
    }

    /// The TSC rate the area states ([`PvclockTimeInfo::tsc_frequency`]).
    pub fn tsc_frequency(&self) -> Result<Frequency, ParavirtError> {
        self.read()?.tsc_frequency()
    }

    /// Ends the registration (writes 0 to the MSR): KVM stops writing the area, whose memory
    /// is then the caller's again. Reads before this call stay valid values.
    pub fn disable(self) {
        // SAFETY: `register`'s contract gives CPL 0, the MSR, and ownership of it; writing 0
        // only stops the hypervisor's writes.
        unsafe { wrmsr(self.msr, 0) };
        compiler_fence(Ordering::SeqCst);
    }
}

/// Reads `HV_X64_MSR_TSC_FREQUENCY` (0x40000022): the guest TSC rate in Hz, as Linux's
/// `hv_get_tsc_khz` does (it divides by 1000; here the hertz are kept).
///
/// # Safety
///
/// The code runs at CPL 0 under a hypervisor whose Hyper-V feature leaf (base + 3) makes the
/// MSR readable — [`X86Discovery::hyperv_tsc_frequency_msr`](crate::discover::X86Discovery::hyperv_tsc_frequency_msr) says so —
/// otherwise RDMSR raises #GP.
pub unsafe fn read_hyperv_tsc_frequency() -> Result<Frequency, ParavirtError> {
    // SAFETY: CPL 0 and the MSR is available (# Safety); reading it has no side effect.
    let hz = unsafe { rdmsr(HV_X64_MSR_TSC_FREQUENCY) };
    paravirt::decode_hyperv_tsc_frequency(hz)
}
