//! The spec checker: what `onnx.checker.check_model(full_check=True)` verifies structurally, and
//! more (unused values, dead nodes, duplicate names). One module per concern:
//! `model.rs` (IR version, opset imports), `graph.rs` (scoping, SSA, order, initializers, unused),
//! `node.rs` (the node against its operator schema), `function.rs` (model-local functions).

mod function;
mod graph;
mod model;
mod node;

use crate::Code;
use diagnostics::{Diagnostic, Location};
use onnx_ir::Model;
use onnx_proto::{FunctionProto, NodeProto, OperatorSetIdProto};
use std::collections::HashMap;

/// Checks `model`; `file` is the name findings carry; `input_shapes` overrides graph inputs' dims
/// for shape inference.
pub fn check(
    model: &Model,
    file: &str,
    input_shapes: &HashMap<String, Vec<i64>>,
) -> Vec<Diagnostic> {
    check_with(model, file, &crate::infer(model, file, input_shapes))
}

/// [`check`] with shape inference already run (the caller reuses it for the deployment lints).
pub fn check_with(model: &Model, file: &str, inference: &crate::Inference) -> Vec<Diagnostic> {
    let mut cx = Cx::new(model, file);
    model::check(&mut cx, model);
    graph::check_main(&mut cx, model.graph());
    function::check_all(&mut cx, model);
    let mut out = cx.out;
    out.extend(inference.findings.iter().cloned());
    out
}

/// Normalized domain: `ai.onnx` is the default domain `""`.
pub(crate) fn domain(d: &str) -> &str {
    if d == "ai.onnx" {
        ""
    } else {
        d
    }
}

pub(crate) fn domain_display(d: &str) -> &str {
    if d.is_empty() {
        "ai.onnx"
    } else {
        d
    }
}

/// What the whole check shares: where findings go and what the model imports and defines.
pub(crate) struct Cx<'m> {
    pub file: String,
    pub out: Vec<Diagnostic>,
    pub ir_version: i64,
    pub opsets: HashMap<String, i64>,
    pub functions: HashMap<(String, String), &'m FunctionProto>,
}

impl<'m> Cx<'m> {
    fn new(model: &'m Model, file: &str) -> Self {
        let p = &model.proto;
        Cx {
            file: file.to_string(),
            out: Vec::new(),
            ir_version: p.ir_version.unwrap_or(0),
            opsets: opset_map(&p.opset_import),
            functions: p
                .functions
                .iter()
                .map(|f| ((domain(f.domain()).to_string(), f.name().to_string()), f))
                .collect(),
        }
    }

    pub fn report(&mut self, code: Code, location: Location, message: String) -> &mut Diagnostic {
        self.out.push(Diagnostic::new(
            code.code(),
            code.severity(),
            message,
            location,
        ));
        self.out.last_mut().expect("just pushed")
    }

    pub fn at_node(&self, node: &NodeProto, index: usize) -> Location {
        Location::Node {
            file: self.file.clone(),
            node: node_label(node, index),
            op: node.op_type().to_string(),
        }
    }

    pub fn at_value(&self, name: &str) -> Location {
        Location::Value {
            file: self.file.clone(),
            value: name.to_string(),
        }
    }

    pub fn at_model(&self) -> Location {
        Location::File {
            file: self.file.clone(),
        }
    }
}

pub(crate) fn opset_map(imports: &[OperatorSetIdProto]) -> HashMap<String, i64> {
    imports
        .iter()
        .map(|o| (domain(o.domain()).to_string(), o.version()))
        .collect()
}

/// A node's name, or `#index` when it has none.
pub(crate) fn node_label(node: &NodeProto, index: usize) -> String {
    if node.name().is_empty() {
        format!("#{index}")
    } else {
        node.name().to_string()
    }
}
