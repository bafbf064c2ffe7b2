//! Flags model and node metadata that leak absolute paths of the exporting machine.
//!
//! ## What it does
//! Looks at the model's `metadata_props`, `doc_string`s of the model, graph and nodes, and node
//! `metadata_props` (where the PyTorch exporter writes `pkg.torch.onnx.stack_trace` and
//! `pkg.torch.onnx.name_scopes`) for absolute paths (`/home/…`, `/Users/…`, `C:\…`), and reports
//! the model once and each node once.
//!
//! ## Why is this bad?
//! A shipped model then discloses user names, directory layouts and source file names of the
//! machine that exported it, and the bytes differ from one machine to the next.
//!
//! ## Example
//! A dynamo export keeps `pkg.torch.onnx.stack_trace = 'File "/home/alice/proj/model.py", line 12'`.
//!
//! ## Fix
//! PyTorch side: strip the metadata before saving (clear `metadata_props` and `doc_string`).
//! ONNX side: remove the `pkg.torch.onnx.stack_trace` entries and doc strings with onnx.helper.

use super::{module_suffix, node_label, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;

const UNIX_ROOTS: &[&str] = &[
    "/home/",
    "/Users/",
    "/root/",
    "/tmp/",
    "/opt/",
    "/mnt/",
    "/var/",
    "/workspace/",
    "/usr/",
];

/// The first absolute path in `text`, if any.
pub(crate) fn absolute_path(text: &str) -> Option<&str> {
    let token_end = |s: &str| {
        s.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ')' | '('))
            .unwrap_or(s.len())
    };
    for root in UNIX_ROOTS {
        if let Some(i) = text.find(root) {
            let rest = &text[i..];
            return Some(&rest[..token_end(rest)]);
        }
    }
    let b = text.as_bytes();
    (0..b.len().saturating_sub(2)).find_map(|i| {
        let drive = b[i].is_ascii_alphabetic() && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
        (drive && b[i + 1] == b':' && b[i + 2] == b'\\').then(|| {
            let rest = &text[i..];
            &rest[..token_end(rest)]
        })
    })
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let p = &cx.model.proto;
    let model_texts = p
        .metadata_props
        .iter()
        .map(|e| (e.key().to_string(), e.value()))
        .chain(std::iter::once(("doc_string".to_string(), p.doc_string())))
        .chain(std::iter::once((
            "graph doc_string".to_string(),
            cx.model.graph().doc_string(),
        )));
    for (key, value) in model_texts {
        if let Some(path) = absolute_path(value) {
            push(
                out,
                None,
                Code::MetadataPathLeak,
                Severity::Warning,
                cx.file_location(),
                format!("model metadata '{key}' contains the absolute path {path}"),
                "strip metadata_props and doc_string before shipping the model".into(),
            );
            break;
        }
    }
    for n in &cx.nodes {
        let texts = n
            .metadata_props
            .iter()
            .map(|e| (e.key(), e.value()))
            .chain(std::iter::once(("doc_string", n.doc_string())));
        for (key, value) in texts {
            if let Some(path) = absolute_path(value) {
                push(
                    out,
                    None,
                    Code::MetadataPathLeak,
                    Severity::Warning,
                    cx.node_location(n),
                    format!(
                        "{}{}: metadata '{key}' contains the absolute path {path}",
                        node_label(n),
                        module_suffix(n)
                    ),
                    "strip pkg.torch.onnx.stack_trace and doc strings before shipping the model"
                        .into(),
                );
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};
    use super::absolute_path;
    use onnx_proto::StringStringEntryProto;

    #[test]
    fn paths_are_found_in_unix_and_windows_form() {
        assert_eq!(
            absolute_path("File \"/home/alice/m.py\", line 3"),
            Some("/home/alice/m.py")
        );
        assert_eq!(
            absolute_path("at C:\\Users\\bob\\m.py line 3"),
            Some("C:\\Users\\bob\\m.py")
        );
        assert_eq!(absolute_path("model.py:12 in forward"), None);
    }

    #[test]
    fn stack_trace_metadata_is_reported_on_its_node() {
        let mut n = node(
            "MatMul",
            "/encoder/layer.0/attn/MatMul",
            &["a", "b"],
            &["c"],
        );
        n.metadata_props.push(StringStringEntryProto {
            key: Some("pkg.torch.onnx.stack_trace".into()),
            value: Some("File \"/home/alice/proj/model.py\", line 12, in forward".into()),
        });
        let m = model(18, vec![n, node("Relu", "/r/Relu", &["c"], &["d"])], vec![]);
        let f = lint(&m, "m.onnx", &[]);
        assert_eq!(
            summary(&f),
            vec![(
                String::new(),
                "ODT032".into(),
                "warning".into(),
                "/encoder/layer.0/attn/MatMul".into()
            )]
        );
        assert!(f[0].diagnostic.message.contains("encoder.layer.0.attn"));
    }
}
