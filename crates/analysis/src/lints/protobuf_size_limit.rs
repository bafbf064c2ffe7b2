//! Flags a model whose protobuf is close to or over the 2 GB limit.
//!
//! ## What it does
//! Computes the size of the serialized ModelProto without the tensors that are stored as external
//! data (the encoded size of the decoded model, minus the bytes of its external tensors). Over
//! 2 GiB − 1 byte (the protobuf limit) it reports an error; over 90 % of it (about 1.8 GiB) an
//! info, so the model is moved to external data before the next layer tips it over.
//!
//! ## Why is this bad?
//! Protobuf messages are limited to 2 GiB: `onnx.save`, `onnx.load`, `onnx.checker` and most
//! runtimes' parsers fail on a larger ModelProto ("message too large" / "exceeds maximum protobuf
//! size of 2GB"), and tools that re-serialize a model near the limit (an optimizer adding a few
//! nodes, a converter inlining constants) push it over.
//!
//! ## Example
//! `torch.onnx.export` of a 1.5 B-parameter fp32 model without external data, or
//! `onnx.save(model, "m.onnx")` of such a model after `onnx.load` with `load_external_data=True`.
//!
//! ## Fix
//! PyTorch side: export with `external_data=True` (dynamo exporter) — the TorchScript exporter
//! switches to external data by itself above 2 GB. ONNX side:
//! `onnx.save_model(m, "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
//! location="m.onnx.data")`.

use super::{push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;
use onnx_proto::Message;

/// The largest protobuf message size (`INT_MAX` bytes).
pub(crate) const LIMIT: u64 = i32::MAX as u64;

/// The severity for a protobuf of `size` bytes against `limit`: an error over it, an info above
/// 90 % of it.
fn classify(size: u64, limit: u64) -> Option<Severity> {
    if size > limit {
        Some(Severity::Error)
    } else if size > limit / 10 * 9 {
        Some(Severity::Info)
    } else {
        None
    }
}

fn gib(n: u64) -> String {
    format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64)
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    check(cx, LIMIT, out);
}

fn check(cx: &Cx, limit: u64, out: &mut Vec<Finding>) {
    let total = cx.model.proto.encoded_len() as u64;
    let external: u64 = cx.model.external.iter().map(|e| e.length).sum();
    let inline = total.saturating_sub(external);
    let Some(severity) = classify(inline, limit) else {
        return;
    };
    let stored = if cx.model.external.is_empty() {
        "the model has no external data".to_string()
    } else {
        format!(
            "{} tensors ({}) are already external",
            cx.model.external.len(),
            gib(external)
        )
    };
    let verdict = if severity == Severity::Error {
        "over the protobuf limit of 2 GiB: onnx and most runtimes cannot load or save it"
    } else {
        "close to the protobuf limit of 2 GiB"
    };
    push(
        out,
        None,
        Code::ProtobufSizeLimit,
        severity,
        cx.file_location(),
        format!(
            "the serialized ModelProto is {} ({inline} bytes; {stored}), {verdict}",
            gib(inline)
        ),
        "store the weights as external data: torch.onnx.export(..., external_data=True), or onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True)".into(),
    );
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint, Cx};
    use super::*;

    #[test]
    fn thresholds() {
        assert_eq!(classify(100, 1000), None);
        assert_eq!(classify(900, 1000), None);
        assert_eq!(classify(901, 1000), Some(Severity::Info));
        assert_eq!(classify(1000, 1000), Some(Severity::Info));
        assert_eq!(classify(1001, 1000), Some(Severity::Error));
        // 1.8 GiB is close, 2 GiB is over.
        assert_eq!(classify(1_900_000_000, LIMIT), None);
        assert_eq!(classify(1_950_000_000, LIMIT), Some(Severity::Info));
        assert_eq!(classify(1 << 31, LIMIT), Some(Severity::Error));
    }

    fn model_of(bytes: usize) -> onnx_ir::Model {
        let mut w = int64("w", &[]);
        w.data_type = Some(tensor::DataType::Uint8 as i32);
        w.dims = vec![bytes as i64];
        w.raw_data = Some(vec![0u8; bytes].into());
        model(13, vec![node("Identity", "i", &["w"], &["y"])], vec![w])
    }

    #[test]
    fn a_model_over_a_small_limit_is_an_error_and_near_it_an_info() {
        let m = model_of(10_000);
        let cx = Cx::new(&m, "m.onnx", &[]);
        let mut out = Vec::new();
        check(&cx, 9_000, &mut out);
        assert_eq!(summary(&out)[0].2, "error");
        assert!(out[0].diagnostic.message.contains("has no external data"));
        out.clear();
        check(&cx, 10_500, &mut out);
        assert_eq!(summary(&out)[0].2, "info");
        out.clear();
        check(&cx, 20_000, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn external_tensors_do_not_count() {
        let mut m = model_of(10_000);
        m.external.push(onnx_ir::ExternalTensor {
            tensor: "w".into(),
            location: "m.onnx.data".into(),
            offset: 0,
            length: 10_000,
        });
        let cx = Cx::new(&m, "m.onnx", &[]);
        let mut out = Vec::new();
        check(&cx, 9_000, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn small_models_are_clean() {
        let f = lint(&model_of(16), "m.onnx", &[]);
        assert!(summary(&f).iter().all(|s| s.1 != "ODT034"));
    }
}
