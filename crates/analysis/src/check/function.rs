//! Model-local functions: unique, their bodies well formed (order, single assignment, defined
//! outputs) and every body node valid against the function's own opset imports.

use super::graph::Scope;
use super::{domain, node, node_label, opset_map, Cx};
use crate::Code;
use diagnostics::Location;
use onnx_ir::Model;
use std::collections::HashSet;

pub(super) fn check_all(cx: &mut Cx, model: &Model) {
    let mut seen = HashSet::new();
    for f in &model.proto.functions {
        let key = (
            domain(f.domain()).to_string(),
            f.name().to_string(),
            f.overload().to_string(),
        );
        let at = Location::Value {
            file: cx.file.clone(),
            value: format!("function {}::{}", f.domain(), f.name()),
        };
        if !seen.insert(key) {
            cx.report(
                Code::FunctionDuplicate,
                at.clone(),
                format!(
                    "function {}::{} is defined more than once",
                    f.domain(),
                    f.name()
                ),
            );
        }
        let mut opsets = opset_map(&f.opset_import);
        for (d, v) in &cx.opsets {
            opsets.entry(d.clone()).or_insert(*v);
        }
        let mut scope = Scope::new(None);
        for input in &f.input {
            scope.define(input);
        }
        for (i, n) in f.node.iter().enumerate() {
            for name in n.input.iter().filter(|s| !s.is_empty()) {
                if !scope.is_defined(name) {
                    let later = f.node[i..].iter().any(|m| m.output.contains(name));
                    let (code, why) = if later {
                        (Code::NotTopologicallySorted, "is produced by a later node")
                    } else {
                        (
                            Code::ValueUndefined,
                            "is not a function input or an earlier node's output",
                        )
                    };
                    cx.report(
                        code,
                        cx.at_node(n, i),
                        format!(
                            "in function {}: input '{name}' of node '{}' {why}",
                            f.name(),
                            node_label(n, i)
                        ),
                    );
                }
            }
            node::check(cx, n, i, &scope, &opsets, Some(f));
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                if scope.is_defined(o) {
                    cx.report(
                        Code::ValueRedefined,
                        cx.at_node(n, i),
                        format!("in function {}: '{o}' is assigned more than once", f.name()),
                    );
                }
                scope.define(o);
            }
        }
        for o in &f.output {
            if !scope.is_defined(o) {
                cx.report(
                    Code::FunctionOutputUndefined,
                    at.clone(),
                    format!(
                        "output '{o}' of function {} is not produced by its body",
                        f.name()
                    ),
                );
            }
        }
    }
}
