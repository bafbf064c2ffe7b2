//! `onnx-doctor rule CODE`: every finding code of every verb has a page.

mod common;

use common::{run, stderr, stdout};

#[test]
fn every_check_and_target_code_has_a_page() {
    for c in analysis::ALL_CODES {
        let o = run(&["rule", c.code(), "--format", "json"]);
        assert!(o.status.success(), "{}: {}", c.code(), stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["code"], c.code());
        assert_eq!(v["summary"], c.summary());
        // Deployment lints carry their documentation with the four sections.
        if c.code().starts_with("ODT") {
            let doc = v["doc"]
                .as_str()
                .unwrap_or_else(|| panic!("{} has no doc", c.code()));
            for section in [
                "## What it does",
                "## Why is this bad?",
                "## Example",
                "## Fix",
            ] {
                assert!(doc.contains(section), "{} lacks '{section}'", c.code());
            }
        }
    }
}

#[test]
fn lint_rules_and_lowercase_codes_resolve() {
    let o = run(&["rule", "odl001"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("ODL001 (mask-index-assignment)"),
        "{}",
        stdout(&o)
    );
    let o = run(&["rule", "ODC050"]);
    assert_eq!(stdout(&o), "ODC050 (value-undefined) [error]\nA node input or graph output names a value nothing defines.\n");
}

#[test]
fn unknown_code_is_an_input_error() {
    let o = run(&["rule", "NOPE1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown code 'NOPE1'"),
        "{}",
        stderr(&o)
    );
}
