//! Kernels of the linalg family (inference: `families/linalg.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
