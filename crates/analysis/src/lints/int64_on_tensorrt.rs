//! Flags INT64 initializers and Constant values on targets that narrow INT64 to INT32.
//!
//! ## What it does
//! On targets whose profile says `int64 = "cast-to-int32"` (TensorRT before 9.0), decodes every
//! INT64 initializer and Constant `value` and looks at the tensors with a value outside the INT32
//! range:
//! - used only where the clamp cannot change the result — a Slice `starts` / `ends` (Slice clamps
//!   them to the dim anyway, so `INT64_MAX` → `INT32_MAX` still means "to the end" and `INT64_MIN`
//!   still "from before the start") or NonMaxSuppression's `max_output_boxes_per_class` (`INT32_MAX`
//!   still means "no limit"): info;
//! - used anywhere else (as data, indices, a Reshape shape, a graph output, ...): error.
//!
//! One finding per tensor, at the Constant node that holds it (at the initializer otherwise); the
//! tensors that fit INT32 are summarised in one info finding.
//!
//! ## Why is this bad?
//! TensorRT 8.x casts INT64 down to INT32 and clamps values to +-INT_MAX. Shape arithmetic and the
//! sentinels above are unaffected, but large indices, offsets or hashes silently change.
//!
//! ## Example
//! `register_buffer("offset", torch.tensor([2**40]))` then `ids + self.offset` (error); `x[:, 1:]`
//! exports `Slice(ends=[9223372036854775807])` (info).
//!
//! ## Fix
//! PyTorch side: keep indices and offsets in the int32 range; slice with explicit sizes
//! (`x[:, 1:x.shape[1]]`) to silence the info. ONNX side: replace the constant with an in-range
//! value (`onnxsim` folds most), or target TensorRT >= 9.

use super::{cite, module_suffix, node_label, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;
use onnx_proto::tensor_proto::DataType;
use onnx_proto::NodeProto;
use std::collections::HashMap;

/// The (node, input index) pairs where a value is used.
type Uses<'m> = Vec<(&'m NodeProto, usize)>;

/// (op, input index) where a value outside INT32, clamped to INT32, gives the same result.
const CLAMP_SAFE: &[(&str, usize)] = &[("Slice", 1), ("Slice", 2), ("NonMaxSuppression", 2)];

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let targets: Vec<_> = cx.targets.iter().filter(|p| p.casts_int64()).collect();
    if targets.is_empty() {
        return;
    }
    // Where each value is used, and which Constant node holds it.
    let mut uses: HashMap<&str, Uses> = HashMap::new();
    let mut holder: HashMap<&str, &NodeProto> = HashMap::new();
    for n in &cx.nodes {
        for (i, v) in n.input.iter().enumerate() {
            uses.entry(v.as_str()).or_default().push((n, i));
        }
        if n.op_type() == "Constant" && super::default_domain(n) {
            if let Some(o) = n.output.first() {
                holder.insert(o.as_str(), n);
            }
        }
    }
    let graph_outputs: Vec<&str> = cx.model.graph().output.iter().map(|o| o.name()).collect();
    let mut names: Vec<&&str> = cx.constants.keys().collect();
    names.sort();
    // (name, an offending value, the uses when all are clamp-safe)
    let mut outside: Vec<(&str, i64, Option<Uses>)> = Vec::new();
    let mut inside = Vec::new();
    for name in names {
        let t = cx.constants[*name];
        if t.data_type() != DataType::Int64 as i32 {
            continue;
        }
        let Ok(values) = tensor::Tensor::from_proto(t).and_then(|v| v.to_vec::<i64>()) else {
            continue;
        };
        match values.iter().find(|v| i32::try_from(**v).is_err()) {
            Some(v) => {
                let used = uses.get(*name).cloned().unwrap_or_default();
                let safe = !used.is_empty()
                    && !graph_outputs.contains(name)
                    && used.iter().all(|(n, i)| {
                        super::default_domain(n) && CLAMP_SAFE.contains(&(n.op_type(), *i))
                    });
                outside.push((*name, *v, safe.then_some(used)));
            }
            None => inside.push(*name),
        }
    }
    for p in targets {
        let source = p
            .int64_source
            .as_deref()
            .map(|s| cite(p, s))
            .unwrap_or_default();
        for (name, v, safe) in &outside {
            let (location, what) = match holder.get(name) {
                Some(n) => (
                    cx.node_location(n),
                    format!(
                        "{}{} holds INT64 {v} (in '{name}')",
                        node_label(n),
                        module_suffix(n)
                    ),
                ),
                None => (
                    cx.value_location(name),
                    format!("INT64 tensor '{name}' holds {v}"),
                ),
            };
            match safe {
                Some(used) => {
                    let roles: Vec<String> = used
                        .iter()
                        .map(|(n, i)| format!("{} input {i} of {}", n.op_type(), node_label(n)))
                        .collect();
                    push(
                        out,
                        Some(p),
                        Code::Int64OnTensorrt,
                        Severity::Info,
                        location,
                        format!(
                            "{what}, outside the INT32 range; {} v{} clamps it to INT32, which does not change the result where it is used ({})",
                            p.backend,
                            p.version,
                            roles.join(", ")
                        ),
                        format!("nothing to do; to silence it, slice with explicit sizes or use an in-range limit; {source}"),
                    );
                }
                None => push(
                    out,
                    Some(p),
                    Code::Int64OnTensorrt,
                    Severity::Error,
                    location,
                    format!(
                        "{what}, outside the INT32 range; {} v{} casts INT64 to INT32 and clamps it, which changes the value where it is used",
                        p.backend, p.version
                    ),
                    format!("keep the value in the INT32 range (int32 indices, smaller offsets or hashes); {source}"),
                ),
            }
        }
        if !inside.is_empty() {
            let shown: Vec<&str> = inside.iter().take(3).copied().collect();
            push(
                out,
                Some(p),
                Code::Int64OnTensorrt,
                Severity::Info,
                cx.file_location(),
                format!(
                    "{} INT64 constant(s) ({}{}) fit INT32; {} v{} casts them to INT32 without changing their values",
                    inside.len(),
                    shown.join(", "),
                    if inside.len() > 3 { ", ..." } else { "" },
                    p.backend,
                    p.version
                ),
                source.clone(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    fn odt010(m: &onnx_ir::Model) -> Vec<(String, String, String, String)> {
        summary(&lint(m, "m.onnx", &targets("tensorrt-8.6,tensorrt-10")))
            .into_iter()
            .filter(|s| s.1 == "ODT010")
            .collect()
    }

    fn row(sev: &str, at: &str) -> (String, String, String, String) {
        (
            "tensorrt-8.6".into(),
            "ODT010".into(),
            sev.into(),
            at.into(),
        )
    }

    // An INT64_MAX Slice end used to be an error here. It is info now: TensorRT 8.6 clamps it to
    // INT32_MAX, and Slice clamps any end past the dim to the dim, so the result is the same
    // (`x[:, 1:]` in every TorchScript transformer; tests/hazards/slice_int64max_ts).
    #[test]
    fn int64_max_slice_end_is_info_on_tensorrt_8_6_only() {
        let m = model(
            13,
            vec![node("Slice", "/Slice", &["x", "starts", "ends"], &["y"])],
            vec![int64("starts", &[1]), int64("ends", &[i64::MAX])],
        );
        assert_eq!(odt010(&m), vec![row("info", "ends"), row("info", "")]);
    }

    #[test]
    fn reversing_slice_start_and_nms_limit_are_info() {
        let m = model(
            13,
            vec![
                node(
                    "Slice",
                    "/Slice",
                    &["x", "starts", "ends", "axes", "steps"],
                    &["y"],
                ),
                node("NonMaxSuppression", "/NMS", &["b", "s", "max"], &["k"]),
            ],
            vec![
                int64("starts", &[-1]),
                int64("ends", &[i64::MIN]),
                int64("axes", &[0]),
                int64("steps", &[-1]),
                int64("max", &[i64::MAX]),
            ],
        );
        let f = odt010(&m);
        assert!(
            f.contains(&row("info", "ends")) && f.contains(&row("info", "max")),
            "{f:?}"
        );
        assert!(!f.iter().any(|s| s.2 == "error"), "{f:?}");
    }

    #[test]
    fn a_large_value_used_as_data_stays_an_error_even_if_also_a_slice_end() {
        let m = model(
            13,
            vec![
                node("Add", "/Add", &["ids", "offset"], &["y"]),
                node("Slice", "/Slice", &["x", "starts", "offset"], &["z"]),
            ],
            vec![int64("starts", &[0]), int64("offset", &[1 << 40])],
        );
        assert!(
            odt010(&m).contains(&row("error", "offset")),
            "{:?}",
            odt010(&m)
        );
        // Used as the steps of a Slice (not clamp-safe) or not used at all: error.
        let m = model(
            13,
            vec![node(
                "Slice",
                "/Slice",
                &["x", "s", "e", "a", "big"],
                &["y"],
            )],
            vec![int64("big", &[1 << 40])],
        );
        assert!(odt010(&m).contains(&row("error", "big")));
    }

    #[test]
    fn a_constant_node_is_reported_at_the_node() {
        let mut c = node("Constant", "/Constant_2", &[], &["/Constant_2_output_0"]);
        c.attribute.push(onnx_proto::AttributeProto {
            name: Some("value".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
            t: Some(int64("", &[i64::MAX])),
            ..Default::default()
        });
        let m = model(
            13,
            vec![
                c,
                node("Gather", "/Gather", &["x", "/Constant_2_output_0"], &["y"]),
            ],
            vec![],
        );
        assert_eq!(odt010(&m), vec![row("error", "/Constant_2")]);
    }
}
