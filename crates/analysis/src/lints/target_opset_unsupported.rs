//! Flags a model whose ai.onnx opset is outside the range the target's ONNX importer accepts.
//!
//! ## What it does
//! Compares the model's ai.onnx `opset_import` with the opset range the profile states (e.g.
//! TensorRT 8.6: up to 17; TensorRT 10.15: 9 to 24) and reports once per target.
//!
//! ## Why is this bad?
//! The importer refuses models newer than it knows, even when each op would be supported, and
//! makes no promise for opsets older than its lower bound.
//!
//! ## Example
//! `torch.onnx.export(..., opset_version=18)` and then TensorRT 8.6's parser.
//!
//! ## Fix
//! PyTorch side: pass an `opset_version` inside the range. ONNX side:
//! `onnx.version_converter.convert_version(model, 17)`.

use super::{cite, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    for &p in cx.targets {
        let low = p.opset_min.is_some_and(|m| cx.opset < m);
        let high = p.opset_max.is_some_and(|m| cx.opset > m);
        if !(low || high) {
            continue;
        }
        let range = format!(
            "{}..{}",
            p.opset_min.map(|v| v.to_string()).unwrap_or_default(),
            p.opset_max.map(|v| v.to_string()).unwrap_or_default()
        );
        let source = p
            .opset_source
            .as_deref()
            .map(|s| cite(p, s))
            .unwrap_or_default();
        push(
            out,
            Some(p),
            Code::TargetOpsetUnsupported,
            Severity::Error,
            cx.file_location(),
            format!("the model imports ai.onnx opset {}; {} v{} accepts opsets {range}", cx.opset, p.backend, p.version),
            format!("export with opset_version in {range} or convert with onnx.version_converter; {source}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    #[test]
    fn opset_18_is_too_new_for_tensorrt_8_6_only() {
        let m = model(18, vec![node("Relu", "r", &["x"], &["y"])], vec![]);
        let codes: Vec<_> = summary(&lint(&m, "m.onnx", &targets("tensorrt-8.6,tensorrt-10")))
            .into_iter()
            .filter(|s| s.1 == "ODT002")
            .collect();
        assert_eq!(
            codes,
            vec![(
                "tensorrt-8.6".into(),
                "ODT002".into(),
                "error".into(),
                String::new()
            )]
        );
    }
}
