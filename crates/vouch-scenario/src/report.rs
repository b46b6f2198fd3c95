//! The per-scenario output of scenarios.md ("The output"), shared by the oracle and the
//! runner, and the field-by-field comparison both use.

use crate::task::TaskReport;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vouch_core::{DeliveryStatus, EndedBy, Outcome, Posture, Route, Significance};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportState {
    Ended,
    Suspended,
}

/// A question the contract does not decide (the oracle never guesses).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gap {
    pub question: String,
}

/// A rule the oracle applied and the section of docs/contract.md it implements.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Citation {
    pub rule: String,
    pub section: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryReport {
    /// `None` only when the oracle reports a GAP for it.
    pub posture: Option<Posture>,
    /// `None` only when the oracle reports a GAP for it.
    pub status: Option<DeliveryStatus>,
    /// Runner only: effects counted at the provider's side, across the whole scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions: Option<u32>,
}

/// One field on which two answers differ. `field` is a dotted path (`deliveries.d1.status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disagreement {
    pub field: String,
    pub expected: Value,
    pub actual: Value,
}

/// The report for one scenario. Field order is the documented output order; the oracle
/// fills `rules`, `max_executions` and `claims`, the runner `receipt`, `executions`,
/// `agrees` and `disagreements`. A `None` in a field that is never null in a runner's report
/// (state, significance, attention, notifications, needs_you) means the oracle reports a GAP.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioReport {
    pub id: String,
    pub state: Option<ReportState>,
    pub outcome: Option<Outcome>,
    pub ended_by: Option<EndedBy>,
    pub deliveries: IndexMap<String, DeliveryReport>,
    pub needs_you: Option<Vec<String>>,
    pub significance: Option<Significance>,
    pub attention: Option<Route>,
    pub notifications: Option<u32>,
    /// Task runs: the board's record of the task (contract §13.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskReport>,
    /// Task runs with a judge: the judge task's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<TaskReport>,
    /// Task runs: what the run's receipt says became of its `result` item (issue 22 #7) —
    /// `accepted`, `missing`, `refused` or `cancelled`; none while the run waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agrees: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreements: Option<Vec<Disagreement>>,
    #[serde(default)]
    pub gaps: Vec<Gap>,
    #[serde(default)]
    pub expect_ok: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<Citation>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executions: Option<IndexMap<String, u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<String>>,
}

impl ScenarioReport {
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// One JSON line, fields in documented order.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The comparable part of an oracle answer as an expectation: the prescribed fields
    /// (never receipt, executions or comparison fields), without the ones left open by a GAP.
    pub fn as_expectation(&self) -> Value {
        let mut o = serde_json::Map::new();
        if let Some(s) = self.state {
            o.insert("state".into(), serde_json::to_value(s).unwrap_or_default());
        }
        let open = !self.gaps.is_empty();
        // outcome/ended_by are legitimately null while suspended; with a GAP, null means open.
        if !(open && self.outcome.is_none() && self.state == Some(ReportState::Ended)) {
            o.insert(
                "outcome".into(),
                serde_json::to_value(self.outcome).unwrap_or_default(),
            );
        }
        if !(open && self.ended_by.is_none() && self.state == Some(ReportState::Ended)) {
            o.insert(
                "ended_by".into(),
                serde_json::to_value(self.ended_by).unwrap_or_default(),
            );
        }
        let mut ds = serde_json::Map::new();
        for (id, d) in &self.deliveries {
            let mut m = serde_json::Map::new();
            if let Some(p) = d.posture {
                m.insert(
                    "posture".into(),
                    serde_json::to_value(p).unwrap_or_default(),
                );
            }
            if let Some(s) = d.status {
                m.insert("status".into(), serde_json::to_value(s).unwrap_or_default());
            }
            ds.insert(id.clone(), Value::Object(m));
        }
        o.insert("deliveries".into(), Value::Object(ds));
        if let Some(n) = &self.needs_you {
            o.insert(
                "needs_you".into(),
                serde_json::to_value(n).unwrap_or_default(),
            );
        }
        if let Some(s) = self.significance {
            o.insert(
                "significance".into(),
                serde_json::to_value(s).unwrap_or_default(),
            );
        }
        if let Some(a) = self.attention {
            o.insert(
                "attention".into(),
                serde_json::to_value(a).unwrap_or_default(),
            );
        }
        if let Some(n) = self.notifications {
            o.insert("notifications".into(), Value::from(n));
        }
        if let Some(h) = &self.handoff {
            o.insert("handoff".into(), Value::from(h.as_str()));
        }
        for (k, t) in [("task", &self.task), ("judge", &self.judge)] {
            if let Some(t) = t {
                o.insert(k.into(), serde_json::to_value(t).unwrap_or_default());
            }
        }
        Value::Object(o)
    }
}

/// Compare field by field: every field present in `expected` must equal the same field in
/// `actual`; objects are compared recursively (so `expected` may be any subset), arrays of
/// strings as sets (delivery ids have no meaningful order), everything else by equality.
pub fn compare(expected: &Value, actual: &Value) -> Vec<Disagreement> {
    let mut out = Vec::new();
    walk("", expected, actual, &mut out);
    out
}

fn walk(path: &str, e: &Value, a: &Value, out: &mut Vec<Disagreement>) {
    match (e, a) {
        (Value::Object(eo), Value::Object(ao)) => {
            for (k, ev) in eo {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(&p, ev, ao.get(k).unwrap_or(&Value::Null), out);
            }
        }
        (Value::Array(ea), Value::Array(aa)) if ea.iter().chain(aa).all(Value::is_string) => {
            let mut es: Vec<&str> = ea.iter().filter_map(Value::as_str).collect();
            let mut as_: Vec<&str> = aa.iter().filter_map(Value::as_str).collect();
            es.sort_unstable();
            as_.sort_unstable();
            if es != as_ {
                out.push(Disagreement {
                    field: path.to_string(),
                    expected: e.clone(),
                    actual: a.clone(),
                });
            }
        }
        _ => {
            if e != a {
                out.push(Disagreement {
                    field: path.to_string(),
                    expected: e.clone(),
                    actual: a.clone(),
                });
            }
        }
    }
}

/// The runner-versus-oracle comparison: the oracle's prescribed fields (minus GAPs), the
/// same set of deliveries on both sides, and no delivery executed more often than the
/// oracle's `max_executions` allows.
pub fn compare_reports(oracle: &ScenarioReport, actual: &ScenarioReport) -> Vec<Disagreement> {
    let mut out = compare(&oracle.as_expectation(), &actual.to_value());
    for id in actual.deliveries.keys() {
        if !oracle.deliveries.contains_key(id) {
            out.push(Disagreement {
                field: format!("deliveries.{id}"),
                expected: Value::Null,
                actual: serde_json::to_value(&actual.deliveries[id]).unwrap_or_default(),
            });
        }
    }
    if let Some(max) = &oracle.max_executions {
        for (id, d) in &actual.deliveries {
            if let (Some(n), Some(m)) = (d.executions, max.get(id)) {
                if n > *m {
                    out.push(Disagreement {
                        field: format!("deliveries.{id}.executions"),
                        expected: Value::from(*m),
                        actual: Value::from(n),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_comparison() {
        let actual = json!({"outcome": "partial", "deliveries": {"d1": {"posture": "execute", "status": "verified"}, "d2": {"status": "unknown"}}, "needs_you": ["d2", "d3"]});
        assert!(compare(
            &json!({"deliveries": {"d1": {"status": "verified"}}}),
            &actual
        )
        .is_empty());
        assert!(compare(&json!({"needs_you": ["d3", "d2"]}), &actual).is_empty());
        let d = compare(
            &json!({"outcome": "failed", "deliveries": {"d9": {"status": "verified"}}}),
            &actual,
        );
        let fields: Vec<&str> = d.iter().map(|x| x.field.as_str()).collect();
        assert_eq!(fields, vec!["outcome", "deliveries.d9"]);
    }

    #[test]
    fn report_field_order() {
        let r = ScenarioReport {
            id: "x".into(),
            state: Some(ReportState::Ended),
            ..Default::default()
        };
        let line = r.to_json_line();
        let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(&line)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            vec![
                "id",
                "state",
                "outcome",
                "ended_by",
                "deliveries",
                "needs_you",
                "significance",
                "attention",
                "notifications",
                "gaps",
                "expect_ok"
            ]
        );
    }
}
