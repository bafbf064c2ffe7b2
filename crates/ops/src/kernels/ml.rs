//! Kernels of the ml family (inference: `families/ml.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
