//! Kernels of the norm family (inference: `families/norm.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
