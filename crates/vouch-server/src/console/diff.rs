//! A line diff for a person judging a change: what an overwrite removes and adds in the file
//! it replaces (issue 28). Every line is inert text; unchanged stretches are cut to a few
//! lines of context around each change.

use super::view::inert;
use maud::{html, Markup};
use similar::{ChangeTag, TextDiff};

/// Lines of unchanged context kept around each change.
const CONTEXT_LINES: usize = 3;
/// Lines of diff shown at most (a huge rewrite says how much more there is).
const DIFF_LINES_MAX: usize = 2_000;

pub fn unified(old: &str, new: &str) -> Markup {
    if old == new {
        return html! { p.muted #diff { "The file already holds exactly this text: nothing changes." } };
    }
    let diff = TextDiff::from_lines(old, new);
    let mut lines = vec![];
    for (i, group) in diff.grouped_ops(CONTEXT_LINES).iter().enumerate() {
        if i > 0 {
            lines.push(("ctx", "…".to_string()));
        }
        for op in group {
            for c in diff.iter_changes(op) {
                let (class, sign) = match c.tag() {
                    ChangeTag::Delete => ("del", "−"),
                    ChangeTag::Insert => ("add", "+"),
                    ChangeTag::Equal => ("ctx", " "),
                };
                let text = c.value().trim_end_matches('\n');
                lines.push((class, format!("{sign} {}", inert(text))));
            }
        }
    }
    let more = lines.len().saturating_sub(DIFF_LINES_MAX);
    let (removed, added) = diff.ops().iter().fold((0, 0), |(r, a), op| {
        let (tag, old_r, new_r) = op.as_tag_tuple();
        match tag {
            similar::DiffTag::Delete => (r + old_r.len(), a),
            similar::DiffTag::Insert => (r, a + new_r.len()),
            similar::DiffTag::Replace => (r + old_r.len(), a + new_r.len()),
            similar::DiffTag::Equal => (r, a),
        }
    });
    html! {
        p.muted { (removed) " line" @if removed != 1 { "s" } " removed, " (added) " added." }
        pre.diff #diff {
            @for (class, text) in lines.iter().take(DIFF_LINES_MAX) {
                span.(class) { (text) }
            }
        }
        @if more > 0 { p.muted { (more) " more lines of diff are not shown." } }
    }
}

/// A unified diff as a provider gave it (a patch), each line marked by its first character.
pub fn patch(text: &str) -> Markup {
    let lines: Vec<&str> = text.lines().collect();
    let more = lines.len().saturating_sub(DIFF_LINES_MAX);
    html! {
        pre.diff #preview {
            @for l in lines.iter().take(DIFF_LINES_MAX) {
                @let class = if l.starts_with("+++") || l.starts_with("---") || l.starts_with("diff ") || l.starts_with("index ") || l.starts_with("@@") {
                    "ctx"
                } else if l.starts_with('+') {
                    "add"
                } else if l.starts_with('-') {
                    "del"
                } else {
                    "ctx"
                };
                span.(class) { (inert(l)) }
            }
        }
        @if more > 0 { p.muted { (more) " more lines of diff are not shown." } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_marks_what_goes_and_what_comes_and_is_inert() {
        let m = unified("# Today\n- a\n- b\n", "# Today\n- a\n- c\u{202e}\n").into_string();
        assert!(m.contains("class=\"del\">− - b</span>"), "{m}");
        assert!(m.contains("class=\"add\">+ - c\\u{202e}</span>"), "{m}");
        assert!(m.contains("1 line removed, 1 added."), "{m}");
        assert!(unified("x\n", "x\n")
            .into_string()
            .contains("nothing changes"));
    }
}
