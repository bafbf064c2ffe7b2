//! ## What it does
//! Reports a file that is not valid Python, at the first place the parser gives up.
//!
//! ## Why is this bad?
//! Nothing in the file can be checked, and the exporter cannot import the module either:
//! `torch.onnx.export` never gets to trace a model whose source does not parse.
//!
//! ## Example
//! ```python
//! def forward(self, x)
//!     return x
//! ```
//!
//! ## Fix
//! Correct the syntax; the other rules then run on the file.
//! ```python
//! def forward(self, x):
//!     return x
//! ```

use crate::registry::{FixKind, Rule};
use diagnostics::Severity;

pub(crate) const RULE: Rule = Rule {
    code: "ODL000",
    name: "syntax-error",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "the file is not valid Python",
    source: include_str!("syntax_error.rs"),
};
