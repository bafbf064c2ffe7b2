//! The graph-level shape-inference driver: walks a graph in order, asks each node's op (crate
//! `ops`) for its outputs' types and known values, recurses into subgraphs for If/Loop/Scan, and
//! compares what it infers with what the model declares.
//!
//! Findings: ODC070 when an op's inference fails (the node cannot run with these inputs),
//! ODC046 when a declared value_info or graph output contradicts the inferred shape.

use crate::check::{domain, node_label};
use crate::Code;
use diagnostics::{Diagnostic, Location};
use onnx_ir::{Model, ValueType};
use onnx_proto::{GraphProto, NodeProto};
use ops::infer::{known, show};
use ops::{InferCx, Info, Shape, SymDim, Ty};
use std::collections::{BTreeMap, HashMap};

/// Initializers up to this many elements keep their values for data propagation.
const KNOWN_VALUE_LIMIT: usize = 1 << 16;

/// What inference learnt about the main graph.
#[derive(Default)]
pub struct Inference {
    /// Every value of the main graph: inputs, initializers, node outputs.
    pub values: HashMap<String, Info>,
    /// `domain::Op` (or `Op`) → number of nodes whose outputs stay unknown because the op has no
    /// inference rule yet.
    pub uninferred: BTreeMap<String, usize>,
    pub findings: Vec<Diagnostic>,
}

/// Values visible in a graph: its own, then the enclosing graphs'.
struct Env<'p> {
    values: HashMap<String, Info>,
    parent: Option<&'p Env<'p>>,
}

impl Env<'_> {
    fn get(&self, name: &str) -> Option<&Info> {
        self.values
            .get(name)
            .or_else(|| self.parent.and_then(|p| p.get(name)))
    }
}

struct Driver {
    file: String,
    ir_version: i64,
    opsets: HashMap<String, i64>,
    uninferred: std::cell::RefCell<BTreeMap<String, usize>>,
    findings: std::cell::RefCell<Vec<Diagnostic>>,
}

/// Infers every value of the main graph. `input_shapes` overrides the declared dims of graph
/// inputs (e.g. `--input-shape x=1x3x224x224`).
pub fn infer(model: &Model, file: &str, input_shapes: &HashMap<String, Vec<i64>>) -> Inference {
    let d = Driver {
        file: file.to_string(),
        ir_version: model.proto.ir_version.unwrap_or(0),
        opsets: model
            .proto
            .opset_import
            .iter()
            .map(|o| (domain(o.domain()).to_string(), o.version()))
            .collect(),
        uninferred: Default::default(),
        findings: Default::default(),
    };
    let g = model.graph();
    let mut inputs = HashMap::new();
    for v in &g.input {
        let mut ty = Ty::from_value_type(&ValueType::from_proto(v.r#type.as_ref()));
        if let (Some(dims), Ty::Tensor { shape, .. }) = (input_shapes.get(v.name()), &mut ty) {
            *shape = Some(dims.iter().map(|&n| Some(SymDim::known(n))).collect());
        }
        inputs.insert(v.name().to_string(), ty);
    }
    let env = d.graph(g, None, &inputs);
    Inference {
        values: env.values,
        uninferred: d.uninferred.into_inner(),
        findings: d.findings.into_inner(),
    }
}

fn declared(g: &GraphProto) -> HashMap<&str, Ty> {
    g.value_info
        .iter()
        .chain(&g.output)
        .filter(|v| v.r#type.is_some())
        .map(|v| {
            (
                v.name(),
                Ty::from_value_type(&ValueType::from_proto(v.r#type.as_ref())),
            )
        })
        .collect()
}

impl Driver {
    fn report(&self, code: Code, location: Location, message: String) {
        self.findings.borrow_mut().push(Diagnostic::new(
            code.code(),
            code.severity(),
            message,
            location,
        ));
    }

    fn at_node(&self, n: &NodeProto, i: usize) -> Location {
        Location::Node {
            file: self.file.clone(),
            node: node_label(n, i),
            op: n.op_type().to_string(),
        }
    }

    /// Infers one graph; `inputs` gives its inputs' types (for subgraphs: what the op passes in).
    fn graph<'p>(
        &self,
        g: &GraphProto,
        parent: Option<&'p Env<'p>>,
        inputs: &HashMap<String, Ty>,
    ) -> Env<'p> {
        let mut env = Env {
            values: HashMap::new(),
            parent,
        };
        for v in &g.input {
            let ty = inputs
                .get(v.name())
                .cloned()
                .unwrap_or_else(|| Ty::from_value_type(&ValueType::from_proto(v.r#type.as_ref())));
            env.values.insert(v.name().to_string(), Info::of(ty));
        }
        for t in &g.initializer {
            let info = match tensor::Tensor::from_proto(t) {
                Ok(tensor) if tensor.len() <= KNOWN_VALUE_LIMIT => Info::known(tensor),
                Ok(tensor) => Info::of(Ty::tensor(
                    Some(tensor.dtype()),
                    Some(
                        tensor
                            .shape()
                            .iter()
                            .map(|&n| Some(SymDim::known(n as i64)))
                            .collect(),
                    ),
                )),
                Err(_) => Info::default(),
            };
            // From IR 4 on, an initializer that is also a graph input is a default the caller may
            // override: its value is not known, only its type. Before IR 4 every initializer had to
            // be listed as an input, and it is a constant like any other.
            if self.ir_version >= 4 && env.values.contains_key(t.name()) {
                continue;
            }
            env.values.insert(t.name().to_string(), info);
        }
        let declared = declared(g);
        for (i, n) in g.node.iter().enumerate() {
            let outputs = self.node(n, i, &env);
            for (k, mut info) in outputs.into_iter().enumerate() {
                let Some(name) = n.output.get(k).filter(|o| !o.is_empty()) else {
                    continue;
                };
                if let Some(decl) = declared.get(name.as_str()) {
                    info.ty = self.reconcile(n, i, name, info.ty, decl);
                }
                env.values.insert(name.clone(), info);
            }
        }
        env
    }

    /// One node's outputs (unknown where no rule exists or the rule fails).
    fn node(&self, n: &NodeProto, i: usize, env: &Env) -> Vec<Info> {
        let unknown = vec![Info::default(); n.output.len()];
        let dom = domain(n.domain());
        let Some(&opset) = self.opsets.get(dom) else {
            return unknown;
        };
        let Some(def) = ops::lookup(dom, n.op_type(), opset) else {
            let key = if dom.is_empty() {
                n.op_type().to_string()
            } else {
                format!("{dom}::{}", n.op_type())
            };
            *self.uninferred.borrow_mut().entry(key).or_default() += 1;
            return unknown;
        };
        let inputs: Vec<Option<&Info>> = n
            .input
            .iter()
            .map(|name| if name.is_empty() { None } else { env.get(name) })
            .collect();
        let sub = |g: &GraphProto, tys: &[Ty]| -> Vec<Ty> {
            let bound: HashMap<String, Ty> = g
                .input
                .iter()
                .zip(tys)
                .map(|(v, t)| (v.name().to_string(), t.clone()))
                .collect();
            let child = self.graph(g, Some(env), &bound);
            let decl = declared(g);
            g.output
                .iter()
                .map(
                    |o| match child.values.get(o.name()).or_else(|| env.get(o.name())) {
                        Some(info) if info.ty != Ty::Unknown => info.ty.clone(),
                        _ => decl.get(o.name()).cloned().unwrap_or_default(),
                    },
                )
                .collect()
        };
        let input_infos = inputs.clone();
        let mut cx = InferCx::new(n, opset, inputs);
        cx.subgraph = Some(&sub);
        // A bug in one op's rule must not take the whole process down: it becomes a finding.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (def.infer)(&mut cx).map(|()| cx.outputs)
        }));
        match result {
            Ok(Ok(mut outputs)) => {
                fold_constants(n, opset, &input_infos, &mut outputs);
                outputs
            }
            Err(_) => {
                self.report(
                    Code::ShapeInferenceFailed,
                    self.at_node(n, i),
                    format!("internal error in the shape inference of node '{}' ({}); this is a bug in onnx-doctor, please report it", node_label(n, i), n.op_type()),
                );
                unknown
            }
            Ok(Err(e)) => {
                self.report(
                    Code::ShapeInferenceFailed,
                    self.at_node(n, i),
                    format!(
                        "shape inference of node '{}' ({}) failed: {e}",
                        node_label(n, i),
                        n.op_type()
                    ),
                );
                unknown
            }
        }
    }

    /// Inferred vs declared: a static contradiction is a finding; otherwise the declared type
    /// fills what inference left unknown.
    fn reconcile(&self, n: &NodeProto, i: usize, name: &str, inferred: Ty, decl: &Ty) -> Ty {
        let (
            Ty::Tensor {
                dtype: di,
                shape: si,
            },
            Ty::Tensor {
                dtype: dd,
                shape: sd,
            },
        ) = (&inferred, decl)
        else {
            return if inferred == Ty::Unknown {
                decl.clone()
            } else {
                inferred
            };
        };
        let shape = match (si, sd) {
            (Some(a), Some(b)) if a.len() != b.len() => {
                self.contradiction(
                    n,
                    i,
                    name,
                    &format!("rank {} ({})", a.len(), show(a)),
                    &format!("rank {} ({})", b.len(), show(b)),
                );
                Some(a.clone())
            }
            (Some(a), Some(b)) => {
                let mut merged: Shape = Vec::with_capacity(a.len());
                let mut clash = false;
                for (x, y) in a.iter().zip(b) {
                    match (known(x), known(y)) {
                        (Some(p), Some(q)) if p != q => {
                            clash = true;
                            merged.push(x.clone());
                        }
                        (Some(_), _) => merged.push(x.clone()),
                        _ => merged.push(x.clone().or_else(|| y.clone())),
                    }
                }
                if clash {
                    self.contradiction(n, i, name, &show(a), &show(b));
                }
                Some(merged)
            }
            (Some(a), None) => Some(a.clone()),
            (None, b) => b.clone(),
        };
        Ty::Tensor {
            dtype: di.or(*dd),
            shape,
        }
    }

    fn contradiction(&self, n: &NodeProto, i: usize, name: &str, inferred: &str, declared: &str) {
        self.report(
            Code::DeclaredShapeContradicted,
            self.at_node(n, i),
            format!("'{name}' (output of node '{}', {}) is declared {declared}, but its inputs give {inferred}", node_label(n, i), n.op_type()),
        );
    }
}

/// Writes what inference learnt into the model, as onnx.shape_inference does: a value_info for
/// every main-graph node output with a known element type (replacing a less specific one), and
/// graph outputs' types where inference knows more than was declared.
pub fn apply(model: &mut onnx_proto::ModelProto, inference: &Inference) {
    let Some(g) = model.graph.as_mut() else {
        return;
    };
    let outputs: std::collections::HashSet<String> =
        g.output.iter().map(|v| v.name().to_string()).collect();
    let inputs: std::collections::HashSet<String> = g
        .input
        .iter()
        .map(|v| v.name().to_string())
        .chain(g.initializer.iter().map(|t| t.name().to_string()))
        .collect();
    let mut order: Vec<String> = Vec::new();
    for n in &g.node {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if !outputs.contains(o) && !inputs.contains(o) {
                order.push(o.clone());
            }
        }
    }
    let mut existing: HashMap<String, usize> = g
        .value_info
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name().to_string(), i))
        .collect();
    for name in order {
        let Some(tp) = inference.values.get(&name).and_then(|i| type_proto(&i.ty)) else {
            continue;
        };
        match existing.get(&name) {
            Some(&i) => g.value_info[i].r#type = Some(tp),
            None => {
                existing.insert(name.clone(), g.value_info.len());
                g.value_info.push(onnx_proto::ValueInfoProto {
                    name: Some(name),
                    r#type: Some(tp),
                    ..Default::default()
                });
            }
        }
    }
    for v in &mut g.output {
        if let Some(tp) = inference
            .values
            .get(v.name())
            .and_then(|i| type_proto(&i.ty))
        {
            v.r#type = Some(tp);
        }
    }
}

/// The TypeProto of an inferred type; `None` when the element type is unknown.
pub fn type_proto(t: &Ty) -> Option<onnx_proto::TypeProto> {
    use onnx_proto::{
        tensor_shape_proto::{dimension, Dimension},
        type_proto, TensorShapeProto, TypeProto,
    };
    let shape = |s: &Option<Shape>| {
        s.as_ref().map(|dims| TensorShapeProto {
            dim: dims
                .iter()
                .map(|d| Dimension {
                    value: d.as_ref().map(|d| match d.as_known() {
                        Some(n) => dimension::Value::DimValue(n),
                        None => dimension::Value::DimParam(d.to_string()),
                    }),
                    denotation: None,
                })
                .collect(),
        })
    };
    let value = match t {
        Ty::Tensor {
            dtype: Some(d),
            shape: s,
        } => type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(d.onnx_code()),
            shape: shape(s),
        }),
        Ty::SparseTensor {
            dtype: Some(d),
            shape: s,
        } => type_proto::Value::SparseTensorType(type_proto::SparseTensor {
            elem_type: Some(d.onnx_code()),
            shape: shape(s),
        }),
        Ty::Sequence(e) => type_proto::Value::SequenceType(Box::new(type_proto::Sequence {
            elem_type: Some(Box::new(type_proto(e)?)),
        })),
        Ty::Optional(e) => type_proto::Value::OptionalType(Box::new(type_proto::Optional {
            elem_type: Some(Box::new(type_proto(e)?)),
        })),
        _ => return None,
    };
    Some(TypeProto {
        value: Some(value),
        denotation: None,
    })
}

/// Largest tensor (elements) constant folding reads or writes: shape arithmetic, not weights.
const FOLD_LIMIT: usize = 4096;

/// When every input of a deterministic, subgraph-free node is a known small tensor and the op has
/// a kernel, runs the kernel so the outputs' values are known too (what onnx's data propagation
/// does for a fixed list of ops, here for every op with a kernel). Values the op's own rule
/// already computed are kept.
fn fold_constants(n: &NodeProto, opset: i64, inputs: &[Option<&Info>], outputs: &mut [Info]) {
    if outputs.iter().all(|o| o.value.is_some())
        || n.attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty())
    {
        return;
    }
    let dom = domain(n.domain());
    let deterministic = opset::schema_in(dom, n.op_type(), opset)
        .is_some_and(|s| s.determinism != opset::Determinism::NonDeterministic);
    let Some(kernel) = ops::exec::lookup(dom, n.op_type(), opset) else {
        return;
    };
    if !deterministic || n.op_type() == "Dropout" {
        return;
    }
    let mut values = Vec::with_capacity(inputs.len());
    for (name, info) in n.input.iter().zip(inputs) {
        if name.is_empty() {
            values.push(None);
            continue;
        }
        match info {
            Some(Info {
                value: Some(ops::Known::Tensor(t)),
                ..
            }) if t.len() <= FOLD_LIMIT => values.push(Some(ops::exec::Value::Tensor(t.clone()))),
            _ => return,
        }
    }
    let refs: Vec<Option<&ops::exec::Value>> = values.iter().map(|v| v.as_ref()).collect();
    let cx = ops::exec::RunCx::new(n, opset, &refs, &ops::exec::NoSubgraphs);
    let Ok(Ok(folded)) =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (kernel.run)(&cx)))
    else {
        return;
    };
    for (out, v) in outputs.iter_mut().zip(folded) {
        let ops::exec::Value::Tensor(t) = v else {
            continue;
        };
        if out.value.is_some() || t.len() > FOLD_LIMIT {
            continue;
        }
        // The kernel's answer must agree with the rule's type; otherwise trust neither.
        if out.ty.dtype().is_some_and(|d| d != t.dtype()) {
            continue;
        }
        let known = Info::known(t);
        if out.ty == Ty::Unknown || out.ty.shape().is_none() || out.ty.shape() == known.ty.shape() {
            *out = known;
        } else {
            out.value = known.value;
        }
    }
}
