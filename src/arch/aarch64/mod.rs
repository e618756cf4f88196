//! aarch64: the generic timer's virtual counter, its frequency register and ID registers.

mod cntvct;
pub(crate) mod semihosting;

pub use cntvct::{
    read_cntfrq_el0, read_id_aa64mmfr0_el1, read_midr_el1, write_cntfrq_el0, GenericTimer,
    GenericTimerUnordered,
};
