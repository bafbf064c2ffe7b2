//! Kernels of the sequence family (inference: `families/sequence.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
