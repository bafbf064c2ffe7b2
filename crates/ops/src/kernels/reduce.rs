//! Kernels of the reduce family (inference: `families/reduce.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
