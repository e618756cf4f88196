//! Simulated faulty counter reads: each aarch64 counter erratum's bug, over a true counter.

use core::cell::Cell;

use crate::SimWorld;
use baretime_aarch64::Erratum;

/// The bit whose carry the Cortex-A73 858921 model garbles: bit 32, where the low word of the
/// count carries into the high word (Arm's erratum notice). The model's own constant, not the
/// workaround's: a model that shared the workaround's figures would share its mistakes.
const A73_CARRY_BIT: u32 = 32;
/// The low bits the Allwinner model forces to all ones or all zeros (ten, as first reported;
/// the workaround checks nine of them).
const A64_MODEL_LOW_MASK: u64 = 0x3FF;
/// The 858921 model strikes only on a read less than this many ticks after the one before
/// (half of bit 32's period): a read long after the carry was not taken at the carry.
const A73_MODEL_NEAR: u64 = 1 << 31;
/// The same for the Allwinner model: half of bit 10's period.
const A64_MODEL_NEAR: u64 = 1 << 9;
/// Bits 5..=31: where the HiSilicon model's wrong bits go (a multiple of 32, within the low
/// word).
const HISILICON_MODEL_BITS: u64 = 0xFFFF_FFE0;

/// A model of one erratum's faulty reads: give it the true count at each read
/// ([`FaultyRead::read`]) and it returns what the buggy hardware would.
///
/// | erratum | when it strikes | what the read returns |
/// | --- | --- | --- |
/// | [`FslA008585`](Erratum::FslA008585) | at random, once in `n` reads ([`with_one_in(n)`](FaultyRead::with_one_in)) | a random 64-bit value |
/// | [`Hisilicon161010101`](Erratum::Hisilicon161010101) | at random, once in `n` reads | the true value with random bits among 5..=31 flipped: off by a nonzero multiple of 32, either way |
/// | [`Arm858921`](Erratum::Arm858921) | on the first read after bit 32 carried, if the read before was less than 2³¹ ticks earlier (with probability 1/`n`) | the new high word with the old low word: about 2³² ticks ahead |
/// | [`Sun50iUnknown1`](Erratum::Sun50iUnknown1) | on the first read after bit 10 or above changed, if the read before was less than 2⁹ ticks earlier (probability 1/`n`) | the bits that changed half-way: either the bits set in both the old and the new value with the low 10 bits zero (7ff → 000: back), or the bits set in either with the low 10 bits ones (7ff → fff: ahead) |
///
/// The defaults are one in 1000 for the random faults and every time for the carry faults.
/// "The previous read" is the previous call of [`FaultyRead::read`]; the model keeps it, so
/// one model serves one reader. (The "less than … earlier" keeps the carry faults to reads
/// taken near the carry: a read long after it is not at the carry, and a workaround is
/// right to assume that two carries of the same bit do not fall between two close reads.)
/// The truth must come from a counter that moves slowly next
/// to the reads, as the errata's workarounds assume: A-008585's needs two consecutive reads
/// to agree now and then, HiSilicon's needs them less than 32 ticks apart, 858921's needs at
/// most one bit-32 carry between two reads.
///
/// For the Cortex-A73, only the form of the glitch Linux's rule catches is modelled: a read
/// whose bit 32 already shows the carry. A read with the carry's *old* high word and the
/// new low word (2³² ticks back) would pass that rule when it is the second of the pair.
///
/// ```
/// use baretime_aarch64::Erratum;
/// use baretime_sim::FaultyRead;
/// use core::cell::Cell;
///
/// // A counter just short of bit 32's carry, 8 ticks per read; returns (glitches, steps back).
/// let run = |workaround: bool| {
///     let truth = Cell::new(0xFFFF_FFF0u64);
///     let model = FaultyRead::new(Erratum::Arm858921, 1);
///     let raw = || {
///         truth.set(truth.get() + 8);
///         model.read(truth.get())
///     };
///     let (mut last, mut back) = (0, 0);
///     for _ in 0..4 {
///         let v = if workaround { Erratum::Arm858921.read(raw).ticks } else { raw() };
///         back += u32::from(v < last);
///         last = v;
///     }
///     (model.glitches(), back)
/// };
/// assert_eq!(run(false), (1, 1)); // the read after the carry is 2^32 ahead; the next goes back
/// assert_eq!(run(true), (1, 0)); // the same glitch, caught
/// ```
#[derive(Debug)]
pub struct FaultyRead {
    erratum: Erratum,
    one_in: u64,
    rng: SimWorld,
    last_true: Cell<Option<u64>>,
    reads: Cell<u64>,
    glitches: Cell<u64>,
}

impl FaultyRead {
    /// A model of `erratum` with PRNG `seed` and the default rate (see the type docs).
    pub fn new(erratum: Erratum, seed: u64) -> FaultyRead {
        let one_in = match erratum {
            Erratum::FslA008585 | Erratum::Hisilicon161010101 => 1000,
            // Arm 858921, Allwinner A64, and any erratum added later: on every read.
            _ => 1,
        };
        FaultyRead {
            erratum,
            one_in,
            rng: SimWorld::new(seed),
            last_true: Cell::new(None),
            reads: Cell::new(0),
            glitches: Cell::new(0),
        }
    }

    /// Strike once in `n` reads where the fault can strike (`n` = 1: every time; 0 is 1).
    pub fn with_one_in(self, n: u64) -> FaultyRead {
        FaultyRead {
            one_in: n.max(1),
            ..self
        }
    }

    /// The erratum modelled.
    pub fn erratum(&self) -> Erratum {
        self.erratum
    }

    /// Reads so far.
    pub fn reads(&self) -> u64 {
        self.reads.get()
    }

    /// Reads so far that returned something other than the true value.
    pub fn glitches(&self) -> u64 {
        self.glitches.get()
    }

    /// What the faulty hardware returns when the true count is `true_ticks`.
    pub fn read(&self, true_ticks: u64) -> u64 {
        let t = true_ticks;
        let last = self.last_true.replace(Some(t));
        self.reads.set(self.reads.get().wrapping_add(1));
        let value = match (self.erratum, last) {
            (Erratum::FslA008585, _) if self.strikes() => self.rng.random(),
            (Erratum::Hisilicon161010101, _) if self.strikes() => {
                // Nonzero among bits 5..=31: some multiple of 32, up or down.
                let flip = (self.rng.random() & HISILICON_MODEL_BITS).max(1 << 5);
                t ^ flip
            }
            (Erratum::Arm858921, Some(old))
                if (old ^ t) >> A73_CARRY_BIT & 1 != 0
                    && t.wrapping_sub(old) < A73_MODEL_NEAR
                    && self.strikes() =>
            {
                (t & !0xFFFF_FFFF) | (old & 0xFFFF_FFFF)
            }
            (Erratum::Sun50iUnknown1, Some(old))
                if (old ^ t) & !A64_MODEL_LOW_MASK != 0
                    && t.wrapping_sub(old) < A64_MODEL_NEAR
                    && self.strikes() =>
            {
                if self.rng.random() & 1 == 0 {
                    (old & t) & !A64_MODEL_LOW_MASK
                } else {
                    (old | t) | A64_MODEL_LOW_MASK
                }
            }
            _ => t,
        };
        if value != t {
            self.glitches.set(self.glitches.get().wrapping_add(1));
        }
        value
    }

    fn strikes(&self) -> bool {
        self.one_in <= 1 || self.rng.random_below(self.one_in) == 0
    }
}
