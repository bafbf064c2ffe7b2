//! CPU kernels, one module per operator family (the same families as inference under
//! `families/`). Each module exports `KERNELS`; [`ALL`] lists the modules.

pub mod attention;
pub mod cast;
pub mod control;
pub mod conv;
/// float32 depthwise convolution over blocks of 16 channels (not a registry family).
pub(crate) mod depthwise;
pub mod elementwise;
/// float32 fast paths of the elementwise and normalization kernels (not a registry family).
pub(crate) mod fast32;
/// Fast dense f32 matrix multiplication shared by MatMul, Gemm and Conv (not a registry family).
pub(crate) mod gemm;
pub mod indexing;
pub mod linalg;
pub mod ml;
pub mod norm;
/// float32 1×1 convolution vectorised over output channels (not a registry family).
pub(crate) mod pointwise;
pub mod quant;
pub mod random;
pub mod reduce;
pub mod resize;
pub mod rnn;
pub mod sequence;
pub mod shape;
pub mod signal;
pub mod text;
pub mod training;
/// Winograd F(2×2, 3×3) for float32 Conv (not a registry family).
pub(crate) mod winograd;

use crate::exec::KernelDef;

/// Every family's kernels.
pub const ALL: &[&[KernelDef]] = &[
    elementwise::KERNELS,
    shape::KERNELS,
    indexing::KERNELS,
    reduce::KERNELS,
    linalg::KERNELS,
    conv::KERNELS,
    norm::KERNELS,
    resize::KERNELS,
    rnn::KERNELS,
    attention::KERNELS,
    cast::KERNELS,
    quant::KERNELS,
    control::KERNELS,
    sequence::KERNELS,
    text::KERNELS,
    ml::KERNELS,
    signal::KERNELS,
    random::KERNELS,
    training::KERNELS,
];
