//! Static analysis of ONNX models: the spec checker today; shape inference and deployment lints
//! build on it.
//!
//! [`check`] returns every finding as a [`diagnostics::Diagnostic`] with a code from [`Code`] (one
//! table, `codes.rs`, with name, severity and summary; docs/checks.md is generated from it).
//!
//! **Architecture Invariant:** analysis reads models and reports; it never changes a model and never
//! runs one. It knows op *signatures* through `opset`, not kernels.

mod check;
mod codes;
mod infer;

pub use check::{check, check_with};
pub use codes::{Code, ALL_CODES};
pub use infer::{apply, infer, type_proto, Inference};
pub mod lints;
pub mod targets;
pub use lints::{lint, lint_with, Finding, RULES};
