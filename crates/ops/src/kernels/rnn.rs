//! Kernels of the rnn family (inference: `families/rnn.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
