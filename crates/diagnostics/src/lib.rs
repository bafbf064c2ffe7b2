//! The one `Diagnostic` type every verb reports findings with, and its renderers:
//! human (ruff style: `path:line:col: CODE message`, excerpt, `help:`), JSON, SARIF 2.1.0.
//!
//! **Architecture Invariant:** this crate knows nothing of ONNX or Python beyond the names that
//! locations carry; rules and checks live elsewhere and only build `Diagnostic`s.

mod human;
mod json;
mod sarif;

pub use human::render_human;
pub use json::render_json;
pub use sarif::render_sarif;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Where a finding points: a place in a source file, or a node / value of a model file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Location {
    /// 1-based line and column in a text file.
    Source {
        file: String,
        line: usize,
        column: usize,
    },
    /// A node of a model, by name and op type.
    Node {
        file: String,
        node: String,
        op: String,
    },
    /// A value (graph input/output, initializer, node output) of a model.
    Value { file: String, value: String },
    /// The model or file as a whole.
    File { file: String },
}

impl Location {
    pub fn file(&self) -> &str {
        match self {
            Location::Source { file, .. }
            | Location::Node { file, .. }
            | Location::Value { file, .. }
            | Location::File { file } => file,
        }
    }
}

/// A suggested change; only `safe` fixes are applied without being asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    pub description: String,
    pub safe: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// A stable code such as `ODC001`.
    pub code: String,
    pub severity: Severity,
    pub message: String,
    pub location: Location,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

impl Diagnostic {
    pub fn new(
        code: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
        location: Location,
    ) -> Self {
        Diagnostic {
            code: code.into(),
            severity,
            message: message.into(),
            location,
            help: None,
            fix: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn with_fix(mut self, description: impl Into<String>, safe: bool) -> Self {
        self.fix = Some(Fix {
            description: description.into(),
            safe,
        });
        self
    }
}

/// The process exit code for a set of findings: 1 if any is an error, else 0.
pub fn exit_code(diagnostics: &[Diagnostic]) -> u8 {
    u8::from(diagnostics.iter().any(|d| d.severity == Severity::Error))
}

/// Describes a rule for SARIF's `tool.driver.rules` and for `explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    pub code: String,
    pub name: String,
    pub summary: String,
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub fn sample() -> Vec<Diagnostic> {
        vec![
            Diagnostic::new(
                "ODL001",
                Severity::Error,
                "boolean-mask assignment exports as aten::index_put",
                Location::Source {
                    file: "model.py".into(),
                    line: 2,
                    column: 5,
                },
            )
            .with_help("use torch.where(mask, 0, x)")
            .with_fix("replace with torch.where", false),
            Diagnostic::new(
                "ODC010",
                Severity::Warning,
                "node output 'y' is never used",
                Location::Node {
                    file: "model.onnx".into(),
                    node: "/fc/Gemm".into(),
                    op: "Gemm".into(),
                },
            ),
            Diagnostic::new(
                "ODC020",
                Severity::Info,
                "input 'x' has a symbolic batch dim",
                Location::Value {
                    file: "model.onnx".into(),
                    value: "x".into(),
                },
            ),
        ]
    }

    pub const SOURCE: &str = "def forward(self, x, mask):\n    x[mask] = 0\n    return x\n";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_code_follows_the_worst_severity() {
        let all = fixtures::sample();
        assert_eq!(exit_code(&all), 1);
        assert_eq!(exit_code(&all[1..]), 0);
        assert_eq!(exit_code(&[]), 0);
    }
}
