//! Kernels that reinterpret or convert element types: Cast, CastLike, BitCast (inference:
//! `families/shape.rs`, `families/indexing.rs`).

use crate::exec::KernelDef;

pub const KERNELS: &[KernelDef] = &[];
