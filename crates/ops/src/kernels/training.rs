//! Kernels of the training family (inference: `families/training.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
