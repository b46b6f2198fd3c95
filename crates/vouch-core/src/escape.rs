//! Escaping text for people (§10): text that came from a model, a payload or a provider is
//! shown only after control and bidirectional characters are escaped, so a terminal escape
//! (`ESC[2J`, an OSC title or hyperlink), a carriage return or a right-to-left override can
//! never change what a person sees on a card, a receipt or a list.
//!
//! The escaped form is printable: `\x1b` for ASCII controls, `\u{202e}` for the rest. It has
//! no character that needs escaping, so escaping twice equals escaping once (a receipt stored
//! escaped can be escaped again on the way to the terminal without changing).

use std::borrow::Cow;

/// Does this character need escaping before a person sees it? Every C0 and C1 control and
/// DEL, the bidirectional controls (LRM, RLM, ALM, LRE…RLO, LRI…PDI), the line and paragraph
/// separators, and the zero-width and byte-order marks that hide text.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

fn escape_with(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| needs_escape(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) && !keep(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Escape one field shown on one line (a title, a summary, a payload, a reason): every
/// control character, newlines included, so the text cannot start a line of its own.
pub fn escape_line(s: &str) -> Cow<'_, str> {
    escape_with(s, |_| false)
}

/// Escape a block of text whose line breaks are its own (a receipt, a help message): like
/// [`escape_line`] but `\n` and `\t` stay.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_with(s, |c| c == '\n' || c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_escapes_and_bidi_overrides_become_visible_text() {
        let evil = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}\rSent\u{202e}gpj.exe\u{9b}31m";
        let e = escape_line(evil);
        assert_eq!(
            e,
            "ok\\x1b[2J\\x1b]0;pwned\\x07\\rSent\\u{202e}gpj.exe\\u{9b}31m"
        );
        assert!(!e.chars().any(needs_escape));
    }

    #[test]
    fn text_keeps_its_own_line_breaks_but_not_carriage_returns() {
        assert_eq!(escape_text("a\nb\tc\rd"), "a\nb\tc\\rd");
        assert_eq!(escape_line("a\nb\tc"), "a\\nb\\tc");
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let s = "Receipt · Save my notes — ünïcode ✓ 日本語";
        assert!(matches!(escape_line(s), Cow::Borrowed(x) if x == s));
    }

    proptest! {
        #[test]
        fn escaped_line_has_nothing_left_to_escape(s in any::<String>()) {
            let e = escape_line(&s);
            prop_assert!(!e.chars().any(needs_escape));
            prop_assert_eq!(escape_line(&e), e.clone());
        }

        #[test]
        fn escaped_text_keeps_exactly_its_newlines(s in any::<String>()) {
            let e = escape_text(&s);
            prop_assert!(!e.chars().any(|c| needs_escape(c) && c != '\n' && c != '\t'));
            prop_assert_eq!(e.matches('\n').count(), s.matches('\n').count());
            prop_assert_eq!(escape_text(&e), e.clone());
        }

        #[test]
        fn text_without_controls_is_unchanged(s in "[a-zA-Z0-9 .,:;!?'\"()\\[\\]{}/\\\\äöü€→·—-]{0,64}") {
            prop_assert_eq!(escape_line(&s), s.clone());
        }
    }
}
