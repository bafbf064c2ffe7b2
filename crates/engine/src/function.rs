//! Calling a function: a model-local `FunctionProto` or an op's schema function body.
//!
//! The body runs in a fresh scope (a function sees only its formal inputs), with the
//! function's own opset imports, and with every attribute reference (`ref_attr_name`) replaced
//! by the calling node's attribute of that name, or the function's default, or dropped.

use crate::graph::{run_node, schedule, Env};
use crate::{norm_domain, EngineError, Session, Value};
use onnx_proto::{AttributeProto, FunctionProto, NodeProto};
use std::collections::HashMap;

/// The opsets a function body runs under: its own imports, then the caller's for any domain it
/// does not import.
pub(crate) fn opsets_of(f: &FunctionProto, caller: &HashMap<String, i64>) -> HashMap<String, i64> {
    let mut m = caller.clone();
    for o in &f.opset_import {
        m.insert(norm_domain(o.domain()).to_string(), o.version());
    }
    m
}

/// `node`'s attributes as the body node `body` should see them.
fn substitute(body: &NodeProto, caller: &NodeProto, f: &FunctionProto) -> NodeProto {
    let mut n = body.clone();
    n.attribute = body
        .attribute
        .iter()
        .filter_map(|a| {
            if a.ref_attr_name.as_deref().is_none_or(str::is_empty) {
                return Some(a.clone());
            }
            let r = a.ref_attr_name.as_deref().unwrap_or_default();
            let found: Option<&AttributeProto> = caller
                .attribute
                .iter()
                .find(|c| c.name() == r)
                .or_else(|| f.attribute_proto.iter().find(|d| d.name() == r));
            found.map(|src| {
                let mut c = src.clone();
                c.name = a.name.clone();
                c.ref_attr_name = None;
                c
            })
        })
        .collect();
    n
}

/// Runs `f` for `node` with `inputs` (positional; `None` = omitted) and returns its outputs
/// (`None` for outputs the body never produced).
pub(crate) fn call(
    session: &Session,
    f: &FunctionProto,
    node: &NodeProto,
    inputs: Vec<Option<Value>>,
    caller_opsets: &HashMap<String, i64>,
) -> Result<Vec<Option<Value>>, EngineError> {
    let opsets = opsets_of(f, caller_opsets);
    let mut values = HashMap::new();
    let mut absent = std::collections::HashSet::new();
    let mut given = inputs.into_iter();
    for formal in &f.input {
        match given.next().flatten() {
            Some(v) => {
                values.insert(formal.clone(), v);
            }
            None => {
                absent.insert(formal.clone());
            }
        }
    }
    let mut env = Env {
        values,
        base: None,
        parent: None,
        absent,
    };
    let body: Vec<NodeProto> = f.node.iter().map(|n| substitute(n, node, f)).collect();
    for i in schedule(&body, f.name())? {
        let n = &body[i];
        let outs = run_node(session, n, &opsets, &env)?;
        for (name, v) in n.output.iter().zip(outs) {
            if let Some(v) = v {
                env.values.insert(name.clone(), v);
            }
        }
    }
    Ok(f.output.iter().map(|o| env.values.remove(o)).collect())
}
