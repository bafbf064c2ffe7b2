//! Kernels of the signal family (inference: `families/signal.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
