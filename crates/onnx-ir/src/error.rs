use std::path::PathBuf;

/// Everything that can go wrong while loading or saving a model. Every variant names the file
/// and, when known, the tensor or value involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: is a directory, expected an .onnx file")]
    IsDirectory { path: PathBuf },
    #[error("{path}: empty file, expected a serialized ONNX ModelProto")]
    Empty { path: PathBuf },
    #[error("{path}: not a valid ONNX model (protobuf decoding failed: {reason})")]
    Decode { path: PathBuf, reason: String },
    #[error("{path}: not an ONNX model: the ModelProto has no graph")]
    NoGraph { path: PathBuf },
    #[error("{path}: tensor '{tensor}' ({site}): {reason}")]
    Tensor {
        path: PathBuf,
        tensor: String,
        site: String,
        reason: String,
    },
    #[error("{path}: external data of tensor '{tensor}': {reason}")]
    ExternalData {
        path: PathBuf,
        tensor: String,
        reason: String,
    },
    #[error("{path}: {reason}")]
    Save { path: PathBuf, reason: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}
