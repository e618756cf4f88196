//! The SMP workload both kernels run once their CPUs are up (`mode=smp`): every CPU reads one
//! shared `static` [`Clock`] while CPU 0 recalibrates it (±50 ppm around the calibrated rate)
//! and updates it; each CPU checks that its own reads never go back, and all of them check
//! cross-CPU order through one shared atomic; then a warp check runs with one participant per
//! CPU. Only CPU 0 prints (`key=value`); the others leave their figures in atomics.
//!
//! # The cross-CPU order check
//!
//! A read that *began* after another read *finished* must not return less. Every CPU, after
//! reading `t`, raises `LAST_FINISHED` to at least `t` (`fetch_max`); before each read it
//! loads `LAST_FINISHED` as its floor, and the read must be at least the floor. The floor
//! was published by a read that finished before this one began (sequentially consistent
//! atomics order the load before the clock's own loads and its ordered counter read), so a
//! value below it is a real inversion between two CPUs, not an artefact of the check.

use core::cell::UnsafeCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use baretime::{Clock, ClockError, Counter, Frequency, Instant};
use baretime_diag::{TickBudget, WarpCheck, WarpError, WarpVerdict};

/// The most CPUs a scenario may use (stacks and per-CPU figures are sized for it).
pub const MAX_CPUS: usize = 8;

/// Rendezvous points, in the order every CPU passes them.
pub mod at {
    /// The CPU is up and running Rust.
    pub const ONLINE: usize = 0;
    /// CPU 0 has set up the workload: readers start.
    pub const START: usize = 1;
    /// Every CPU has finished its reads.
    pub const READ_DONE: usize = 2;
    /// Every CPU has finished the first warp check.
    pub const WARP1_DONE: usize = 3;
    /// CPU 0 asked for a repair (skew scenario): each CPU repairs its own counter.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // the skew scenario is x86 only
    pub const REPAIR: usize = 4;
    /// Every CPU has repaired.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // the skew scenario is x86 only
    pub const REPAIRED: usize = 5;
    /// Every CPU has finished the second warp check.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // the skew scenario is x86 only
    pub const WARP2_DONE: usize = 6;
    /// How many points there are.
    pub const COUNT: usize = 7;
}

/// The `mode=smp` command-line words (those `scenario::Args` does not know).
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// CPUs to use, CPU 0 included (`cpus=N`, at most [`MAX_CPUS`]).
    pub cpus: u32,
    /// Successful `recalibrate` calls and successful `update` calls CPU 0 makes, each.
    pub writes: u32,
    /// Checks per ordered pair of CPUs in each warp check (1000 for a `consistent` verdict).
    pub warp_checks: u32,
    /// Skew scenario: the CPU that moves its own counter, and by how many µs.
    pub skew_cpu: u32,
    /// Skew scenario: µs worth of ticks to add to `skew_cpu`'s counter (0: none).
    pub skew_us: u64,
    /// Read through the monotonic guard instead of the plain clock (`guard=1`).
    pub guard: bool,
}

impl Params {
    /// Reads `cpus=`, `writes=`, `warp_checks=`, `skew_cpu=`, `skew_us=`, `guard=`.
    pub fn parse(cmdline: &str) -> Params {
        let mut p = Params {
            cpus: 4,
            writes: 1000,
            warp_checks: 1000,
            skew_cpu: 2,
            skew_us: 0,
            guard: false,
        };
        for (key, value) in cmdline.split_whitespace().filter_map(|w| w.split_once('=')) {
            match key {
                "cpus" => p.cpus = value.parse().unwrap_or(p.cpus),
                "writes" => p.writes = value.parse().unwrap_or(p.writes),
                "warp_checks" => p.warp_checks = value.parse().unwrap_or(p.warp_checks),
                "skew_cpu" => p.skew_cpu = value.parse().unwrap_or(p.skew_cpu),
                "skew_us" => p.skew_us = value.parse().unwrap_or(p.skew_us),
                "guard" => p.guard = value == "1",
                _ => {}
            }
        }
        p.cpus = p.cpus.clamp(1, MAX_CPUS as u32);
        p
    }
}

static SHARED: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

impl Params {
    /// Publishes these parameters (and the CPU count) for the other CPUs (CPU 0, before it
    /// starts them).
    pub fn share(&self) {
        CPUS.store(self.cpus, Ordering::SeqCst);
        let values = [
            u64::from(self.cpus),
            u64::from(self.writes),
            u64::from(self.warp_checks),
            u64::from(self.skew_cpu),
            self.skew_us,
            u64::from(self.guard),
        ];
        for (slot, v) in SHARED.iter().zip(values) {
            slot.store(v, Ordering::SeqCst);
        }
    }

    /// The parameters CPU 0 published.
    #[cfg_attr(target_arch = "aarch64", allow(dead_code))] // aarch64's CPUs need none
    pub fn shared() -> Params {
        let v = |i: usize| SHARED[i].load(Ordering::SeqCst);
        Params {
            cpus: v(0) as u32,
            writes: v(1) as u32,
            warp_checks: v(2) as u32,
            skew_cpu: v(3) as u32,
            skew_us: v(4),
            guard: v(5) != 0,
        }
    }
}

static POINTS: [AtomicU32; at::COUNT] = [const { AtomicU32::new(0) }; at::COUNT];
static CPUS: AtomicU32 = AtomicU32::new(1);
static STOP_READING: AtomicBool = AtomicBool::new(false);
static LAST_FINISHED: AtomicU64 = AtomicU64::new(0);

/// One CPU's figures, written by that CPU only, read by CPU 0 after [`at::READ_DONE`].
struct Figures {
    reads: AtomicU64,
    own_inversions: AtomicU64,
    cross_inversions: AtomicU64,
    /// Largest step below the floor (cross) or below the CPU's own last read, in ns.
    max_back_ns: AtomicU64,
    /// Largest step forward between two of the CPU's own consecutive reads, in ns.
    max_step_ns: AtomicU64,
}

static FIGURES: [Figures; MAX_CPUS] = [const {
    Figures {
        reads: AtomicU64::new(0),
        own_inversions: AtomicU64::new(0),
        cross_inversions: AtomicU64::new(0),
        max_back_ns: AtomicU64::new(0),
        max_step_ns: AtomicU64::new(0),
    }
}; MAX_CPUS];

/// Arrives at rendezvous point `point` and waits until every CPU has.
pub fn rendezvous(point: usize) {
    let p = &POINTS[point];
    p.fetch_add(1, Ordering::SeqCst);
    let cpus = CPUS.load(Ordering::SeqCst);
    while p.load(Ordering::SeqCst) < cpus {
        core::hint::spin_loop();
    }
}

/// Arrives at `point` without waiting (CPU 0 uses it to let the others go).
pub fn arrive(point: usize) {
    POINTS[point].fetch_add(1, Ordering::SeqCst);
}

/// How many CPUs have arrived at `point`.
pub fn arrived(point: usize) -> u32 {
    POINTS[point].load(Ordering::SeqCst)
}

/// A reader's own state: its last read.
struct Reader {
    cpu: usize,
    last_ns: u64,
    reads: u64,
    own: u64,
    cross: u64,
    max_back_ns: u64,
    max_step_ns: u64,
}

impl Reader {
    fn new(cpu: usize) -> Reader {
        Reader {
            cpu,
            last_ns: 0,
            reads: 0,
            own: 0,
            cross: 0,
            max_back_ns: 0,
            max_step_ns: 0,
        }
    }

    /// One checked read; returns the time read (ns).
    #[inline(always)]
    fn read(&mut self, now_ns: &impl Fn() -> u64) -> u64 {
        let floor = LAST_FINISHED.load(Ordering::SeqCst);
        let t = now_ns();
        if t < self.last_ns {
            self.own += 1;
            self.max_back_ns = self.max_back_ns.max(self.last_ns - t);
        } else if self.reads != 0 {
            self.max_step_ns = self.max_step_ns.max(t - self.last_ns);
        }
        if t < floor {
            self.cross += 1;
            self.max_back_ns = self.max_back_ns.max(floor - t);
        }
        self.last_ns = t;
        self.reads += 1;
        LAST_FINISHED.fetch_max(t, Ordering::SeqCst);
        t
    }

    fn publish(&self) {
        let Some(f) = FIGURES.get(self.cpu) else {
            return;
        };
        f.reads.store(self.reads, Ordering::SeqCst);
        f.own_inversions.store(self.own, Ordering::SeqCst);
        f.cross_inversions.store(self.cross, Ordering::SeqCst);
        f.max_back_ns.store(self.max_back_ns, Ordering::SeqCst);
        f.max_step_ns.store(self.max_step_ns, Ordering::SeqCst);
    }
}

/// The read phase on a CPU other than 0: checked reads until CPU 0 says stop.
pub fn ap_reads(cpu: u32, now_ns: &impl Fn() -> u64) {
    let mut reader = Reader::new(cpu as usize);
    while !STOP_READING.load(Ordering::Relaxed) {
        reader.read(now_ns);
    }
    reader.publish();
}

/// What CPU 0's writes did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Writes {
    /// `recalibrate` calls that returned `Ok`.
    pub recalibrations: u32,
    /// `update` calls that returned `Ok`.
    pub updates: u32,
    /// Calls that returned `Busy` (another writer was active: never, with one writer).
    pub busy: u32,
    /// Calls that returned `Behind`: CPU 0's counter lagged the time another CPU had been
    /// handed out by more than `LAG_NS` (a warped counter), so the write changed
    /// nothing (the clock's promise 6). Counted as attempted, with the recalibrations or
    /// updates, so that the phase ends; only the skew scenarios may see any.
    pub behind: u32,
    /// Calls that returned any other error.
    pub errors: u32,
    /// The last such error.
    pub last_error: Option<ClockError>,
}

/// `f` moved by `ppm` parts per million (same provenance).
fn offset(f: Frequency, ppm: i64) -> Frequency {
    let m = f.as_millihz();
    let d = m / 1_000_000 * ppm.unsigned_abs();
    let moved = if ppm < 0 { m - d } else { m + d };
    Frequency::from_millihz(moved, f.source(), f.accuracy()).unwrap_or(f)
}

/// The read phase on CPU 0: checked reads, and between them a `recalibrate` to `base`
/// +50 ppm, an `update`, a `recalibrate` to −50 ppm, an `update`, …, spaced at least
/// `2 × HANDOVER_NS` of clock time apart (an `update` within `HANDOVER_NS` of the last write
/// has nothing to do), until `params.writes` of each succeeded — or `limit_ns` of clock time
/// passed. Then tells the other CPUs to stop.
pub fn bsp_reads<C: Counter>(
    clock: &Clock<C>,
    base: Frequency,
    params: &Params,
    limit_ns: u64,
    now_ns: &impl Fn() -> u64,
) -> Writes {
    let mut reader = Reader::new(0);
    let mut w = Writes::default();
    let up = offset(base, 50);
    let down = offset(base, -50);
    let spacing_ns = 2 * baretime::LAG_NS;
    let start = reader.read(now_ns);
    let mut next = start;
    let mut step = 0u32;
    while w.recalibrations < params.writes || w.updates < params.writes {
        let t = reader.read(now_ns);
        if t.saturating_sub(start) > limit_ns {
            break;
        }
        if t < next {
            continue;
        }
        // Even steps recalibrate (up, down, up, …), odd steps update.
        let result = match step % 4 {
            0 => clock.recalibrate(up).map(|()| true),
            2 => clock.recalibrate(down).map(|()| true),
            _ => clock.update().map(|()| false),
        };
        match result {
            Ok(true) => w.recalibrations += 1,
            Ok(false) => w.updates += 1,
            Err(ClockError::Busy) => w.busy += 1,
            Err(ClockError::Behind) => {
                w.behind += 1;
                if step % 2 == 0 {
                    w.recalibrations += 1;
                } else {
                    w.updates += 1;
                }
            }
            Err(e) => {
                w.errors += 1;
                w.last_error = Some(e);
            }
        }
        step = step.wrapping_add(1);
        next = t + spacing_ns;
    }
    // Back to the calibrated rate, so that later phases (delays) use it.
    let _ = clock.recalibrate(base);
    STOP_READING.store(true, Ordering::SeqCst);
    reader.publish();
    w
}

/// All CPUs' read figures, summed (CPU 0 only, after [`at::READ_DONE`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Reads, all CPUs.
    pub reads: u64,
    /// Reads below the same CPU's previous read.
    pub own_inversions: u64,
    /// Reads below the floor another CPU's finished read set.
    pub cross_inversions: u64,
    /// Largest step back seen, ns.
    pub max_back_ns: u64,
    /// Largest step forward between two consecutive reads of one CPU, ns.
    pub max_step_ns: u64,
}

/// Sums the figures of CPUs `0..cpus` and prints `reads_per_cpu=a,b,…`.
pub fn totals(out: &mut impl Write, cpus: u32) -> Totals {
    let mut t = Totals::default();
    let _ = write!(out, "reads_per_cpu=");
    for (i, f) in FIGURES.iter().take(cpus as usize).enumerate() {
        let reads = f.reads.load(Ordering::SeqCst);
        let _ = write!(out, "{}{reads}", if i == 0 { "" } else { "," });
        t.reads += reads;
        t.own_inversions += f.own_inversions.load(Ordering::SeqCst);
        t.cross_inversions += f.cross_inversions.load(Ordering::SeqCst);
        t.max_back_ns = t.max_back_ns.max(f.max_back_ns.load(Ordering::SeqCst));
        t.max_step_ns = t.max_step_ns.max(f.max_step_ns.load(Ordering::SeqCst));
    }
    let _ = writeln!(out);
    t
}

/// Prints the read phase's figures: `cpus reads recalibrations updates busy behind_writes
/// write_errors
/// own_inversions cross_inversions inversions max_back_ns max_step_ns`.
pub fn print_reads(out: &mut impl Write, cpus: u32, w: &Writes, t: &Totals, label: &str) {
    let _ = writeln!(
        out,
        "{label}cpus={cpus} {label}reads={} {label}recalibrations={} {label}updates={} {label}busy={} {label}behind_writes={} {label}write_errors={} {label}own_inversions={} {label}cross_inversions={} {label}inversions={} {label}max_back_ns={} {label}max_step_ns={}",
        t.reads,
        w.recalibrations,
        w.updates,
        w.busy,
        w.behind,
        w.errors,
        t.own_inversions,
        t.cross_inversions,
        t.own_inversions + t.cross_inversions,
        t.max_back_ns,
        t.max_step_ns,
    );
    if let Some(e) = w.last_error {
        let _ = writeln!(out, "{label}last_write_error=\"{e}\"");
    }
}

/// A warp check that CPU 0 sets up (the number of CPUs and checks per pair are only known
/// from the command line) before any other CPU starts, and every CPU then shares.
struct WarpSlot(UnsafeCell<Option<WarpCheck>>);

// SAFETY: written only by CPU 0 in `init_warps`, before it starts the other CPUs (the
// start, PSCI CPU_ON or INIT-SIPI, and their arrival at `at::ONLINE` order the write before
// every other CPU's reads); read-only afterwards, and `WarpCheck` itself is `Sync`.
unsafe impl Sync for WarpSlot {}

/// The first and second warp checks (one participant per CPU each).
static WARP: [WarpSlot; 2] = [
    WarpSlot(UnsafeCell::new(None)),
    WarpSlot(UnsafeCell::new(None)),
];

/// CPU 0, before it starts any other CPU: sets up both warp checks for `params.cpus` CPUs
/// and `params.warp_checks` checks per ordered pair.
pub fn init_warps(params: &Params) {
    for slot in &WARP {
        // SAFETY: see `WarpSlot`: no other CPU runs yet, and nothing borrows the slot.
        unsafe { *slot.0.get() = Some(WarpCheck::new(params.cpus, params.warp_checks)) };
    }
}

fn warp_check(which: usize) -> Option<&'static WarpCheck> {
    // SAFETY: see `WarpSlot`: the slot is no longer written once other CPUs run.
    WARP.get(which)
        .and_then(|slot| unsafe { (*slot.0.get()).as_ref() })
}

/// How long a participant waits for its turn: 60 s of TSC/generic-timer time per wait at
/// the calibrated rate, set by CPU 0. A CPU outside the pair being compared waits for the
/// whole phase (2K + 1 handovers), and under QEMU on a busy 2-core host a handover between
/// vCPU threads takes 1–5 ms (seen: a 10 s patience ran out during a 2001-step phase).
static PATIENCE_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);

/// CPU 0: sets the per-wait patience from the counter's rate.
pub fn set_patience(hz: u64) {
    PATIENCE_TICKS.store(hz.saturating_mul(60), Ordering::SeqCst);
}

/// Runs warp check `which` (0 or 1) on this CPU, timing its waits with `patience_counter`
/// (the raw CPU counter: under a simulated skew not the skewed one).
pub fn warp<C: Counter + ?Sized, P: Counter>(
    which: usize,
    cpu: u32,
    counter: &C,
    patience_counter: &P,
) {
    if let Some(check) = warp_check(which) {
        let mut patience = TickBudget::new(patience_counter, PATIENCE_TICKS.load(Ordering::SeqCst));
        let result = check.participate(cpu, counter, &mut patience);
        if let (Err(e), Some(slot)) = (result, WARP_ERRORS.get(which)) {
            slot.store(error_code(&e), Ordering::SeqCst);
        }
    }
}

/// CPU 0 after the reads: the first warp check (its waits timed on `patience_counter`), then
/// `read_ms warp_ms` (the two phases' times on `clock`) and the check's report.
pub fn bsp_warp<C: Counter, P: Counter>(
    out: &mut impl Write,
    clock: &Clock<C>,
    patience_counter: &P,
    t_read: Instant,
    rate: &Frequency,
) {
    let t_warp = clock.now();
    warp(0, 0, clock.counter(), patience_counter);
    rendezvous(at::WARP1_DONE);
    let _ = writeln!(
        out,
        "read_ms={} warp_ms={}",
        t_warp.saturating_duration_since(t_read).as_millis(),
        clock.elapsed(t_warp).as_millis()
    );
    print_warp(out, 0, "", rate);
}

/// The first error any participant of each warp check met (0: none).
static WARP_ERRORS: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];

fn error_code(e: &WarpError) -> u32 {
    match e {
        WarpError::Timeout { .. } => 1,
        WarpError::Aborted { .. } => 2,
        WarpError::CpuOutOfRange { .. } => 3,
        WarpError::AlreadyJoined { .. } => 4,
        _ => 5,
    }
}

/// Prints warp check `which`'s report with keys prefixed by `label`: `warp_cpus warp_pairs
/// warp_checks warp_min_checks_per_pair warp_warps warp_max_ticks warp_max_ns warp_from
/// warp_to warp_verdict` (and `warp_error`, `warp_timed_out_waiting_for` if a wait ran out).
pub fn print_warp(out: &mut impl Write, which: usize, label: &str, rate: &Frequency) {
    let Some(check) = warp_check(which) else {
        let _ = writeln!(out, "{label}warp_verdict=not_run");
        return;
    };
    let r = check.report();
    let (from, to) = match r.verdict() {
        WarpVerdict::Warped {
            from_cpu, to_cpu, ..
        } => (i64::from(from_cpu), i64::from(to_cpu)),
        _ => (-1, -1),
    };
    let _ = writeln!(
        out,
        "{label}warp_cpus={} {label}warp_pairs={}/{} {label}warp_checks={} {label}warp_min_checks_per_pair={} {label}warp_warps={} {label}warp_max_ticks={} {label}warp_max_ns={} {label}warp_from={from} {label}warp_to={to} {label}warp_verdict={}",
        r.cpus_covered,
        r.pairs_compared,
        r.pairs,
        r.checks,
        r.min_checks_per_pair,
        r.warps,
        r.max_warp_ticks,
        r.max_warp_ns(rate),
        r.verdict().token(),
    );
    let code = WARP_ERRORS
        .get(which)
        .map_or(0, |e| e.load(Ordering::SeqCst));
    if code != 0 || r.timed_out_waiting_for.is_some() {
        let _ = writeln!(
            out,
            "{label}warp_error={code} {label}warp_timed_out_waiting_for={}",
            r.timed_out_waiting_for.map_or(-1, i64::from)
        );
    }
}
