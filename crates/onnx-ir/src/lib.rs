//! Loading, saving and reading ONNX models.
//!
//! A [`Model`] is the decoded `ModelProto` tree (prost types from `onnx-proto`) plus what loading
//! learnt about it: where it came from and which tensors were stored as external data. The proto
//! tree is the editable IR: it keeps every field the file had (names, doc strings, metadata_props,
//! value_info, functions, training info), so load → save → load is faithful by construction.
//! Helpers such as [`ValueType`] and [`Dim`] give typed views of it.
//!
//! Loading memory-maps the file and decodes it zero-copy: every `raw_data` is a slice of the map,
//! and external data files are mapped the same way (see [`external`]), so opening a 300 MB model
//! touches only the pages holding the graph structure.
//!
//! **Architecture Invariant:** this crate knows the format, not the meaning of ops: no kernels,
//! no schemas. Every error names the file and, when known, the tensor.

mod error;
pub mod external;
mod save;
mod types;
pub mod walk;

pub use error::{Error, Result};
pub use external::ExternalTensor;
pub use save::{ExternalPolicy, SaveOptions, SaveReport, PROTOBUF_LIMIT};
pub use types::{dims, Dim, ElemType, ValueType};

use bytes::Bytes;
use error::io;
use onnx_proto::{GraphProto, Message, ModelProto};
use std::path::{Path, PathBuf};
use walk::{for_each_tensor_mut, TensorSite};

/// A decoded ONNX model.
#[derive(Debug, Clone)]
pub struct Model {
    /// The whole ModelProto; external data is already resolved into `raw_data`.
    pub proto: ModelProto,
    /// The file it was loaded from, if any.
    pub path: Option<PathBuf>,
    /// The tensors that were stored in external files, in model order.
    pub external: Vec<ExternalTensor>,
}

impl Model {
    /// Loads `path`: memory-maps it, decodes it, resolves external data next to it, and checks
    /// that every tensor's data agrees with its dims and type.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(io(path))?;
        if meta.is_dir() {
            return Err(Error::IsDirectory { path: path.into() });
        }
        if meta.len() == 0 {
            return Err(Error::Empty { path: path.into() });
        }
        let bytes = external::map_file(path).map_err(io(path))?;
        let base = path.parent().map(|p| {
            if p.as_os_str().is_empty() {
                Path::new(".")
            } else {
                p
            }
        });
        Model::from_bytes(bytes, path, base)
    }

    /// Decodes a serialized model. `name` is used in errors; external data is looked up in
    /// `base_dir` (refused when `None`).
    pub fn from_bytes(bytes: Bytes, name: &Path, base_dir: Option<&Path>) -> Result<Model> {
        let mut proto = ModelProto::decode(bytes).map_err(|e| Error::Decode {
            path: name.into(),
            reason: e.to_string(),
        })?;
        if proto.graph.is_none() {
            return Err(Error::NoGraph { path: name.into() });
        }
        let external = external::resolve(&mut proto, name, base_dir)?;
        check_tensors(&mut proto, name)?;
        Ok(Model {
            proto,
            path: Some(name.into()),
            external,
        })
    }

    /// Wraps a proto built in memory.
    pub fn from_proto(proto: ModelProto) -> Model {
        Model {
            proto,
            path: None,
            external: Vec::new(),
        }
    }

    /// The main graph (a loaded model always has one; an empty graph otherwise).
    pub fn graph(&self) -> &GraphProto {
        static EMPTY: std::sync::OnceLock<GraphProto> = std::sync::OnceLock::new();
        self.proto
            .graph
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(GraphProto::default))
    }

    /// The opset version imported for `domain` (`""` and `"ai.onnx"` are the same domain).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        let norm = |d: &str| if d == "ai.onnx" { "" } else { d }.to_string();
        let want = norm(domain);
        self.proto
            .opset_import
            .iter()
            .find(|o| norm(o.domain()) == want)
            .map(|o| o.version())
    }

    /// Writes the model to `path` (see [`SaveOptions`]): temp file then rename, never a half-written file.
    pub fn save(&self, path: impl AsRef<Path>, options: &SaveOptions) -> Result<SaveReport> {
        save::save(self, path.as_ref(), options)
    }
}

/// Every tensor's data must match its dims and element type.
fn check_tensors(proto: &mut ModelProto, name: &Path) -> Result<()> {
    for_each_tensor_mut(proto, &mut |t, site: &TensorSite| {
        tensor::Tensor::from_proto(t)
            .map(drop)
            .map_err(|e| Error::Tensor {
                path: name.into(),
                tensor: t.name().to_string(),
                site: site.to_string(),
                reason: e.to_string(),
            })
    })
}
