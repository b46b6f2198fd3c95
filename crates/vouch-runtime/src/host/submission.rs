//! One rule for a task attempt's submission (§13.4.1), wherever it arrives — the run's
//! `submit` tool, a worker's HTTP or MCP submit: the type's output schema, the host's rules
//! beyond it (artifacts stored, a judge's scores exact), the self-assessment criteria ask for,
//! and the repair budget. The budget is counted where the attempt lives: on the board's attempt
//! row (`BoardBudget`), so a valid submission after "no repairs left" is refused on every
//! interface and by every process; a run with no board counts in memory (`CountedBudget`).
//! Decides nothing about the attempt itself: the caller reports what was accepted.

use serde_json::Value;
use std::cell::Cell;
use vouch_store::board::{AttemptRef, BoardStore};
use vouch_store::{StoreError, StoreResult};

/// What a result must satisfy.
pub struct SubmitRules<'a> {
    /// The task's type and input, for the host's rules beyond the schema (`result_errors`);
    /// `None` for an advisory submission (a patch run's), which decides nothing.
    pub task: Option<(&'a str, &'a Value)>,
    pub output_schema: &'a Value,
    /// The task has success criteria: a self-assessment is required.
    pub needs_assessment: bool,
    /// Where a result's artifacts must be stored (§13.5); without one, none is.
    pub artifacts: Option<&'a dyn vouch_artifacts::ArtifactStore>,
    /// Malformed submissions answered with their errors before every further one is refused.
    pub repairs_max: u32,
}

/// Where an attempt's malformed submissions are counted.
pub trait RepairBudget {
    /// Malformed submissions so far.
    fn spent(&self) -> StoreResult<u32>;
    /// Count one more; the count after.
    fn spend(&self) -> StoreResult<u32>;
}

/// The board's count on the attempt row: the live claimant's only (`Conflict` otherwise).
pub struct BoardBudget<'a> {
    pub board: &'a dyn BoardStore,
    pub attempt: &'a AttemptRef,
}

impl RepairBudget for BoardBudget<'_> {
    fn spent(&self) -> StoreResult<u32> {
        self.board
            .repairs_spent(&self.attempt.task_id, self.attempt.n)
    }
    fn spend(&self) -> StoreResult<u32> {
        self.board.spend_repair(self.attempt)
    }
}

/// A count kept by the caller (a run whose attempt has no board row here).
#[derive(Debug, Default)]
pub struct CountedBudget(pub Cell<u32>);

impl RepairBudget for CountedBudget {
    fn spent(&self) -> StoreResult<u32> {
        Ok(self.0.get())
    }
    fn spend(&self) -> StoreResult<u32> {
        self.0.set(self.0.get().saturating_add(1));
        Ok(self.0.get())
    }
}

/// A submission the rules accept.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub result: Value,
    pub self_assessment: Option<Value>,
}

/// Why a submission was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// Malformed: each error names its JSON path; the attempt may repair it.
    #[error("malformed result ({}); {left} repair(s) left", errors.join("; "))]
    Invalid { errors: Vec<String>, left: u32 },
    /// The repairs are spent: no submission, valid or not, is taken for this attempt.
    #[error("no repairs left ({spent} malformed submissions); the attempt will fail")]
    NoRepairsLeft { spent: u32 },
    /// The count could not be read or written (or the caller does not hold the attempt).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Check one submission against `rules`, spending a repair from `budget` when it is
/// malformed. Once more than `repairs_max` malformed submissions were made, every submission
/// is refused, a valid one too (§13.4.1).
pub fn accept_submission(
    rules: &SubmitRules,
    budget: &dyn RepairBudget,
    result: &Value,
    self_assessment: Option<&Value>,
) -> Result<Accepted, SubmitError> {
    let spent = budget.spent()?;
    if spent > rules.repairs_max {
        return Err(SubmitError::NoRepairsLeft { spent });
    }
    let assessment = self_assessment.filter(|v| !v.is_null()).cloned();
    let mut errors = match super::validate(rules.output_schema, result) {
        Ok(()) => match rules.task {
            Some((kind, input)) => super::result_errors(kind, input, result, rules.artifacts),
            None => vec![],
        },
        Err(e) => e,
    };
    if rules.needs_assessment && assessment.is_none() {
        errors.push(
            "at /self_assessment: the task has success criteria; include your self-assessment against them".into(),
        );
    }
    if errors.is_empty() {
        return Ok(Accepted {
            result: result.clone(),
            self_assessment: assessment,
        });
    }
    let spent = budget.spend()?;
    Err(SubmitError::Invalid {
        errors,
        left: (rules.repairs_max + 1).saturating_sub(spent),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn after_the_repairs_even_a_valid_submission_is_refused() {
        let schema = json!({"type": "object", "required": ["summary"]});
        let input = json!({"brief": "b"});
        let rules = SubmitRules {
            task: Some(("freeform", &input)),
            output_schema: &schema,
            needs_assessment: false,
            artifacts: None,
            repairs_max: 1,
        };
        let budget = CountedBudget::default();
        let bad = json!({});
        let good = json!({"summary": "s"});
        for left in [1, 0] {
            match accept_submission(&rules, &budget, &bad, None) {
                Err(SubmitError::Invalid { errors, left: l }) => {
                    assert_eq!(l, left);
                    assert!(errors[0].starts_with("at /"), "{errors:?}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            accept_submission(&rules, &budget, &good, None),
            Err(SubmitError::NoRepairsLeft { spent: 2 })
        ));
        let fresh = CountedBudget::default();
        let ok = accept_submission(&rules, &fresh, &good, Some(&Value::Null)).unwrap();
        assert_eq!((ok.result, ok.self_assessment), (good, None));
    }

    #[test]
    fn criteria_need_a_self_assessment() {
        let schema = json!({"type": "object"});
        let rules = SubmitRules {
            task: None,
            output_schema: &schema,
            needs_assessment: true,
            artifacts: None,
            repairs_max: 3,
        };
        let budget = CountedBudget::default();
        let e = accept_submission(&rules, &budget, &json!({}), None).unwrap_err();
        assert!(e.to_string().contains("at /self_assessment"), "{e}");
        assert_eq!(budget.0.get(), 1);
        let a = json!({"met": true});
        let ok = accept_submission(&rules, &budget, &json!({}), Some(&a)).unwrap();
        assert_eq!(ok.self_assessment, Some(a));
    }
}
