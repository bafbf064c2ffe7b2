//! What a kernel sees when it runs one node, and the kernel registry.
//!
//! A kernel is a plain function ([`KernelFn`]) registered for (domain, op, inclusive opset
//! range) in its family's `KERNELS` list under `kernels/`. It reads its node's attributes and
//! inputs through [`RunCx`] and returns the node's outputs in order. It never sees the graph; when
//! an op owns subgraphs (If, Loop, Scan, SequenceMap) the engine runs them for it through
//! [`Subgraphs`].
//!
//! **Architecture Invariant:** a kernel either computes the op exactly as the ONNX spec says for
//! the input types it is given, or fails with [`KernelError::Unsupported`] naming the op, its
//! version and the type — never a silently different answer.

pub mod epilogue;
#[cfg(test)]
pub(crate) mod testing;
pub mod util;

pub use epilogue::{Activation, EpilogueOp};

use onnx_proto::{attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto};
use tensor::{DataType, Tensor};

pub use crate::VersionRange;

/// A runtime value: a tensor, a sequence of tensors, or an optional.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Tensor(Tensor),
    /// A sequence of tensors; `elem_type` types it even when empty.
    Sequence {
        elem_type: DataType,
        items: Vec<Tensor>,
    },
    /// An optional: `None` is the empty optional.
    Optional(Option<Box<Value>>),
}

impl Value {
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// A short description for messages: `tensor(float)[2,3]`, `seq(tensor(int64))`, ...
    pub fn describe(&self) -> String {
        match self {
            Value::Tensor(t) => format!("tensor({}){:?}", t.dtype(), t.shape()),
            Value::Sequence { elem_type, items } => {
                format!("seq(tensor({elem_type})) of {} items", items.len())
            }
            Value::Optional(None) => "optional (empty)".to_string(),
            Value::Optional(Some(v)) => format!("optional({})", v.describe()),
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Tensor(t)
    }
}

/// Why a kernel could not run.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// The op, at this version, has no kernel for this input type.
    #[error("unsupported: {op} v{version} ({dtype})")]
    Unsupported {
        op: String,
        version: i64,
        dtype: String,
    },
    /// The node's inputs or attributes break the op's contract.
    #[error("{0}")]
    Invalid(String),
    /// A subgraph failed; the message already names where.
    #[error("{0}")]
    Subgraph(String),
}

impl From<tensor::Error> for KernelError {
    fn from(e: tensor::Error) -> Self {
        KernelError::Invalid(e.to_string())
    }
}

/// Result of a kernel.
pub type KResult<T> = Result<T, KernelError>;

/// Runs a node's subgraph attribute (the engine implements this).
pub trait Subgraphs {
    /// Runs `graph` with `inputs` bound to its formal inputs in order (outer-scope values stay
    /// visible) and returns its outputs in order.
    fn run(&self, graph: &GraphProto, inputs: Vec<Value>) -> KResult<Vec<Value>>;
}

/// For running a node that owns no subgraph (constant folding, tests): running one is an error.
pub struct NoSubgraphs;

impl Subgraphs for NoSubgraphs {
    fn run(&self, _: &GraphProto, _: Vec<Value>) -> KResult<Vec<Value>> {
        Err(KernelError::Invalid(
            "this node's subgraphs cannot run here".into(),
        ))
    }
}

/// The kernel of one op over a range of opset versions.
pub type KernelFn = fn(&RunCx) -> KResult<Vec<Value>>;

/// One registry entry.
#[derive(Debug, Clone, Copy)]
pub struct KernelDef {
    pub domain: &'static str,
    pub name: &'static str,
    pub versions: VersionRange,
    pub run: KernelFn,
}

/// A kernel of the default domain from opset `since` on.
pub const fn kernel(name: &'static str, since: i64, run: KernelFn) -> KernelDef {
    KernelDef {
        domain: "",
        name,
        versions: VersionRange { since, until: None },
        run,
    }
}

/// A kernel of the default domain for opsets `since..=until`.
pub const fn kernel_range(name: &'static str, since: i64, until: i64, run: KernelFn) -> KernelDef {
    KernelDef {
        domain: "",
        name,
        versions: VersionRange {
            since,
            until: Some(until),
        },
        run,
    }
}

/// A kernel of another domain (`ai.onnx.ml`, `ai.onnx.preview.training`, ...).
pub const fn kernel_in(
    domain: &'static str,
    name: &'static str,
    since: i64,
    until: Option<i64>,
    run: KernelFn,
) -> KernelDef {
    KernelDef {
        domain,
        name,
        versions: VersionRange { since, until },
        run,
    }
}

/// Everything a kernel may look at while running one node.
pub struct RunCx<'a> {
    pub node: &'a NodeProto,
    /// The opset version of the node's domain in the model (or function) the node is in.
    pub opset: i64,
    inputs: &'a [Option<&'a Value>],
    subgraphs: &'a dyn Subgraphs,
    /// Elementwise steps the engine asks the kernel to apply to its (only) output.
    epilogue: Option<&'a [EpilogueOp<'a>]>,
    epilogue_applied: std::cell::Cell<usize>,
    /// Which inputs hold the same value on every run, and where the kernel may keep what it
    /// derives from them (see [`RunCx::prepared`]).
    constant: &'a [bool],
    state: Option<&'a NodeState>,
}

/// What a kernel derives once from a node's constant inputs (repacked or transformed
/// weights), kept by the engine for the node across runs.
#[derive(Default)]
pub struct NodeState(std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>);

impl std::fmt::Debug for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "NodeState(prepared)"
        } else {
            "NodeState(empty)"
        })
    }
}

impl<'a> RunCx<'a> {
    /// `inputs[i]` is `None` for an omitted optional input (empty name or past the end).
    pub fn new(
        node: &'a NodeProto,
        opset: i64,
        inputs: &'a [Option<&'a Value>],
        subgraphs: &'a dyn Subgraphs,
    ) -> Self {
        RunCx {
            node,
            opset,
            inputs,
            subgraphs,
            epilogue: None,
            epilogue_applied: std::cell::Cell::new(0),
            constant: &[],
            state: None,
        }
    }

    /// Tells the kernel which inputs are the same on every run (`constant[i]`) and gives it
    /// `state` to keep what it derives from them.
    pub fn with_state(mut self, constant: &'a [bool], state: &'a NodeState) -> Self {
        self.constant = constant;
        self.state = Some(state);
        self
    }

    /// Whether input `i` holds the same value on every run of this node (an initializer).
    pub fn is_constant(&self, i: usize) -> bool {
        self.constant.get(i).copied().unwrap_or(false)
    }

    /// The value `make` derives from constant inputs, made on the node's first run and kept
    /// for later runs; `None` when the engine keeps no state for this node. A kernel calls
    /// this only when every input `make` reads [`is_constant`](Self::is_constant), and uses
    /// one type `T` per node.
    pub fn prepared<T: std::any::Any + Send + Sync>(
        &self,
        make: impl FnOnce() -> KResult<T>,
    ) -> KResult<Option<&'a T>> {
        let Some(state) = self.state else {
            return Ok(None);
        };
        if state.0.get().is_none() {
            let v = make()?;
            // Another thread may have set it first; both values are the same.
            let _ = state.0.set(Box::new(v));
        }
        Ok(state.0.get().and_then(|b| b.downcast_ref::<T>()))
    }

    /// Asks the kernel to apply `ops` to its output (see [`epilogue`]).
    pub fn with_epilogue(mut self, ops: &'a [EpilogueOp<'a>]) -> Self {
        self.epilogue = Some(ops).filter(|o| !o.is_empty());
        self
    }

    /// How many leading steps of the epilogue the kernel applied: its output is then the
    /// value after the last of them, not its own.
    pub fn epilogue_applied(&self) -> usize {
        self.epilogue_applied.get()
    }

    /// [`RunCx::finish_f32`] for an output (N×C×…) that still lacks its per-channel `bias`
    /// (axis 1), which is added first, in the same pass: the same values as adding it on
    /// its own and then applying the epilogue.
    pub fn finish_f32_biased(&self, y: &mut [f32], shape: &[usize], bias: Option<&[f32]>) {
        let ops = match self.epilogue {
            Some(ops) if self.epilogue_applied.get() == 0 => ops,
            _ => &[],
        };
        let done = epilogue::apply_f32_biased(bias, ops, y, shape);
        if done > 0 {
            self.epilogue_applied.set(done);
        }
    }

    /// Applies as much of the epilogue as it can, if there is one, to a float32 output about
    /// to be returned (`y` of shape `shape`); kernels with a float32 fast path call this last.
    pub fn finish_f32(&self, y: &mut [f32], shape: &[usize]) {
        self.finish_f32_biased(y, shape, None)
    }

    pub fn op(&self) -> &str {
        self.node.op_type()
    }

    /// An error naming this op and version for an input type the kernel does not handle.
    pub fn unsupported(&self, dtype: impl std::fmt::Display) -> KernelError {
        KernelError::Unsupported {
            op: self.node.op_type().to_string(),
            version: self.opset,
            dtype: dtype.to_string(),
        }
    }

    /// A contract violation: the message should say what was expected and what was given.
    pub fn invalid(&self, msg: impl Into<String>) -> KernelError {
        KernelError::Invalid(msg.into())
    }

    // ---- inputs ----

    /// Number of input positions (including omitted optional ones before the last given one).
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Whether input `i` is present.
    pub fn has_input(&self, i: usize) -> bool {
        self.inputs.get(i).is_some_and(|v| v.is_some())
    }

    /// Input `i` as any value, if present.
    pub fn value(&self, i: usize) -> Option<&'a Value> {
        self.inputs.get(i).copied().flatten()
    }

    /// Required tensor input `i`.
    pub fn input(&self, i: usize) -> KResult<&'a Tensor> {
        match self.value(i) {
            Some(Value::Tensor(t)) => Ok(t),
            Some(other) => Err(self.invalid(format!(
                "input {i} must be a tensor, got {}",
                other.describe()
            ))),
            None => Err(self.invalid(format!("required input {i} is missing"))),
        }
    }

    /// Optional tensor input `i`: `None` when omitted.
    pub fn opt_input(&self, i: usize) -> KResult<Option<&'a Tensor>> {
        if self.has_input(i) {
            self.input(i).map(Some)
        } else {
            Ok(None)
        }
    }

    // ---- outputs ----

    /// Number of outputs the node declares (including omitted optional ones).
    pub fn num_outputs(&self) -> usize {
        self.node.output.len()
    }

    /// Whether output `k` is wanted (declared with a non-empty name).
    pub fn wants_output(&self, k: usize) -> bool {
        self.node.output.get(k).is_some_and(|n| !n.is_empty())
    }

    // ---- attributes ----

    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == name)
    }

    fn attr_of(&self, name: &str, ty: AttributeType) -> KResult<Option<&'a AttributeProto>> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type.is_none_or(|t| t == ty as i32 || t == 0) => Ok(Some(a)),
            Some(a) => Err(self.invalid(format!(
                "attribute '{name}' must be {}, got type code {}",
                ty.as_str_name(),
                a.r#type.unwrap_or_default()
            ))),
        }
    }

    pub fn attr_i(&self, name: &str) -> KResult<Option<i64>> {
        Ok(self.attr_of(name, AttributeType::Int)?.map(|a| a.i()))
    }

    /// Int attribute with a default.
    pub fn int(&self, name: &str, default: i64) -> KResult<i64> {
        Ok(self.attr_i(name)?.unwrap_or(default))
    }

    pub fn attr_f(&self, name: &str) -> KResult<Option<f32>> {
        Ok(self.attr_of(name, AttributeType::Float)?.map(|a| a.f()))
    }

    /// Float attribute with a default.
    pub fn float(&self, name: &str, default: f32) -> KResult<f32> {
        Ok(self.attr_f(name)?.unwrap_or(default))
    }

    pub fn attr_ints(&self, name: &str) -> KResult<Option<&'a [i64]>> {
        Ok(self
            .attr_of(name, AttributeType::Ints)?
            .map(|a| a.ints.as_slice()))
    }

    pub fn attr_floats(&self, name: &str) -> KResult<Option<&'a [f32]>> {
        Ok(self
            .attr_of(name, AttributeType::Floats)?
            .map(|a| a.floats.as_slice()))
    }

    /// String attribute (UTF-8, lossy).
    pub fn attr_s(&self, name: &str) -> KResult<Option<String>> {
        Ok(self
            .attr_of(name, AttributeType::String)?
            .map(|a| String::from_utf8_lossy(a.s()).into_owned()))
    }

    /// String attribute with a default.
    pub fn string(&self, name: &str, default: &str) -> KResult<String> {
        Ok(self.attr_s(name)?.unwrap_or_else(|| default.to_string()))
    }

    pub fn attr_strings(&self, name: &str) -> KResult<Option<Vec<String>>> {
        Ok(self.attr_of(name, AttributeType::Strings)?.map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        }))
    }

    /// Tensor attribute, decoded.
    pub fn attr_t(&self, name: &str) -> KResult<Option<Tensor>> {
        match self.attr_of(name, AttributeType::Tensor)? {
            Some(a) => match &a.t {
                Some(t) => {
                    Ok(Some(Tensor::from_proto(t).map_err(|e| {
                        self.invalid(format!("attribute '{name}': {e}"))
                    })?))
                }
                None => Err(self.invalid(format!("attribute '{name}' holds no tensor"))),
            },
            None => Ok(None),
        }
    }

    pub fn attr_g(&self, name: &str) -> KResult<Option<&'a GraphProto>> {
        Ok(self
            .attr_of(name, AttributeType::Graph)?
            .and_then(|a| a.g.as_ref()))
    }

    /// Runs subgraph attribute `name` with `inputs`.
    pub fn run_subgraph(&self, name: &str, inputs: Vec<Value>) -> KResult<Vec<Value>> {
        let g = self
            .attr_g(name)?
            .ok_or_else(|| self.invalid(format!("graph attribute '{name}' is missing")))?;
        self.subgraphs.run(g, inputs)
    }

    /// Runs a given subgraph (for ops that pick among several).
    pub fn run_graph(&self, graph: &GraphProto, inputs: Vec<Value>) -> KResult<Vec<Value>> {
        self.subgraphs.run(graph, inputs)
    }
}

/// The kernel in force for `domain`/`name` at `opset` (`"ai.onnx"` = `""`).
pub fn lookup(domain: &str, name: &str, opset: i64) -> Option<&'static KernelDef> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    registry()
        .get(&(domain, name))?
        .iter()
        .copied()
        .find(|d| d.versions.contains(opset))
}

/// Every registered kernel.
pub fn all() -> impl Iterator<Item = &'static KernelDef> {
    crate::kernels::ALL.iter().flat_map(|f| f.iter())
}

type Registry = std::collections::HashMap<(&'static str, &'static str), Vec<&'static KernelDef>>;

fn registry() -> &'static Registry {
    static REG: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REG.get_or_init(|| {
        let mut m = Registry::new();
        for def in all() {
            m.entry((def.domain, def.name)).or_default().push(def);
        }
        m
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_ranges_never_overlap() {
        for defs in registry().values() {
            for (i, a) in defs.iter().enumerate() {
                for b in &defs[i + 1..] {
                    assert!(
                        !a.versions.overlaps(&b.versions),
                        "{}: overlapping kernel ranges {:?} {:?}",
                        a.name,
                        a.versions,
                        b.versions
                    );
                }
            }
        }
    }

    #[test]
    fn every_kernel_is_an_onnx_op() {
        for d in all() {
            assert!(
                !opset::history(d.domain, d.name).is_empty(),
                "{}::{} is not an ONNX op",
                d.domain,
                d.name
            );
        }
    }
}
