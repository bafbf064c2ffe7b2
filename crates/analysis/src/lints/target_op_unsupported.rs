//! Flags nodes whose operator the target backend does not implement, or not at the model's opset.
//!
//! ## What it does
//! For each target, looks every ai.onnx node (subgraphs included) up in the target's profile
//! (`crates/analysis/targets/<target>.toml`) at the opset the model imports, and reports the nodes
//! the target does not list, or lists only for other opsets. A node of a custom domain (one the
//! ONNX schemas do not define, e.g. `mydomain::FancyAct` from a `symbolic` or
//! `torch.onnx.register_custom_op_symbolic`) with no model-local function is reported for every
//! target whose profile does not list that domain's op: no backend loads it without a
//! plugin / custom-op library (the target-independent ODC013 says the same without targets). A
//! custom op with a model-local function is left to the runtimes that inline it; the other
//! standard domains (ai.onnx.ml, preview) are not checked. Ops the profile's `[loader]` runs without a kernel are not reported: onnxruntime's graph
//! loader turns `Constant` nodes into initializers (it has no Constant kernel), and its partitioner
//! expands an ai.onnx op that has no kernel but a schema function body at the model's opset
//! (e.g. `HardSwish`, `CastLike` at opset 17) into that body. The other profiles list Constant.
//!
//! ## Why is this bad?
//! The backend's importer refuses the graph ("No importer registered for op", "NOT_IMPLEMENTED"):
//! the model exports and passes `onnx.checker`, then fails at deployment.
//!
//! ## Example
//! `torch.unique(x)` exports a `Unique` node; TensorRT's ONNX parser has no importer for it.
//!
//! ## Fix
//! PyTorch side: replace the op by one the target supports (e.g. sort + compare instead of
//! `unique`), or move it out of the exported module. ONNX side: export at an opset the target
//! accepts, or register a plugin / custom op for it on the target.

use super::{cite, module_suffix, node_label, push, Cx, Finding};
use crate::targets::Support;
use crate::Code;
use diagnostics::Severity;

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    custom_ops(cx, out);
    for &p in cx.targets {
        for n in cx.nodes.iter().filter(|n| super::default_domain(n)) {
            let (message, help) = match p.support("", n.op_type(), cx.opset) {
                Support::Yes(_) => continue,
                _ if p.loaded_without_kernel(n.op_type(), cx.opset).is_some() => continue,
                Support::No => (
                    format!("{} v{} does not implement {}{}", p.backend, p.version, node_label(n), module_suffix(n)),
                    "replace the op (PyTorch side) or provide a plugin / custom op on the target; the profile lists what it implements".to_string(),
                ),
                Support::OutsideRange(ranges) => {
                    let shown: Vec<String> = ranges
                        .iter()
                        .map(|(a, b)| format!("{}..{}", a.map(|v| v.to_string()).unwrap_or_default(), b.map(|v| v.to_string()).unwrap_or_default()))
                        .collect();
                    (
                        format!(
                            "{} v{} implements {} only at opsets {}, the model imports opset {}{}",
                            p.backend, p.version, node_label(n), shown.join(", "), cx.opset, module_suffix(n)
                        ),
                        "export with an opset_version inside the range, or convert with onnx.version_converter".to_string(),
                    )
                }
            };
            let source = p
                .ops
                .first()
                .map(|g| cite(p, &g.source))
                .unwrap_or_default();
            push(
                out,
                Some(p),
                Code::TargetOpUnsupported,
                Severity::Error,
                cx.node_location(n),
                message,
                format!("{help}; {source}"),
            );
        }
    }
}

/// Nodes of a custom domain without a model-local function, once per target that does not list
/// the op.
fn custom_ops(cx: &Cx, out: &mut Vec<Finding>) {
    let functions: Vec<(&str, &str)> = cx
        .model
        .proto
        .functions
        .iter()
        .map(|f| (f.domain(), f.name()))
        .collect();
    for n in &cx.nodes {
        let dom = n.domain();
        if super::default_domain(n)
            || opset::domains().any(|d| d == dom)
            || functions.contains(&(dom, n.op_type()))
        {
            continue;
        }
        let version = cx.model.opset(dom).unwrap_or(1);
        for &p in cx.targets {
            if matches!(p.support(dom, n.op_type(), version), Support::Yes(_)) {
                continue;
            }
            push(
                out,
                Some(p),
                Code::TargetOpUnsupported,
                Severity::Error,
                cx.node_location(n),
                format!(
                    "{} v{} cannot load custom op {dom}::{} ({}{}): the model carries no function for it and the target has no such op without a plugin",
                    p.backend,
                    p.version,
                    n.op_type(),
                    node_label(n),
                    module_suffix(n)
                ),
                "register a plugin / custom-op library for it on the target, or export the op as standard ONNX ops (a model-local function, or a symbolic built from ai.onnx ops)".to_string(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    #[test]
    fn unique_fails_on_tensorrt_not_on_onnxruntime() {
        let m = model(
            13,
            vec![
                node("Unique", "/enc/Unique", &["x"], &["y"]),
                node("Relu", "r", &["y"], &["z"]),
            ],
            vec![],
        );
        let f: Vec<_> = lint(&m, "m.onnx", &targets("tensorrt-8.6,onnxruntime-cpu"))
            .into_iter()
            .filter(|f| f.diagnostic.code == "ODT001")
            .collect();
        assert_eq!(
            summary(&f),
            vec![(
                "tensorrt-8.6".into(),
                "ODT001".into(),
                "error".into(),
                "/enc/Unique".into()
            )]
        );
        assert!(
            f[0].diagnostic.message.contains("PyTorch module `enc`"),
            "{}",
            f[0].diagnostic.message
        );
    }

    #[test]
    fn ops_onnxruntime_loads_without_a_kernel_are_not_reported() {
        let mut c = node("Constant", "/Constant", &[], &["c"]);
        c.attribute.push(onnx_proto::AttributeProto {
            name: Some("value".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
            t: Some(int64("v", &[1])),
            ..Default::default()
        });
        let m = model(
            17,
            vec![
                c,
                node("HardSwish", "/act/HardSwish", &["x"], &["h"]),
                node("CastLike", "/CastLike", &["h", "c"], &["y"]),
            ],
            vec![],
        );
        let all = targets("all");
        let f: Vec<_> = summary(&lint(&m, "m.onnx", &all))
            .into_iter()
            .filter(|s| s.1 == "ODT001")
            .collect();
        // onnxruntime folds the Constant and inlines HardSwish / CastLike (function bodies); every
        // other profile lists Constant.
        assert!(!f.iter().any(|s| s.0 == "onnxruntime-cpu"), "{f:?}");
        assert!(!f.iter().any(|s| s.3 == "/Constant"), "{f:?}");
        assert!(
            f.iter()
                .any(|s| s.0 == "tensorrt-8.6" && s.3 == "/CastLike"),
            "{f:?}"
        );
        // ImageDecoder (opset 20) has no CPU kernel and no function body: still reported.
        let m = model(21, vec![node("ImageDecoder", "d", &["x"], &["y"])], vec![]);
        let f = summary(&lint(&m, "m.onnx", &targets("onnxruntime-cpu")));
        assert!(f.iter().any(|s| s.1 == "ODT001" && s.3 == "d"), "{f:?}");
    }

    #[test]
    fn a_custom_op_without_a_function_fails_on_every_target() {
        let mut n = node("FancyAct", "/FancyAct", &["x"], &["y"]);
        n.domain = Some("mydomain".into());
        let mut m = model(17, vec![n], vec![]);
        m.proto.opset_import.push(onnx_proto::OperatorSetIdProto {
            domain: Some("mydomain".into()),
            version: Some(1),
        });
        let all = targets("all");
        let f: Vec<_> = summary(&lint(&m, "m.onnx", &all))
            .into_iter()
            .filter(|s| s.1 == "ODT001")
            .collect();
        assert_eq!(f.len(), all.len(), "{f:?}");
        assert!(
            f.iter().all(|s| s.2 == "error" && s.3 == "/FancyAct"),
            "{f:?}"
        );
        // With a model-local function of that name the op is not reported.
        m.proto.functions.push(onnx_proto::FunctionProto {
            name: Some("FancyAct".into()),
            domain: Some("mydomain".into()),
            ..Default::default()
        });
        let f = summary(&lint(&m, "m.onnx", &all));
        assert!(!f.iter().any(|s| s.1 == "ODT001"), "{f:?}");
        // Standard non-default domains (ai.onnx.ml) are not this rule's concern.
        let mut ml = node("LabelEncoder", "le", &["x"], &["y"]);
        ml.domain = Some("ai.onnx.ml".into());
        let f = summary(&lint(&model(17, vec![ml], vec![]), "m.onnx", &all));
        assert!(!f.iter().any(|s| s.1 == "ODT001"), "{f:?}");
    }

    #[test]
    fn an_op_outside_its_range_is_named_with_the_range() {
        // onnxruntime's CPU kernels for Upsample stop at opset 9.
        let m = model(
            10,
            vec![node("Upsample", "up", &["x", "s"], &["y"])],
            vec![],
        );
        let f = lint(&m, "m.onnx", &targets("onnxruntime-cpu"));
        let d = &f
            .iter()
            .find(|f| f.diagnostic.code == "ODT001")
            .unwrap()
            .diagnostic;
        assert!(d.message.contains("only at opsets 7..9"), "{}", d.message);
    }
}
