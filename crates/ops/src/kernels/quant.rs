//! Kernels of the quant family (inference: `families/quant.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
