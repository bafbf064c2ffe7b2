//! Kernels of the attention family (inference: `families/attention.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
