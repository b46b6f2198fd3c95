//! Destination patterns (`kind:address`, `*` matches any run of characters).

use vouch_core::Destination;

/// `kind:address`, the string every world pattern is matched against.
pub fn dest_key(d: &Destination) -> String {
    format!("{}:{}", d.kind.as_str(), d.address)
}

/// Does `pattern` match `text`? `*` matches any run of characters (including none);
/// every other character matches itself. Iterative, linear in practice.
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut back: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            back = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((bp, bt)) = back {
            pi = bp + 1;
            ti = bt + 1;
            back = Some((bp, bt + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        for (p, t, want) in [
            ("email:*", "email:ann@x.org", true),
            ("email:*", "webhook:https://x", false),
            ("*", "", true),
            ("folder:Briefs/*", "folder:Briefs/2026.md", true),
            ("folder:Briefs/*.md", "folder:Briefs/a.txt", false),
            ("a*b*c", "aXbYbZc", true),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(pattern_matches(p, t), want, "{p} vs {t}");
        }
    }
}
