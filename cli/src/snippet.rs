//! An error as `ratebound check` shows it: the message, where it is, and the
//! line of the configuration with a caret under the column. Drawn by
//! `annotate-snippets` (rustc's layout), which measures display width: a
//! wide (CJK) character before the error takes two columns, a tab four.

use crate::source::Position;
use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};
use std::ffi::OsStr;

/// Columns for a source line and its margin: a longer line is shown around
/// the column, so the caret stays on screen.
const WIDTH: usize = 140;

/// Whether the report is drawn with colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    Plain,
    Styled,
}

impl Colour {
    /// Colours only on a terminal, and not when `NO_COLOR` is set to
    /// anything but the empty string (no-color.org): piped output and tests
    /// read plain text.
    pub fn choose(terminal: bool, no_color: Option<&OsStr>) -> Colour {
        if terminal && no_color.is_none_or(OsStr::is_empty) {
            Colour::Styled
        } else {
            Colour::Plain
        }
    }

    fn renderer(self) -> Renderer {
        match self {
            Colour::Plain => Renderer::plain(),
            Colour::Styled => Renderer::styled(),
        }
        .term_width(WIDTH)
    }
}

/// `error: MESSAGE`, then where it is in `file` and its line of `text` with
/// a caret (and `label`, if any) under the column; the message alone
/// without a position. Ends with a newline.
pub fn error(
    file: &str,
    text: &str,
    message: &str,
    at: Option<Position>,
    label: Option<&str>,
    colour: Colour,
) -> String {
    let title = Level::ERROR.primary_title(message);
    let group = match at {
        None => Group::with_title(title),
        Some(at) => match text.lines().nth(at.line.saturating_sub(1) as usize) {
            // A position past the text: where, without a line to show.
            None => title.element(
                Origin::path(file)
                    .line(at.line as usize)
                    .char_column(at.column as usize),
            ),
            Some(line) => title.element(
                Snippet::source(line)
                    .line_start(at.line as usize)
                    .path(file)
                    .annotation(
                        AnnotationKind::Primary
                            .span(span(line, at.column))
                            .label(label),
                    ),
            ),
        },
    };
    let mut s = colour.renderer().render(&[group]);
    s.push('\n');
    s
}

/// The bytes of the character at `column` (from 1, in characters) of
/// `line`; empty at the end of the line.
fn span(line: &str, column: u32) -> std::ops::Range<usize> {
    let mut chars = line.char_indices().skip(column.saturating_sub(1) as usize);
    match chars.next() {
        Some((i, c)) => i..i + c.len_utf8(),
        None => line.len()..line.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32, column: u32) -> Option<Position> {
        Some(Position { line, column })
    }

    #[test]
    fn the_caret_sits_under_the_column_after_wide_characters() {
        // 東 and 京 take two columns each on a terminal.
        let text = "{\"city\": \"東京\", \"limit\": 0}\n";
        let s = error("c.json", text, "$.limit: 0", at(1, 25), None, Colour::Plain);
        let caret = format!("  | {}^", " ".repeat(26));
        assert!(s.lines().any(|l| l == caret), "{s}");
        assert!(s.contains(" --> c.json:1:25\n"), "{s}");
    }

    #[test]
    fn the_message_where_it_is_the_line_and_the_caret() {
        let text = "routes:\n  - name: x\n    limit: 0\n";
        let s = error(
            "c.yaml",
            text,
            "$.limit: too small",
            at(3, 12),
            None,
            Colour::Plain,
        );
        assert_eq!(
            s,
            "error: $.limit: too small\n --> c.yaml:3:12\n  |\n3 |     limit: 0\n  |            ^\n"
        );
    }

    #[test]
    fn a_label_is_written_beside_the_caret() {
        let s = error(
            "c.yaml",
            "limit: 0\n",
            "m",
            at(1, 8),
            Some("not 0"),
            Colour::Plain,
        );
        assert!(s.contains("1 | limit: 0\n  |        ^ not 0\n"), "{s}");
    }

    #[test]
    fn without_a_position_the_message_alone_and_past_the_text_where_it_is() {
        assert_eq!(
            error("c.json", "{}", "$: m", None, None, Colour::Plain),
            "error: $: m\n"
        );
        let s = error("c.json", "{}", "$: m", at(9, 3), None, Colour::Plain);
        assert!(s.contains("c.json:9:3"), "{s}");
    }

    #[test]
    fn a_long_line_is_shown_around_the_column() {
        let line = format!("{}X{}", "a".repeat(300), "b".repeat(300));
        let s = error("c.json", &line, "m", at(1, 301), None, Colour::Plain);
        let shown = s
            .lines()
            .find(|l| l.starts_with("1 | "))
            .unwrap_or_default();
        let caret = s.lines().find(|l| l.ends_with('^')).unwrap_or_default();
        assert!(shown.chars().count() <= WIDTH, "{s}");
        let x = shown.find('X').unwrap_or_else(|| panic!("{s}"));
        assert_eq!(caret.len() - 1, x, "{s}");
    }

    #[test]
    fn colour_on_a_terminal_unless_no_color_says_otherwise() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert_eq!(Colour::choose(true, None), Colour::Styled);
        assert_eq!(Colour::choose(true, empty), Colour::Styled);
        assert_eq!(Colour::choose(true, set), Colour::Plain);
        assert_eq!(Colour::choose(false, None), Colour::Plain);
        let s = error("c.json", "{}", "m", at(1, 1), None, Colour::Styled);
        assert!(s.contains('\u{1b}'), "{s}");
        let s = error("c.json", "{}", "m", at(1, 1), None, Colour::Plain);
        assert!(!s.contains('\u{1b}'), "{s}");
    }
}
