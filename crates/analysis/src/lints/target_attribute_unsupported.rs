//! Flags attribute values the target documents as unsupported for an operator.
//!
//! ## What it does
//! For each `[[restrictions]]` entry of a profile that names an attribute and its allowed values
//! (e.g. TensorRT's Resize: `mode` in nearest / linear), reports nodes that set the attribute to
//! another value. An absent attribute takes the ONNX default, which the listed restrictions allow.
//!
//! ## Why is this bad?
//! The importer refuses the node, or the op has no kernel for that mode on the target.
//!
//! ## Example
//! `F.interpolate(x, scale_factor=2, mode="bicubic")` exports `Resize(mode="cubic")`, which
//! TensorRT does not implement.
//!
//! ## Fix
//! PyTorch side: use a supported mode (`bilinear`, `nearest`). ONNX side: rewrite the attribute
//! only if the numerical change is acceptable; otherwise use a plugin.

use super::{cite, module_suffix, node_label, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    for &p in cx.targets {
        for n in cx.nodes.iter().filter(|n| super::default_domain(n)) {
            for r in p.restrictions(n.op_type()) {
                let Some(name) = &r.attribute else { continue };
                let Some(a) = n.attribute.iter().find(|a| a.name() == name) else {
                    continue;
                };
                let value = match (&a.s, a.i) {
                    (Some(s), _) => String::from_utf8_lossy(s).into_owned(),
                    (None, Some(i)) => i.to_string(),
                    _ => continue,
                };
                if r.allowed.contains(&value) {
                    continue;
                }
                push(
                    out,
                    Some(p),
                    Code::TargetAttributeUnsupported,
                    Severity::Error,
                    cx.node_location(n),
                    format!(
                        "{} v{} does not support {name}={value} on {}{} (supported: {})",
                        p.backend,
                        p.version,
                        node_label(n),
                        module_suffix(n),
                        r.allowed.join(", ")
                    ),
                    format!(
                        "choose a supported {name} on the PyTorch side; {}",
                        cite(p, &r.source)
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    #[test]
    fn cubic_resize_fails_on_tensorrt_but_linear_passes() {
        let mut cubic = node("Resize", "/up/Resize", &["x", "", "s"], &["y"]);
        cubic.attribute.push(attr_s("mode", "cubic"));
        let mut linear = node("Resize", "/up2/Resize", &["y", "", "s"], &["z"]);
        linear.attribute.push(attr_s("mode", "linear"));
        let m = model(13, vec![cubic, linear], vec![]);
        let f: Vec<_> = summary(&lint(&m, "m.onnx", &targets("tensorrt-10,onnxruntime-cpu")))
            .into_iter()
            .filter(|s| s.1 == "ODT003")
            .collect();
        assert_eq!(
            f,
            vec![(
                "tensorrt-10".into(),
                "ODT003".into(),
                "error".into(),
                "/up/Resize".into()
            )]
        );
    }
}
