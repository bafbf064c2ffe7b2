//! Kernels of the indexing family (inference: `families/indexing.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
