//! One interface over the engines a model can run on: our own ([`NativeBackend`], over
//! [`Session`]) and, behind cargo features of this crate, peers to measure it against:
//! onnxruntime (feature `ort`, the `ort` crate loading onnxruntime's shared library at run time)
//! and tract (feature `tract`, the `tract-onnx` crate). `onnx-doctor bench` times any of them
//! the same way.
//!
//! Values cross the boundary as our [`Value`]s. A peer converts tensors of the common element
//! types (float, double, float16, int64, int32, int8, uint8, bool) to and from its own; any
//! other type, and sequences or optionals, are refused with an error naming the value.
//!
//! **Architecture Invariant:** a peer backend is only ever a yardstick: `bench` times it,
//! `compare --backends` and `verify --backends` check our outputs against it. Nothing in the
//! engine depends on one, and default builds (and CI) compile neither.

use crate::{EngineError, Session, Value};
use onnx_ir::Model;
use std::path::Path;

#[cfg(feature = "ort")]
mod ort;
#[cfg(feature = "tract")]
mod tract;

#[cfg(feature = "ort")]
pub use self::ort::OrtBackend;
#[cfg(feature = "tract")]
pub use self::tract::TractBackend;

/// Why a backend could not be opened or could not run.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The native engine refused the model or failed on it.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The backend was asked for but this binary was built without its cargo feature.
    #[error("backend '{name}' is not compiled into this binary: build onnx-doctor with the cargo feature '{feature}' (`cargo build --release -p cli --features {feature}`)")]
    NotCompiled {
        name: &'static str,
        feature: &'static str,
    },
    /// A peer backend failed: loading its library, preparing the model, converting a value, or
    /// running.
    #[error("{backend}: {reason}")]
    Peer {
        backend: &'static str,
        reason: String,
    },
}

/// An engine that runs one model.
pub trait Backend {
    /// `native`, `ort` or `tract`.
    fn name(&self) -> &'static str;

    /// Intra-op threads actually in use (the native engine: 1, whatever was asked).
    fn threads(&self) -> usize;

    /// Gets ready for inputs like these (same names, types and shapes) before the first timed
    /// run. Backends that specialise on shapes do it here (tract fixes its input facts and
    /// optimises); the others do nothing. `bench` counts this in its load time.
    fn prepare(&mut self, inputs: &[(String, Value)]) -> Result<(), BackendError> {
        let _ = inputs;
        Ok(())
    }

    /// Runs the model on `inputs` (by graph-input name) and returns every graph output by
    /// name, in graph order.
    fn run(&mut self, inputs: &[(String, Value)]) -> Result<Vec<(String, Value)>, BackendError>;

    /// Starts timing each step of the following runs; false when the backend cannot.
    fn enable_profile(&mut self) -> bool {
        false
    }

    /// The steps timed since [`Backend::enable_profile`] (or the last call), run after run.
    fn take_profile(&mut self) -> Vec<ProfiledStep> {
        Vec::new()
    }
}

/// One timed step of a run: a node, with the nodes folded into it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfiledStep {
    /// The node's name (or `op -> first output` when it has none).
    pub node: String,
    /// Its op type, then `+` and the op type of each node folded into it (`Conv+Add+Relu`).
    pub ops: String,
    pub seconds: f64,
}

/// Which backend to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Native,
    Ort,
    Tract,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Native => "native",
            BackendKind::Ort => "ort",
            BackendKind::Tract => "tract",
        }
    }

    /// The cargo feature (of this crate, forwarded by the cli crate) that compiles it in.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            BackendKind::Native => None,
            BackendKind::Ort => Some("ort"),
            BackendKind::Tract => Some("tract"),
        }
    }

    /// Whether this build has it.
    pub fn compiled(self) -> bool {
        match self {
            BackendKind::Native => true,
            BackendKind::Ort => cfg!(feature = "ort"),
            BackendKind::Tract => cfg!(feature = "tract"),
        }
    }

    fn not_compiled(self) -> BackendError {
        BackendError::NotCompiled {
            name: self.name(),
            feature: self.feature().unwrap_or_default(),
        }
    }
}

/// Opens `kind` on the model at `path` (already decoded as `model`, which the native engine
/// takes over; peers read the file themselves) with `threads` intra-op threads.
pub fn open(
    kind: BackendKind,
    path: &Path,
    model: Model,
    threads: usize,
) -> Result<Box<dyn Backend>, BackendError> {
    if !kind.compiled() {
        return Err(kind.not_compiled());
    }
    let _ = path;
    match kind {
        BackendKind::Native => Ok(Box::new(NativeBackend::new(model, threads)?)),
        #[cfg(feature = "ort")]
        BackendKind::Ort => Ok(Box::new(OrtBackend::new(path, &model, threads)?)),
        #[cfg(feature = "tract")]
        BackendKind::Tract => Ok(Box::new(TractBackend::new(path, &model, threads)?)),
        #[allow(unreachable_patterns)]
        other => Err(other.not_compiled()),
    }
}

/// The native engine as a [`Backend`], with `threads` intra-op threads (a rayon pool the
/// kernels split large products, convolutions and elementwise maps over).
pub struct NativeBackend {
    session: Session,
    requested_threads: usize,
}

impl NativeBackend {
    pub fn new(model: Model, threads: usize) -> Result<NativeBackend, EngineError> {
        let mut session = Session::new(model)?;
        session.set_threads(threads.max(1))?;
        Ok(NativeBackend {
            session,
            requested_threads: threads.max(1),
        })
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The thread count asked for.
    pub fn requested_threads(&self) -> usize {
        self.requested_threads
    }
}

impl Backend for NativeBackend {
    fn name(&self) -> &'static str {
        "native"
    }

    fn threads(&self) -> usize {
        self.session.threads()
    }

    fn run(&mut self, inputs: &[(String, Value)]) -> Result<Vec<(String, Value)>, BackendError> {
        // Cloning a value clones a reference-counted buffer, not its data.
        let out = self.session.run(inputs.to_vec(), &crate::Capture::None)?;
        Ok(out.outputs)
    }

    fn enable_profile(&mut self) -> bool {
        self.session.enable_profile();
        true
    }

    fn take_profile(&mut self) -> Vec<ProfiledStep> {
        let g = self.session.model().graph();
        self.session
            .take_profile()
            .into_iter()
            .map(|s| {
                let node = &g.node[s.node];
                let mut ops = node.op_type().to_string();
                for &f in &s.fused {
                    ops.push('+');
                    ops.push_str(g.node[f].op_type());
                }
                ProfiledStep {
                    node: crate::graph::node_name(node),
                    ops,
                    seconds: s.seconds,
                }
            })
            .collect()
    }
}

/// A tensor input, or the error a peer gives for anything else.
#[cfg(any(feature = "ort", feature = "tract"))]
fn tensor_input<'v>(
    backend: &'static str,
    name: &str,
    v: &'v Value,
) -> Result<&'v tensor::Tensor, BackendError> {
    match v {
        Value::Tensor(t) => Ok(t),
        other => Err(BackendError::Peer {
            backend,
            reason: format!(
                "input '{name}': only tensors can be passed to this backend, got {}",
                other.describe()
            ),
        }),
    }
}

/// The error for an element type a peer conversion does not cover.
#[cfg(any(feature = "ort", feature = "tract"))]
fn unsupported_type(
    backend: &'static str,
    name: &str,
    what: impl std::fmt::Display,
) -> BackendError {
    BackendError::Peer {
        backend,
        reason: format!(
            "value '{name}': element type {what} is not converted (supported: float, double, \
             float16, int64, int32, int8, uint8, bool)"
        ),
    }
}
