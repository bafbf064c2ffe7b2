//! Flags initializers that are also listed as graph inputs.
//!
//! ## What it does
//! For models with IR version 4 or later (where initializers need not be inputs), reports once
//! when some main-graph inputs are initializers, naming how many and the first few.
//!
//! ## Why is this bad?
//! Runtimes must treat such weights as inputs a caller may override: constant folding and
//! weight pre-packing are disabled (ONNX Runtime warns about it), and tools list hundreds of
//! "inputs".
//!
//! ## Example
//! `torch.onnx.export(model, x, "m.onnx", keep_initializers_as_inputs=True)`.
//!
//! ## Fix
//! PyTorch side: drop `keep_initializers_as_inputs=True`. ONNX side: remove the initializers from
//! `graph.input` (onnxruntime's `tools/python/remove_initializer_from_input.py` does it).

use super::{push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;
use std::collections::HashSet;

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.model.proto.ir_version.unwrap_or(0) < 4 {
        return;
    }
    let g = cx.model.graph();
    let inits: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let listed: Vec<&str> = g
        .input
        .iter()
        .map(|i| i.name())
        .filter(|n| inits.contains(n))
        .collect();
    if listed.is_empty() {
        return;
    }
    let shown: Vec<&str> = listed.iter().take(3).copied().collect();
    push(
        out,
        None,
        Code::InitializerAsInput,
        Severity::Warning,
        cx.file_location(),
        format!(
            "{} initializer(s) are also graph inputs ({}{}), so runtimes must treat them as overridable",
            listed.len(),
            shown.join(", "),
            if listed.len() > 3 { ", ..." } else { "" }
        ),
        "export without keep_initializers_as_inputs=True, or remove the initializers from graph.input".into(),
    );
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};
    use onnx_proto::ValueInfoProto;

    #[test]
    fn weights_listed_as_inputs_are_reported_once() {
        let mut m = model(
            13,
            vec![node("Add", "a", &["x", "w"], &["y"])],
            vec![int64("w", &[1])],
        );
        let g = m.proto.graph.as_mut().unwrap();
        for name in ["x", "w"] {
            g.input.push(ValueInfoProto {
                name: Some(name.into()),
                ..Default::default()
            });
        }
        let f = lint(&m, "m.onnx", &[]);
        assert_eq!(
            summary(&f),
            vec![(
                String::new(),
                "ODT030".into(),
                "warning".into(),
                String::new()
            )]
        );
        assert!(f[0]
            .diagnostic
            .message
            .starts_with("1 initializer(s) are also graph inputs (w)"));
    }
}
