//! Kernels of the control family (inference: `families/control.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
