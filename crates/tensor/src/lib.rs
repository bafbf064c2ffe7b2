//! Tensor values for onnx-doctor: ONNX element types, shapes, the [`Tensor`] value, and tensor
//! files.
//!
//! This crate owns:
//! - [`DataType`]: every ONNX element type (codes 1..=28 of `TensorProto.DataType`), with its
//!   name, width, packed byte size and `.npy` mapping;
//! - [`Tensor`]: element type, row-major shape and data — little-endian bytes in a
//!   [`bytes::Bytes`] laid out as ONNX `raw_data` (sub-byte types packed), so clones are cheap
//!   and a tensor can view a memory-mapped initializer without copying; strings as `Vec<Bytes>`;
//!   typed construction and access through the sealed [`Element`] trait;
//! - conversion from and to `onnx_proto::TensorProto` ([`Tensor::from_proto`],
//!   [`Tensor::from_proto_with_raw`], [`Tensor::to_proto`]);
//! - file I/O: [`npy`], [`npz`] and [`pb`] (a serialized `TensorProto`);
//! - [`reuse`]: float32 buffers of dropped tensors handed out again to kernels.
//!
//! **Architecture invariant:** this crate knows nothing about graphs, nodes, ops or kernels, nor
//! about where external data lives: the model loader (`onnx-ir`) maps external data files and
//! hands the bytes to [`Tensor::from_proto_with_raw`].
//!
//! **Architecture invariant:** no input, however malformed, panics or allocates from a size it
//! merely claims: element counts are checked multiplications, and data lengths are checked
//! against the shape before anything is allocated from it. Errors ([`Error`]) name the file, the
//! `.npz` entry or the tensor, and what was expected.

mod dtype;
mod error;
mod fsutil;
pub use fsutil::write_file;
pub mod npy;
pub mod npz;
mod pack;
pub mod pb;
mod proto;
pub mod reuse;
mod tensor;

pub use dtype::DataType;
pub use error::{Error, Result};
pub use tensor::{Complex, Element, Tensor};
