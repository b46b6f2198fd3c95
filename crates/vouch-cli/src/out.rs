//! Printing that can never change what a run does. `println!` panics when stdout is a closed
//! pipe (`vouch run … | head`, a closed terminal), which would kill the process mid-run and
//! leave the run for start-up reconciliation to call interrupted. Every line the CLI prints
//! goes through these macros instead: a write that fails is dropped, the work goes on.

/// `println!` that ignores a closed or failing stdout.
macro_rules! outln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that ignores a closed or failing stdout.
#[allow(unused_macros)]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut o = std::io::stdout();
        let _ = write!(o, $($arg)*);
        let _ = o.flush();
    }};
}

/// `eprintln!` that ignores a closed or failing stderr.
macro_rules! errln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // Everything on stderr is for people: escaped like `houtln!`.
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", vouch_core::escape_text(&text));
    }};
}

/// `eprint!` that ignores a closed or failing stderr.
#[allow(unused_macros)]
macro_rules! err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` for people: the formatted text is escaped (§10), so no control or
/// bidirectional character from a model, a payload or a provider reaches the terminal raw.
/// Line breaks of the text itself stay; fields that must stay on one line go through
/// [`line`] first. JSON output uses `outln!`, unchanged.
macro_rules! houtln {
    () => {{
        outln!()
    }};
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        outln!("{}", vouch_core::escape_text(&text))
    }};
}

/// `print!` for people, escaped like [`houtln!`].
macro_rules! hout {
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        out!("{}", vouch_core::escape_text(&text))
    }};
}

/// One field shown on one line (a title, a summary, a payload): every control character
/// escaped, line breaks included.
pub(crate) fn line(s: &str) -> std::borrow::Cow<'_, str> {
    vouch_core::escape_line(s)
}

/// A field in a list column: escaped, then cut to `max_chars` with an ellipsis.
pub(crate) fn short(s: &str, max_chars: usize) -> String {
    let e = line(s);
    if e.chars().count() <= max_chars {
        return e.into_owned();
    }
    let mut cut: String = e.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `1 turn`, `2 turns`: a count with its noun in the right number.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Rows printed as aligned columns under a header: each column as wide as its widest cell
/// (cells are escaped first, so the widths are of what the terminal shows); the last column
/// is not padded.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let cells: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| h.to_string()).collect())
        .chain(
            rows.iter()
                .map(|r| r.iter().map(|c| line(c).into_owned()).collect()),
        )
        .collect();
    let mut width = vec![0usize; header.len()];
    for r in &cells {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    cells
        .iter()
        .map(|r| {
            let mut s = String::new();
            for (i, c) in r.iter().enumerate() {
                if i + 1 == r.len() {
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    let pad = width[i].saturating_sub(c.chars().count()) + 2;
                    s.extend(std::iter::repeat_n(' ', pad));
                }
            }
            s.trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_on_what_the_terminal_shows() {
        let rows = vec![
            vec!["a".to_string(), "één".to_string(), "x".to_string()],
            vec![
                "long one".to_string(),
                "b\u{1b}".to_string(),
                "y".to_string(),
            ],
        ];
        assert_eq!(
            table(&["ID", "WORD", "LAST"], &rows),
            vec![
                "ID        WORD   LAST",
                "a         één    x",
                "long one  b\\x1b  y",
            ]
        );
        assert_eq!(count(1, "turn", "turns"), "1 turn");
        assert_eq!(count(0, "turn", "turns"), "0 turns");
    }
}
