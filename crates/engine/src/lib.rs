//! The native engine: runs an ONNX model's graph on the CPU kernels registered in `ops`.
//!
//! [`Session::new`] checks that every node — in the main graph, in subgraphs and in function
//! bodies — has something to run it: a model-local function, a kernel for its (domain, op,
//! opset), or the op's schema function body (expanded when the op has no kernel). A node with
//! none of these is refused there, before anything runs, with `unsupported: <Op> v<N>`.
//! [`Session::run`] binds inputs, runs the nodes in topological order, and returns the graph
//! outputs and, on request, every intermediate value ([`Capture`]).
//!
//! **Architecture Invariant:** the engine never computes an op itself; it only moves values
//! between kernels. A kernel failure becomes an [`EngineError::Node`] naming the node and op.

pub mod backend;
pub mod compare;
pub mod conformance;
mod error;
mod function;
mod fuse;
mod graph;
mod inputs;
pub mod io;

pub use error::EngineError;
pub use inputs::{check_input, InputSpec};
pub use ops::exec::Value;

/// The inputs a caller must (or may) feed to `graph`, as [`Session::inputs`] lists them, without
/// preparing a session (for peers of the native engine, which may run models it cannot).
pub fn input_specs(graph: &onnx_proto::GraphProto) -> Vec<InputSpec> {
    inputs::specs(graph)
}

use onnx_ir::Model;
use onnx_proto::FunctionProto;
use std::collections::{HashMap, HashSet};
use tensor::Tensor;

/// Which intermediate values [`Session::run`] keeps.
#[derive(Debug, Clone, Default)]
pub enum Capture {
    #[default]
    None,
    /// Every node output of the main graph.
    All,
    /// These value names.
    Names(HashSet<String>),
}

impl Capture {
    fn wants(&self, name: &str) -> bool {
        match self {
            Capture::None => false,
            Capture::All => true,
            Capture::Names(n) => n.contains(name),
        }
    }
}

/// What one run produced.
#[derive(Debug, Clone, Default)]
pub struct RunOutput {
    /// Graph outputs in graph order.
    pub outputs: Vec<(String, Value)>,
    /// Captured intermediates in the order the nodes produced them.
    pub captured: Vec<(String, Value)>,
}

/// A model ready to run.
pub struct Session {
    model: Model,
    /// Opset per domain (`""` for ai.onnx).
    opsets: HashMap<String, i64>,
    /// Model-local functions by domain, then name.
    functions: HashMap<String, HashMap<String, std::sync::Arc<FunctionProto>>>,
    /// Schema function bodies, decoded (with the schema's attribute defaults) once per
    /// (domain, op, opset) the first time a node needs one; `None` = the op has none.
    schema_bodies: graph::SchemaBodies,
    /// Main-graph initializers, decoded (and aligned) once; runs borrow them.
    initializers: HashMap<String, Value>,
    /// The main graph's run plan, built once (`None` when the graph cannot be scheduled: the
    /// error is reported when it runs).
    plan: Option<graph::Plan>,
    /// The intra-op thread pool kernels run in (`None`: the caller's thread only).
    pool: Option<rayon::ThreadPool>,
    /// When set, every node run (in any graph or function body) is recorded here.
    trace: Option<std::sync::Mutex<Vec<NodeRecord>>>,
    /// When set, the time of each main-graph step is recorded here (see [`Session::profile`]).
    profile: Option<std::sync::Mutex<Vec<StepTime>>>,
}

/// How long one main-graph step took, as recorded by [`Session::enable_profile`].
#[derive(Debug, Clone, PartialEq)]
pub struct StepTime {
    /// The node's index in the graph.
    pub node: usize,
    /// Nodes of the graph folded into this step (see [`Session::fused_nodes`]).
    pub fused: Vec<usize>,
    pub seconds: f64,
}

/// One node execution, as recorded by [`Session::enable_trace`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeRecord {
    /// `""` for ai.onnx.
    pub domain: String,
    pub op: String,
    /// The opset version of the node's domain where it ran.
    pub version: i64,
    /// Element type of each tensor input (`None` for omitted or non-tensor inputs).
    pub input_types: Vec<Option<tensor::DataType>>,
    /// Whether a kernel ran it (else a function body was expanded).
    pub kernel: bool,
}

pub(crate) fn norm_domain(d: &str) -> &str {
    if d == "ai.onnx" {
        ""
    } else {
        d
    }
}

impl Session {
    /// Prepares `model`: decodes initializers and checks every node can be run.
    pub fn new(model: Model) -> Result<Session, EngineError> {
        let opsets = model
            .proto
            .opset_import
            .iter()
            .map(|o| (norm_domain(o.domain()).to_string(), o.version()))
            .collect::<HashMap<_, _>>();
        let mut functions: HashMap<String, HashMap<String, std::sync::Arc<FunctionProto>>> =
            HashMap::new();
        for f in &model.proto.functions {
            functions
                .entry(norm_domain(f.domain()).to_string())
                .or_default()
                .insert(f.name().to_string(), std::sync::Arc::new(f.clone()));
        }
        let mut initializers = HashMap::new();
        for t in &model.graph().initializer {
            let v = Tensor::from_proto(t).map_err(|e| EngineError::Initializer {
                name: t.name().to_string(),
                reason: e.to_string(),
            })?;
            initializers.insert(t.name().to_string(), Value::Tensor(v.aligned()));
        }
        let plan = graph::Plan::new(model.graph(), &initializers).ok();
        let session = Session {
            model,
            opsets,
            functions,
            schema_bodies: Default::default(),
            initializers,
            plan,
            pool: None,
            trace: None,
            profile: None,
        };
        graph::check_runnable(&session, session.model.graph(), &session.opsets)?;
        Ok(session)
    }

    /// Lets kernels use `threads` threads (intra-op parallelism: matrix products,
    /// convolutions). 1 (the default) runs everything on the calling thread.
    pub fn set_threads(&mut self, threads: usize) -> Result<(), EngineError> {
        self.pool = if threads <= 1 {
            None
        } else {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("onnx-doctor-{i}"))
                    .build()
                    .map_err(|e| EngineError::Graph {
                        graph: self.model.graph().name().to_string(),
                        reason: format!("cannot start {threads} threads: {e}"),
                    })?,
            )
        };
        Ok(())
    }

    /// The number of threads kernels may use.
    pub fn threads(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(1, rayon::ThreadPool::current_num_threads)
    }

    /// Records every node run from now on (see [`Session::take_trace`]).
    pub fn enable_trace(&mut self) {
        self.trace = Some(Default::default());
    }

    /// Times every main-graph step of the runs from now on (with fusion as in ordinary runs).
    pub fn enable_profile(&mut self) {
        self.profile = Some(Default::default());
    }

    /// The step times recorded since profiling was enabled (or last taken), run after run.
    pub fn take_profile(&self) -> Vec<StepTime> {
        self.profile
            .as_ref()
            .map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default()
    }

    /// The nodes run since tracing was enabled (or last taken).
    pub fn take_trace(&self) -> Vec<NodeRecord> {
        self.trace
            .as_ref()
            .map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default()
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The inputs a caller must (or may) feed: graph inputs that are not initializers, then
    /// those that are (they have a default).
    pub fn inputs(&self) -> Vec<InputSpec> {
        inputs::specs(self.model.graph())
    }

    /// Runs one node of the main graph (or any node under the model's opsets) on the given
    /// input values (positional, `None` = omitted), outside the graph: how `compare --reinject`
    /// separates a node's own error from the error it inherits.
    pub fn run_one(
        &self,
        node: &onnx_proto::NodeProto,
        inputs: Vec<Option<Value>>,
    ) -> Result<Vec<Option<Value>>, EngineError> {
        let mut env = graph::Env {
            values: HashMap::new(),
            base: None,
            parent: None,
            absent: HashSet::new(),
        };
        let mut bound = node.clone();
        for (i, v) in inputs.into_iter().enumerate() {
            let name = format!("__input_{i}");
            match v {
                Some(v) => {
                    env.values.insert(name.clone(), v);
                }
                None => {
                    env.absent.insert(name.clone());
                }
            }
            if i < bound.input.len() {
                bound.input[i] = name;
            }
        }
        graph::run_node(self, &bound, &self.opsets, &env)
    }

    /// How many main-graph nodes runs fold into the node producing their input (elementwise
    /// chains after a Conv, MatMul or Gemm; see `ops::exec::epilogue`). Runs that capture
    /// intermediates or trace nodes fold none.
    pub fn fused_nodes(&self) -> usize {
        self.plan
            .as_ref()
            .map_or(0, |p| p.fusions.values().map(|c| c.nodes().count()).sum())
    }

    /// The main graph's node indices in the order [`Session::run`] runs them.
    pub fn schedule(&self) -> Result<Vec<usize>, EngineError> {
        match &self.plan {
            Some(p) => Ok(p.order.clone()),
            None => graph::schedule(&self.model.graph().node, self.model.graph().name()),
        }
    }

    /// Runs the main graph. `inputs` are matched to graph inputs by name; every input without an
    /// initializer must be given, and each is checked against its declared type.
    pub fn run(
        &self,
        inputs: Vec<(String, Value)>,
        capture: &Capture,
    ) -> Result<RunOutput, EngineError> {
        let specs = self.inputs();
        let mut given: HashMap<String, Value> = HashMap::new();
        for (name, v) in inputs {
            let Some(spec) = specs.iter().find(|s| s.name == name) else {
                return Err(EngineError::Input {
                    name,
                    reason: format!(
                        "the model has no input of that name (inputs: {})",
                        specs
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            };
            check_input(spec, &v)?;
            given.insert(name, v);
        }
        for s in &specs {
            if !s.has_initializer && !given.contains_key(&s.name) {
                return Err(EngineError::Input {
                    name: s.name.clone(),
                    reason: format!("missing: the model needs a value of type {}", s.ty),
                });
            }
        }
        match &self.pool {
            Some(pool) => pool.install(|| graph::run_main(self, given, capture)),
            None => graph::run_main(self, given, capture),
        }
    }
}
