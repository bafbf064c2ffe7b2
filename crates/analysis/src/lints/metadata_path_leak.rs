//! Flags model and node metadata that leak absolute paths of the exporting machine.
//!
//! ## What it does
//! Looks at the model's `metadata_props`, `doc_string`s of the model, graph and nodes, and node
//! `metadata_props` (where the PyTorch exporter writes `pkg.torch.onnx.stack_trace` and
//! `pkg.torch.onnx.name_scopes`) for absolute paths, and reports the model once and each node
//! once. A path is any POSIX path of two or more components starting at a word boundary
//! (`/work/main/m.py`, `/builds/ci/x`, `/root/.pyenv/...`), a Windows path (`C:\…`, `C:/…`,
//! `\\host\share`) or a `file://` URL. Node-scope names are not paths: a `/a/b…` token whose first
//! component starts one of the model's TorchScript-scoped node or value names (`/encoder/layer.0/…`)
//! is skipped, unless it is the `File "…"` of a Python stack frame or ends in a file name with an
//! extension (`….py`).
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
use std::collections::HashSet;

/// Where a path token ends.
fn token_end(s: &str) -> usize {
    s.find(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '\'' | '`' | ',' | ';' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '|'
            )
    })
    .unwrap_or(s.len())
}

/// `/a/b.py:12.` → `/a/b.py` (a trailing `:line` and punctuation are not part of the path).
fn trim_path(p: &str) -> &str {
    let p = p.trim_end_matches(['.', ':', ';']);
    match p.rsplit_once(':') {
        Some((head, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => p,
    }
}

/// Does the last component look like a file name with an extension (`model.py`, `libx.so`)?
fn has_extension(path: &str) -> bool {
    let last = path.rsplit(['/', '\\']).next().unwrap_or("");
    last.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && ext.len() <= 8
            && ext.starts_with(|c: char| c.is_ascii_alphabetic())
            && ext.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The first absolute path in `text`, if any: a POSIX path of two or more components starting at
/// a word boundary (`/work/main/m.py`, `/builds/x/y`), a Windows path (`C:\…`, `C:/…`, `\\host\share`)
/// or a `file://` URL. POSIX tokens whose first component is one of `scopes` (the first component
/// of the model's TorchScript-scoped node and value names, e.g. `encoder` for
/// `/encoder/layer.0/MatMul`) are names, not paths — unless they are a `File "…"` frame of a
/// Python stack trace or end in a file name with an extension.
pub(crate) fn absolute_path<'t>(text: &'t str, scopes: &HashSet<&str>) -> Option<&'t str> {
    let b = text.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        let prev = if i == 0 { None } else { Some(b[i - 1]) };
        let boundary = prev.is_none_or(|p| {
            p.is_ascii_whitespace() || matches!(p, b'"' | b'\'' | b'`' | b'(' | b'[' | b'=' | b',')
        });
        let rest = &text[i..];
        if rest.starts_with("file://") && prev.is_none_or(|p| !p.is_ascii_alphanumeric()) {
            let tok = trim_path(&rest[..token_end(rest)]);
            if tok.len() > "file://".len() {
                return Some(tok);
            }
        }
        if !boundary {
            continue;
        }
        match c {
            b'/' => {
                let tok = trim_path(&rest[..token_end(rest)]);
                let parts: Vec<&str> = tok[1..].split('/').collect();
                let components = parts.iter().filter(|p| !p.is_empty()).count();
                if parts[0].is_empty() || components < 2 {
                    continue;
                }
                let frame = text[..i].ends_with("File \"");
                if frame || has_extension(tok) || !scopes.contains(parts[0]) {
                    return Some(tok);
                }
            }
            b'\\' if rest.starts_with("\\\\") => {
                let tok = trim_path(&rest[..token_end(rest)]);
                if tok[2..].split('\\').filter(|p| !p.is_empty()).count() >= 2 {
                    return Some(tok);
                }
            }
            c if c.is_ascii_alphabetic()
                && b.get(i + 1) == Some(&b':')
                && matches!(b.get(i + 2), Some(b'\\' | b'/'))
                && b.get(i + 3)
                    .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'_' || *n == b'.') =>
            {
                return Some(trim_path(&rest[..token_end(rest)]));
            }
            _ => {}
        }
    }
    None
}

/// First components of the model's `/`-scoped node and value names (TorchScript's
/// `/encoder/layer.0/attn/MatMul`, `/encoder/layer.0/attn/MatMul_output_0`).
fn scope_roots<'m>(cx: &Cx<'m>) -> HashSet<&'m str> {
    let mut names: Vec<&'m str> = Vec::new();
    for n in &cx.nodes {
        names.push(n.name());
        names.extend(n.output.iter().map(String::as_str));
    }
    names
        .into_iter()
        .filter_map(|n| n.strip_prefix('/')?.split('/').next())
        .filter(|r| !r.is_empty())
        .collect()
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let scopes = scope_roots(cx);
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
        if let Some(path) = absolute_path(value, &scopes) {
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
            if let Some(path) = absolute_path(value, &scopes) {
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
    use std::collections::HashSet;

    fn path(text: &str) -> Option<&str> {
        absolute_path(text, &HashSet::new())
    }

    #[test]
    fn paths_are_found_in_unix_and_windows_form() {
        assert_eq!(
            path("File \"/home/alice/m.py\", line 3"),
            Some("/home/alice/m.py")
        );
        assert_eq!(
            path("at C:\\Users\\bob\\m.py line 3"),
            Some("C:\\Users\\bob\\m.py")
        );
        assert_eq!(path("model.py:12 in forward"), None);
    }

    #[test]
    fn any_root_counts_not_a_fixed_list() {
        for (text, want) in [
            (
                "File \"/work/main/scripts/export.py\", line 771, in forward",
                "/work/main/scripts/export.py",
            ),
            (
                "/builds/group/proj/model.py(12): forward",
                "/builds/group/proj/model.py",
            ),
            ("checkpoint /srv/models/run3", "/srv/models/run3"),
            ("at /__w/repo/repo/m.py:40.", "/__w/repo/repo/m.py"),
            ("saved from file:///data/x/m.onnx", "file:///data/x/m.onnx"),
            ("D:/work/m.py", "D:/work/m.py"),
            ("\\\\fileserver\\share\\m.py", "\\\\fileserver\\share\\m.py"),
        ] {
            assert_eq!(path(text), Some(want), "{text}");
        }
        for text in [
            "/Relu",                                 // one component
            "https://github.com/pytorch/pytorch",    // a URL, not a local path
            "__main__.LinReluM/fc: torch.nn.Linear", // dynamo's namespace metadata
            "a/b/c.py relative",                     // relative
            "ratio 1/2/3",
            "['', 'encoder', 'encoder.layer.0']",
        ] {
            assert_eq!(path(text), None, "{text}");
        }
    }

    #[test]
    fn node_scope_names_are_not_paths_but_frames_and_files_are() {
        let scopes: HashSet<&str> = ["encoder"].into();
        assert_eq!(
            absolute_path("fused from /encoder/layer.0/attn/MatMul", &scopes),
            None
        );
        assert_eq!(
            absolute_path("input /encoder/layer.0/attn/MatMul_output_0", &scopes),
            None
        );
        // The same first component in a stack frame or with a file name is a path.
        assert_eq!(
            absolute_path("File \"/encoder/src/m\", line 1", &scopes),
            Some("/encoder/src/m")
        );
        assert_eq!(
            absolute_path("/encoder/src/m.py(3): forward", &scopes),
            Some("/encoder/src/m.py")
        );
        // Without the scope in the model, the same token is a path.
        assert_eq!(
            absolute_path("/encoder/layer.0/attn", &HashSet::new()),
            Some("/encoder/layer.0/attn")
        );
    }

    #[test]
    fn a_doc_string_naming_scoped_nodes_is_not_reported() {
        let mut n = node(
            "MatMul",
            "/encoder/layer.0/attn/MatMul",
            &["a", "b"],
            &["c"],
        );
        n.doc_string =
            Some("fused from /encoder/layer.0/attn/Mul and /encoder/layer.0/attn/Add".into());
        let mut r = node("Relu", "/r/Relu", &["c"], &["d"]);
        r.doc_string = Some("/work/main/scripts/export.py(771): forward".into());
        let m = model(17, vec![n, r], vec![]);
        let f = summary(&lint(&m, "m.onnx", &[]));
        assert_eq!(
            f,
            vec![(
                String::new(),
                "ODT032".into(),
                "warning".into(),
                "/r/Relu".into()
            )]
        );
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
