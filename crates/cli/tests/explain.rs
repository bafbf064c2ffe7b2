//! `onnx-doctor explain`, end to end: errors and tracebacks on stdin or in files, rule docs.

mod common;

use common::{stderr, stdout, workspace};
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn explain_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
        .arg("explain")
        .args(args)
        .current_dir(workspace())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn traceback(user_file: &str) -> String {
    format!(
        r#"Traceback (most recent call last):
  File "{user_file}", line 3, in <module>
    torch.onnx.export(model, (x, mask), "m.onnx", opset_version=16)
  File "/opt/conda/lib/python3.10/site-packages/torch/onnx/utils.py", line 506, in export
    _export(
  File "{user_file}", line 7, in forward
    x[mask, 1:] = 0
  File "/opt/conda/lib/python3.10/site-packages/torch/onnx/symbolic_opset11.py", line 187, in index_put
    return torch._C._jit_onnx_convert_pattern_from_subblock(block, node, env)
RuntimeError: Only consecutive 1-d tensor indices are supported in exporting aten::index_put to ONNX.Check https://pytorch.org/docs/stable/onnx.html#indexing for details
"#
    )
}

#[test]
fn a_traceback_is_recognised_and_points_at_the_user_line() {
    let dir = tempfile::tempdir().unwrap();
    let user = dir.path().join("net.py");
    std::fs::write(&user, "import torch\n\ntorch.onnx.export(...)\n\ndef forward(self, x, mask):\n    # current source\n    x[mask, 1:] = 0.0  # edited since\n").unwrap();
    let o = explain_stdin(&[], &traceback(user.to_str().unwrap()));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o).replace(user.to_str().unwrap(), "<user>/net.py");
    assert!(
        out.contains("7 | x[mask, 1:] = 0.0  # edited since"),
        "the line comes from the file on disk: {out}"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn json_output_has_entry_and_user_frame() {
    let o = explain_stdin(
        &["-", "--format", "json"],
        &traceback("/home/u/proj/model.py"),
    );
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["recognised"], true);
    assert_eq!(v["entry"]["id"], "index-put-nonconsecutive");
    assert_eq!(v["entry"]["origin"], "pytorch-exporter");
    assert!(v["entry"]["facts"].as_array().unwrap().len() >= 2);
    assert_eq!(v["user_frame"]["file"], "/home/u/proj/model.py");
    assert_eq!(v["user_frame"]["line"], 7);
    assert_eq!(v["user_frame"]["function"], "forward");
    assert_eq!(
        v["user_frame"]["code"], "x[mask, 1:] = 0",
        "not on disk: the traceback's line"
    );
    assert!(v["error"]
        .as_str()
        .unwrap()
        .starts_with("RuntimeError: Only consecutive"));
}

#[test]
fn an_error_from_a_file_is_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("err.txt");
    std::fs::write(&f, "[TRT] [E] 4: [network.cpp::validate::3011] Error Code 4: Internal Error (Network has dynamic or shape inputs, but no optimization profile has been defined.)\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
        .args(["explain", f.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["entry"]["id"], "trt-no-optimization-profile");
    assert_eq!(v["user_frame"], serde_json::Value::Null);
}

#[test]
fn unknown_errors_are_said_to_be_unknown_and_keep_the_user_frame() {
    let text = "Traceback (most recent call last):\n  File \"/srv/app/infer.py\", line 42, in predict\n    out = helper(cfg)\n  File \"/usr/lib/python3.11/site-packages/yaml/__init__.py\", line 1, in load\n    raise KeyError\nKeyError: 'backbone'\n";
    let o = explain_stdin(&[], text);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(out.starts_with("unknown error: none of the"), "{out}");
    assert!(
        out.contains("your code: /srv/app/infer.py:42 in predict"),
        "{out}"
    );
    assert!(out.contains("42 | out = helper(cfg)"), "{out}");
    assert!(out.contains("error: KeyError: 'backbone'"), "{out}");
    let o = explain_stdin(&["--format", "json"], text);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["recognised"], false);
    assert_eq!(v["entry"], serde_json::Value::Null);
    assert_eq!(v["user_frame"]["line"], 42);
}

#[test]
fn a_rule_code_prints_the_rule_documentation() {
    let o = common::run(&["explain", "ODL001"]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(
        out.starts_with("ODL001 (mask-index-assignment) [warning, fix: unsafe]"),
        "{out}"
    );
    for s in [
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Fix",
    ] {
        assert!(out.contains(s), "{s}: {out}");
    }
    let o = common::run(&["explain", "opset-too-low", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["rule"]["code"], "ODL020");
}

#[test]
fn empty_or_missing_input_exits_2_with_one_line() {
    let o = explain_stdin(&[], "  \n");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("error: stdin: no error text") && err.trim_end().lines().count() == 1,
        "{err}"
    );
    let o = common::run(&["explain", "/nonexistent/err.txt"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("/nonexistent/err.txt") && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn logs_saved_as_utf16_or_with_stray_bytes_are_read_and_binary_data_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let message = "[TRT] [E] 4: [network.cpp::validate::3011] Error Code 4: Internal Error (Network has dynamic or shape inputs, but no optimization profile has been defined.)\r\n";
    let explain_file = |name: &str, bytes: &[u8]| {
        let f = dir.path().join(name);
        std::fs::write(&f, bytes).unwrap();
        Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
            .args(["explain", f.to_str().unwrap(), "--format", "json"])
            .output()
            .unwrap()
    };
    // PowerShell's `2> err.txt`: UTF-16LE with a byte order mark (and without one).
    let utf16: Vec<u8> = message.encode_utf16().flat_map(u16::to_le_bytes).collect();
    for (name, bytes) in [
        ("bom.txt", [&[0xFF, 0xFE][..], &utf16].concat()),
        ("plain16.txt", utf16.clone()),
        // A Latin-1 path in the log: one byte that is not UTF-8.
        (
            "latin1.txt",
            [b"C:\\Users\\Jos\xe9\\export.py\n", message.as_bytes()].concat(),
        ),
    ] {
        let o = explain_file(name, &bytes);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["entry"]["id"], "trt-no-optimization-profile", "{name}");
    }
    // The same bytes on stdin: not refused for the one byte that is not UTF-8.
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
        .args(["explain", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = [b"C:\\Users\\Jos\xe9\\export.py\n", message.as_bytes()].concat();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Saved from a terminal, with colour codes: shown without them.
    let o = explain_stdin(&[], &format!("\x1b[31m{}\x1b[0m\n", message.trim_end()));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("trt-no-optimization-profile") && !out.contains('\x1b'),
        "{out}"
    );
    // Saved in a legacy code page (GBK), cut short with NULs, or with a spinner's backspaces:
    // still a log.
    let gbk_path: &[u8] = b"D:\\\xc9\xee\xb6\xc8\xd1\xa7\xcf\xb0\\\xcf\xee\xc4\xbf\\\xd5\xd2\xb2\xbb\xb5\xbd\xd6\xb8\xb6\xa8\xb5\xc4\xc4\xa3\xbf\xe9\xa1\xa3\n";
    for (name, bytes) in [
        ("gbk.txt", [gbk_path, message.as_bytes()].concat()),
        ("nuls.txt", [message.as_bytes(), &[0u8; 4096][..]].concat()),
        (
            "spinner.txt",
            [&b"\x08".repeat(50)[..], message.as_bytes()].concat(),
        ),
        (
            "osc.txt",
            [
                &b"\x1b]8;;file:///x\x07link\x1b]8;;\x07 \x1b(B"[..],
                message.as_bytes(),
            ]
            .concat(),
        ),
    ] {
        let o = explain_file(name, &bytes);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["entry"]["id"], "trt-no-optimization-profile", "{name}");
        assert!(
            !v["error"].as_str().unwrap_or_default().contains('\x1b'),
            "{name}"
        );
    }
    // An image or a model handed over by mistake.
    let binary: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let o = explain_file("model.onnx", &binary);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("model.onnx: not text") && err.trim_end().lines().count() == 1,
        "{err}"
    );
}
