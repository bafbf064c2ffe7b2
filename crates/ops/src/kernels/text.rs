//! Kernels of the text family (inference: `families/text.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
