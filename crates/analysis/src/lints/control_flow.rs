//! Flags If, Loop and Scan nodes, with the target's restrictions and the likely PyTorch cause.
//!
//! ## What it does
//! Reports each If / Loop / Scan node (subgraphs included) once per target that implements it,
//! with the severity the profile gives `control-flow` and the restrictions it lists for the op
//! (TensorRT: If branches must produce outputs of the same rank / broadcastable shapes; Loop scan
//! outputs cannot have a dynamic length).
//!
//! ## Why is this bad?
//! Control flow blocks constant folding and fusion, and backends accept it only in restricted
//! forms: a graph that passes the checker can still be refused, or run slowly.
//!
//! ## Example
//! `if x.sum() > 0:` in a scripted module, `x.squeeze(1)` on a dim that is dynamic at export, a
//! `torch.jit.script` loop, or `repeat_interleave` with a tensor of repeats.
//!
//! ## Fix
//! PyTorch side: replace data-dependent `if` with `torch.where`, squeeze with explicit shapes,
//! unroll loops with a static trip count, trace instead of script. ONNX side: fold the If when the
//! condition is constant (onnxsim).

use super::{cite, module_suffix, node_label, push, severity, Cx, Finding};
use crate::targets::Support;
use crate::Code;

fn cause(op: &str) -> &'static str {
    match op {
        "If" => "likely from a data-dependent Python `if` in a scripted module or `squeeze(dim)` on a dim that was dynamic at export",
        "Loop" => "likely from a scripted loop (torch.jit.script) or `repeat_interleave` with tensor repeats",
        _ => "likely from a scripted loop or an RNN exported as a loop",
    }
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    for n in cx.nodes.iter().filter(|n| super::default_domain(n)) {
        let op = n.op_type();
        if !matches!(op, "If" | "Loop" | "Scan") {
            continue;
        }
        for &p in cx.targets {
            if !matches!(p.support("", op, cx.opset), Support::Yes(_)) {
                continue;
            }
            let Some(h) = p.hazard("control-flow") else {
                continue;
            };
            let notes: Vec<&str> = p
                .restrictions(op)
                .filter_map(|r| r.note.as_deref())
                .collect();
            let restriction = if notes.is_empty() {
                h.note.clone()
            } else {
                notes.join(" ")
            };
            push(
                out,
                Some(p),
                Code::ControlFlow,
                severity(&h.severity),
                cx.node_location(n),
                format!("{}{}, {}; on {} v{}: {restriction}", node_label(n), module_suffix(n), cause(op), p.backend, p.version),
                format!("trace with static shapes or use torch.where instead of Python control flow; {}", cite(p, &h.source)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    #[test]
    fn if_is_a_warning_on_tensorrt_and_info_on_openvino() {
        let m = model(13, vec![node("If", "/block/If", &["c"], &["y"])], vec![]);
        let f: Vec<_> = lint(&m, "m.onnx", &targets("tensorrt-10,openvino"))
            .into_iter()
            .filter(|f| f.diagnostic.code == "ODT021")
            .collect();
        assert_eq!(
            summary(&f),
            vec![
                (
                    "tensorrt-10".into(),
                    "ODT021".into(),
                    "warning".into(),
                    "/block/If".into()
                ),
                (
                    "openvino".into(),
                    "ODT021".into(),
                    "info".into(),
                    "/block/If".into()
                ),
            ]
        );
        assert!(
            f[0].diagnostic.message.contains("same rank"),
            "{}",
            f[0].diagnostic.message
        );
        assert!(f[0].diagnostic.message.contains("PyTorch module `block`"));
    }
}
