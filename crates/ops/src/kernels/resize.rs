//! Kernels of the resize family (inference: `families/resize.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
