//! Flags a constant shape that fixes a dimension the model declares dynamic.
//!
//! ## What it does
//! Runs shape inference and looks, in the main graph, for a size the exporter computed at export
//! time (a constant, or a value computed from constants alone) that pins a dimension the graph
//! inputs declare symbolic to one number:
//! - Reshape with a constant shape that has no `-1` and does not copy (`0`) every symbolic
//!   dimension of its input: the element count is fixed, so only one value of the symbol fits;
//! - Reshape with a constant shape with a `-1` whose first entry is a number > 1 where the input's
//!   first dim is a graph input's batch symbol (`x.view(int(x.shape[0]), -1)`: the -1 swallows the
//!   real batch). Only the first entry: a literal over another symbolic dim is the usual head
//!   split (`[6,batch,4,8]` → `[-1, 32]`);
//! - Reshape with a shape computed at run time (Shape → Gather → Concat) that has a constant entry
//!   greater than 1, no `-1`, and an element count that differs from its input's as a polynomial of the
//!   declared dims (MHA's `k.view(5, bsz * heads, head_dim)` with the sequence length traced);
//! - Expand with a constant shape whose entry is greater than 1 where the input's dimension is
//!   symbolic;
//! - Range, ConstantOfShape, Slice, Tile, Expand or Reshape with size inputs computed from
//!   constants, whose result (directly or through other nodes) meets a symbolic dimension in a
//!   broadcasting op or a Concat with a fixed size greater than 1 (reported at that op);
//! - a tensor computed from constants alone — what `torch.arange(int(n))` or
//!   `torch.zeros(int(b), 4)` become once the exporter folds them — meeting a symbolic dim of the
//!   graph inputs in a broadcasting op or a Concat with a fixed size greater than 1 (reported at
//!   the meeting node, the only place left that shows it).
//!
//! The finding is a warning; it is an error when a graph output the model declares with a
//! symbolic dimension is inferred with a fixed size there and the node lies upstream of it.
//!
//! ## Why is this bad?
//! The export declared the axis dynamic (`dynamic_axes` / `dynamic_shapes`), but a size was traced
//! as a Python int at export time and stored as a constant. The model loads, then fails (or
//! silently broadcasts wrongly) for any other batch size or sequence length.
//!
//! ## Example
//! `x.view(2, -1)` written as `x.view(batch, 12)` with `batch = int(x.shape[0])`, exported with
//! `dynamic_axes={"x": {0: "batch"}}`, gives Reshape of `x[batch,3,4]` with the constant shape
//! `[2,12]`; `torch.arange(int(x.shape[1]))` gives a Range with constant bounds.
//!
//! ## Fix
//! PyTorch side: keep sizes as tensors (`x.shape[0]` without `int()`, `x.reshape(x.shape[0], -1)`,
//! `-1` for the inferred axis, `torch.arange(x.size(1))`), so the exporter emits
//! Shape → Gather → Concat. ONNX side: replace the constant entry by `-1` (or `0` to copy the input
//! dim) in Reshape, or feed the size from a `Shape` of the input.

use super::{module_suffix, node_label, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;
use onnx_ir::ValueType;
use onnx_proto::NodeProto;
use ops::infer::{ints_of, show};
use ops::{Info, Known, Shape, SymDim, Ty};
use std::collections::{HashMap, HashSet};

/// Ops where a constant size input fixes an output size, with the indices of their size inputs.
const ORIGINS: &[(&str, &[usize])] = &[
    ("Reshape", &[1]),
    ("Expand", &[1]),
    ("ConstantOfShape", &[0]),
    ("Range", &[0, 1, 2]),
    ("Slice", &[1, 2, 3, 4]),
    ("Tile", &[1]),
];

/// Ops that broadcast their inputs against each other.
const BROADCASTING: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Mod",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Where",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "BitShift",
    "PRelu",
];

/// How far back (in nodes) a fixed size is traced to the constant that made it.
const TRACE_DEPTH: usize = 16;

fn symbolic(d: &Option<SymDim>) -> Option<&SymDim> {
    d.as_ref().filter(|s| !s.is_known())
}

fn literal(d: &Option<SymDim>) -> Option<i64> {
    d.as_ref().and_then(SymDim::as_known)
}

fn shape_of<'a>(values: &'a HashMap<String, Info>, name: &str) -> Option<&'a Shape> {
    values.get(name).and_then(|i| i.ty.shape())
}

/// The entries of `i`-th input of `n` when it is a constant (initializer or Constant output).
fn constant_ints(
    cx: &Cx,
    values: &HashMap<String, Info>,
    n: &NodeProto,
    i: usize,
) -> Option<Vec<i64>> {
    let name = n.input.get(i).filter(|s| !s.is_empty())?;
    if !cx.constants.contains_key(name.as_str()) {
        return None;
    }
    match &values.get(name.as_str())?.value {
        Some(Known::Tensor(t)) => ints_of(t),
        _ => None,
    }
}

/// True when every present size input of an origin op is computed from constants alone.
fn sizes_are_constant(derived: &HashSet<&str>, n: &NodeProto, inputs: &[usize]) -> bool {
    let mut any = false;
    for &i in inputs {
        match n.input.get(i).filter(|s| !s.is_empty()) {
            Some(name) if derived.contains(name.as_str()) => any = true,
            Some(_) => return false,
            None => {}
        }
    }
    any
}

/// Values of the main graph computed from initializers and Constant nodes alone (no graph input
/// upstream): what the exporter evaluated at export time.
fn constant_derived<'m>(cx: &Cx<'m>) -> HashSet<&'m str> {
    let g = cx.model.graph();
    let mut derived: HashSet<&'m str> = cx.constants.keys().copied().collect();
    loop {
        let before = derived.len();
        for n in &g.node {
            let has_subgraph = n
                .attribute
                .iter()
                .any(|a| a.g.is_some() || !a.graphs.is_empty());
            if !has_subgraph
                && !n.input.is_empty()
                && n.input
                    .iter()
                    .all(|i| i.is_empty() || derived.contains(i.as_str()))
            {
                derived.extend(n.output.iter().map(String::as_str));
            }
        }
        if derived.len() == before {
            return derived;
        }
    }
}

/// The symbol names a dim is written with (`2*batch + 1` → `batch`), when every one is an
/// identifier (`[A-Za-z_][A-Za-z0-9_]*`); `None` otherwise.
fn symbols_of(d: &SymDim) -> Option<Vec<String>> {
    let text = d.to_string();
    let mut out = Vec::new();
    for tok in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if tok.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            out.push(tok.to_string());
        } else if !tok.is_empty() && !tok.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
    }
    Some(out)
}

/// True when `d` is symbolic and written only with the graph inputs' dim names (not with a
/// symbol inference made up for an unknown size).
fn declared_symbolic(d: &SymDim, declared: &HashSet<String>) -> bool {
    !d.is_known()
        && symbols_of(d).is_some_and(|s| !s.is_empty() && s.iter().all(|x| declared.contains(x)))
}

/// The product of `dims` when every one is known (symbolically).
fn product(dims: &[Option<SymDim>]) -> Option<SymDim> {
    dims.iter()
        .try_fold(SymDim::known(1), |acc, d| d.as_ref().map(|d| acc.mul(d)))
}

/// The entries of a shape input as inference knows them (a constant or a partly symbolic
/// `Shape`-computed vector).
fn shape_value(values: &HashMap<String, Info>, name: &str) -> Option<Shape> {
    match &values.get(name)?.value {
        Some(Known::Tensor(t)) => Some(
            ints_of(t)?
                .into_iter()
                .map(|v| Some(SymDim::known(v)))
                .collect(),
        ),
        Some(Known::Dims { dims, .. }) => Some(dims.clone()),
        None => None,
    }
}

/// A Reshape whose shape is computed at run time (Shape → Gather → Concat with constant pieces)
/// and whose element count differs from its input's, because a constant piece holds an export
/// size: `k.view(5, bsz * heads, head_dim)` with the sequence length 5 traced as an int.
fn computed_reshape<'m>(
    n: &'m NodeProto,
    values: &HashMap<String, Info>,
    d: &Shape,
    declared: &HashSet<String>,
) -> Option<Hit<'m>> {
    let s = shape_value(values, n.input.get(1)?)?;
    let allowzero = n
        .attribute
        .iter()
        .find(|a| a.name() == "allowzero")
        .and_then(|a| a.i)
        .unwrap_or(0);
    if s.iter().any(|e| literal(e) == Some(-1)) {
        return None;
    }
    let out: Shape = s
        .iter()
        .enumerate()
        .map(|(i, e)| match literal(e) {
            Some(0) if allowzero == 0 => d.get(i).cloned().flatten(),
            _ => e.clone(),
        })
        .collect();
    let (pin, pout) = (product(d)?, product(&out)?);
    let all_declared = d
        .iter()
        .chain(&out)
        .flatten()
        .all(|x| x.is_known() || declared_symbolic(x, declared));
    let fixed: Vec<(usize, i64)> = s
        .iter()
        .enumerate()
        .filter_map(|(i, e)| literal(e).filter(|&k| k > 1).map(|k| (i, k)))
        .collect();
    if pin != pout && all_declared && !pin.is_known() && !fixed.is_empty() {
        return Some(Hit { node: n, message: format!(
                "{}{}: its shape '{}' {} holds the fixed size(s) {} and has {} elements where '{}' {} has {}, so the reshape only fits particular values of the symbolic dims",
                node_label(n),
                module_suffix(n),
                n.input[1],
                show(&s),
                fixed.iter().map(|(i, k)| format!("{k} (entry {i})")).collect::<Vec<_>>().join(", "),
                pout,
                n.input[0],
                show(d),
                pin,
            ),
        });
    }
    None
}

struct Hit<'m> {
    node: &'m NodeProto,
    message: String,
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let g = cx.model.graph();
    let any_symbolic_input = g.input.iter().any(|v| {
        Ty::from_value_type(&ValueType::from_proto(v.r#type.as_ref()))
            .shape()
            .is_some_and(|s| s.iter().any(|d| symbolic(d).is_some()))
    });
    if !any_symbolic_input {
        return;
    }
    let values = &cx.inference().values;
    let derived = constant_derived(cx);
    // Dim names of the graph inputs, and the symbols of their leading (batch) dims.
    let mut declared: HashSet<String> = HashSet::new();
    let mut batch_syms: Vec<SymDim> = Vec::new();
    for v in &g.input {
        let ty = Ty::from_value_type(&ValueType::from_proto(v.r#type.as_ref()));
        let Some(shape) = ty.shape() else { continue };
        for (i, d) in shape.iter().enumerate() {
            if let Some(d) = symbolic(d) {
                declared.extend(symbols_of(d).unwrap_or_default());
                if i == 0 {
                    batch_syms.push(d.clone());
                }
            }
        }
    }
    let producer: HashMap<&str, &NodeProto> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();

    let mut hits: Vec<Hit> = Vec::new();

    for n in g.node.iter().filter(|n| super::default_domain(n)) {
        match n.op_type() {
            "Reshape" => {
                let Some(d) = n.input.first().and_then(|x| shape_of(values, x)) else {
                    continue;
                };
                let Some(s) = constant_ints(cx, values, n, 1) else {
                    hits.extend(computed_reshape(n, values, d, &declared));
                    continue;
                };
                if s.contains(&-1) {
                    // `x.view(int(x.shape[0]), -1)`: the export batch at the position of a batch
                    // dim, the -1 swallowing the real batch.
                    // Only the leading entry: elsewhere a literal over a symbolic dim is the
                    // usual head split (`[6,batch,4,8]` → `[-1, 32]`).
                    let i = 0;
                    let baked = s.first().copied().filter(|&k| {
                        k > 1
                            && d.first()
                                .and_then(symbolic)
                                .is_some_and(|sym| batch_syms.contains(sym))
                    });
                    if let Some(k) = baked {
                        let sym = symbolic(&d[i]).map(ToString::to_string).unwrap_or_default();
                        hits.push(Hit { node: n, message: format!(
                                "{}{}: the constant shape '{}' = {:?} puts {k} where '{}' {} has its batch dim `{sym}` (dim {i}), and the -1 absorbs the real batch, so the output has the wrong shape for any `{sym}` but {k}",
                                node_label(n),
                                module_suffix(n),
                                n.input[1],
                                s,
                                n.input[0],
                                show(d),
                            ),
                        });
                    }
                    continue;
                }
                let allowzero = n
                    .attribute
                    .iter()
                    .find(|a| a.name() == "allowzero")
                    .and_then(|a| a.i)
                    .unwrap_or(0);
                let lost = d.iter().enumerate().find(|(i, dim)| {
                    symbolic(dim).is_some() && !(allowzero == 0 && s.get(*i) == Some(&0))
                });
                if let Some((i, dim)) = lost {
                    let sym = symbolic(dim).map(ToString::to_string).unwrap_or_default();
                    hits.push(Hit { node: n, message: format!(
                            "{}{}: the constant shape '{}' = {:?} has no -1 and does not copy dim {i} of '{}' {} (symbolic `{sym}`), so the reshape only fits one value of `{sym}`",
                            node_label(n),
                            module_suffix(n),
                            n.input[1],
                            s,
                            n.input[0],
                            show(d),
                        ),
                    });
                }
            }
            "Expand" => {
                let (Some(s), Some(d)) = (
                    constant_ints(cx, values, n, 1),
                    n.input.first().and_then(|x| shape_of(values, x)),
                ) else {
                    continue;
                };
                let rank = s.len().max(d.len());
                let (off_s, off_d) = (rank - s.len(), rank - d.len());
                for (i, dim) in d.iter().enumerate() {
                    let Some(sym) = symbolic(dim) else { continue };
                    let k = (i + off_d).checked_sub(off_s).map(|j| s[j]);
                    if let Some(k) = k.filter(|&k| k > 1) {
                        hits.push(Hit { node: n, message: format!(
                                "{}{}: the constant shape '{}' = {:?} expands dim {i} of '{}' {} (symbolic `{sym}`) to {k}, so it only runs when `{sym}` is 1 or {k}",
                                node_label(n),
                                module_suffix(n),
                                n.input[1],
                                s,
                                n.input[0],
                                show(d),
                            ),
                        });
                        break;
                    }
                }
            }
            _ => {}
        }
        // A fixed size meeting a symbolic one: trace the fixed side to a constant-sized origin.
        let op = n.op_type();
        let concat_axis = (op == "Concat").then(|| {
            n.attribute
                .iter()
                .find(|a| a.name() == "axis")
                .and_then(|a| a.i)
                .unwrap_or(0)
        });
        if !BROADCASTING.contains(&op) && concat_axis.is_none() {
            continue;
        }
        let shapes: Vec<(&str, &Shape)> = n
            .input
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| shape_of(values, s).map(|sh| (s.as_str(), sh)))
            .collect();
        let rank = shapes.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
        let concat_axis = concat_axis.map(|a| if a < 0 { a + rank as i64 } else { a });
        for pos in 0..rank {
            if concat_axis == Some(pos as i64) {
                continue;
            }
            let at = |s: &Shape| -> Option<Option<SymDim>> {
                (pos + s.len() >= rank).then(|| s[pos + s.len() - rank].clone())
            };
            let Some(sym) = shapes
                .iter()
                .find_map(|(_, s)| at(s).and_then(|d| symbolic(&d).cloned()))
            else {
                continue;
            };
            for (name, s) in &shapes {
                let Some(k) = at(s).and_then(|d| literal(&d)).filter(|&k| k > 1) else {
                    continue;
                };
                if let Some(origin) = trace(cx, &derived, &producer, name) {
                    hits.push(Hit { node: origin, message: format!(
                            "{}{}: its constant size inputs fix a size of {k} that reaches {} as '{name}' {} against the symbolic `{sym}`, so the model only runs when `{sym}` is {k}",
                            node_label(origin),
                            module_suffix(origin),
                            node_label(n),
                            show(s),
                        ),
                    });
                } else if derived.contains(name) && declared_symbolic(&sym, &declared) {
                    // A tensor the exporter computed from an int() size and folded into a
                    // constant (torch.arange(int(n)), torch.zeros(int(b), 4)): no size op left,
                    // so the node where it meets the symbolic dim is the place to show.
                    hits.push(Hit { node: n, message: format!(
                            "{}{}: '{name}' {} is computed from constants only (an export-time tensor, e.g. a folded torch.arange / torch.zeros of an int() size) and has a fixed size of {k} where the other operand has the symbolic `{sym}`, so the model only runs when `{sym}` is {k}",
                            node_label(n),
                            module_suffix(n),
                            show(s),
                        ),
                    });
                }
            }
        }
    }
    if hits.is_empty() {
        return;
    }

    // Nodes upstream of a graph output declared symbolic where inference found a fixed size.
    let mut upstream: HashSet<*const NodeProto> = HashSet::new();
    for o in &g.output {
        let declared = Ty::from_value_type(&ValueType::from_proto(o.r#type.as_ref()));
        let (Some(decl), Some(inferred)) = (declared.shape(), shape_of(values, o.name())) else {
            continue;
        };
        let contradicted = decl.len() == inferred.len()
            && decl
                .iter()
                .zip(inferred)
                .any(|(a, b)| symbolic(a).is_some() && literal(b).is_some());
        if !contradicted {
            continue;
        }
        let mut stack = vec![o.name()];
        while let Some(v) = stack.pop() {
            if let Some(p) = producer.get(v) {
                if upstream.insert(*p as *const NodeProto) {
                    stack.extend(p.input.iter().map(String::as_str));
                }
            }
        }
    }
    let mut seen: HashSet<*const NodeProto> = HashSet::new();
    for h in hits {
        if !seen.insert(h.node as *const NodeProto) {
            continue;
        }
        let error = upstream.contains(&(h.node as *const NodeProto));
        let message = if error {
            format!(
                "{}; a graph output declared with a symbolic dim is inferred with a fixed size because of it",
                h.message
            )
        } else {
            h.message
        };
        push(
            out,
            None,
            Code::BakedDynamicDim,
            if error { Severity::Error } else { Severity::Warning },
            cx.node_location(h.node),
            message,
            "keep sizes as tensors on the PyTorch side (x.shape[0] without int(), -1 in view/reshape, torch.arange(x.size(1))); on the ONNX side use -1/0 in Reshape or feed the size from Shape".into(),
        );
    }
}

/// The nearest node upstream of `value` (itself included) that is an origin op with constant size
/// inputs.
fn trace<'m>(
    cx: &Cx,
    derived: &HashSet<&str>,
    producer: &HashMap<&str, &'m NodeProto>,
    value: &str,
) -> Option<&'m NodeProto> {
    let mut frontier = vec![value];
    let mut visited: HashSet<&str> = HashSet::new();
    for _ in 0..TRACE_DEPTH {
        let mut next = Vec::new();
        for v in frontier {
            if !visited.insert(v) {
                continue;
            }
            let Some(p) = producer.get(v).copied() else {
                continue;
            };
            if let Some((_, sizes)) = ORIGINS.iter().find(|(op, _)| *op == p.op_type()) {
                if super::default_domain(p) && sizes_are_constant(derived, p, sizes) {
                    return Some(p);
                }
            }
            next.extend(
                p.input
                    .iter()
                    .map(String::as_str)
                    .filter(|s| !s.is_empty() && !cx.constants.contains_key(s)),
            );
        }
        if next.is_empty() {
            return None;
        }
        frontier = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};
    use onnx_proto::ValueInfoProto;
    use ops::infer::fixed;
    use ops::{SymDim, Ty};
    use tensor::DataType;

    fn vi(name: &str, dims: &[&str]) -> ValueInfoProto {
        let shape = dims
            .iter()
            .map(|d| match d.parse::<i64>() {
                Ok(n) => fixed(n),
                Err(_) => Some(SymDim::sym(d)),
            })
            .collect();
        ValueInfoProto {
            name: Some(name.into()),
            r#type: crate::type_proto(&Ty::tensor(Some(DataType::Float), Some(shape))),
            ..Default::default()
        }
    }

    fn with_io(
        mut m: onnx_ir::Model,
        inputs: &[(&str, &[&str])],
        outputs: &[(&str, &[&str])],
    ) -> onnx_ir::Model {
        let g = m.proto.graph.as_mut().unwrap();
        g.input = inputs.iter().map(|(n, d)| vi(n, d)).collect();
        g.output = outputs.iter().map(|(n, d)| vi(n, d)).collect();
        onnx_ir::Model::from_proto(m.proto)
    }

    fn odt033(m: &onnx_ir::Model) -> Vec<(String, String, String, String)> {
        summary(&lint(m, "m.onnx", &[]))
            .into_iter()
            .filter(|s| s.1 == "ODT033")
            .collect()
    }

    fn reshape_model(shape: &[i64], out_dims: &[&str]) -> onnx_ir::Model {
        with_io(
            model(
                14,
                vec![node("Reshape", "/view/Reshape", &["x", "shape"], &["y"])],
                vec![int64("shape", shape)],
            ),
            &[("x", &["batch", "3", "4"])],
            &[("y", out_dims)],
        )
    }

    #[test]
    fn reshape_with_the_export_batch_baked_in_is_flagged() {
        let f = odt033(&reshape_model(&[2, 12], &["2", "12"]));
        assert_eq!(
            f,
            vec![(
                String::new(),
                "ODT033".into(),
                "warning".into(),
                "/view/Reshape".into()
            )]
        );
    }

    #[test]
    fn a_contradicted_symbolic_output_makes_it_an_error() {
        let f = odt033(&reshape_model(&[2, 12], &["batch", "12"]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].2, "error");
    }

    #[test]
    fn minus_one_or_zero_at_the_batch_position_is_clean() {
        assert!(odt033(&reshape_model(&[-1, 12], &["batch", "12"])).is_empty());
        assert!(odt033(&reshape_model(&[0, 12], &["batch", "12"])).is_empty());
    }

    #[test]
    fn a_shape_computed_from_shape_gather_concat_is_clean() {
        let mut gather = node("Gather", "/Gather", &["s", "zero"], &["b"]);
        gather.attribute.push(attr_i("axis", 0));
        let unsq = node("Unsqueeze", "/Unsqueeze", &["b", "axes"], &["b1"]);
        let mut concat = node("Concat", "/Concat", &["b1", "twelve"], &["shape"]);
        concat.attribute.push(attr_i("axis", 0));
        let mut zero = int64("zero", &[0]);
        zero.dims.clear();
        let m = with_io(
            model(
                14,
                vec![
                    node("Shape", "/Shape", &["x"], &["s"]),
                    gather,
                    unsq,
                    concat,
                    node("Reshape", "/view/Reshape", &["x", "shape"], &["y"]),
                ],
                vec![zero, int64("axes", &[0]), int64("twelve", &[12])],
            ),
            &[("x", &["batch", "3", "4"])],
            &[("y", &["batch", "12"])],
        );
        assert!(odt033(&m).is_empty(), "{:?}", lint(&m, "m.onnx", &[]));
    }

    #[test]
    fn constant_range_added_to_a_dynamic_sequence_is_flagged_at_the_range() {
        let scalar = |name: &str, v: i64| {
            let mut t = int64(name, &[v]);
            t.dims.clear();
            t
        };
        let mut cast = node("Cast", "/pos/Cast", &["r"], &["rf"]);
        cast.attribute.push(attr_i("to", 1));
        let m = with_io(
            model(
                14,
                vec![
                    node("Range", "/pos/Range", &["start", "limit", "delta"], &["r"]),
                    cast,
                    node("Add", "/Add", &["x", "rf"], &["y"]),
                ],
                vec![scalar("start", 0), scalar("limit", 7), scalar("delta", 1)],
            ),
            &[("x", &["batch", "seq"])],
            &[("y", &["batch", "seq"])],
        );
        let f = odt033(&m);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].3, "/pos/Range");
        assert_eq!(f[0].2, "error");
    }

    #[test]
    fn expand_to_a_fixed_batch_is_flagged_but_expand_with_ones_is_not() {
        let m = |shape: &[i64]| {
            with_io(
                model(
                    14,
                    vec![node("Expand", "/Expand", &["x", "shape"], &["y"])],
                    vec![int64("shape", shape)],
                ),
                &[("x", &["batch", "4"])],
                &[],
            )
        };
        assert_eq!(odt033(&m(&[2, 4])).len(), 1);
        assert!(odt033(&m(&[1, 4])).is_empty());
    }

    #[test]
    fn view_with_minus_one_and_the_export_batch_first_is_flagged() {
        // x.view(int(x.shape[0]), -1) traced at batch 2: Reshape(x[batch,3,4], [2, -1]).
        let f = odt033(&reshape_model(&[2, -1], &["batch", "n"]));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].3, "/view/Reshape");
        // The usual forms stay clean: -1 first, or a literal over a non-leading symbolic dim (a
        // head split of [6,batch,4,8] into [-1, 32]).
        assert!(odt033(&reshape_model(&[-1, 12], &["batch", "12"])).is_empty());
        let m = with_io(
            model(
                14,
                vec![node("Reshape", "/Reshape", &["x", "shape"], &["y"])],
                vec![int64("shape", &[-1, 32])],
            ),
            &[("x", &["6", "batch", "4", "8"])],
            &[("y", &["n", "32"])],
        );
        assert!(odt033(&m).is_empty());
    }

    fn folded_constant_model(
        op: &str,
        c_dims: &[i64],
        x: &[&str],
        axis: Option<i64>,
    ) -> onnx_ir::Model {
        let mut c = int64("c", &vec![0; c_dims.iter().product::<i64>() as usize]);
        c.dims = c_dims.to_vec();
        c.data_type = Some(DataType::Float as i32);
        c.float_data = vec![0.0; c.int64_data.len()];
        c.int64_data.clear();
        let mut n = node(op, &format!("/{op}"), &["x", "c"], &["y"]);
        if let Some(a) = axis {
            n.attribute.push(attr_i("axis", a));
        }
        with_io(model(14, vec![n], vec![c]), &[("x", x)], &[])
    }

    #[test]
    fn a_folded_constant_meeting_a_symbolic_dim_is_flagged_at_the_meeting_node() {
        // x[batch, seq] + arange(5) folded to a Constant [5].
        let f = odt033(&folded_constant_model("Add", &[5], &["batch", "seq"], None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].3, "/Add");
        // cat([x[batch,5], zeros(2, 4)], 1) with zeros folded to a [2,4] Constant.
        let f = odt033(&folded_constant_model(
            "Concat",
            &[2, 4],
            &["batch", "5"],
            Some(1),
        ));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].3, "/Concat");
        // A bias over a fixed dim, or a constant of size 1, is fine.
        assert!(odt033(&folded_constant_model("Add", &[16], &["batch", "16"], None)).is_empty());
        assert!(odt033(&folded_constant_model(
            "Add",
            &[1, 16],
            &["batch", "16"],
            None
        ))
        .is_empty());
    }

    /// k[seq, batch, 16] reshaped to Concat([5], batch*2, [8]) (MHA's k.view(k.shape[0], ...)
    /// with the sequence length traced as an int), or to Concat(Gather(Shape)[0], batch*2, [8]).
    fn mha_reshape(seq_piece_is_constant: bool, seq: &str) -> onnx_ir::Model {
        let scalar = |name: &str, v: i64| {
            let mut t = int64(name, &[v]);
            t.dims.clear();
            t
        };
        let mut g1 = node("Gather", "/Gather_1", &["s", "one"], &["b"]);
        g1.attribute.push(attr_i("axis", 0));
        let mut g0 = node("Gather", "/Gather_0", &["s", "zero"], &["q"]);
        g0.attribute.push(attr_i("axis", 0));
        let first = if seq_piece_is_constant { "five" } else { "q1" };
        let mut concat = node("Concat", "/Concat", &[first, "bh1", "eight"], &["shape"]);
        concat.attribute.push(attr_i("axis", 0));
        with_io(
            model(
                14,
                vec![
                    node("Shape", "/Shape", &["k"], &["s"]),
                    g0,
                    node("Unsqueeze", "/Unsqueeze_0", &["q", "axes"], &["q1"]),
                    g1,
                    node("Mul", "/Mul", &["b", "two"], &["bh"]),
                    node("Unsqueeze", "/Unsqueeze_1", &["bh", "axes"], &["bh1"]),
                    concat,
                    node("Reshape", "/attn/Reshape_4", &["k", "shape"], &["y"]),
                ],
                vec![
                    scalar("zero", 0),
                    scalar("one", 1),
                    scalar("two", 2),
                    int64("axes", &[0]),
                    int64("five", &[5]),
                    int64("eight", &[8]),
                ],
            ),
            &[("k", &[seq, "batch", "16"])],
            &[],
        )
    }

    #[test]
    fn a_computed_reshape_shape_with_a_baked_entry_is_flagged() {
        let f = odt033(&mha_reshape(true, "seq"));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].3, "/attn/Reshape_4");
        // The same shape with the size read from Shape, or with seq fixed at 5: clean.
        assert!(odt033(&mha_reshape(false, "seq")).is_empty());
        assert!(odt033(&mha_reshape(true, "5")).is_empty());
    }

    #[test]
    fn an_expand_whose_size_is_computed_from_constants_is_the_origin() {
        // cls.expand(int(x.shape[0]), -1, -1) with the size computed from constants (Mul), then
        // cat with x[batch, 3, 8] on axis 1: reported at the Expand, not at its size chain.
        let mut cls = int64("cls", &[0; 8]);
        cls.dims = vec![1, 1, 8];
        cls.data_type = Some(DataType::Float as i32);
        cls.float_data = vec![0.0; 8];
        cls.int64_data.clear();
        let mut concat = node("Concat", "/Concat", &["e", "x"], &["y"]);
        concat.attribute.push(attr_i("axis", 1));
        let m = with_io(
            model(
                14,
                vec![
                    node("Mul", "/Mul", &["base", "one"], &["shape"]),
                    node("Expand", "/Expand", &["cls", "shape"], &["e"]),
                    concat,
                ],
                vec![cls, int64("base", &[2, 1, 1]), int64("one", &[1])],
            ),
            &[("x", &["batch", "3", "8"])],
            &[],
        );
        let f = odt033(&m);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].3, "/Expand");
    }
}
