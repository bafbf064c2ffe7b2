//! The crate's one error type.
//!
//! Low-level decoders return context-free errors; the functions that know the file, the npz entry
//! or the tensor name wrap them ([`Error::InFile`], [`Error::InEntry`], [`Error::InTensor`]), so a
//! message reads `model/x.npz: entry 'w': .npy data holds 8 bytes but shape [3] of float needs 12`.

use std::io;
use std::path::{Path, PathBuf};

use crate::DataType;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong building, converting, reading or writing a tensor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O failure on `path`.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    /// `error` happened while reading or writing `path`.
    #[error("{}: {error}", path.display())]
    InFile { path: PathBuf, error: Box<Error> },
    /// `error` happened in the member `entry` of an `.npz` archive.
    #[error("entry '{entry}': {error}")]
    InEntry { entry: String, error: Box<Error> },
    /// `error` happened converting the `TensorProto` named `name`.
    #[error("tensor '{name}': {error}")]
    InTensor { name: String, error: Box<Error> },

    /// A `data_type` code that is not an ONNX element type.
    #[error("data_type {0} is not an ONNX element type (expected 1..=28)")]
    UnknownDataType(i32),
    /// A negative entry in `dims`.
    #[error("dims[{index}] = {dim} is negative")]
    NegativeDim { index: usize, dim: i64 },
    /// A dimension larger than ONNX can represent (`i64::MAX`).
    #[error("dimension {index} = {dim} exceeds i64::MAX")]
    DimTooLarge { index: usize, dim: u64 },
    /// The element count or byte size of a shape overflows 64 bits.
    #[error("shape {shape:?} of {dtype} is too large: its size overflows 64 bits")]
    ShapeOverflow { dtype: DataType, shape: Vec<u64> },
    /// The data holds a different amount than the shape needs.
    #[error("{field} holds {actual} {unit} but shape {shape:?} of {dtype} needs {expected}")]
    DataLength {
        field: &'static str,
        dtype: DataType,
        shape: Vec<usize>,
        expected: u64,
        actual: u64,
        unit: &'static str,
    },

    /// `TensorProto.data_location` is EXTERNAL.
    #[error(
        "data is stored externally (data_location = EXTERNAL); external data must be resolved \
         by the model loader, which then calls Tensor::from_proto_with_raw"
    )]
    ExternalData,
    /// `TensorProto.segment` is set.
    #[error("segmented tensors (TensorProto.segment) are not supported")]
    Segment,
    /// Data found in more than one field of a `TensorProto`.
    #[error("data is present in more than one field ({0}); a TensorProto must use exactly one")]
    ConflictingData(String),
    /// Data in a `TensorProto` field that the spec does not allow for the type.
    #[error("{field} cannot hold {dtype} data; ONNX stores {dtype} in {expected}")]
    WrongField {
        field: &'static str,
        dtype: DataType,
        expected: &'static str,
    },
    /// A typed-field entry outside the range its element type allows.
    #[error("{field}[{index}] = {value} is out of range for {dtype} ({expected})")]
    ValueOutOfRange {
        field: &'static str,
        index: usize,
        value: i128,
        dtype: DataType,
        expected: &'static str,
    },

    /// Typed access with the wrong element type, or an operation the dtype does not support.
    #[error("expected a {expected} tensor, found {actual}")]
    TypeMismatch {
        expected: &'static str,
        actual: DataType,
    },

    /// A malformed `.npy` stream.
    #[error("invalid .npy: {0}")]
    Npy(String),
    /// A well-formed `.npy` stream this crate does not read or write.
    #[error("unsupported .npy: {0}")]
    NpyUnsupported(String),
    /// A malformed `.npz` archive.
    #[error("invalid .npz: {0}")]
    Zip(#[from] zip::result::ZipError),
    /// A malformed `.npz` member list.
    #[error("invalid .npz: {0}")]
    Npz(String),
    /// Bytes that do not decode as a `TensorProto`.
    #[error("invalid TensorProto: {0}")]
    Decode(#[from] prost::DecodeError),
}

impl Error {
    pub(crate) fn io(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
        move |error| Error::Io {
            path: path.to_owned(),
            error,
        }
    }

    pub(crate) fn in_file(self, path: &Path) -> Error {
        match self {
            // An I/O error already names its path.
            e @ Error::Io { .. } => e,
            e => Error::InFile {
                path: path.to_owned(),
                error: Box::new(e),
            },
        }
    }

    pub(crate) fn in_entry(self, entry: &str) -> Error {
        Error::InEntry {
            entry: entry.to_owned(),
            error: Box::new(self),
        }
    }

    pub(crate) fn in_tensor(self, name: &str) -> Error {
        Error::InTensor {
            name: name.to_owned(),
            error: Box::new(self),
        }
    }
}
