//! The ONNX protobuf messages (`ModelProto`, `GraphProto`, `TensorProto`, …) as prost types.
//!
//! The code in `generated/onnx.rs` is produced by `cargo run -p xtask -- gen-proto` from the
//! `.proto` files under `proto/onnx/` (copied from the onnx 1.23.2 wheel, IR version 14) and is
//! committed, so building needs no `protoc`. Every `bytes` field is a [`bytes::Bytes`]: decoding
//! from a `Bytes` that owns a memory map borrows from the map instead of copying.

#![allow(clippy::all, missing_docs)]

#[rustfmt::skip]
mod generated {
    include!("generated/onnx.rs");
}

pub use generated::*;
pub use prost::Message;

/// The IR version of the `.proto` files this crate was generated from.
pub const IR_VERSION: i64 = Version::IrVersion as i64;
