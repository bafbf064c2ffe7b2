//! Human output in the style of ruff:
//!
//! ```text
//! model.py:2:5: ODL001 [error] boolean-mask assignment exports as aten::index_put
//!   |
//! 2 |     x[mask] = 0
//!   |     ^
//!   = help: use torch.where(mask, 0, x)
//! ```

use crate::{Diagnostic, Location};
use std::fmt::Write as _;

/// Renders diagnostics; `source` gives the text of a file for excerpts (None: no excerpt).
pub fn render_human(diagnostics: &[Diagnostic], source: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let place = match &d.location {
            Location::Source { file, line, column } => format!("{file}:{line}:{column}"),
            Location::Node { file, node, op } => format!("{file}: node '{node}' ({op})"),
            Location::Value { file, value } => format!("{file}: value '{value}'"),
            Location::File { file } => file.clone(),
        };
        let _ = writeln!(
            out,
            "{place}: {} [{}] {}",
            d.code,
            d.severity.as_str(),
            d.message
        );
        if let Location::Source { file, line, column } = &d.location {
            if let Some(text) =
                source(file).and_then(|t| t.lines().nth(line.saturating_sub(1)).map(str::to_owned))
            {
                let gutter = line.to_string().len();
                let pad = " ".repeat(gutter);
                let caret = " ".repeat(column.saturating_sub(1));
                let _ = writeln!(out, "{pad} |\n{line} | {text}\n{pad} | {caret}^");
            }
        }
        if let Some(help) = &d.help {
            let _ = writeln!(out, "  = help: {help}");
        }
        if let Some(fix) = &d.fix {
            let kind = if fix.safe { "fix" } else { "unsafe fix" };
            let _ = writeln!(out, "  = {kind}: {}", fix.description);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn snapshot() {
        let text = render_human(&fixtures::sample(), &|f| {
            (f == "model.py").then(|| fixtures::SOURCE.to_string())
        });
        insta::assert_snapshot!(text);
    }
}
