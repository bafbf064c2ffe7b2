//! Kernels of the conv family (inference: `families/conv.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
