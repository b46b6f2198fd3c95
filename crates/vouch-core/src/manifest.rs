//! The manifest (§3): a closed vocabulary of delivery verbs, destinations, and constraints.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Delivery verbs (§3.1). The set is closed: anything else is rejected by parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    Write,
    Show,
    Save,
    Send,
    Reply,
    Draft,
    Schedule,
    Delete,
}

impl Verb {
    pub const ALL: [Verb; 8] = [
        Verb::Write,
        Verb::Show,
        Verb::Save,
        Verb::Send,
        Verb::Reply,
        Verb::Draft,
        Verb::Schedule,
        Verb::Delete,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Write => "write",
            Verb::Show => "show",
            Verb::Save => "save",
            Verb::Send => "send",
            Verb::Reply => "reply",
            Verb::Draft => "draft",
            Verb::Schedule => "schedule",
            Verb::Delete => "delete",
        }
    }

    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Destination kinds (§3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DestinationKind {
    Surface,
    Folder,
    Email,
    Webhook,
    Calendar,
    Payment,
    /// A git branch, `PATH#BRANCH` (§14): applying a patch task's commit to it.
    Repository,
}

impl DestinationKind {
    pub const ALL: [DestinationKind; 7] = [
        DestinationKind::Surface,
        DestinationKind::Folder,
        DestinationKind::Email,
        DestinationKind::Webhook,
        DestinationKind::Calendar,
        DestinationKind::Payment,
        DestinationKind::Repository,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Surface => "surface",
            DestinationKind::Folder => "folder",
            DestinationKind::Email => "email",
            DestinationKind::Webhook => "webhook",
            DestinationKind::Calendar => "calendar",
            DestinationKind::Payment => "payment",
            DestinationKind::Repository => "repository",
        }
    }

    pub fn parse(s: &str) -> Option<DestinationKind> {
        DestinationKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for DestinationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    pub kind: DestinationKind,
    #[serde(default)]
    pub address: String,
}

impl Destination {
    pub fn new(kind: DestinationKind, address: impl Into<String>) -> Self {
        Destination {
            kind,
            address: address.into(),
        }
    }

    /// `kind:address`, the form patterns are matched against.
    pub fn key(&self) -> String {
        format!("{}:{}", self.kind, self.address)
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.address.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{} {}", self.kind, self.address)
        }
    }
}

/// The model's confidence (§3.2). The host may lower it, never raise it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    Low,
    Medium,
    #[default]
    High,
}

fn default_true() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// One promised delivery (§3.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    pub id: String,
    pub verb: Verb,
    pub destination: Destination,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<serde_json::Value>,
    #[serde(default)]
    pub confidence: Confidence,
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub required: bool,
    /// For `schedule`: attendees other than the user make the act irreversible (§5.4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attendees: Vec<String>,
}

/// A negation (§3.1): a verb, optionally narrowed to a destination kind or address pattern.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Forbid {
    pub verb: Verb,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<DestinationKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

impl Forbid {
    /// Does this forbid cover `verb` to `dest`? Address patterns support a `*` wildcard.
    pub fn covers(&self, verb: Verb, dest: &Destination) -> bool {
        if self.verb != verb {
            return false;
        }
        if let Some(kind) = self.kind {
            if kind != dest.kind {
                return false;
            }
        }
        match &self.address {
            Some(pattern) => glob_match(pattern, &dest.address),
            None => true,
        }
    }
}

/// A dependency (§3.1): `after` may only be attempted once `before` is verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Order {
    pub before: String,
    pub after: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[serde(default)]
    pub deliveries: Vec<Delivery>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid: Vec<Forbid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<Order>,
}

/// §3.2: a delivery id is 1 to `ID_CHARS_MAX` characters of `A–Z a–z 0–9 _ -`. Ids come from
/// a model or a script, reach receipts, references and file names: a closed alphabet keeps
/// every one of them a plain, printable name.
pub const ID_CHARS_MAX: usize = 64;
/// §3.2: a manifest (with its amendments) declares at most this many deliveries; the same
/// bound holds for its forbids and its orders. Every later step is linear in it.
pub const DELIVERIES_MAX: usize = 256;

/// Is `id` a delivery id by §3.2's alphabet and length?
pub fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= ID_CHARS_MAX
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// At most 32 characters of an untrusted id, with everything outside the id alphabet shown
/// as `\u{..}`, so an error can name the id without carrying 10 KB or a control character.
pub fn shown_id(id: &str) -> String {
    let mut out = String::new();
    for (i, c) in id.chars().enumerate() {
        if i == 32 {
            out.push('…');
            break;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' || c == '/' {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    out
}

/// Why a manifest cannot even be considered (§3.2): a malformed call the model repairs, not a
/// request that contradicts itself, so it spends no question.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("{what} id `{shown}` is not 1–{ID_CHARS_MAX} characters of A–Z a–z 0–9 _ -; give the delivery such an id")]
    BadId { what: &'static str, shown: String },
    #[error(
        "the manifest has {count} {what}; at most {DELIVERIES_MAX} are allowed; declare fewer"
    )]
    TooMany { what: &'static str, count: usize },
}

impl Manifest {
    /// §3.2's shape: how many items, and every delivery and order id in the alphabet. An empty
    /// delivery id is left to §3.3 (`EmptyId`), which has always answered it.
    pub fn check_shape(&self) -> Result<(), ShapeError> {
        for (what, count) in [
            ("deliveries", self.deliveries.len()),
            ("forbids", self.forbid.len()),
            ("orders", self.order.len()),
        ] {
            if count > DELIVERIES_MAX {
                return Err(ShapeError::TooMany { what, count });
            }
        }
        let ids = self.deliveries.iter().map(|d| ("delivery", &d.id));
        let orders = self
            .order
            .iter()
            .flat_map(|o| [("order", &o.before), ("order", &o.after)]);
        for (what, id) in ids.chain(orders) {
            if !id.is_empty() && !is_plain_id(id) {
                return Err(ShapeError::BadId {
                    what,
                    shown: shown_id(id),
                });
            }
        }
        Ok(())
    }
}

/// Why a manifest is rejected (§3.3). Each variant names the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ManifestError {
    #[error("delivery id `{id}` appears more than once; give each delivery its own id")]
    DuplicateId { id: String },
    #[error("delivery id is empty at position {index}; every delivery needs an id")]
    EmptyId { index: usize },
    #[error("order names unknown delivery `{id}`; declare it or fix the order")]
    UnknownOrderId { id: String },
    #[error("order forms a cycle through {cycle:?}; a delivery cannot wait on itself")]
    OrderCycle { cycle: Vec<String> },
    #[error("delivery `{id}` ({verb} to {destination}) contradicts a forbid of the same manifest")]
    ContradictsForbid {
        id: String,
        verb: Verb,
        destination: String,
    },
}

impl Manifest {
    pub fn delivery(&self, id: &str) -> Option<&Delivery> {
        self.deliveries.iter().find(|d| d.id == id)
    }

    /// The ids `id` must wait for (its `order` predecessors).
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.order
            .iter()
            .filter(|o| o.after == id)
            .map(|o| o.before.as_str())
            .collect()
    }

    pub fn is_forbidden(&self, verb: Verb, dest: &Destination) -> bool {
        self.forbid.iter().any(|f| f.covers(verb, dest))
    }

    /// Validate per §3.3. Returns every problem found, in a stable order.
    /// Out-of-vocabulary verbs and kinds are rejected earlier, when the manifest is parsed.
    pub fn validate(&self) -> Result<(), Vec<ManifestError>> {
        let mut errors = Vec::new();
        let mut seen = BTreeSet::new();
        for (index, d) in self.deliveries.iter().enumerate() {
            if d.id.is_empty() {
                errors.push(ManifestError::EmptyId { index });
            } else if !seen.insert(d.id.as_str()) {
                errors.push(ManifestError::DuplicateId { id: d.id.clone() });
            }
        }
        for o in &self.order {
            for id in [&o.before, &o.after] {
                if !seen.contains(id.as_str()) {
                    let e = ManifestError::UnknownOrderId { id: id.clone() };
                    if !errors.contains(&e) {
                        errors.push(e);
                    }
                }
            }
        }
        if let Some(cycle) = self.find_cycle() {
            errors.push(ManifestError::OrderCycle { cycle });
        }
        for d in &self.deliveries {
            if self.is_forbidden(d.verb, &d.destination) {
                errors.push(ManifestError::ContradictsForbid {
                    id: d.id.clone(),
                    verb: d.verb,
                    destination: d.destination.to_string(),
                });
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// Apply an amendment (§3.5): new deliveries are added; forbids and orders can only grow.
    /// A delivery whose id already exists is a duplicate and is reported by `validate`.
    pub fn amended(&self, amendment: &Manifest) -> Manifest {
        let mut m = self.clone();
        m.deliveries.extend(amendment.deliveries.iter().cloned());
        for f in &amendment.forbid {
            if !m.forbid.contains(f) {
                m.forbid.push(f.clone());
            }
        }
        for o in &amendment.order {
            if !m.order.contains(o) {
                m.order.push(o.clone());
            }
        }
        m
    }

    fn find_cycle(&self) -> Option<Vec<String>> {
        let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for o in &self.order {
            edges
                .entry(o.before.as_str())
                .or_default()
                .push(o.after.as_str());
        }
        // Iterative DFS with colours; bounded by the number of edges.
        let mut colour: BTreeMap<&str, u8> = BTreeMap::new();
        for &start in edges.keys() {
            if colour.get(start).copied().unwrap_or(0) != 0 {
                continue;
            }
            let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
            colour.insert(start, 1);
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let succ = edges.get(node).map(|v| v.as_slice()).unwrap_or(&[]);
                if *next < succ.len() {
                    let s = succ[*next];
                    *next += 1;
                    match colour.get(s).copied().unwrap_or(0) {
                        0 => {
                            colour.insert(s, 1);
                            stack.push((s, 0));
                        }
                        1 => {
                            let pos = stack.iter().position(|(n, _)| *n == s).unwrap_or(0);
                            let mut cycle: Vec<String> =
                                stack[pos..].iter().map(|(n, _)| n.to_string()).collect();
                            cycle.push(s.to_string());
                            return Some(cycle);
                        }
                        _ => {}
                    }
                } else {
                    colour.insert(node, 2);
                    stack.pop();
                }
            }
        }
        None
    }
}

/// Match `text` against `pattern` where `*` matches any run of characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None::<usize>, 0usize);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: &str, verb: Verb, kind: DestinationKind, addr: &str) -> Delivery {
        Delivery {
            id: id.into(),
            verb,
            destination: Destination::new(kind, addr),
            object: None,
            confidence: Confidence::High,
            required: true,
            attendees: vec![],
        }
    }

    #[test]
    fn valid_manifest_passes() {
        let m = Manifest {
            deliveries: vec![
                d("d1", Verb::Save, DestinationKind::Folder, "a.md"),
                d("d2", Verb::Send, DestinationKind::Email, "x@y"),
            ],
            forbid: vec![],
            order: vec![Order {
                before: "d1".into(),
                after: "d2".into(),
            }],
        };
        assert_eq!(m.validate(), Ok(()));
        assert_eq!(m.dependencies("d2"), vec!["d1"]);
    }

    #[test]
    fn each_rejection_names_its_item() {
        let m = Manifest {
            deliveries: vec![
                d("d1", Verb::Save, DestinationKind::Folder, "a.md"),
                d("d1", Verb::Send, DestinationKind::Email, "bob@example.com"),
                d("d3", Verb::Send, DestinationKind::Webhook, "https://h"),
            ],
            forbid: vec![Forbid {
                verb: Verb::Send,
                kind: Some(DestinationKind::Email),
                address: None,
            }],
            order: vec![
                Order {
                    before: "d1".into(),
                    after: "zz".into(),
                },
                Order {
                    before: "d3".into(),
                    after: "d1".into(),
                },
                Order {
                    before: "d1".into(),
                    after: "d3".into(),
                },
            ],
        };
        let errs = m.validate().unwrap_err();
        assert!(errs.contains(&ManifestError::DuplicateId { id: "d1".into() }));
        assert!(errs.contains(&ManifestError::UnknownOrderId { id: "zz".into() }));
        assert!(errs
            .iter()
            .any(|e| matches!(e, ManifestError::OrderCycle { .. })));
        assert!(errs
            .iter()
            .any(|e| matches!(e, ManifestError::ContradictsForbid { id, .. } if id == "d1")));
        assert!(errs[0].to_string().contains("d1"));
    }

    #[test]
    fn unknown_verb_or_kind_fails_to_parse() {
        let bad_verb = r#"{"deliveries":[{"id":"a","verb":"tweet","destination":{"kind":"folder","address":"x"}}]}"#;
        let e = serde_json::from_str::<Manifest>(bad_verb)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tweet"), "{e}");
        let bad_kind = r#"{"deliveries":[{"id":"a","verb":"save","destination":{"kind":"ftp","address":"x"}}]}"#;
        assert!(serde_json::from_str::<Manifest>(bad_kind).is_err());
    }

    #[test]
    fn model_chosen_delivery_id_never_becomes_a_path() {
        for bad in [
            "..",
            "../../../victim/README",
            "/abs/path",
            "a\0b",
            "a\u{202e}b",
            "a.b",
            "a b",
            &"x".repeat(65),
            &"x".repeat(10_000),
        ] {
            let m = Manifest {
                deliveries: vec![d(bad, Verb::Write, DestinationKind::Surface, "")],
                ..Manifest::default()
            };
            let e = m.check_shape().unwrap_err();
            assert!(matches!(e, ShapeError::BadId { .. }), "{bad:?}");
            let text = e.to_string();
            assert!(text.len() < 300 && !text.contains('\0') && !text.contains('\u{202e}'));
        }
        for good in ["d1", "A_b-9", &"x".repeat(64)] {
            let m = Manifest {
                deliveries: vec![d(good, Verb::Write, DestinationKind::Surface, "")],
                ..Manifest::default()
            };
            assert_eq!(m.check_shape(), Ok(()), "{good}");
        }
        let order = Manifest {
            deliveries: vec![d("a", Verb::Write, DestinationKind::Surface, "")],
            order: vec![Order {
                before: "a".into(),
                after: "../x".into(),
            }],
            ..Manifest::default()
        };
        assert!(matches!(
            order.check_shape(),
            Err(ShapeError::BadId { what: "order", .. })
        ));
    }

    #[test]
    fn a_manifest_declares_at_most_the_bound_of_deliveries() {
        let many = |n: usize| Manifest {
            deliveries: (0..n)
                .map(|i| d(&format!("d{i}"), Verb::Write, DestinationKind::Surface, ""))
                .collect(),
            ..Manifest::default()
        };
        assert_eq!(many(DELIVERIES_MAX).check_shape(), Ok(()));
        let e = many(DELIVERIES_MAX + 1).check_shape().unwrap_err();
        assert_eq!(
            e,
            ShapeError::TooMany {
                what: "deliveries",
                count: DELIVERIES_MAX + 1
            }
        );
        assert!(e.to_string().contains("256"), "{e}");
    }

    #[test]
    fn forbid_patterns() {
        let f = Forbid {
            verb: Verb::Send,
            kind: Some(DestinationKind::Email),
            address: Some("*@corp.com".into()),
        };
        assert!(f.covers(
            Verb::Send,
            &Destination::new(DestinationKind::Email, "ann@corp.com")
        ));
        assert!(!f.covers(
            Verb::Send,
            &Destination::new(DestinationKind::Email, "ann@home.org")
        ));
        assert!(!f.covers(
            Verb::Reply,
            &Destination::new(DestinationKind::Email, "ann@corp.com")
        ));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*c", "abbbc"));
        assert!(!glob_match("a*c", "abbb"));
    }

    #[test]
    fn amendments_only_grow_constraints() {
        let base = Manifest {
            deliveries: vec![d("d1", Verb::Save, DestinationKind::Folder, "a")],
            forbid: vec![Forbid {
                verb: Verb::Send,
                kind: None,
                address: None,
            }],
            order: vec![],
        };
        let am = Manifest {
            deliveries: vec![d("d2", Verb::Write, DestinationKind::Surface, "")],
            forbid: vec![],
            order: vec![],
        };
        let m = base.amended(&am);
        assert_eq!(m.deliveries.len(), 2);
        assert_eq!(m.forbid.len(), 1);
    }
}

#[cfg(test)]
mod validate_props {
    //! §3.3 as properties: `validate` accepts exactly the manifests whose ids are non-empty and
    //! unique, whose order names only declared ids and has no cycle, and whose items no forbid
    //! covers — checked against an independent reading of each rule.
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn verb() -> impl Strategy<Value = Verb> {
        prop::sample::select(vec![Verb::Save, Verb::Send, Verb::Write, Verb::Delete])
    }

    fn kind() -> impl Strategy<Value = DestinationKind> {
        prop::sample::select(vec![
            DestinationKind::Folder,
            DestinationKind::Email,
            DestinationKind::Surface,
        ])
    }

    fn id() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", "a", "b", "c", "d"]).prop_map(String::from)
    }

    fn manifest() -> impl Strategy<Value = Manifest> {
        let delivery = (id(), verb(), kind(), prop::sample::select(vec!["x", "y"])).prop_map(
            |(id, verb, kind, addr)| Delivery {
                id,
                verb,
                destination: Destination::new(kind, addr),
                object: None,
                confidence: Confidence::default(),
                required: true,
                attendees: vec![],
            },
        );
        let forbid = (
            verb(),
            prop::option::of(kind()),
            prop::option::of(prop::sample::select(vec!["x", "*"])),
        )
            .prop_map(|(verb, kind, address)| Forbid {
                verb,
                kind,
                address: address.map(String::from),
            });
        let order = (id(), id()).prop_map(|(before, after)| Order { before, after });
        (
            prop::collection::vec(delivery, 0..5),
            prop::collection::vec(forbid, 0..2),
            prop::collection::vec(order, 0..4),
        )
            .prop_map(|(deliveries, forbid, order)| Manifest {
                deliveries,
                forbid,
                order,
            })
    }

    /// An independent cycle check: repeatedly remove nodes with no incoming edge.
    fn has_cycle(order: &[Order]) -> bool {
        let mut edges: BTreeSet<(String, String)> = order
            .iter()
            .map(|o| (o.before.clone(), o.after.clone()))
            .collect();
        loop {
            let targets: BTreeSet<&String> = edges.iter().map(|(_, a)| a).collect();
            let sources: Vec<String> = edges
                .iter()
                .map(|(b, _)| b.clone())
                .filter(|b| !targets.contains(b))
                .collect();
            if sources.is_empty() {
                return !edges.is_empty();
            }
            edges.retain(|(b, _)| !sources.contains(b));
        }
    }

    proptest! {
        #[test]
        fn validate_accepts_exactly_the_manifests_that_follow_every_rule(m in manifest()) {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for d in &m.deliveries {
                *counts.entry(d.id.as_str()).or_default() += 1;
            }
            let ids_ok = !counts.contains_key("") && counts.values().all(|n| *n == 1);
            let order_ok = m.order.iter().all(|o| counts.contains_key(o.before.as_str())
                && counts.contains_key(o.after.as_str())
                && !o.before.is_empty() && !o.after.is_empty());
            let acyclic = !has_cycle(&m.order);
            let not_forbidden = m.deliveries.iter().all(|d| {
                !m.forbid.iter().any(|f| f.verb == d.verb
                    && f.kind.is_none_or(|k| k == d.destination.kind)
                    && f.address.as_deref().is_none_or(|a| a == "*" || a == d.destination.address))
            });
            let expected_ok = ids_ok && order_ok && acyclic && not_forbidden;
            let got = m.validate();
            prop_assert_eq!(got.is_ok(), expected_ok, "{:?} → {:?}", m, got);
            if let Err(errors) = got {
                // Every error names something that really is wrong.
                for e in &errors {
                    match e {
                        ManifestError::DuplicateId { id } => prop_assert!(counts[id.as_str()] > 1),
                        ManifestError::EmptyId { index } => prop_assert!(m.deliveries[*index].id.is_empty()),
                        ManifestError::UnknownOrderId { id } => prop_assert!(id.is_empty() || !counts.contains_key(id.as_str())),
                        ManifestError::OrderCycle { .. } => prop_assert!(!acyclic),
                        ManifestError::ContradictsForbid { id, .. } => prop_assert!(m.delivery(id).is_some()),
                    }
                }
            }
        }

        #[test]
        fn an_amendment_only_grows_the_manifest(m in manifest(), a in manifest()) {
            let n = m.amended(&a);
            prop_assert_eq!(n.deliveries.len(), m.deliveries.len() + a.deliveries.len());
            for f in m.forbid.iter().chain(&a.forbid) {
                prop_assert!(n.forbid.contains(f));
            }
            for o in m.order.iter().chain(&a.order) {
                prop_assert!(n.order.contains(o));
            }
        }
    }
}
