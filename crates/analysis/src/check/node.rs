//! One node against its operator: the op exists at the imported opset, arity, attributes, and the
//! type constraints of every input and output whose type is declared.

use super::graph::Scope;
use super::{domain, domain_display, node_label, Cx};
use crate::Code;
use onnx_ir::{ElemType, ValueType};
use onnx_proto::{
    attribute_proto::AttributeType as ProtoAttr, AttributeProto, FunctionProto, NodeProto,
};
use opset::{AttributeType, FormalParameter, Optionality, Schema};
use std::collections::{HashMap, HashSet};

/// `in_function`: the function whose body holds the node (where `ref_attr_name` is allowed).
/// Returns the node's schema when it has one in force (not deprecated), for type propagation.
pub(crate) fn check(
    cx: &mut Cx,
    n: &NodeProto,
    i: usize,
    scope: &Scope,
    opsets: &HashMap<String, i64>,
    in_function: Option<&FunctionProto>,
) -> Option<&'static Schema> {
    let at = cx.at_node(n, i);
    let label = node_label(n, i);
    let op = n.op_type();
    let dom = domain(n.domain());
    if op.is_empty() {
        cx.report(
            Code::OpUnknown,
            at,
            format!("node '{label}' has no op_type"),
        );
        return None;
    }
    let Some(&version) = opsets.get(dom) else {
        cx.report(
            Code::OpsetImportMissing,
            at,
            format!(
                "node '{label}' ({op}) is in domain '{}', which the model does not import",
                domain_display(dom)
            ),
        )
        .help = Some(format!(
            "add an opset_import for domain '{}'",
            domain_display(dom)
        ));
        return None;
    };
    if let Some(f) = cx
        .functions
        .get(&(dom.to_string(), op.to_string()))
        .copied()
    {
        check_function_call(cx, n, i, f, in_function);
        return None;
    }
    let history = opset::history(dom, op);
    if history.is_empty() {
        if opset::domains().any(|d| d == dom) {
            cx.report(
                Code::OpUnknown,
                at,
                format!(
                    "there is no operator '{op}' in domain {}",
                    domain_display(dom)
                ),
            );
        } else {
            cx.report(Code::CustomOpWithoutFunction, at, format!("node '{label}' uses custom op {}::{op}, which has no function body in the model", domain_display(dom)))
                .help = Some("runtimes need that op registered (a custom-op library), or export it as a model-local function".into());
        }
        return None;
    }
    let Some(schema) = opset::schema_in(dom, op, version) else {
        let first = history[0].since_version;
        cx.report(
            Code::OpNotYetInOpset,
            at,
            format!(
                "{op} exists from {} opset {first}; the model imports opset {version}",
                domain_display(dom)
            ),
        )
        .help = Some(format!(
            "export with opset_version={first} or later, or replace the op"
        ));
        return None;
    };
    if schema.deprecated {
        cx.report(
            Code::OpDeprecated,
            at,
            format!(
                "{op} is deprecated at {} opset {version} (since opset {})",
                domain_display(dom),
                schema.since_version
            ),
        );
        return None;
    }
    check_arity(cx, n, i, schema);
    check_attributes(cx, n, i, schema, in_function);
    check_types(cx, n, i, schema, scope);
    Some(schema)
}

fn range(min: usize, max: Option<usize>) -> String {
    match max {
        Some(m) if m == min => format!("{min}"),
        Some(m) => format!("{min} to {m}"),
        None => format!("at least {min}"),
    }
}

/// The formal parameter at position `k`: the last one repeats when it is variadic.
fn formal_at(params: &[FormalParameter], k: usize) -> Option<&FormalParameter> {
    params
        .get(k)
        .or_else(|| params.last().filter(|p| p.option == Optionality::Variadic))
}

fn check_arity(cx: &mut Cx, n: &NodeProto, i: usize, s: &Schema) {
    let label = node_label(n, i);
    let v = s.since_version;
    for (side, names, min, max, params, code) in [
        (
            "inputs",
            &n.input,
            s.min_inputs,
            s.max_inputs,
            &s.inputs,
            Code::InputArity,
        ),
        (
            "outputs",
            &n.output,
            s.min_outputs,
            s.max_outputs,
            &s.outputs,
            Code::OutputArity,
        ),
    ] {
        if names.len() < min || max.is_some_and(|m| names.len() > m) {
            cx.report(
                code,
                cx.at_node(n, i),
                format!(
                    "{}-{v} takes {} {side}; node '{label}' has {}",
                    s.name,
                    range(min, max),
                    names.len()
                ),
            );
            continue;
        }
        for (k, name) in names.iter().enumerate() {
            if name.is_empty()
                && formal_at(params, k).is_some_and(|p| p.option != Optionality::Optional)
            {
                let formal = formal_at(params, k).map(|p| p.name.as_str()).unwrap_or("?");
                cx.report(
                    Code::RequiredInputMissing,
                    cx.at_node(n, i),
                    format!("{} {k} ('{formal}') of node '{label}' ({}) is required but given as the empty name", &side[..side.len() - 1], s.name),
                );
            }
        }
    }
}

fn proto_type(t: AttributeType) -> ProtoAttr {
    match t {
        AttributeType::Float => ProtoAttr::Float,
        AttributeType::Int => ProtoAttr::Int,
        AttributeType::String => ProtoAttr::String,
        AttributeType::Tensor => ProtoAttr::Tensor,
        AttributeType::Graph => ProtoAttr::Graph,
        AttributeType::SparseTensor => ProtoAttr::SparseTensor,
        AttributeType::TypeProto => ProtoAttr::TypeProto,
        AttributeType::Floats => ProtoAttr::Floats,
        AttributeType::Ints => ProtoAttr::Ints,
        AttributeType::Strings => ProtoAttr::Strings,
        AttributeType::Tensors => ProtoAttr::Tensors,
        AttributeType::Graphs => ProtoAttr::Graphs,
        AttributeType::SparseTensors => ProtoAttr::SparseTensors,
        AttributeType::TypeProtos => ProtoAttr::TypeProtos,
    }
}

/// The value fields an attribute has filled in, as the types they belong to.
fn filled_fields(a: &AttributeProto) -> Vec<ProtoAttr> {
    let mut v = Vec::new();
    let mut add = |present: bool, t: ProtoAttr| {
        if present {
            v.push(t)
        }
    };
    add(a.f.is_some(), ProtoAttr::Float);
    add(a.i.is_some(), ProtoAttr::Int);
    add(a.s.is_some(), ProtoAttr::String);
    add(a.t.is_some(), ProtoAttr::Tensor);
    add(a.g.is_some(), ProtoAttr::Graph);
    add(a.sparse_tensor.is_some(), ProtoAttr::SparseTensor);
    add(a.tp.is_some(), ProtoAttr::TypeProto);
    add(!a.floats.is_empty(), ProtoAttr::Floats);
    add(!a.ints.is_empty(), ProtoAttr::Ints);
    add(!a.strings.is_empty(), ProtoAttr::Strings);
    add(!a.tensors.is_empty(), ProtoAttr::Tensors);
    add(!a.graphs.is_empty(), ProtoAttr::Graphs);
    add(!a.sparse_tensors.is_empty(), ProtoAttr::SparseTensors);
    add(!a.type_protos.is_empty(), ProtoAttr::TypeProtos);
    v
}

fn is_list(t: ProtoAttr) -> bool {
    matches!(
        t,
        ProtoAttr::Floats
            | ProtoAttr::Ints
            | ProtoAttr::Strings
            | ProtoAttr::Tensors
            | ProtoAttr::Graphs
            | ProtoAttr::SparseTensors
            | ProtoAttr::TypeProtos
    )
}

fn type_name(code: i32) -> String {
    ProtoAttr::try_from(code).map_or(format!("type code {code}"), |t| t.as_str_name().to_string())
}

/// Attribute type and value-field consistency, shared by schema ops and function calls.
fn check_attribute_value(
    cx: &mut Cx,
    n: &NodeProto,
    i: usize,
    a: &AttributeProto,
    expected: Option<ProtoAttr>,
) {
    let label = node_label(n, i);
    let name = a.name();
    let declared = a.r#type.unwrap_or(0);
    if declared == 0 {
        cx.report(
            Code::AttributeWrongType,
            cx.at_node(n, i),
            format!("attribute '{name}' of node '{label}' has no type"),
        );
        return;
    }
    if let Some(expected) = expected {
        if declared != expected as i32 {
            cx.report(
                Code::AttributeWrongType,
                cx.at_node(n, i),
                format!(
                    "attribute '{name}' of node '{label}' ({}) must be {}, but is {}",
                    n.op_type(),
                    expected.as_str_name(),
                    type_name(declared)
                ),
            );
            return;
        }
    }
    if a.ref_attr_name.is_some() {
        return;
    }
    let Ok(declared) = ProtoAttr::try_from(declared) else {
        cx.report(
            Code::AttributeWrongType,
            cx.at_node(n, i),
            format!(
                "attribute '{name}' of node '{label}' has unknown {}",
                type_name(declared)
            ),
        );
        return;
    };
    let filled = filled_fields(a);
    let ok = match filled.as_slice() {
        [] => is_list(declared),
        [only] => *only == declared,
        _ => false,
    };
    if !ok {
        let got: Vec<&str> = filled.iter().map(|t| t.as_str_name()).collect();
        cx.report(
            Code::AttributeWrongType,
            cx.at_node(n, i),
            format!(
                "attribute '{name}' of node '{label}' is declared {} but holds {}",
                declared.as_str_name(),
                if got.is_empty() {
                    "no value".to_string()
                } else {
                    format!("a value of type {}", got.join(" and "))
                }
            ),
        );
    }
}

fn check_attributes(
    cx: &mut Cx,
    n: &NodeProto,
    i: usize,
    s: &Schema,
    in_function: Option<&FunctionProto>,
) {
    let label = node_label(n, i);
    let mut seen = HashSet::new();
    for a in &n.attribute {
        let name = a.name();
        if !seen.insert(name) {
            cx.report(
                Code::AttributeDuplicate,
                cx.at_node(n, i),
                format!("attribute '{name}' is given twice on node '{label}'"),
            );
            continue;
        }
        if a.ref_attr_name.is_some() && in_function.is_none() {
            cx.report(Code::AttributeRefOutsideFunction, cx.at_node(n, i), format!("attribute '{name}' of node '{label}' refers to a function attribute outside any function"));
        }
        let Some(schema_attr) = s.attribute(name) else {
            let known: Vec<&str> = s.attributes.iter().map(|a| a.name.as_str()).collect();
            cx.report(
                Code::AttributeUnknown,
                cx.at_node(n, i),
                format!("{}-{} has no attribute '{name}'", s.name, s.since_version),
            )
            .help = Some(if known.is_empty() {
                format!("{} takes no attributes", s.name)
            } else {
                format!("{} takes: {}", s.name, known.join(", "))
            });
            continue;
        };
        check_attribute_value(cx, n, i, a, Some(proto_type(schema_attr.ty)));
    }
    for a in s
        .attributes
        .iter()
        .filter(|a| a.required && !seen.contains(a.name.as_str()))
    {
        cx.report(
            Code::AttributeRequiredMissing,
            cx.at_node(n, i),
            format!(
                "node '{label}' ({}-{}) lacks the required attribute '{}' ({})",
                s.name,
                s.since_version,
                a.name,
                proto_type(a.ty).as_str_name()
            ),
        );
    }
}

/// A schema type string against an actual one: equal up to spaces, and `map(K, V)` in a schema
/// names the value type bare where a TypeProto says `tensor(V)`.
fn type_allows(allowed: &str, actual: &str) -> bool {
    let a: String = allowed.chars().filter(|c| !c.is_whitespace()).collect();
    if a == actual {
        return true;
    }
    if let Some(rest) = actual.strip_prefix("map(") {
        if let Some((key, value)) = rest.strip_suffix(')').and_then(|r| r.split_once(',')) {
            if let Some(bare) = value
                .strip_prefix("tensor(")
                .and_then(|v| v.strip_suffix(')'))
            {
                return a == format!("map({key},{bare})");
            }
        }
    }
    false
}

fn check_types(cx: &mut Cx, n: &NodeProto, i: usize, s: &Schema, scope: &Scope) {
    let label = node_label(n, i);
    let mut bound: HashMap<&str, (String, String)> = HashMap::new();
    for (side, names, params) in [
        ("input", &n.input, &s.inputs),
        ("output", &n.output, &s.outputs),
    ] {
        for (k, name) in names.iter().enumerate() {
            if name.is_empty() {
                continue;
            }
            let (Some(formal), Some(t)) = (formal_at(params, k), scope.type_of(name)) else {
                continue;
            };
            if !t.is_fully_known() {
                continue;
            }
            let actual = t.onnx_type_string();
            let constraint = s.type_constraint(&formal.type_str);
            let allowed: Vec<&str> = match constraint {
                Some(c) => c.allowed_type_strs.iter().map(String::as_str).collect(),
                None => vec![formal.type_str.as_str()],
            };
            let here = format!("{side} {k} '{name}'");
            if !allowed.iter().any(|a| type_allows(a, &actual)) {
                let shown: Vec<&str> = allowed.iter().take(8).copied().collect();
                let more = if allowed.len() > 8 { ", …" } else { "" };
                cx.report(
                    Code::TypeConstraintViolated,
                    cx.at_node(n, i),
                    format!(
                        "{here} of node '{label}' ({}-{}) is {actual}; {} allows {}{more}",
                        s.name,
                        s.since_version,
                        formal.type_str,
                        shown.join(", ")
                    ),
                );
                continue;
            }
            let free_variadic = formal.option == Optionality::Variadic && !formal.is_homogeneous;
            if constraint.is_none() || free_variadic {
                continue;
            }
            match bound.get(formal.type_str.as_str()) {
                Some((prev, prev_here)) if *prev != actual => {
                    cx.report(
                        Code::TypeConstraintViolated,
                        cx.at_node(n, i),
                        format!("{here} of node '{label}' ({}) is {actual}, but {} is already {prev} from {prev_here}", s.name, formal.type_str),
                    )
                    .help = Some("all values bound to one type parameter must have the same type: insert a Cast".into());
                }
                Some(_) => {}
                None => {
                    bound.insert(formal.type_str.as_str(), (actual, here));
                }
            }
        }
    }
}

/// A node calling a model-local function: arity and attribute names against the function.
fn check_function_call(
    cx: &mut Cx,
    n: &NodeProto,
    i: usize,
    f: &FunctionProto,
    in_function: Option<&FunctionProto>,
) {
    let label = node_label(n, i);
    if n.input.len() > f.input.len() {
        cx.report(
            Code::InputArity,
            cx.at_node(n, i),
            format!(
                "function {} takes {} inputs; node '{label}' has {}",
                f.name(),
                f.input.len(),
                n.input.len()
            ),
        );
    }
    if n.output.len() > f.output.len() {
        cx.report(
            Code::OutputArity,
            cx.at_node(n, i),
            format!(
                "function {} has {} outputs; node '{label}' has {}",
                f.name(),
                f.output.len(),
                n.output.len()
            ),
        );
    }
    let known: HashSet<&str> = f
        .attribute
        .iter()
        .map(String::as_str)
        .chain(f.attribute_proto.iter().map(|a| a.name()))
        .collect();
    let mut seen = HashSet::new();
    for a in &n.attribute {
        if !seen.insert(a.name()) {
            cx.report(
                Code::AttributeDuplicate,
                cx.at_node(n, i),
                format!("attribute '{}' is given twice on node '{label}'", a.name()),
            );
        }
        if a.ref_attr_name.is_some() && in_function.is_none() {
            cx.report(Code::AttributeRefOutsideFunction, cx.at_node(n, i), format!("attribute '{}' of node '{label}' refers to a function attribute outside any function", a.name()));
        }
        if !known.contains(a.name()) {
            cx.report(
                Code::AttributeUnknown,
                cx.at_node(n, i),
                format!("function {} has no attribute '{}'", f.name(), a.name()),
            );
            continue;
        }
        check_attribute_value(cx, n, i, a, None);
    }
}

/// The element types of a node's outputs that follow from its inputs' types by the schema alone:
/// an output whose type parameter is bound by a typed input, or whose constraint allows exactly
/// one type; and the two ops whose output type is an attribute (Constant's `value`, Cast's `to`).
/// Shapes are not inferred here: the rank stays unknown.
pub(crate) fn infer_output_types(
    n: &NodeProto,
    s: &Schema,
    scope: &Scope,
) -> Vec<(usize, ValueType)> {
    let tensor = |code: i32| ValueType::Tensor {
        elem: ElemType::from_code(Some(code)),
        shape: None,
    };
    let attr = |name: &str| n.attribute.iter().find(|a| a.name() == name);
    if s.domain.is_empty() {
        match s.name.as_str() {
            "Constant" => {
                return attr("value")
                    .and_then(|a| a.t.as_ref())
                    .map(|t| vec![(0, tensor(t.data_type()))])
                    .unwrap_or_default()
            }
            "Cast" => {
                return attr("to")
                    .and_then(|a| a.i)
                    .map(|to| vec![(0, tensor(to as i32))])
                    .unwrap_or_default()
            }
            _ => {}
        }
    }
    let mut bound: HashMap<&str, &ValueType> = HashMap::new();
    for (k, name) in n.input.iter().enumerate() {
        let Some(formal) = formal_at(&s.inputs, k) else {
            continue;
        };
        if name.is_empty() || (formal.option == Optionality::Variadic && !formal.is_homogeneous) {
            continue;
        }
        if let Some(t) = scope.type_of(name).filter(|t| t.is_fully_known()) {
            bound.entry(formal.type_str.as_str()).or_insert(t);
        }
    }
    let mut out = Vec::new();
    for (k, name) in n.output.iter().enumerate() {
        let Some(formal) = formal_at(&s.outputs, k) else {
            continue;
        };
        if name.is_empty() || (formal.option == Optionality::Variadic && !formal.is_homogeneous) {
            continue;
        }
        let single = match s.type_constraint(&formal.type_str) {
            Some(c) if c.allowed_type_strs.len() == 1 => Some(c.allowed_type_strs[0].as_str()),
            Some(_) => None,
            None => Some(formal.type_str.as_str()),
        };
        if let Some(t) = bound.get(formal.type_str.as_str()) {
            out.push((k, strip_shape(t)));
        } else if let Some(code) = single.and_then(tensor_code) {
            out.push((k, tensor(code)));
        }
    }
    out
}

/// The same type with the rank forgotten: inference here only knows element types.
fn strip_shape(t: &ValueType) -> ValueType {
    match t {
        ValueType::Tensor { elem, .. } => ValueType::Tensor {
            elem: *elem,
            shape: None,
        },
        ValueType::SparseTensor { elem, .. } => ValueType::SparseTensor {
            elem: *elem,
            shape: None,
        },
        other => other.clone(),
    }
}

/// `tensor(float)` → the ONNX code of float; anything else → None.
fn tensor_code(type_str: &str) -> Option<i32> {
    let name = type_str.strip_prefix("tensor(")?.strip_suffix(')')?;
    tensor::DataType::from_name(name).map(|d| d.onnx_code())
}
