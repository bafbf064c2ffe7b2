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
use unicode_width::UnicodeWidthChar;

/// Columns a tab takes in an excerpt.
const TAB: usize = 4;

/// Renders diagnostics; `source` gives the text of a file for excerpts (None: no excerpt).
pub fn render_human(diagnostics: &[Diagnostic], source: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    // The last file's text and line starts: diagnostics come grouped by file, and asking for the
    // text and scanning it again for every diagnostic made a file with many findings quadratic.
    let mut current: Option<(String, Option<String>, Vec<usize>)> = None;
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
            if current.as_ref().is_none_or(|(f, _, _)| f != file) {
                let text = source(file);
                let starts = text.as_deref().map_or_else(Vec::new, |t| {
                    std::iter::once(0)
                        .chain(t.match_indices('\n').map(|(i, _)| i + 1))
                        .collect()
                });
                current = Some((file.clone(), text, starts));
            }
            let excerpt = current.as_ref().and_then(|(_, text, starts)| {
                let text = text.as_deref()?;
                let start = *starts.get(line.saturating_sub(1))?;
                let rest = text.get(start..)?;
                // As `str::lines` gives it: up to the newline, without a `\r` before it.
                let end = rest.find('\n').unwrap_or(rest.len());
                let l = &rest[..end];
                (start < text.len() || end > 0)
                    .then(|| l.strip_suffix('\r').unwrap_or(l).to_owned())
            });
            if let Some(text) = excerpt {
                let gutter = line.to_string().len();
                let pad = " ".repeat(gutter);
                // Tabs shown as four spaces (as ruff does), so the caret lines up whatever the
                // terminal's tab stops; wide characters (CJK, full-width forms) take two columns.
                let width: usize = text
                    .chars()
                    .take(column.saturating_sub(1))
                    .map(|c| {
                        if c == '\t' {
                            TAB
                        } else {
                            UnicodeWidthChar::width(c).unwrap_or(0)
                        }
                    })
                    .sum();
                let caret = " ".repeat(width);
                let text = text.replace('\t', &" ".repeat(TAB));
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

    /// The excerpt and caret lines rendered for a finding at `column` of a one-line file.
    fn excerpt(line: &str, column: usize) -> (String, String) {
        let d = Diagnostic::new(
            "ODL004",
            crate::Severity::Error,
            "frozen".to_string(),
            Location::Source {
                file: "m.py".into(),
                line: 1,
                column,
            },
        );
        let text = render_human(&[d], &|_| Some(format!("{line}\n")));
        let lines: Vec<&str> = text.lines().collect();
        (
            lines[2].strip_prefix("1 | ").unwrap().to_string(),
            lines[3].strip_prefix("  | ").unwrap().to_string(),
        )
    }

    #[test]
    fn a_caret_under_a_tab_indented_line_points_at_its_column() {
        let (source, caret) = excerpt("\t\treturn x.tolist()", 10);
        assert_eq!(source, "        return x.tolist()");
        assert_eq!(&source[caret.len() - 1..caret.len() + 8], "x.tolist(");
    }

    #[test]
    fn a_caret_after_wide_characters_points_at_its_column() {
        // `print("结果", x.item())`: the two CJK characters take two terminal columns each:
        // 4 spaces + `print("` (7) + 4 columns + `", ` (3) = 18 columns before `x`.
        let (_, caret) = excerpt("    print(\"结果\", x.item())", 17);
        assert_eq!(caret, format!("{}^", " ".repeat(18)));
    }

    #[test]
    fn excerpts_of_one_file_come_from_its_own_lines() {
        // Several diagnostics of one file (the file's text asked for once), a CRLF line, a line
        // past the end (no excerpt), then another file.
        let at = |file: &str, line| {
            Diagnostic::new(
                "ODL004",
                crate::Severity::Error,
                "frozen".to_string(),
                Location::Source {
                    file: file.into(),
                    line,
                    column: 1,
                },
            )
        };
        let text = render_human(
            &[at("a.py", 1), at("a.py", 3), at("a.py", 9), at("b.py", 2)],
            &|f| {
                Some(if f == "a.py" {
                    "one\r\ntwo\nthree\n".into()
                } else {
                    "uno\ndos".into()
                })
            },
        );
        let excerpts: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once(" | ").map(|(_, t)| t))
            .filter(|t| !t.trim().starts_with('^'))
            .collect();
        assert_eq!(excerpts, ["one", "three", "dos"]);
    }
}
