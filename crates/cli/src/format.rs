//! The `--format` option shared by every verb.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// For people: aligned text.
    #[default]
    Human,
    /// For programs: one JSON document with a stable schema (see docs/cli.md).
    Json,
}

/// `--format` of verbs that report findings (diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FindingsFormat {
    /// For people: `location: CODE [severity] message`, the source line when there is one, help.
    #[default]
    Human,
    /// For programs: `{"file", "diagnostics": [...], "summary": {...}}` (see docs/cli.md).
    Json,
    /// SARIF 2.1.0, for code-scanning tools.
    Sarif,
}
