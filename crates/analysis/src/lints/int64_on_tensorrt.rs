//! Flags INT64 initializers and Constant values on targets that narrow INT64 to INT32.
//!
//! ## What it does
//! On targets whose profile says `int64 = "cast-to-int32"` (TensorRT before 9.0), decodes every
//! INT64 initializer and Constant `value`: a tensor with a value outside the INT32 range is an
//! error (one finding each); the tensors that fit are summarised in one info finding.
//!
//! ## Why is this bad?
//! TensorRT 8.x casts INT64 down to INT32 and clamps values to +-INT_MAX. Shape arithmetic is
//! unaffected, but sentinels such as `INT64_MAX` as a Slice end become 2147483647 and large
//! indices or hashes silently change.
//!
//! ## Example
//! `x[:, 1:]` exports `Slice(ends=[9223372036854775807])`.
//!
//! ## Fix
//! PyTorch side: slice with explicit sizes (`x[:, 1:x.shape[1]]`), keep indices in int32. ONNX side:
//! replace the constant with an in-range value (`onnxsim` folds most), or target TensorRT >= 9.

use super::{cite, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;
use onnx_proto::tensor_proto::DataType;

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let targets: Vec<_> = cx.targets.iter().filter(|p| p.casts_int64()).collect();
    if targets.is_empty() {
        return;
    }
    let mut names: Vec<&&str> = cx.constants.keys().collect();
    names.sort();
    let mut outside = Vec::new();
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
            Some(v) => outside.push((*name, *v)),
            None => inside.push(*name),
        }
    }
    for p in targets {
        let source = p
            .int64_source
            .as_deref()
            .map(|s| cite(p, s))
            .unwrap_or_default();
        for (name, v) in &outside {
            push(
                out,
                Some(p),
                Code::Int64OnTensorrt,
                Severity::Error,
                cx.value_location(name),
                format!("INT64 tensor '{name}' holds {v}, outside the INT32 range; {} v{} casts INT64 to INT32 and clamps it", p.backend, p.version),
                format!("use an in-range value (e.g. the real dim instead of INT64_MAX as a Slice end); {source}"),
            );
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

    #[test]
    fn int64_max_slice_end_is_an_error_on_tensorrt_8_6_only() {
        let m = model(
            13,
            vec![node("Slice", "/Slice", &["x", "starts", "ends"], &["y"])],
            vec![int64("starts", &[1]), int64("ends", &[i64::MAX])],
        );
        let f: Vec<_> = summary(&lint(&m, "m.onnx", &targets("tensorrt-8.6,tensorrt-10")))
            .into_iter()
            .filter(|s| s.1 == "ODT010")
            .collect();
        assert_eq!(
            f,
            vec![
                (
                    "tensorrt-8.6".into(),
                    "ODT010".into(),
                    "error".into(),
                    "ends".into()
                ),
                (
                    "tensorrt-8.6".into(),
                    "ODT010".into(),
                    "info".into(),
                    String::new()
                ),
            ]
        );
    }
}
