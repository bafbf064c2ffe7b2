//! onnxruntime as a peer backend (cargo feature `ort`): the `ort` crate, loading onnxruntime's
//! shared library at run time from `ORT_DYLIB_PATH`, else from the onnxruntime PyPI wheel of the
//! `python3` on PATH (`<package>/capi/libonnxruntime.so.1.*`). The `ort` crate needs
//! onnxruntime 1.31 or newer (its C API version 31).
//!
//! Sessions run sequentially (no inter-op parallelism) with `threads` intra-op threads and the
//! default (all) graph optimisations, as `onnxruntime.InferenceSession` does by default.

use super::{tensor_input, unsupported_type, Backend, BackendError};
use crate::Value;
use ort::session::Session;
use ort::value::{DynValue, Tensor as OrtTensor, TensorElementType, TensorRef, ValueType};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tensor::{DataType, Tensor};

const NAME: &str = "ort";

fn peer(reason: impl std::fmt::Display) -> BackendError {
    BackendError::Peer {
        backend: NAME,
        reason: reason.to_string(),
    }
}

/// Where onnxruntime's shared library is: `ORT_DYLIB_PATH`, else the wheel's.
pub fn find_dylib() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("ORT_DYLIB_PATH={} is not a file", p.display()))
        };
    }
    let hint = "set ORT_DYLIB_PATH to libonnxruntime.so, or `python3 -m pip install onnxruntime`";
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import onnxruntime, os; print(os.path.dirname(onnxruntime.__file__))",
        ])
        .output()
        .map_err(|e| format!("cannot run python3 to find the onnxruntime wheel ({e}); {hint}"))?;
    if !out.status.success() {
        return Err(format!("python3 cannot import onnxruntime; {hint}"));
    }
    let capi = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("capi");
    let mut libs: Vec<PathBuf> = std::fs::read_dir(&capi)
        .map_err(|e| format!("{}: {e}; {hint}", capi.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so.1."))
        })
        .collect();
    libs.sort();
    libs.pop()
        .ok_or_else(|| format!("no libonnxruntime.so.1.* in {}; {hint}", capi.display()))
}

/// The process's one onnxruntime environment (the library can be loaded only once).
fn environment() -> Result<&'static ort::environment::Environment, BackendError> {
    static ENV: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let lib = find_dylib()?;
        let builder =
            ort::init_from(&lib).map_err(|e| format!("loading {}: {e}", lib.display()))?;
        builder
            .with_name("onnx-doctor")
            .build()
            .map_err(|e| format!("creating the environment from {}: {e}", lib.display()))
    })
    .as_ref()
    .map_err(peer)
}

/// A model in an onnxruntime session.
pub struct OrtBackend {
    session: Session,
    threads: usize,
}

impl OrtBackend {
    /// `model` is only used for messages; onnxruntime reads `path` itself.
    pub fn new(
        path: &Path,
        model: &onnx_ir::Model,
        threads: usize,
    ) -> Result<OrtBackend, BackendError> {
        let _ = model;
        let env = environment()?;
        let threads = threads.max(1);
        let file = path.display();
        let session = Session::builder(env)
            .and_then(|b| Ok(b.with_intra_threads(threads)?))
            .and_then(|b| Ok(b.with_parallel_execution(false)?))
            .and_then(|mut b| b.commit_from_file(path))
            .map_err(|e| peer(format!("{file}: {e}")))?;
        Ok(OrtBackend { session, threads })
    }
}

impl Backend for OrtBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&mut self, inputs: &[(String, Value)]) -> Result<Vec<(String, Value)>, BackendError> {
        // Borrowed views of our buffers where they are aligned, else copies (see `to_ort`).
        let mut feed: Vec<(String, ort::session::SessionInputValue<'_>)> = Vec::new();
        for (name, v) in inputs {
            let t = tensor_input(NAME, name, v)?;
            feed.push((name.clone(), to_ort(name, t)?));
        }
        let outputs = self.session.run(feed).map_err(peer)?;
        let mut result = Vec::new();
        for (name, value) in outputs {
            result.push((name.to_string(), Value::Tensor(from_ort(name, &value)?)));
        }
        Ok(result)
    }
}

/// Our tensor as an onnxruntime input: a view of our bytes when they are aligned, else a copy.
fn to_ort<'v>(
    name: &str,
    t: &'v Tensor,
) -> Result<ort::session::SessionInputValue<'v>, BackendError> {
    fn one<'v, T>(t: &'v Tensor) -> Result<ort::session::SessionInputValue<'v>, BackendError>
    where
        T: tensor::Element + ort::value::PrimitiveTensorElementType + std::fmt::Debug + Clone,
    {
        let shape: Vec<usize> = t.shape().to_vec();
        match t.as_slice::<T>() {
            Some(data) => Ok(TensorRef::from_array_view((shape, data))
                .map_err(peer)?
                .into_dyn()
                .into()),
            None => {
                let data = t.to_vec::<T>().map_err(peer)?;
                Ok(OrtTensor::from_array((shape, data))
                    .map_err(peer)?
                    .into_dyn()
                    .into())
            }
        }
    }
    match t.dtype() {
        DataType::Float => one::<f32>(t),
        DataType::Double => one::<f64>(t),
        DataType::Float16 => one::<half::f16>(t),
        DataType::Int64 => one::<i64>(t),
        DataType::Int32 => one::<i32>(t),
        DataType::Int8 => one::<i8>(t),
        DataType::Uint8 => one::<u8>(t),
        DataType::Bool => one::<bool>(t),
        other => Err(unsupported_type(NAME, name, other)),
    }
}

/// An onnxruntime output as our tensor (copied).
fn from_ort(name: &str, v: &DynValue) -> Result<Tensor, BackendError> {
    fn one<T>(v: &DynValue) -> Result<Tensor, BackendError>
    where
        T: tensor::Element + ort::value::PrimitiveTensorElementType + Clone,
    {
        let (shape, data) = v.try_extract_tensor::<T>().map_err(peer)?;
        let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        Tensor::from_vec(shape, data.to_vec()).map_err(peer)
    }
    let ty = match v.dtype() {
        ValueType::Tensor { ty, .. } => *ty,
        other => {
            return Err(peer(format!(
                "output '{name}': only tensor outputs are converted, got {other}"
            )))
        }
    };
    match ty {
        TensorElementType::Float32 => one::<f32>(v),
        TensorElementType::Float64 => one::<f64>(v),
        TensorElementType::Float16 => one::<half::f16>(v),
        TensorElementType::Int64 => one::<i64>(v),
        TensorElementType::Int32 => one::<i32>(v),
        TensorElementType::Int8 => one::<i8>(v),
        TensorElementType::Uint8 => one::<u8>(v),
        TensorElementType::Bool => one::<bool>(v),
        other => Err(unsupported_type(NAME, name, format!("{other:?}"))),
    }
}
