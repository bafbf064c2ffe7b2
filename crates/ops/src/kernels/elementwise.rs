//! Kernels of the elementwise family (inference: `families/elementwise.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
