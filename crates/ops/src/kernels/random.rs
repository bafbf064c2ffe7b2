//! Kernels of the random family (inference: `families/random.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
