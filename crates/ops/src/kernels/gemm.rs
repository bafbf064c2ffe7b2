//! Fast dense matrix multiplication for the kernels that reduce to it (MatMul, Gemm, Conv via
//! im2col). Not an operator family: it has no registry entries.
