//! Model-level facts: IR version and opset imports.

use super::{domain, domain_display, Cx};
use crate::Code;
use onnx_ir::Model;
use std::collections::HashSet;

/// The IR version each ai.onnx opset was released with (onnx.helper.VERSION_TABLE, onnx 1.23.2).
const OPSET_RELEASE_IR: &[(i64, i64)] = &[
    (1, 3),
    (5, 3),
    (6, 3),
    (7, 3),
    (8, 3),
    (9, 4),
    (10, 5),
    (11, 6),
    (12, 7),
    (13, 7),
    (14, 7),
    (15, 8),
    (16, 8),
    (17, 8),
    (18, 8),
    (19, 9),
    (20, 9),
    (21, 10),
    (22, 10),
    (23, 11),
    (24, 12),
    (25, 13),
    (26, 13),
    (27, 13),
    (28, 14),
];

pub(super) fn check(cx: &mut Cx, model: &Model) {
    let p = &model.proto;
    let at = cx.at_model();
    match p.ir_version {
        None => {
            cx.report(Code::IrVersionMissing, at.clone(), "ir_version is not set".into())
                .help = Some("set ModelProto.ir_version (torch.onnx.export always does; a hand-built model may not)".into());
        }
        Some(v) if !(1..=onnx_proto::IR_VERSION).contains(&v) => {
            cx.report(
                Code::IrVersionUnknown,
                at.clone(),
                format!(
                    "ir_version {v} is not an ONNX IR version (this tool knows 1 to {})",
                    onnx_proto::IR_VERSION
                ),
            );
        }
        _ => {}
    }
    if cx.ir_version >= 3 && p.opset_import.is_empty() {
        cx.report(
            Code::OpsetImportMissing,
            at.clone(),
            format!(
                "IR version {} requires opset_import, and the model has none",
                cx.ir_version
            ),
        );
    }
    let mut seen = HashSet::new();
    for o in &p.opset_import {
        let d = domain(o.domain());
        if !seen.insert(d) {
            cx.report(
                Code::OpsetImportDuplicate,
                at.clone(),
                format!("domain '{}' is imported more than once", domain_display(d)),
            );
        }
        if let Some(latest) = opset::latest_opset(d).filter(|&l| o.version() > l) {
            cx.report(
                Code::OpsetNewerThanKnown,
                at.clone(),
                format!(
                    "{} opset {} is newer than the newest this tool knows ({latest}); ops are checked against opset {latest}",
                    domain_display(d),
                    o.version()
                ),
            );
        }
    }
    if let (Some(&opset), Some(ir)) = (cx.opsets.get(""), p.ir_version) {
        let released = OPSET_RELEASE_IR
            .iter()
            .rev()
            .find(|(o, _)| *o <= opset)
            .map(|(_, ir)| *ir);
        if let Some(need) = released.filter(|&need| ir >= 1 && ir < need) {
            cx.report(
                Code::IrTooOldForOpset,
                at,
                format!("ir_version {ir} is older than IR {need}, which ai.onnx opset {opset} was released with"),
            )
            .help = Some(format!("set ir_version to {need} or later; onnxruntime refuses some such models"));
        }
    }
}
