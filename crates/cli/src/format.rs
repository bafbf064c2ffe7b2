//! The `--format` option shared by every verb.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// For people: aligned text.
    #[default]
    Human,
    /// For programs: one JSON document with a stable schema (see docs/cli.md).
    Json,
}
