//! JSON output: `{"diagnostics": [...], "summary": {"error": n, "warning": n, "info": n}}`.

use crate::{Diagnostic, Severity};

pub fn render_json(diagnostics: &[Diagnostic]) -> serde_json::Value {
    let count = |s: Severity| diagnostics.iter().filter(|d| d.severity == s).count();
    serde_json::json!({
        "diagnostics": diagnostics,
        "summary": {
            "error": count(Severity::Error),
            "warning": count(Severity::Warning),
            "info": count(Severity::Info),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn snapshot() {
        insta::assert_json_snapshot!(render_json(&fixtures::sample()));
    }
}
